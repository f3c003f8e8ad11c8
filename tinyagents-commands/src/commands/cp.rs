//! `cp`: copies files; the destination (or `-t DIR`) is written. `-L`
//! follows symlinks in the sources; `-s` creates symlinks (refused).

use super::{flag, fx, opt, req, Fx, Operands, Spec, Val, BACKUP_REFUSAL, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "cp",
    opts: &[
        fx(&["-a", "--archive"], Fx::Recursive),
        fx(&["-r", "-R", "--recursive"], Fx::Recursive),
        flag(&["-d", "-P", "--no-dereference"]),
        flag(&["-f", "--force"]),
        flag(&["-i", "--interactive"]),
        flag(&["-H"]),
        fx(&["-L", "--dereference"], Fx::Follows),
        flag(&["-n", "--no-clobber"]),
        flag(&["-p"]),
        opt(&["--preserve"], Val::Text),
        req(&["--no-preserve"], Val::Text),
        opt(&["--reflink"], Val::OneOf(&["auto", "always", "never"])),
        flag(&["--remove-destination"]),
        req(&["--sparse"], Val::OneOf(&["auto", "always", "never"])),
        flag(&["--strip-trailing-slashes"]),
        req(&["-t", "--target-directory"], Val::TargetDir),
        flag(&["-T", "--no-target-directory"]),
        flag(&["-u"]),
        opt(&["--update"], Val::OneOf(&["all", "none", "none-fail", "older"])),
        flag(&["-v", "--verbose"]),
        flag(&["-x", "--one-file-system"]),
        flag(&["--attributes-only"]),
        flag(&["--debug"]),
    ],
    deny: &[
        ("-b", BACKUP_REFUSAL),
        ("--backup", BACKUP_REFUSAL),
        ("-S", BACKUP_REFUSAL),
        ("--suffix", BACKUP_REFUSAL),
        (
            "--parents",
            "it writes each source's own path under the destination (`x/.git/…`), which the guard does not check \
             against the protected paths",
        ),
        (
            "-l",
            "it creates hard links: a later write through the link would change the original (which may be \
             protected configuration)",
        ),
        (
            "--link",
            "it creates hard links: a later write through the link would change the original (which may be \
             protected configuration)",
        ),
        ("-s", "it creates symlinks, which could point outside the workspace"),
        (
            "--symbolic-link",
            "it creates symlinks, which could point outside the workspace",
        ),
    ],
    operands: Operands::CopyLike,
    writes: true,
    relinks: true,
    ..BASE
};
