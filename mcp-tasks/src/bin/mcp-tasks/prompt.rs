//! Asking the person at the terminal: one line per field of an elicitation's
//! `requestedSchema`, each checked against its type before it is sent.

use std::{io::Write, sync::Arc};

use crate::printable::printable;
use mcp_tasks::client::{InputAnswer, InputContext, form_field_problem};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Map, Value};
use tokio::{
    io::{AsyncBufReadExt, BufReader, Lines, Stdin},
    sync::Mutex,
};

/// Reads answers from stdin; writes questions to stderr.
#[derive(Clone)]
pub struct Prompter {
    lines: Arc<Mutex<Lines<BufReader<Stdin>>>>,
}

/// Writes a prompt, which quotes the server's question: [`printable`] first.
fn say(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{}", printable(text));
    let _ = err.flush();
}

impl Prompter {
    pub fn new() -> Self {
        Self {
            lines: Arc::new(Mutex::new(BufReader::new(tokio::io::stdin()).lines())),
        }
    }

    async fn read_line(&self) -> Option<String> {
        self.lines.lock().await.next_line().await.ok().flatten()
    }

    /// Answers one elicitation from the terminal; end of input answers `cancel`.
    pub async fn elicit(
        &self,
        params: ElicitRequestParams,
        cx: InputContext,
    ) -> InputAnswer<ElicitResult> {
        match params {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => {
                say(&format!(
                    "\n? {message}  (input `{}`; type :decline or :cancel to refuse)\n",
                    cx.key
                ));
                let schema = serde_json::to_value(&requested_schema)?;
                self.form(&schema).await
            }
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
                say(&format!(
                    "\n? {message}\n  open {url}\n  press Enter when done (or :decline / :cancel): "
                ));
                let action = match self.read_line().await.as_deref().map(str::trim) {
                    None | Some(":cancel") => ElicitationAction::Cancel,
                    Some(":decline") => ElicitationAction::Decline,
                    Some(_) => ElicitationAction::Accept,
                };
                Ok(Some(ElicitResult::new(action)))
            }
            _ => Ok(Some(ElicitResult::new(ElicitationAction::Decline))),
        }
    }

    async fn form(&self, schema: &Value) -> InputAnswer<ElicitResult> {
        let required = schema["required"].as_array();
        let mut content = Map::new();
        for (name, property) in schema["properties"].as_object().into_iter().flatten() {
            let needed = required.is_some_and(|r| r.iter().any(|n| n == name));
            match self.field(name, property, needed).await {
                Ok(value) => content.extend(value.map(|value| (name.clone(), value))),
                Err(refusal) => return Ok(Some(ElicitResult::new(refusal))),
            }
        }
        Ok(Some(
            ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content)),
        ))
    }

    /// One field's value, `None` to leave it out, or the person's refusal of the whole form.
    async fn field(
        &self,
        name: &str,
        property: &Value,
        required: bool,
    ) -> Result<Option<Value>, ElicitationAction> {
        let label = property["title"].as_str().unwrap_or(name);
        let default = property.get("default").filter(|d| !d.is_null());
        let mut question = format!("  {label} ({}", describe(property));
        if let Some(default) = default {
            question.push_str(&format!(", default {default}"));
        } else if !required {
            question.push_str(", optional");
        }
        question.push(')');
        if let Some(description) = property["description"].as_str() {
            question.push_str(&format!(" {description}"));
        }
        question.push_str(": ");
        loop {
            say(&question);
            let Some(line) = self.read_line().await else {
                say("\n  (end of input: cancelling)\n");
                return Err(ElicitationAction::Cancel);
            };
            let line = line.trim();
            match line {
                ":cancel" => return Err(ElicitationAction::Cancel),
                ":decline" => return Err(ElicitationAction::Decline),
                "" if default.is_some() || !required => return Ok(default.cloned()),
                "" => say("  a value is required\n"),
                _ => match check(property, line) {
                    Ok(value) => return Ok(Some(value)),
                    Err(why) => say(&format!("  invalid: {why}\n")),
                },
            }
        }
    }
}

