//! `mv`: moves files; every operand is written (the source disappears).

use super::{flag, opt, req, Operands, Spec, Val, BACKUP_REFUSAL, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "mv",
    opts: &[
        flag(&["-f", "--force"]),
        flag(&["-i", "--interactive"]),
        flag(&["-n", "--no-clobber"]),
        flag(&["--strip-trailing-slashes"]),
        req(&["-t", "--target-directory"], Val::TargetDir),
        flag(&["-T", "--no-target-directory"]),
        flag(&["-u"]),
        opt(&["--update"], Val::OneOf(&["all", "none", "none-fail", "older"])),
        flag(&["-v", "--verbose"]),
        flag(&["--debug"]),
    ],
    deny: &[
        ("-b", BACKUP_REFUSAL),
        ("--backup", BACKUP_REFUSAL),
        ("-S", BACKUP_REFUSAL),
        ("--suffix", BACKUP_REFUSAL),
    ],
    operands: Operands::MoveLike,
    writes: true,
    relinks: true,
    ..BASE
};
