//! `cat`: reads files.

use super::{flag, Operands, Spec, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "cat",
    opts: &[
        flag(&["-A", "--show-all"]),
        flag(&["-b", "--number-nonblank"]),
        flag(&["-e"]),
        flag(&["-E", "--show-ends"]),
        flag(&["-n", "--number"]),
        flag(&["-s", "--squeeze-blank"]),
        flag(&["-t"]),
        flag(&["-T", "--show-tabs"]),
        flag(&["-u"]),
        flag(&["-v", "--show-nonprinting"]),
    ],
    operands: Operands::Read,
    ..BASE
};
