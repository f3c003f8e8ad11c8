//! `uniq`: `INPUT [OUTPUT]`: the second operand is written.

use super::{flag, opt, req, Operands, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "uniq",
    opts: &[
        flag(&["-c", "--count"]),
        flag(&["-d", "--repeated"]),
        flag(&["-D"]),
        opt(&["--all-repeated"], Val::OneOf(&["none", "prepend", "separate"])),
        req(&["-f", "--skip-fields"], Val::Num),
        opt(&["--group"], Val::OneOf(&["separate", "prepend", "append", "both"])),
        flag(&["-i", "--ignore-case"]),
        req(&["-s", "--skip-chars"], Val::Num),
        flag(&["-u", "--unique"]),
        flag(&["-z", "--zero-terminated"]),
        req(&["-w", "--check-chars"], Val::Num),
    ],
    operands: Operands::InOut,
    ..BASE
};
