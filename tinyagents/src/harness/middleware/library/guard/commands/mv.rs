//! `mv`: moves files; every operand is written (the source disappears).

use super::{flag, opt, req, Operands, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "mv",
    opts: &[
        opt(
            &["--backup"],
            Val::OneOf(&["none", "off", "numbered", "t", "existing", "nil", "simple", "never"]),
        ),
        flag(&["-b"]),
        flag(&["-f", "--force"]),
        flag(&["-i", "--interactive"]),
        flag(&["-n", "--no-clobber"]),
        flag(&["--strip-trailing-slashes"]),
        req(&["-S", "--suffix"], Val::Text),
        req(&["-t", "--target-directory"], Val::Write),
        flag(&["-T", "--no-target-directory"]),
        flag(&["-u"]),
        opt(&["--update"], Val::OneOf(&["all", "none", "none-fail", "older"])),
        flag(&["-v", "--verbose"]),
        flag(&["--debug"]),
    ],
    operands: Operands::Write,
    writes: true,
    relinks: true,
    ..BASE
};
