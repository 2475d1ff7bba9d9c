//! The duration grammar of `ttl`, `poll_interval` and `inline_budget`: one or more
//! `<digits><unit>` with units `h`, `m`, `s`, `ms` from largest to smallest, no spaces
//! (`"250ms"`, `"1s"`, `"10m"`, `"1h30m"`). Pure, so it is unit-tested on its own.

/// The longest duration accepted, in milliseconds: the largest integer a JSON number carries
/// exactly (2^53 - 1), since `ttlMs` and `pollIntervalMs` travel as JSON numbers.
pub const MAX_MS: u64 = (1 << 53) - 1;

const UNITS: [(&str, u64); 4] = [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)];

const EXAMPLES: &str = "e.g. `\"250ms\"`, `\"10s\"`, `\"10m\"` or `\"1h30m\"`";

/// Parses `text` into milliseconds. The error is a complete, lowercase message.
pub fn parse(text: &str) -> Result<u64, String> {
    if text.is_empty() {
        return Err(format!(
            "empty duration, expected a number and a unit, {EXAMPLES}"
        ));
    }
    if text.chars().any(char::is_whitespace) {
        let joined: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        return Err(format!(
            "invalid duration `{text}`: remove the whitespace, e.g. `\"{joined}\"`"
        ));
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
            let found = rest.chars().next().unwrap_or_default();
            return Err(if found == '-' {
                format!("invalid duration `{text}`: a duration cannot be negative, {EXAMPLES}")
            } else {
                format!("invalid duration `{text}`: expected a number before `{rest}`, {EXAMPLES}")
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
                 `ms`, `s`, `m`, `h`, e.g. `\"{number}s\"`"
            ));
        }
        let Some(index) = UNITS.iter().position(|(name, _)| *name == unit) else {
            let hint = if UNITS
                .iter()
                .any(|(name, _)| *name == unit.to_ascii_lowercase())
            {
                format!(" (units are lowercase: `{}`)", unit.to_ascii_lowercase())
            } else {
                String::new()
            };
            return Err(format!(
                "invalid duration `{text}`: unknown unit `{unit}`{hint}, expected one of \
                 `ms`, `s`, `m`, `h`, {EXAMPLES}"
            ));
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

    #[test]
    fn accepts_each_unit() {
        assert_eq!(parse("250ms"), Ok(250));
        assert_eq!(parse("1s"), Ok(1_000));
        assert_eq!(parse("10m"), Ok(600_000));
        assert_eq!(parse("1h"), Ok(3_600_000));
    }

    #[test]
    fn accepts_combinations_largest_first() {
        assert_eq!(parse("1h30m"), Ok(5_400_000));
        assert_eq!(parse("1m30s"), Ok(90_000));
        assert_eq!(parse("2h1m1s1ms"), Ok(7_261_001));
        assert_eq!(parse("1s500ms"), Ok(1_500));
    }

    #[test]
    fn accepts_leading_zeros_and_big_numbers() {
        assert_eq!(parse("0010s"), Ok(10_000));
        assert_eq!(parse("90m"), Ok(5_400_000));
        assert_eq!(parse(&format!("{MAX_MS}ms")), Ok(MAX_MS));
    }

    #[test]
    fn rejects_whitespace_with_the_fixed_spelling() {
        assert_eq!(
            parse("10 m").unwrap_err(),
            "invalid duration `10 m`: remove the whitespace, e.g. `\"10m\"`"
        );
        assert!(parse(" 1s").unwrap_err().contains("remove the whitespace"));
    }

    #[test]
    fn rejects_zero() {
        assert_eq!(
            parse("0s").unwrap_err(),
            "invalid duration `0s`: a duration must be longer than zero, e.g. `\"1ms\"`"
        );
        assert!(parse("0h0m").is_err());
    }

    #[test]
    fn rejects_unknown_units() {
        assert_eq!(
            parse("5x").unwrap_err(),
            "invalid duration `5x`: unknown unit `x`, expected one of `ms`, `s`, `m`, `h`, \
             e.g. `\"250ms\"`, `\"10s\"`, `\"10m\"` or `\"1h30m\"`"
        );
        assert_eq!(
            parse("5M").unwrap_err(),
            "invalid duration `5M`: unknown unit `M` (units are lowercase: `m`), expected one of \
             `ms`, `s`, `m`, `h`, e.g. `\"250ms\"`, `\"10s\"`, `\"10m\"` or `\"1h30m\"`"
        );
        assert!(parse("1d").unwrap_err().contains("unknown unit `d`"));
        assert!(parse("1sec").unwrap_err().contains("unknown unit `sec`"));
    }

    #[test]
    fn rejects_missing_unit_or_number() {
        assert_eq!(
            parse("5").unwrap_err(),
            "invalid duration `5`: missing unit after `5`, expected one of `ms`, `s`, `m`, `h`, \
             e.g. `\"5s\"`"
        );
        assert!(
            parse("ms")
                .unwrap_err()
                .contains("expected a number before `ms`")
        );
        assert!(parse("").unwrap_err().starts_with("empty duration"));
        assert!(parse("-1s").unwrap_err().contains("cannot be negative"));
    }

    #[test]
    fn rejects_fractions() {
        assert!(
            parse("1.5h")
                .unwrap_err()
                .contains("fractions are not supported")
        );
    }

    #[test]
    fn rejects_wrong_order_and_repeats() {
        let order = "units must go from largest to smallest, each at most once";
        assert!(parse("30m1h").unwrap_err().contains(order));
        assert!(parse("1m1m").unwrap_err().contains(order));
        assert!(parse("1ms1s").unwrap_err().contains(order));
    }

    #[test]
    fn rejects_overflow() {
        let too_long = "too long, at most 9007199254740991ms";
        assert!(
            parse("99999999999999999999999h")
                .unwrap_err()
                .contains(too_long)
        );
        assert!(
            parse("18446744073709551615h")
                .unwrap_err()
                .contains(too_long)
        );
        assert!(
            parse(&format!("{}ms", MAX_MS + 1))
                .unwrap_err()
                .contains(too_long)
        );
        assert!(parse("2501999999h1ms").unwrap_err().contains(too_long));
    }

    #[test]
    fn formats_shortest_spelling() {
        assert_eq!(format(5_400_000), "1h30m");
        assert_eq!(format(250), "250ms");
        assert_eq!(format(3_600_000), "1h");
        assert_eq!(format(1_500), "1s500ms");
        for text in ["1h30m", "250ms", "2h1m1s1ms"] {
            assert_eq!(format(parse(text).unwrap()), text);
        }
    }
}
