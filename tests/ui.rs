//! trybuild: every compile error `#[task_tool]` and `toolkit!` can produce, with reviewed
//! `.stderr` files (`tests/ui/fail/<topic>/<case>.rs`), and inputs that must compile
//! (`tests/ui/pass/`). Regenerate with `TRYBUILD=overwrite` and review the diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*/*.rs");
}