/// Allowed values of an enum-like property: `enum`, or `oneOf`/`anyOf` of `const`s.
fn choices(property: &Value) -> Option<Vec<String>> {
    let values: Vec<&Value> = match property["enum"].as_array() {
        Some(values) => values.iter().collect(),
        None => {
            let options = property["oneOf"]
                .as_array()
                .or(property["anyOf"].as_array())?;
            options.iter().map(|option| &option["const"]).collect()
        }
    };
    let strings = values.into_iter().filter_map(Value::as_str);
    Some(strings.map(str::to_owned).collect())
}

fn describe(property: &Value) -> String {
    let kind = property["type"].as_str().unwrap_or("string");
    match (kind, choices(property)) {
        ("array", _) => match choices(&property["items"]) {
            Some(options) => format!("comma-separated, from {}", options.join("|")),
            None => "comma-separated list".to_owned(),
        },
        ("boolean", _) => "yes/no".to_owned(),
        (_, Some(options)) => format!("one of {}", options.join("|")),
        (kind, None) => kind.to_owned(),
    }
}

/// The typed value of `text` for `property`, or why it does not fit: the text read as the
/// property's type, then held to the property's schema as the server holds an answer.
pub fn check(property: &Value, text: &str) -> Result<Value, String> {
    let value = match property["type"].as_str().unwrap_or("string") {
        "boolean" => match text.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" | "1" => Value::Bool(true),
            "n" | "no" | "false" | "0" => Value::Bool(false),
            _ => return Err("answer yes or no".to_owned()),
        },
        "integer" => Value::from(
            text.parse::<i64>()
                .map_err(|_| format!("`{text}` is not an integer"))?,
        ),
        "number" => match text.parse::<f64>() {
            Ok(n) if n.is_finite() => Value::from(n),
            _ => return Err(format!("`{text}` is not a finite number")),
        },
        "array" => text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect(),
        _ => Value::String(text.to_owned()),
    };
    match form_field_problem(property, &value) {
        Some(problem) => Err(problem),
        None => Ok(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_checked_against_their_type() {
        assert_eq!(check(&json!({"type": "boolean"}), "Yes"), Ok(json!(true)));
        assert!(check(&json!({"type": "boolean"}), "maybe").is_err());
        assert_eq!(check(&json!({"type": "integer"}), "7"), Ok(json!(7)));
        assert!(check(&json!({"type": "integer"}), "7.5").is_err());
        assert!(check(&json!({"type": "integer", "maximum": 5}), "7").is_err());
        assert_eq!(check(&json!({"type": "number"}), "2.5"), Ok(json!(2.5)));
        assert!(check(&json!({"type": "number"}), "NaN").is_err());
        assert_eq!(
            check(&json!({"type": "string", "enum": ["a", "b"]}), "b"),
            Ok(json!("b"))
        );
        assert!(check(&json!({"type": "string", "enum": ["a", "b"]}), "c").is_err());
        assert!(check(&json!({"type": "string", "minLength": 3}), "ab").is_err());
        assert_eq!(
            check(
                &json!({"type": "array", "items": {"type": "string", "enum": ["x", "y"]}}),
                "x, y"
            ),
            Ok(json!(["x", "y"]))
        );
        assert!(
            check(
                &json!({"type": "array", "items": {"type": "string", "enum": ["x"]}}),
                "z"
            )
            .is_err()
        );
        // What the server refuses, the prompt refuses first: a format, a count of choices.
        let email = json!({"type": "string", "format": "email"});
        assert_eq!(
            check(&email, "nobody"),
            Err("must be an email address (name@domain)".to_owned())
        );
        assert_eq!(check(&email, "a@b.example"), Ok(json!("a@b.example")));
        let two = json!({"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "maxItems": 1});
        assert!(check(&two, "x, y").is_err());
    }
}
