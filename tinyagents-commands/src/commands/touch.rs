//! `touch`: creates files or updates their times (every operand is written).

use super::{flag, req, Operands, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "touch",
    opts: &[
        flag(&["-a"]),
        flag(&["-c", "--no-create"]),
        req(&["-d", "--date"], Val::Text),
        flag(&["-f"]),
        flag(&["-h", "--no-dereference"]),
        flag(&["-m"]),
        req(&["-r", "--reference"], Val::Read),
        req(&["-t"], Val::Text),
        req(&["--time"], Val::OneOf(&["atime", "access", "use", "mtime", "modify"])),
    ],
    operands: Operands::Write,
    writes: true,
    ..BASE
};
