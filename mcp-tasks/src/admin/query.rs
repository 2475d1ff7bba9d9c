//! The query string of an admin request: filters, page and purge bounds, each bad value a
//! [`BadParam`] that names its parameter.

use std::time::Duration;

use crate::store::admin::{MAX_PAGE, TaskFilter, TaskQuery, parse_status};

/// A query parameter with a value the admin API cannot use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadParam {
    pub(crate) name: String,
    /// What is wrong and what to send instead.
    pub(crate) message: String,
}

impl BadParam {
    pub(crate) fn new(name: &str, message: impl Into<String>) -> Self {
        Self {
            name: name.to_owned(),
            message: message.into(),
        }
    }
}

/// The parameters of a list (and of a count, which ignores `cursor` and `limit`).
pub(crate) const LIST_PARAMS: [&str; 10] = [
    "status",
    "tool",
    "owner",
    "instance",
    "created_after",
    "created_before",
    "stalled",
    "parked",
    "cursor",
    "limit",
];

/// The query string's pairs, decoded; empty values are left out (an empty form field). A
/// parameter not in `known` is refused (a misspelt filter would otherwise match everything).
pub(crate) fn pairs(
    query: Option<&str>,
    known: &[&str],
) -> Result<Vec<(String, String)>, BadParam> {
    let pairs: Vec<_> = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .filter(|(_, value)| !value.is_empty())
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect();
    let Some((key, _)) = pairs.iter().find(|(key, _)| !known.contains(&key.as_str())) else {
        return Ok(pairs);
    };
    let expected = known.join(", ");
    let message = format!("unknown parameter `{key}`: expected one of {expected}");
    Err(BadParam::new(key, message))
}

/// The step a fork starts from: parameter (or form field) `step`'s value, a number.
pub(crate) fn step(value: Option<&str>) -> Result<usize, BadParam> {
    let value =
        value.ok_or_else(|| BadParam::new("step", "give the step to fork from: `step=N`"))?;
    value.parse().map_err(|_| {
        BadParam::new(
            "step",
            format!("`{value}` is not a step number (0, 1, 2, ...)"),
        )
    })
}

pub(crate) fn single<'a>(
    pairs: &'a [(String, String)],
    name: &str,
) -> Result<Option<&'a str>, BadParam> {
    let mut values = pairs.iter().filter(|(key, _)| key == name);
    let first = values.next().map(|(_, value)| value.as_str());
    if values.next().is_some() {
        let message = format!("`{name}` is given more than once: give it once");
        return Err(BadParam::new(name, message));
    }
    Ok(first)
}

/// The filter of `pairs`.
pub(crate) fn filter(pairs: &[(String, String)], now_ms: u64) -> Result<TaskFilter, BadParam> {
    let mut filter = TaskFilter::new();
    for (key, value) in pairs.iter().filter(|(key, _)| key == "status") {
        for word in value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let Some(status) = parse_status(word) else {
                let message = format!(
                    "unknown status `{word}`: expected working, input_required, completed, failed \
                     or cancelled (several separated by commas)"
                );
                return Err(BadParam::new(key, message));
            };
            filter = filter.with_status(status);
        }
    }
    filter.tool = single(pairs, "tool")?.map(str::to_owned);
    filter.owner = single(pairs, "owner")?.map(str::to_owned);
    filter.instance = single(pairs, "instance")?.map(str::to_owned);
    let at = |name| {
        single(pairs, name)?
            .map(|text| instant(name, text, now_ms))
            .transpose()
    };
    filter.created_after_ms = at("created_after")?;
    filter.created_before_ms = at("created_before")?;
    let stalled = single(pairs, "stalled")?;
    filter.stalled_for = stalled.map(|text| duration("stalled", text)).transpose()?;
    match single(pairs, "parked")? {
        None | Some("false" | "0" | "no") => {}
        Some("true" | "1" | "yes") => filter = filter.parked_only(),
        Some(other) => {
            let message =
                format!("`parked` is `{other}`: give `true` (only parked tasks) or `false`");
            return Err(BadParam::new("parked", message));
        }
    }
    Ok(filter)
}

/// The page of `pairs`: its filter, `limit` and `cursor`.
pub(crate) fn list(pairs: &[(String, String)], now_ms: u64) -> Result<TaskQuery, BadParam> {
    let mut query = TaskQuery::new(filter(pairs, now_ms)?);
    if let Some(limit) = single(pairs, "limit")? {
        let n = limit
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n));
        let Some(n) = n else {
            let message =
                format!("`{limit}` is not a page size: give a whole number from 1 to {MAX_PAGE}");
            return Err(BadParam::new("limit", message));
        };
        query = query.with_limit(n);
    }
    if let Some(cursor) = single(pairs, "cursor")? {
        query = query
            .with_cursor(cursor)
            .map_err(|error| BadParam::new("cursor", error.to_string()))?;
    }
    Ok(query)
}

