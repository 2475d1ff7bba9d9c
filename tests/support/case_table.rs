// The check of a table of grammar cases, included by the unit tests of both copies of each
// grammar the attribute and the runtime share (durations: `tests/duration_cases.txt`, held
// by both `duration.rs`; rates: `tests/rate_cases.txt`, through `rate_table.rs`). A case
// is `<text> => <value>`, accepted as that value, or `<text> !> <words>`, refused with a
// message containing the words; a text between `|` keeps its spaces.

/// Holds `parse` to `table`: each accepted text parses to `want` of its value; each refused
/// one fails with its words, and every spelling its message suggests (`"…"` in backticks)
/// is one `suggestion_ok` accepts. The accepted texts, for the caller's own checks; panics
/// with fewer than `at_least` cases.
fn check_case_table<T: PartialEq + std::fmt::Debug>(
    table: &str,
    at_least: usize,
    parse: impl Fn(&str) -> Result<T, String>,
    want: impl Fn(&str) -> T,
    suggestion_ok: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut checked = 0;
    let mut accepted = Vec::new();
    for line in table.lines() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let text = |t: &str| t.trim_matches('|').to_owned();
        if let Some((input, value)) = line.split_once(" => ") {
            let input = text(input);
            assert_eq!(parse(&input), Ok(want(value)), "{line}");
            accepted.push(input);
        } else if let Some((input, words)) = line.split_once(" !> ") {
            let message = parse(&text(input)).expect_err(line);
            assert!(message.contains(words), "{line}: {message}");
            for suggested in message.split("`\"").skip(1) {
                let suggested = suggested.split("\"`").next().unwrap_or_default();
                assert!(
                    suggestion_ok(suggested),
                    "{line}: suggests `{suggested}`: {message}"
                );
            }
        } else {
            panic!("a case is `<text> => <value>` or `<text> !> <words>`: {line}");
        }
        checked += 1;
    }
    assert!(checked >= at_least, "{checked} cases");
    accepted
}
