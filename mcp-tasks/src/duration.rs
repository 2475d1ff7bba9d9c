//! The one duration grammar (as `#[task_tool(ttl = "1h30m")]` takes it), for the admin API's
//! `stalled`, `older_than` and `created_after` and the CLI's flags: one or more
//! `<digits><unit>` with units `d`, `h`, `m`, `s`, `ms` from largest to smallest, no spaces
//! (`"250ms"`, `"90s"`, `"1h30m"`, `"7d"`).
//!
//! A copy of `mcp-tasks-macros/src/duration.rs` (a proc-macro crate cannot share code with
//! the crate that depends on it); both are held to one table of cases
//! (`tests/duration_cases.txt`).

/// The longest duration accepted, in milliseconds: the largest integer a JSON number carries
/// exactly (2^53 - 1), since `ttlMs` and `pollIntervalMs` travel as JSON numbers.
pub const MAX_MS: u64 = (1 << 53) - 1;

const UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// Each unit, and the words people write for it.
const WORDS: [(&str, &[&str]); 5] = [
    ("d", &["days", "day"]),
    ("h", &["hours", "hour", "hrs", "hr"]),
    ("m", &["minutes", "minute", "mins", "min", "min."]),
    ("s", &["seconds", "second", "secs", "sec", "sec."]),
    (
        "ms",
        &["milliseconds", "millisecond", "millis", "msec", "msecs"],
    ),
];

const EXAMPLES: &str = "e.g. `\"250ms\"`, `\"10s\"`, `\"10m\"` or `\"1h30m\"`";

/// The grammar's spelling of `text`, when `text` is a duration written another common way
/// (`10 minutes`, `1 Hour 30 Min`, `2secs`) and that spelling is accepted.
fn respelled(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let mut out = String::new();
    let mut rest = lower.trim();
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        out.push_str(&rest[..digits]);
        let after = rest[digits..].trim_start();
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c.is_whitespace() || c == ',')
            .unwrap_or(after.len());
        let unit = &after[..unit_len];
        let (unit, _) = WORDS
            .iter()
            .find(|(name, words)| *name == unit || words.contains(&unit))?;
        out.push_str(unit);
        rest = after[unit_len..]
            .trim_start_matches(|c: char| c.is_whitespace() || c == ',')
            .trim_start_matches("and ")
            .trim_start();
    }
    (out != text && parse(&out).is_ok()).then_some(out)
}

/// Parses `text` into milliseconds: one or more `<digits><unit>`, units `d`, `h`, `m`, `s`,
/// `ms` from largest to smallest, each at most once, no spaces, longer than zero and at most
/// [`MAX_MS`]. The error is a complete, lowercase message; a spelling it suggests is accepted.
pub fn parse(text: &str) -> Result<u64, String> {
    if text.is_empty() {
        return Err(format!(
            "empty duration, expected a number and a unit, {EXAMPLES}"
        ));
    }
    let fix = |problem: String| match respelled(text) {
        Some(spelling) => format!("invalid duration `{text}`: {problem}, write `\"{spelling}\"`"),
        None => format!("invalid duration `{text}`: {problem}, {EXAMPLES}"),
    };
    if text.chars().any(char::is_whitespace) {
        return Err(fix("a duration has no spaces".to_owned()));
    }
    let mut rest = text;
    let mut total: u64 = 0;
    // Index into UNITS of the last unit used: each next unit must be smaller.
    let mut last: Option<usize> = None;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(if rest.starts_with('-') {
                fix("a duration cannot be negative".to_owned())
            } else {
                fix(format!("expected a number before `{rest}`"))
            });
        }
        let (number, after) = rest.split_at(digits);
        if after.starts_with('.') {
            return Err(format!(
                "invalid duration `{text}`: fractions are not supported, combine whole units \
                 instead, e.g. `\"1h30m\"` or `\"1500ms\"`"
            ));
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(format!(
                "invalid duration `{text}`: missing unit after `{number}`, expected one of \
                 `ms`, `s`, `m`, `h`, `d`, e.g. `\"{number}s\"`"
            ));
        }
        let Some(index) = UNITS.iter().position(|(name, _)| *name == unit) else {
            return Err(fix(format!(
                "unknown unit `{unit}`, expected one of `ms`, `s`, `m`, `h`, `d`"
            )));
        };
        if last.is_some_and(|last| index <= last) {
            return Err(format!(
                "invalid duration `{text}`: units must go from largest to smallest, each at \
                 most once, e.g. `\"1h30m\"`"
            ));
        }
        last = Some(index);
        let too_long = || {
            format!("invalid duration `{text}`: too long, at most {MAX_MS}ms (about 285000 years)")
        };
        let value: u64 = number.parse().map_err(|_| too_long())?;
        total = value
            .checked_mul(UNITS[index].1)
            .and_then(|ms| total.checked_add(ms))
            .filter(|&ms| ms <= MAX_MS)
            .ok_or_else(too_long)?;
        rest = next;
    }
    if total == 0 {
        return Err(format!(
            "invalid duration `{text}`: a duration must be longer than zero, e.g. `\"1ms\"`"
        ));
    }
    Ok(total)
}

/// The shortest way to write `ms` in the grammar, for messages (`5400000` -> `"1h30m"`).
pub fn format(ms: u64) -> String {
    let mut out = String::new();
    let mut rest = ms;
    for (name, size) in UNITS {
        if rest >= size {
            out.push_str(&format!("{}{name}", rest / size));
            rest %= size;
        }
    }
    if out.is_empty() { "0ms".into() } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table both copies of the grammar are held to (`mcp-tasks-macros/src/duration.rs`
    /// and `mcp-tasks/src/duration.rs`): `<text> => <milliseconds>` is accepted as that, and
    /// prints back as a spelling of the same value; `<text> !> <words>` is refused with a
    /// message containing the words. Every spelling a message suggests must itself be
    /// accepted.
    #[test]
    fn the_shared_table_of_cases() {
        let accepted = check_case_table(
            include_str!("../../tests/duration_cases.txt"),
            30,
            parse,
            |ms| ms.parse().unwrap(),
            |suggested| parse(suggested).is_ok(),
        );
        for input in accepted {
            let printed = format(parse(&input).unwrap());
            assert_eq!(parse(&printed), parse(&input), "{input}");
        }
    }

    include!("../../tests/support/case_table.rs");

    #[test]
    fn formats_shortest_spelling() {
        assert_eq!(format(5_400_000), "1h30m");
        assert_eq!(format(250), "250ms");
        assert_eq!(format(86_400_000 + 1_500), "1d1s500ms");
    }
}