/// The `before` bound of a purge: `before` (an instant) or `older_than` (a duration), or
/// neither (every finished task).
pub(crate) fn purge_before(
    pairs: &[(String, String)],
    now_ms: u64,
) -> Result<Option<u64>, BadParam> {
    match (single(pairs, "before")?, single(pairs, "older_than")?) {
        (Some(_), Some(_)) => Err(BadParam::new(
            "older_than",
            "give `before` or `older_than`, not both",
        )),
        (Some(before), None) => instant("before", before, now_ms).map(Some),
        (None, Some(age)) => {
            let age = duration("older_than", age)?;
            Ok(Some(now_ms.saturating_sub(crate::clock::millis(age))))
        }
        (None, None) => Ok(None),
    }
}

/// A duration in the one grammar of [`crate::duration`] (`90s`, `2h`, `1h30m`, `7d`).
pub(crate) fn duration(name: &str, text: &str) -> Result<Duration, BadParam> {
    crate::duration::parse(text)
        .map(Duration::from_millis)
        .map_err(|message| BadParam::new(name, message))
}

/// An instant: epoch milliseconds, an RFC 3339 time (`2026-12-02T10:00:00Z`), or a duration
/// ago (`2h` is two hours before now).
pub(crate) fn instant(name: &str, text: &str, now_ms: u64) -> Result<u64, BadParam> {
    let ago = || duration(name, text).ok().map(crate::clock::millis);
    text.parse()
        .ok()
        .or_else(|| rfc3339_ms(text))
        .or_else(|| ago().map(|ago| now_ms.saturating_sub(ago)))
        .ok_or_else(|| {
            BadParam::new(
                name,
                format!(
                    "`{text}` is not an instant: give epoch milliseconds, an RFC 3339 time \
             (2026-12-02T10:00:00Z) or a duration ago (2h)"
                ),
            )
        })
}

/// An RFC 3339 time as epoch milliseconds (not before 1970).
fn rfc3339_ms(text: &str) -> Option<u64> {
    let time = chrono::DateTime::parse_from_rfc3339(text).ok()?;
    u64::try_from(time.timestamp_millis()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_in_every_form() {
        assert_eq!(rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            rfc3339_ms("2026-12-02T10:00:00.250Z"),
            Some(1_796_205_600_250)
        );
        assert_eq!(
            rfc3339_ms("2026-12-02T12:00:00+02:00"),
            rfc3339_ms("2026-12-02T10:00:00Z")
        );
        assert_eq!(
            crate::clock::rfc3339(rfc3339_ms("2024-02-29T23:59:59Z").unwrap()),
            "2024-02-29T23:59:59.000Z"
        );
        assert_eq!(instant("x", "2h", 10_000_000), Ok(10_000_000 - 7_200_000));
        assert_eq!(instant("x", "1234", 0), Ok(1234));
        // Not a day of February: refused, not read as the 3rd of March.
        for bad in [
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-02-31T00:00:00Z",
            "2026-12-02",
            "-5",
        ] {
            let error = instant("created_after", bad, 0).unwrap_err();
            assert_eq!(error.name, "created_after", "{bad}");
        }
    }

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(duration("d", "90s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("d", "2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(duration("d", "250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("d", "1h30m"), Ok(Duration::from_secs(5400)));
        for bad in ["90", "h", "1.5h", "5w", ""] {
            assert_eq!(
                duration("stalled", bad).unwrap_err().name,
                "stalled",
                "{bad}"
            );
        }
    }

    #[test]
    fn each_bad_value_names_its_parameter() {
        let q = |text: &str| list(&pairs(Some(text), &LIST_PARAMS)?, 0).map(drop);
        let q = |text: &str| q(text).unwrap_err().name;
        assert_eq!(q("status=running"), "status");
        assert_eq!(q("limit=0"), "limit");
        assert_eq!(q("limit=501"), "limit");
        assert_eq!(q("stalled=soon"), "stalled");
        assert_eq!(q("created_before=later"), "created_before");
        assert_eq!(q("cursor=zz"), "cursor");
        assert_eq!(q("tool=a&tool=b"), "tool");
        assert_eq!(pairs(Some("tol=a"), &LIST_PARAMS).unwrap_err().name, "tol");
        let text = "status=working,failed&tool=&limit=10";
        let ok = list(&pairs(Some(text), &LIST_PARAMS).unwrap(), 0).unwrap();
        assert_eq!(ok.filter.statuses.len(), 2);
        assert_eq!(ok.filter.tool, None, "an empty value is no filter");
        assert_eq!(ok.limit, 10);
    }
}
