//! `realpath`: resolves names (each operand must resolve inside the root).

use super::{flag, req, Operands, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "realpath",
    opts: &[
        flag(&["-e", "--canonicalize-existing"]),
        flag(&["-m", "--canonicalize-missing"]),
        flag(&["-L", "--logical"]),
        flag(&["-P", "--physical"]),
        flag(&["-q", "--quiet"]),
        req(&["--relative-to"], Val::Read),
        req(&["--relative-base"], Val::Read),
        flag(&["-s", "--strip", "--no-symlinks"]),
        flag(&["-z", "--zero"]),
    ],
    operands: Operands::Read,
    ..BASE
};
