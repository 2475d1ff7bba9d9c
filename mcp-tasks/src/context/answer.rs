//! Whether a client's answer answers the input request it names: the result type of the
//! request's method and, for an accepted form, the form's fields. One check for both routes:
//! `tasks/update` refuses an answer that does not fit (the task keeps waiting for a good
//! one), and a multi round-trip call asks again.

#![allow(
    deprecated,
    reason = "sampling and roots are deprecated by SEP-2577 yet still part of the 2026-07-28 wire"
)]

use rmcp::model::{
    CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    EnumSchema, InputRequest, ListRootsResult, MultiSelectEnumSchema, PrimitiveSchemaDefinition,
    SingleSelectEnumSchema, StringFormat,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why `answer` does not answer `request`, if it does not: what was expected, and the
/// problem. An accepted form elicitation's `content` must have every field the form requires,
/// each of the type, range, length, format or choices its schema gives; a field the form does
/// not name is ignored, and so is `null` for a field it does not require.
pub(crate) fn problem(request: &InputRequest, answer: &Value) -> Option<(&'static str, String)> {
    fn decodes<T: DeserializeOwned>(answer: &Value) -> Result<T, String> {
        T::deserialize(answer).map_err(|error| error.to_string())
    }
    match request {
        InputRequest::Elicitation(request) => match decodes::<ElicitResult>(answer) {
            Err(error) => Some(("ElicitResult", error)),
            Ok(result) => match &request.params {
                ElicitRequestParams::FormElicitationParams {
                    requested_schema, ..
                } if result.action == ElicitationAction::Accept => {
                    let problem = form_problem(requested_schema, result.content.as_ref());
                    problem.map(|problem| ("answer to its form", problem))
                }
                _ => None,
            },
        },
        InputRequest::CreateMessage(_) => decodes::<CreateMessageResult>(answer)
            .err()
            .map(|error| ("CreateMessageResult", error)),
        InputRequest::ListRoots(_) => decodes::<ListRootsResult>(answer)
            .err()
            .map(|error| ("ListRootsResult", error)),
        _ => None,
    }
}

/// Why `content` does not fill in the form `schema`, if it does not.
pub(crate) fn form_problem(schema: &ElicitationSchema, content: Option<&Value>) -> Option<String> {
    let empty = serde_json::Map::new();
    let fields = match content {
        None => &empty,
        Some(Value::Object(fields)) => fields,
        Some(other) => return Some(format!("content must be an object, got {}", kind(other))),
    };
    let required = schema.required.as_deref().unwrap_or_default();
    if let Some(missing) = required
        .iter()
        .find(|name| fields.get(*name).is_none_or(Value::is_null))
    {
        return Some(format!(
            "content.{missing} is missing, and the form requires it"
        ));
    }
    schema.properties.iter().find_map(|(name, field)| {
        let value = fields.get(name).filter(|value| !value.is_null())?;
        field_problem(field, value).map(|problem| format!("content.{name} {problem}"))
    })
}

/// Why `value` is not a value of `field`, if it is not ("must be ...").
pub(crate) fn field_problem(field: &PrimitiveSchemaDefinition, value: &Value) -> Option<String> {
    match field {
        PrimitiveSchemaDefinition::String(schema) => {
            let Value::String(text) = value else {
                return Some(format!("must be a string, got {}", kind(value)));
            };
            let chars = text.chars().count();
            if let Some(min) = schema.min_length.filter(|min| chars < *min as usize) {
                return Some(format!(
                    "must be at least {min} characters long, got {chars}"
                ));
            }
            if let Some(max) = schema.max_length.filter(|max| chars > *max as usize) {
                return Some(format!(
                    "must be at most {max} characters long, got {chars}"
                ));
            }
            let format = schema.format?;
            (!has_format(text, format)).then(|| format!("must be {}", format_name(format)))
        }
        PrimitiveSchemaDefinition::Number(schema) => {
            let Some(number) = value.as_f64() else {
                return Some(format!("must be a number, got {}", kind(value)));
            };
            range_problem(number, schema.minimum, schema.maximum)
        }
        PrimitiveSchemaDefinition::Integer(schema) => {
            let integer = value.as_i64().or_else(|| {
                // JSON Schema counts `2.0` as an integer.
                let number = value.as_f64()?;
                (number.fract() == 0.0 && number.abs() < 2f64.powi(63)).then_some(number as i64)
            });
            let Some(integer) = integer else {
                return Some(format!("must be an integer, got {}", kind(value)));
            };
            range_problem(integer, schema.minimum, schema.maximum)
        }
        PrimitiveSchemaDefinition::Boolean(_) => {
            (!value.is_boolean()).then(|| format!("must be true or false, got {}", kind(value)))
        }
        PrimitiveSchemaDefinition::Enum(schema) => enum_problem(schema, value),
        _ => None,
    }
}

/// Why `value` is outside `minimum..=maximum`, if it is.
fn range_problem<T: PartialOrd + std::fmt::Display>(
    value: T,
    minimum: Option<T>,
    maximum: Option<T>,
) -> Option<String> {
    if let Some(min) = minimum.filter(|min| value < *min) {
        return Some(format!("must be at least {min}, got {value}"));
    }
    let max = maximum.filter(|max| value > *max)?;
    Some(format!("must be at most {max}, got {value}"))
}

/// Why `value` is not a choice (or, for a multiple choice, a list of choices) of `schema`.
fn enum_problem(schema: &EnumSchema, value: &Value) -> Option<String> {
    let one_of = |allowed: Vec<&str>| match value.as_str() {
        Some(choice) if allowed.contains(&choice) => None,
        _ => Some(format!(
            "must be one of {}, got {}",
            allowed.join(", "),
            shown(value)
        )),
    };
    let (allowed, min, max): (Vec<&str>, _, _) = match schema {
        EnumSchema::Single(SingleSelectEnumSchema::Untitled(schema)) => {
            return one_of(schema.enum_.iter().map(String::as_str).collect());
        }
        EnumSchema::Single(SingleSelectEnumSchema::Titled(schema)) => {
            return one_of(schema.one_of.iter().map(|c| c.const_.as_str()).collect());
        }
        EnumSchema::Legacy(schema) => {
            return one_of(schema.enum_.iter().map(String::as_str).collect());
        }
        EnumSchema::Multi(MultiSelectEnumSchema::Untitled(schema)) => (
            schema.items.enum_.iter().map(String::as_str).collect(),
            schema.min_items,
            schema.max_items,
        ),
        EnumSchema::Multi(MultiSelectEnumSchema::Titled(schema)) => (
            schema
                .items
                .any_of
                .iter()
                .map(|c| c.const_.as_str())
                .collect(),
            schema.min_items,
            schema.max_items,
        ),
        _ => return None,
    };
    let Value::Array(choices) = value else {
        return Some(format!("must be a list of choices, got {}", kind(value)));
    };
    if let Some(bad) = choices
        .iter()
        .find(|choice| choice.as_str().is_none_or(|c| !allowed.contains(&c)))
    {
        return Some(format!(
            "must list only choices of {}, got {}",
            allowed.join(", "),
            shown(bad)
        ));
    }
    let count = choices.len() as u64;
    if let Some(min) = min.filter(|min| count < *min) {
        return Some(format!("must list at least {min} choices, got {count}"));
    }
    let max = max.filter(|max| count > *max)?;
    Some(format!("must list at most {max} choices, got {count}"))
}

/// What a string of `format` is, for a message.
fn format_name(format: StringFormat) -> &'static str {
    match format {
        StringFormat::Email => "an email address (name@domain)",
        StringFormat::Uri => "a URI with a scheme (e.g. https://example.com)",
        StringFormat::Date => "a date written YYYY-MM-DD",
        StringFormat::DateTime => {
            "a date and time as RFC 3339 writes it (e.g. 2026-07-28T09:30:00Z)"
        }
        _ => "of its format",
    }
}

