//! The DSL's compile-pass and compile-fail cases. Each `fail/*.rs` breaks one
//! rule; its `.stderr` snapshot is the reviewed error. Regenerate snapshots
//! after a deliberate message change with `TRYBUILD=overwrite cargo test -p tinyagents-ui-tests`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("pass/*.rs");
    t.compile_fail("fail/*.rs");
}
