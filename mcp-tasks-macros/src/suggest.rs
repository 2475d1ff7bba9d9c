//! "Did you mean": the closest valid option to a misspelt one, and the messages that name
//! the valid options.

/// The closest candidate within a small edit distance.
pub fn suggest<'a>(found: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (distance(found, c), *c))
        .filter(|(d, c)| *d <= (c.len().max(found.len()) / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(row[j]).min(row[j + 1])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

/// "`a`, `b`, `c`".
pub fn one_of(options: &[&str]) -> String {
    let quoted: Vec<String> = options.iter().map(|o| format!("`{o}`")).collect();
    quoted.join(", ")
}

/// "unknown {what} `{found}`, did you mean `..`? expected one of ..".
pub fn unknown(what: &str, found: &str, options: &[&str]) -> String {
    match suggest(found, options) {
        Some(best) => format!(
            "unknown {what} `{found}`, did you mean `{best}`? expected one of {}",
            one_of(options)
        ),
        None => format!(
            "unknown {what} `{found}`, expected one of {}",
            one_of(options)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_within_a_third_of_the_length() {
        assert_eq!(distance("tll", "ttl"), 1);
        assert_eq!(suggest("tll", &["ttl", "mode"]), Some("ttl"));
        assert_eq!(
            suggest("readonly", &["read_only", "ttl"]),
            Some("read_only")
        );
        assert_eq!(suggest("zzzzzz", &["ttl", "mode"]), None);
    }
}