/// Whether `text` is a string of `format`. The checks are the forms' own, not full RFC
/// parsers: an email is `local@domain` without spaces, a URI starts with a scheme and `:`,
/// dates and times are RFC 3339's with the days of each month.
fn has_format(text: &str, format: StringFormat) -> bool {
    match format {
        StringFormat::Email => text.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !text.chars().any(char::is_whitespace)
        }),
        StringFormat::Uri => text.split_once(':').is_some_and(|(scheme, _)| {
            let mut chars = scheme.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
                && !text.chars().any(char::is_whitespace)
        }),
        StringFormat::Date => is_date(text),
        StringFormat::DateTime => text
            .split_once(['T', 't'])
            .is_some_and(|(date, time)| is_date(date) && is_time(time)),
        _ => true,
    }
}

/// `digits` ASCII digits as a number, if `text` is exactly that.
fn number(text: &str, digits: usize) -> Option<u32> {
    (text.len() == digits && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// RFC 3339's `full-date`: `YYYY-MM-DD`, a day the month has.
fn is_date(text: &str) -> bool {
    let mut parts = text.split('-');
    let (Some(year), Some(month), Some(day), None) = (
        parts.next().and_then(|y| number(y, 4)),
        parts.next().and_then(|m| number(m, 2)),
        parts.next().and_then(|d| number(d, 2)),
        parts.next(),
    ) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// RFC 3339's `full-time`: `HH:MM:SS`, an optional fraction, then `Z` or `+HH:MM`/`-HH:MM`.
fn is_time(text: &str) -> bool {
    let (clock, offset) = match text.find(['Z', 'z', '+', '-']) {
        Some(at) => text.split_at(at),
        None => return false,
    };
    let offset_ok = matches!(offset, "Z" | "z")
        || offset[1..].split_once(':').is_some_and(|(h, m)| {
            number(h, 2).is_some_and(|h| h < 24) && number(m, 2).is_some_and(|m| m < 60)
        });
    let (whole, fraction) = clock.split_once('.').unwrap_or((clock, "1"));
    let mut parts = whole.split(':');
    let clock_ok = matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some(h), Some(m), Some(s), None)
            if number(h, 2).is_some_and(|h| h < 24)
                && number(m, 2).is_some_and(|m| m < 60)
                // 60: a leap second.
                && number(s, 2).is_some_and(|s| s <= 60)
    );
    offset_ok && clock_ok && !fraction.is_empty() && fraction.bytes().all(|b| b.is_ascii_digit())
}

/// `value` as JSON for a message, cut after 40 characters: the client sent it, and its
/// answer need not carry it back whole.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(40) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

/// What kind of JSON value `value` is, for a message.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        ConstTitle, EnumSchema, IntegerSchema, NumberSchema, PrimitiveSchemaDefinition, Request,
        StringSchema, TitledItems, TitledMultiSelectEnumSchema,
    };
    use serde_json::json;

    use super::*;

    fn form() -> InputRequest {
        let schema = ElicitationSchema::builder()
            .required_bool("go")
            .optional_email("email")
            .property(
                "name",
                PrimitiveSchemaDefinition::String(StringSchema::new().length(2, 5)),
            )
            .property(
                "site",
                PrimitiveSchemaDefinition::String(StringSchema::new().format(StringFormat::Uri)),
            )
            .property(
                "day",
                PrimitiveSchemaDefinition::String(StringSchema::new().format(StringFormat::Date)),
            )
            .property(
                "at",
                PrimitiveSchemaDefinition::String(
                    StringSchema::new().format(StringFormat::DateTime),
                ),
            )
            .property(
                "ratio",
                PrimitiveSchemaDefinition::Number(NumberSchema::new().range(0.0, 1.0)),
            )
            .property(
                "count",
                PrimitiveSchemaDefinition::Integer(IntegerSchema::new().range(1, 10)),
            )
            .property(
                "color",
                PrimitiveSchemaDefinition::Enum(
                    EnumSchema::builder(vec!["red".into(), "blue".into()]).build(),
                ),
            )
            .property(
                "tags",
                PrimitiveSchemaDefinition::Enum(EnumSchema::Multi(MultiSelectEnumSchema::Titled(
                    TitledMultiSelectEnumSchema::new(TitledItems::new(vec![
                        ConstTitle::new("a", "A"),
                        ConstTitle::new("b", "B"),
                    ]))
                    .with_max_items(1),
                ))),
            )
            .build()
            .unwrap();
        InputRequest::Elicitation(Request::new(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: "?".into(),
            requested_schema: schema,
        }))
    }

    /// The problem with an accepted answer of `content`, as a message.
    fn accepted(content: Value) -> Option<String> {
        let answer = json!({ "action": "accept", "content": content });
        problem(&form(), &answer).map(|(what, problem)| format!("{what}: {problem}"))
    }

    #[test]
    fn an_answer_that_fills_in_the_form_passes() {
        let full = json!({
            "go": true, "email": "a@b.example", "name": "Ann", "site": "https://x.example/p",
            "day": "2024-02-29", "at": "2026-07-28T09:30:00.5+02:00", "ratio": 0.5, "count": 3.0,
            "color": "red", "tags": ["b"], "not-asked": [1, 2],
        });
        assert_eq!(accepted(full), None);
        // Only the required field; `null` for one that is not required.
        assert_eq!(accepted(json!({ "go": false, "email": null })), None);
        // Declined and cancelled answers carry no content to check.
        for action in ["decline", "cancel"] {
            assert_eq!(problem(&form(), &json!({ "action": action })), None);
        }
    }

    #[test]
    fn each_way_of_not_fitting_the_form_says_which_field_and_why() {
        let cases = [
            (json!({}), "content.go is missing, and the form requires it"),
            (json!({ "go": null }), "content.go is missing"),
            (
                json!({ "go": "yes" }),
                "content.go must be true or false, got a string",
            ),
            (
                json!({ "go": true, "email": "nobody" }),
                "content.email must be an email",
            ),
            (
                json!({ "go": true, "email": "a b@c" }),
                "content.email must be an email",
            ),
            (
                json!({ "go": true, "name": "A" }),
                "at least 2 characters long, got 1",
            ),
            (
                json!({ "go": true, "name": "Ærøskøbing" }),
                "at most 5 characters long, got 10",
            ),
            (
                json!({ "go": true, "name": 5 }),
                "content.name must be a string, got a number",
            ),
            (
                json!({ "go": true, "site": "example.com" }),
                "content.site must be a URI",
            ),
            (
                json!({ "go": true, "day": "2023-02-29" }),
                "content.day must be a date",
            ),
            (
                json!({ "go": true, "day": "2023-13-01" }),
                "content.day must be a date",
            ),
            (
                json!({ "go": true, "at": "2026-07-28 09:30:00Z" }),
                "content.at must be a date and time",
            ),
            (
                json!({ "go": true, "at": "2026-07-28T25:00:00Z" }),
                "content.at must be a date and time",
            ),
            (
                json!({ "go": true, "at": "2026-07-28T09:30:00" }),
                "content.at must be a date and time",
            ),
            (
                json!({ "go": true, "ratio": 1.5 }),
                "content.ratio must be at most 1, got 1.5",
            ),
            (
                json!({ "go": true, "ratio": "0.5" }),
                "content.ratio must be a number, got a string",
            ),
            (
                json!({ "go": true, "count": 0 }),
                "content.count must be at least 1, got 0",
            ),
            (
                json!({ "go": true, "count": 2.5 }),
                "content.count must be an integer, got a number",
            ),
            (
                json!({ "go": true, "color": "green" }),
                "must be one of red, blue, got \"green\"",
            ),
            (
                json!({ "go": true, "tags": "a" }),
                "must be a list of choices, got a string",
            ),
            (
                json!({ "go": true, "tags": ["c"] }),
                "must list only choices of a, b, got \"c\"",
            ),
            (
                json!({ "go": true, "tags": ["a", "b"] }),
                "must list at most 1 choices, got 2",
            ),
            (json!([true]), "content must be an object, got an array"),
        ];
        for (content, expected) in cases {
            let message = accepted(content.clone()).unwrap_or_default();
            assert!(
                message.starts_with("answer to its form: ") && message.contains(expected),
                "{content}: {message:?} does not say {expected:?}"
            );
        }
        // A long value is quoted only in part.
        let long = "x".repeat(10_000);
        for content in [
            json!({ "go": true, "color": long }),
            json!({ "go": true, "tags": [long] }),
        ] {
            let message = accepted(content).unwrap();
            assert!(
                message.len() < 200 && message.ends_with("xxx..."),
                "{message}"
            );
        }
        // An accepted answer without content misses the required field.
        let bare = problem(&form(), &json!({ "action": "accept" })).unwrap();
        assert!(bare.1.contains("content.go is missing"), "{bare:?}");
    }

    #[test]
    fn an_answer_of_the_wrong_result_type_names_the_type() {
        let (what, problem) = problem(&form(), &json!({ "content": {} })).unwrap();
        assert_eq!(what, "ElicitResult");
        assert!(problem.contains("action"), "{problem}");
        let roots = InputRequest::ListRoots(rmcp::model::RequestNoParam::default());
        assert_eq!(
            super::problem(&roots, &json!({ "roots": "none" }))
                .unwrap()
                .0,
            "ListRootsResult"
        );
        assert_eq!(super::problem(&roots, &json!({ "roots": [] })), None);
    }
}
