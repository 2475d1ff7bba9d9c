// The check of the one table of rate cases (`tests/rate_cases.txt`), included (after
// `case_table.rs`) by the unit tests of both copies of the grammar
// (`mcp-tasks-macros/src/attr.rs`, `mcp-tasks/src/rate.rs`): `<text> => <count> <ms>` is
// accepted as that. A spelling a message suggests is a rate, or a window (after `1/`).

/// Holds `parse` (a text to the count and the window in milliseconds) to the table.
fn check_rate_table(parse: impl Fn(&str) -> Result<(u32, u64), String>) {
    let want = |value: &str| {
        let (count, ms) = value.split_once(' ').expect("<count> <ms>");
        (count.parse().unwrap(), ms.parse().unwrap())
    };
    let suggestion_ok = |suggested: &str| {
        if suggested.contains('/') {
            parse(suggested).is_ok()
        } else {
            parse(&format!("1/{suggested}")).is_ok()
        }
    };
    check_case_table(
        include_str!("../rate_cases.txt"),
        15,
        &parse,
        want,
        suggestion_ok,
    );
}
