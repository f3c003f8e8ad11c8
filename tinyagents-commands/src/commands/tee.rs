//! `tee`: copies its input to files (every operand is written). Specified,
//! but not in the default allow list.

use super::{flag, opt, Operands, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "tee",
    opts: &[
        flag(&["-a", "--append"]),
        flag(&["-i", "--ignore-interrupts"]),
        flag(&["-p"]),
        opt(
            &["--output-error"],
            Val::OneOf(&["warn", "warn-nopipe", "exit", "exit-nopipe"]),
        ),
    ],
    operands: Operands::Write,
    writes: true,
    ..BASE
};
