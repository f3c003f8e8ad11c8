//! `tr`: translates its input; operands are character sets, never files.

use super::{flag, Operands, Spec, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "tr",
    opts: &[
        flag(&["-c", "-C", "--complement"]),
        flag(&["-d", "--delete"]),
        flag(&["-s", "--squeeze-repeats"]),
        flag(&["-t", "--truncate-set1"]),
    ],
    operands: Operands::Text,
    ..BASE
};
