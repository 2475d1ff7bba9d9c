// The check of the one table of rate cases (`tests/rate_cases.txt`), included by the unit
// tests of both copies of the grammar (`mcp-tasks-macros/src/attr.rs`,
// `mcp-tasks/src/rate.rs`): `<text> => <count> <ms>` is accepted as that; `<text> !>
// <words>` is refused with a message containing the words. Every spelling a message
// suggests (`"…"` in backticks) is accepted: a rate, or a window (after `1/`).

/// Holds `parse` (a text to the count and the window in milliseconds) to the table.
fn check_rate_table(parse: impl Fn(&str) -> Result<(u32, u64), String>) {
    const CASES: &str = include_str!("../rate_cases.txt");
    let mut checked = 0;
    for line in CASES.lines() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let text = |t: &str| t.trim_matches('|').to_owned();
        if let Some((input, want)) = line.split_once(" => ") {
            let (count, ms) = want.split_once(' ').expect("<count> <ms>");
            let want = (count.parse().unwrap(), ms.parse().unwrap());
            assert_eq!(parse(&text(input)), Ok(want), "{line}");
        } else if let Some((input, words)) = line.split_once(" !> ") {
            let message = parse(&text(input)).expect_err(line);
            assert!(message.contains(words), "{line}: {message}");
            for suggested in message.split("`\"").skip(1) {
                let suggested = suggested.split("\"`").next().unwrap_or_default();
                let as_rate = if suggested.contains('/') {
                    suggested.to_owned()
                } else {
                    format!("1/{suggested}")
                };
                assert!(
                    parse(&as_rate).is_ok(),
                    "{line}: suggests `{suggested}`: {message}"
                );
            }
        } else {
            panic!("a case is `<text> => <count> <ms>` or `<text> !> <words>`: {line}");
        }
        checked += 1;
    }
    assert!(checked >= 15, "{checked} cases");
}
