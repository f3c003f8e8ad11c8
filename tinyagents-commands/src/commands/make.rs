//! `make` (**`workspace` profile only**): runs the project's Makefile, code
//! from the workspace, so it is admitted only where the OS sandbox confines
//! the run. Targets and `VAR=value` operands are text; `-f` names a
//! makefile of the workspace; `-C` (use the call's `cwd`), `-e`
//! (environment overrides) and `-I`/`--eval` (more code from elsewhere) are
//! refused.

use super::{flag, req, Operands, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "make",
    opts: &[
        flag(&[
            "-k",
            "--keep-going",
            "-s",
            "--silent",
            "--quiet",
            "-B",
            "--always-make",
            "--no-print-directory",
            "-w",
            "--print-directory",
            "-n",
            "--dry-run",
            "--just-print",
            "-q",
            "--question",
        ]),
        req(&["-j", "--jobs", "-l", "--load-average"], Val::Num),
        req(&["-f", "--file", "--makefile"], Val::Read),
    ],
    deny: &[
        ("-C", "it changes the directory: give the shell tool a `cwd` instead"),
        (
            "--directory",
            "it changes the directory: give the shell tool a `cwd` instead",
        ),
        ("-e", "it lets the environment override the makefile"),
        (
            "--environment-overrides",
            "it lets the environment override the makefile",
        ),
        ("-I", "it includes makefiles from other directories"),
        ("--include-dir", "it includes makefiles from other directories"),
        ("--eval", "it evaluates code given on the command line"),
    ],
    operands: Operands::Text,
    writes: true,
    ..BASE
};
