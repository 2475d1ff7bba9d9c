//! The request authority: one borrowed, derived shape of a JSON-RPC message that decides
//! whether a request is well-formed, and the JSON-RPC error a client can act on when it is
//! not (the table of answers is in the [server module's docs](super)).
//!
//! [`judge`] reads a message once into [`Message`], borrowing its strings from the text and
//! keeping of every other value only its JSON type; it checks what rmcp's decoder needs of
//! the methods this crate owns (`tools/call`, `tasks/get`, `tasks/update`, `tasks/cancel`)
//! and the envelope of every message, and answers how the request negotiated. Both
//! transports ask it (through the guard); on HTTP rmcp may decode a request first, an
//! optimisation a property test holds equal to this judgement.

use std::borrow::Cow;

use rmcp::model::{ClientCapabilities, ErrorData, JsonRpcError, RequestId};
use serde::{
    Deserialize, Deserializer,
    de::{IgnoredAny, MapAccess, SeqAccess, Visitor, value::MapAccessDeserializer},
};
use serde_json::Value;

pub(crate) mod meta;

pub(crate) use meta::MAX_GROWTH;
use meta::{brackets, meta_within};

use super::negotiation::{Checked, Negotiation};
use crate::context::answer::kind;
use crate::{Limits, errors};

/// How deep JSON may nest: serde_json's recursion limit.
pub(crate) const MAX_DEPTH: usize = 128;

/// What the authority lets through: how a request of a method this crate owns negotiated.
#[derive(Debug)]
pub(crate) struct Verdict {
    /// `Some` for a request of `tools/call` or `tasks/*`, whose params the shape checked in
    /// full, and for a task listen (the push module checks the rest of it).
    pub(crate) checked: Option<Checked>,
    /// The request's id, when it has a valid one.
    pub(crate) id: Option<RequestId>,
}

/// A message refused: the error to answer, with the request's id when it has a valid one.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) id: Option<RequestId>,
    pub(crate) error: ErrorData,
    /// Answered HTTP 400 (otherwise 200, as in a legacy session): not JSON, not a JSON-RPC
    /// message, or a request on the modern wire. (Stdio answers every refusal alike.)
    #[cfg(feature = "http")]
    pub(crate) bad_request: bool,
}

impl Refusal {
    fn parse(error: ErrorData) -> Self {
        Self {
            id: None,
            error,
            #[cfg(feature = "http")]
            bad_request: true,
        }
    }
}

/// Judges one message (an HTTP body or a stdio line). `legacy_session` is whether it arrives
/// in a session opened with `initialize`, where the extension is undefined.
///
/// # Errors
/// The refusal to answer instead of dispatching (see the [module docs](self)).
// docs/protocol.md R53.
pub(crate) fn judge(
    bytes: &[u8],
    limits: &Limits,
    legacy_session: bool,
) -> Result<Verdict, Refusal> {
    let text = utf8(bytes)?;
    // What the shape skips serde_json checks for syntax only: not for nesting depth, nor
    // for lone surrogates in `\u` escapes. A body that may hold either, or is no object,
    // is parsed as a value first, for the exact error.
    static ESCAPE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\\u"));
    if bytes.trim_ascii_start().first() != Some(&b'{')
        || brackets(bytes) >= MAX_DEPTH
        || ESCAPE.find(bytes).is_some()
    {
        let value = parse_value(text)?;
        if !value.is_object() {
            return Err(Refusal::parse(errors::not_a_message(kind(&value))));
        }
    }
    let error = match serde_json::from_str::<Message>(text) {
        Ok(message) => return message.judge(bytes.len(), text, limits, legacy_session),
        // A key given twice; a syntax error further on comes first.
        Err(error) if error.is_data() => match serde_json::from_str::<IgnoredAny>(text) {
            Err(syntax) => not_json(&syntax),
            Ok(_) => errors::undecodable_message(&error.to_string()),
        },
        Err(error) => not_json(&error),
    };
    Err(Refusal::parse(error))
}

/// The text of a message, or `-32700`.
fn utf8(bytes: &[u8]) -> Result<&str, Refusal> {
    std::str::from_utf8(bytes).map_err(|e| {
        Refusal::parse(errors::parse_error(&format!(
            "the request is not valid UTF-8 (invalid byte at offset {}); send UTF-8 JSON",
            e.valid_up_to()
        )))
    })
}

fn not_json(error: &serde_json::Error) -> ErrorData {
    errors::parse_error(&format!("the request is not valid JSON: {error}"))
}

/// Decodes one message as a JSON value (at most [`MAX_DEPTH`] levels deep), for the
/// transports' own use of it (a task listen, stdio's hand-over to rmcp).
///
/// # Errors
/// `-32700` saying whether it is not UTF-8, not JSON or nested too deep.
pub(crate) fn parse(bytes: &[u8]) -> Result<Value, ErrorData> {
    utf8(bytes)
        .and_then(parse_value)
        .map_err(|refusal| refusal.error)
}

fn parse_value(text: &str) -> Result<Value, Refusal> {
    serde_json::from_str::<Value>(text).map_err(|e| {
        Refusal::parse(if e.to_string().starts_with("recursion limit exceeded") {
            errors::parse_error(&format!(
                "the JSON nests deeper than {MAX_DEPTH} levels (at line {}, column {})",
                e.line(),
                e.column()
            ))
        } else {
            not_json(&e)
        })
    })
}

/// The `id` of a request, when it has a valid one (a string or an integer).
#[must_use]
pub(crate) fn request_id(message: &Value) -> Option<RequestId> {
    RequestId::deserialize(message.get("id")?).ok()
}

/// One JSON-RPC error response, serialized (without a newline).
#[must_use]
pub(crate) fn error_response(id: Option<RequestId>, error: ErrorData) -> Vec<u8> {
    serde_json::to_vec(&JsonRpcError::new(id, error)).unwrap_or_else(|_| {
        br#"{"jsonrpc":"2.0","error":{"code":-32603,"message":"internal error"}}"#.to_vec()
    })
}

/// One message, as the authority reads it: every field is optional here, and judged after.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Message<'a> {
    #[serde(borrow, deserialize_with = "present")]
    jsonrpc: Option<Any<'a>>,
    #[serde(borrow, deserialize_with = "present")]
    method: Option<Any<'a>>,
    #[serde(borrow, deserialize_with = "present")]
    id: Option<Any<'a>>,
    #[serde(borrow, deserialize_with = "present")]
    params: Option<Any<'a, Params<'a>>>,
}

/// The fields of the owned methods' params (and of a listen's filter), each of any type.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Params<'a> {
    #[serde(borrow, deserialize_with = "present")]
    name: Option<Any<'a>>,
    #[serde(borrow, deserialize_with = "present")]
    arguments: Option<Any<'a>>,
    #[serde(borrow, rename = "inputResponses", deserialize_with = "present")]
    input_responses: Option<Any<'a>>,
    #[serde(borrow, rename = "requestState", deserialize_with = "present")]
    request_state: Option<Any<'a>>,
    #[serde(borrow, rename = "taskId", deserialize_with = "present")]
    task_id: Option<Any<'a>>,
    #[serde(borrow, deserialize_with = "present")]
    notifications: Option<Any<'a, Filter>>,
    #[serde(borrow, rename = "_meta", deserialize_with = "present")]
    meta: Option<Any<'a, Meta<'a>>>,
}

/// A `subscriptions/listen` filter: whether it names `taskIds` (served here, not by rmcp).
#[derive(Deserialize, Default)]
#[serde(default)]
struct Filter {
    #[serde(rename = "taskIds", deserialize_with = "present")]
    task_ids: Option<IgnoredAny>,
}

/// What negotiation reads of `params._meta` (the keys of `negotiation.rs`).
#[derive(Deserialize, Default)]
#[serde(default)]
struct Meta<'a> {
    #[serde(borrow, rename = "io.modelcontextprotocol/protocolVersion")]
    version: Option<Any<'a>>,
    /// Capabilities that do not decode declare none (as rmcp's `_meta` reads them): the
    /// object, small, is read as a value first.
    #[serde(
        rename = "io.modelcontextprotocol/clientCapabilities",
        deserialize_with = "capabilities"
    )]
    capabilities: Option<ClientCapabilities>,
}

/// A field that is present, `null` included (`Option`'s own decoding takes `null` as absent).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

fn capabilities<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ClientCapabilities>, D::Error> {
    Value::deserialize(d).map(|value| ClientCapabilities::deserialize(value).ok())
}

/// One JSON value: its type, a string's text (borrowed unless it has escapes), a number's
/// kind, and an object decoded as `O` (skipped by default).
enum Any<'a, O = IgnoredAny> {
    Null,
    Bool,
    Number(Number),
    Str(Cow<'a, str>),
    Array,
    Object(O),
}

#[derive(Clone, Copy)]
enum Number {
    Int(i64),
    /// An integer above `i64::MAX`.
    Big,
    Float(f64),
}

impl<O> Any<'_, O> {
    fn kind(&self) -> &'static str {
        match self {
            Any::Null => "null",
            Any::Bool => "a boolean",
            Any::Number(_) => "a number",
            Any::Str(_) => "a string",
            Any::Array => "an array",
            Any::Object(_) => "an object",
        }
    }

    fn str(&self) -> Option<&str> {
        match self {
            Any::Str(text) => Some(text),
            _ => None,
        }
    }

    fn object(&self) -> Option<&O> {
        match self {
            Any::Object(object) => Some(object),
            _ => None,
        }
    }

    /// The value as a request id, as rmcp decodes one: a string, or an integer of 64 signed
    /// bits (also in float form, `1.0`, `1e2`).
    fn request_id(&self) -> Result<RequestId, &'static str> {
        match self {
            Any::Str(text) => Ok(RequestId::String(text.as_ref().into())),
            Any::Number(Number::Int(n)) => Ok(RequestId::Number(*n)),
            Any::Number(Number::Big) => Err("a number outside the 64-bit signed integers"),
            Any::Number(Number::Float(f)) => serde_json::Number::from_f64(*f)
                .and_then(|n| RequestId::deserialize(Value::Number(n)).ok())
                .ok_or(if f.fract() == 0.0 {
                    "a number outside the 64-bit signed integers"
                } else {
                    "a fraction"
                }),
            other => Err(other.kind()),
        }
    }
}

impl<'de: 'a, 'a, O: Deserialize<'de>> Deserialize<'de> for Any<'a, O> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<O>(std::marker::PhantomData<O>);
        impl<'de, O: Deserialize<'de>> Visitor<'de> for V<O> {
            type Value = Any<'de, O>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Any::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Any::Bool)
            }
            fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
                Ok(Any::Number(Number::Int(n)))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
                Ok(Any::Number(
                    i64::try_from(n).map_or(Number::Big, Number::Int),
                ))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Self::Value, E> {
                Ok(Any::Number(Number::Float(n)))
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Any::Str(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Any::Str(Cow::Owned(text.to_owned())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Any::Array)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                O::deserialize(MapAccessDeserializer::new(map)).map(Any::Object)
            }
        }
        deserializer.deserialize_any(V(std::marker::PhantomData))
    }
}

impl Message<'_> {
    fn judge(
        self,
        body_len: usize,
        text: &str,
        limits: &Limits,
        legacy_session: bool,
    ) -> Result<Verdict, Refusal> {
        let id = self.id.as_ref().and_then(|id| id.request_id().ok());
        let params = self.params.as_ref();
        let fields = params.and_then(Any::object);
        let meta = fields.and_then(|p| p.meta.as_ref()).and_then(Any::object);
        let negotiate = |task_listen| {
            let version = meta.and_then(|m| m.version.as_ref()).and_then(Any::str);
            let capabilities = meta.and_then(|m| m.capabilities.clone());
            Checked {
                negotiation: Negotiation::new(version, capabilities.as_ref(), legacy_session),
                capabilities,
                task_listen,
            }
        };
        let refuse = |error: ErrorData| Refusal {
            id: id.clone(),
            #[cfg(feature = "http")]
            bad_request: error.code == rmcp::model::ErrorCode::INVALID_REQUEST
                || negotiate(false).negotiation.modern,
            error,
        };
        self.envelope().map_err(refuse)?;
        let (Some(Any::Str(method)), Some(_)) = (&self.method, &self.id) else {
            return Ok(Verdict { checked: None, id });
        };
        if fields.is_some_and(|p| p.meta.is_some()) {
            meta_within(method, text, limits).map_err(refuse)?;
        }
        let checked = match method.as_ref() {
            "tools/call" => {
                call(params, body_len, text, limits).map_err(refuse)?;
                Some(negotiate(false))
            }
            "tasks/get" | "tasks/cancel" | "tasks/update" => {
                let checked = negotiate(false);
                if let Err(error) = task_request(method, params) {
                    // The capability check comes first for tasks/*, malformed or not.
                    return Err(refuse(if checked.negotiation.declares_tasks {
                        error
                    } else {
                        errors::tasks_capability_required()
                    }));
                }
                Some(checked)
            }
            // Served by the push module, which checks the rest of it.
            "subscriptions/listen"
                if fields
                    .and_then(|p| p.notifications.as_ref())
                    .and_then(Any::object)
                    .is_some_and(|filter| filter.task_ids.is_some()) =>
            {
                Some(negotiate(true))
            }
            _ => match params {
                None | Some(Any::Object(_)) => None,
                Some(other) => {
                    let error = errors::malformed_envelope("params", OBJECT, other.kind());
                    return Err(refuse(error));
                }
            },
        };
        Ok(Verdict { checked, id })
    }

    /// The JSON-RPC 2.0 envelope: `jsonrpc: "2.0"`, a string `method`, an `id` that is a
    /// string or an integer.
    fn envelope(&self) -> Result<(), ErrorData> {
        let version = match &self.jsonrpc {
            Some(Any::Str(version)) if version == "2.0" => None,
            Some(Any::Str(_)) => Some("another version"),
            Some(other) => Some(other.kind()),
            None => Some("none"),
        };
        if let Some(found) = version {
            return Err(errors::malformed_envelope("jsonrpc", "\"2.0\"", found));
        }
        if let Some(method) = self.method.as_ref().filter(|m| m.str().is_none()) {
            return Err(errors::malformed_envelope("method", STRING, method.kind()));
        }
        match &self.id {
            Some(id) => id
                .request_id()
                .map(drop)
                .map_err(|found| errors::malformed_envelope("id", "a string or an integer", found)),
            None => Ok(()),
        }
    }
}

/// The params object, or the error naming what it must be.
fn fields<'p, 'a>(
    method: &str,
    params: Option<&'p Any<'a, Params<'a>>>,
    expected: &str,
) -> Result<&'p Params<'a>, ErrorData> {
    match params {
        Some(Any::Object(fields)) => Ok(fields),
        other => {
            let found = other.map_or("none", Any::kind);
            Err(errors::malformed_param(method, "", expected, found))
        }
    }
}

const OBJECT: &str = "an object";
const STRING: &str = "a string";
const RESPONSES: &str = "an object of responses by input-request key";

/// A field of kind `found` (`None`: absent) that must be of kind `wanted`, or absent or
/// `null` unless it is `required` (with that description).
fn field(
    (method, field): (&str, &str),
    found: Option<&'static str>,
    (wanted, expected): (&str, &str),
    required: Option<&str>,
) -> Result<(), ErrorData> {
    match (found, required) {
        (None, Some(described)) => Err(errors::missing_param(method, field, described)),
        (None, None) | (Some("null"), None) => Ok(()),
        (Some(found), _) if found == wanted => Ok(()),
        (Some(STRING), _) if field == "arguments" => Err(errors::malformed_param(
            method,
            field,
            expected,
            "a string (send the arguments as a JSON object, not as a JSON-encoded string)",
        )),
        (Some(found), _) => Err(errors::malformed_param(method, field, expected, found)),
    }
}

// Every field rmcp's params types decode is checked (unknown fields are ignored), so rmcp
// decodes what passes: the property test below holds it.
fn call(
    params: Option<&Any<'_, Params<'_>>>,
    body_len: usize,
    text: &str,
    limits: &Limits,
) -> Result<(), ErrorData> {
    const METHOD: &str = "tools/call";
    let expected = "an object with `name` (a string) and optional `arguments` (an object)";
    let p = fields(METHOD, params, expected)?;
    let kind = |value: &Option<Any<'_>>| value.as_ref().map(Any::kind);
    let check = |name, found, wanted, required| field((METHOD, name), found, wanted, required);
    let name = (STRING, "a string (the name of the tool to call)");
    let described = "the name of the tool to call, a string";
    check("name", kind(&p.name), name, Some(described))?;
    let arguments = (OBJECT, "an object of the tool's arguments by name");
    check("arguments", kind(&p.arguments), arguments, None)?;
    let responses = (OBJECT, RESPONSES);
    check("inputResponses", kind(&p.input_responses), responses, None)?;
    let state = (
        STRING,
        "a string (the requestState of the last input_required result, as received)",
    );
    check("requestState", kind(&p.request_state), state, None)?;
    let meta = p.meta.as_ref().map(Any::kind);
    check("_meta", meta, (OBJECT, OBJECT), None)?;
    // Compact, the arguments are at most MAX_GROWTH times the body: under the limit for any
    // body this small; a larger one gets the exact count.
    let limit = limits.max_arguments_bytes();
    if matches!(p.arguments, Some(Any::Object(_))) && body_len.saturating_mul(MAX_GROWTH) > limit {
        let size = serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|mut message| message.pointer_mut("/params/arguments").map(Value::take))
            .and_then(|arguments| serde_json::to_vec(&arguments).ok())
            .map_or(0, |compact| compact.len());
        if size > limit {
            return Err(errors::arguments_too_large(size, limit));
        }
    }
    Ok(())
}

fn task_request(method: &str, params: Option<&Any<'_, Params<'_>>>) -> Result<(), ErrorData> {
    let update = method == "tasks/update";
    let expected = if update {
        "an object with `taskId` (a string) and `inputResponses` (an object)"
    } else {
        "an object with `taskId` (a string)"
    };
    let p = fields(method, params, expected)?;
    let check = |name, found, wanted, required| field((method, name), found, wanted, required);
    let task_id = p.task_id.as_ref().map(Any::kind);
    let described = "the taskId the task was created with, a string";
    check("taskId", task_id, (STRING, STRING), Some(described))?;
    if update {
        let responses = p.input_responses.as_ref().map(Any::kind);
        let wanted = (OBJECT, RESPONSES);
        check("inputResponses", responses, wanted, Some(RESPONSES))?;
    }
    let meta = p.meta.as_ref().map(Any::kind);
    check("_meta", meta, (OBJECT, OBJECT), None)
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorData, RequestMetaObject};
    use serde_json::{Value, json};

    use super::{Checked, MAX_DEPTH, judge, parse};
    use crate::Limits;

    /// The authority's verdict on `message`, as text.
    fn check(message: &Value, limits: &Limits, legacy: bool) -> Result<Option<Checked>, ErrorData> {
        judge(message.to_string().as_bytes(), limits, legacy)
            .map(|verdict| verdict.checked)
            .map_err(|refusal| refusal.error)
    }

    #[test]
    fn counts_every_bracket_and_nothing_else() {
        assert_eq!(super::brackets(b""), 0);
        assert_eq!(super::brackets(br#"{"a":[1,{"b":"[{"}]}"#), 5);
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(super::brackets(&all), 2);
        assert_eq!(super::brackets(&[b'['; 1000]), 1000);
    }

    /// Nesting too deep, a lone surrogate and a key given twice are refused, each with its
    /// own error, wherever they are (the shape skips the values they hide in).
    #[test]
    fn what_the_shape_skips_is_still_judged() {
        let refused = |body: &str| judge(body.as_bytes(), &Limits::default(), false).unwrap_err();
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","x":{}{}}}}}"#,
            "[".repeat(MAX_DEPTH + 2),
            "]".repeat(MAX_DEPTH + 2)
        );
        let error = refused(&deep).error;
        assert_eq!(error.code.0, -32700);
        assert!(
            error.message.contains("nests deeper than 128"),
            "{}",
            error.message
        );
        let surrogate =
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","x":"\ud800"}}"#;
        assert_eq!(refused(surrogate).error.code.0, -32700);
        let twice =
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","name":"u"}}"#;
        let error = refused(twice);
        assert_eq!(error.error.code.0, -32600);
        #[cfg(feature = "http")]
        assert!(error.bad_request);
        assert!(
            error.error.message.contains("duplicate field `name`"),
            "{}",
            error.error.message
        );
        // A syntax error after the key given twice is what is answered.
        let both = r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call" nope"#;
        assert_eq!(refused(both).error.code.0, -32700);
    }

    #[test]
    fn reads_escaped_keys_and_values_and_a_listen_for_task_ids() {
        let escaped = r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"t","_meta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}}}"#;
        let verdict = judge(escaped.as_bytes(), &Limits::default(), false).unwrap();
        assert!(verdict.checked.unwrap().negotiation.modern);
        let listen = json!({"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": null}, "_meta": declaring()}});
        let checked = check(&listen, &Limits::default(), false).unwrap().unwrap();
        assert!(checked.task_listen && checked.negotiation.declares_tasks);
        let core = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": true}}});
        assert!(check(&core, &Limits::default(), false).unwrap().is_none());
    }

    fn declaring() -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {
                "extensions": { "io.modelcontextprotocol/tasks": {} }
            }
        })
    }

    fn request(method: &str, params: &Value) -> Value {
        json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params })
    }

    fn rejected(method: &str, params: &Value) -> (i32, String) {
        let error = check(&request(method, params), &Limits::default(), false)
            .expect_err("should be rejected");
        (error.code.0, error.message.into_owned())
    }

    #[test]
    fn task_id_must_be_a_string() {
        for (task_id, found) in [(json!(5), "a number"), (Value::Null, "null")] {
            for method in ["tasks/get", "tasks/cancel", "tasks/update"] {
                let params =
                    json!({ "taskId": task_id, "inputResponses": {}, "_meta": declaring() });
                assert_eq!(
                    rejected(method, &params),
                    (
                        -32602,
                        format!("{method}: params.taskId must be a string, got {found}")
                    )
                );
            }
        }
        let (code, message) = rejected("tasks/get", &json!({ "_meta": declaring() }));
        assert_eq!(code, -32602);
        assert!(
            message.starts_with("tasks/get: params.taskId is required"),
            "{message}"
        );
    }

    #[test]
    fn the_capability_check_comes_first() {
        let (code, _) = rejected("tasks/get", &json!({ "taskId": 5 }));
        assert_eq!(code, -32021);
        let legacy = check(
            &request("tasks/get", &json!({ "taskId": 5, "_meta": declaring() })),
            &Limits::default(),
            true,
        );
        assert_eq!(legacy.map(drop).map_err(|e| e.code.0), Err(-32021));
        // A well-formed request passes: the engine answers its capability check.
        assert!(
            check(
                &request("tasks/get", &json!({ "taskId": "t" })),
                &Limits::default(),
                false
            )
            .is_ok()
        );
    }

    #[test]
    fn tools_call_shapes() {
        let cases = [
            (
                json!({ "name": "x", "arguments": "{\"a\":1}" }),
                "tools/call: params.arguments must be an object",
            ),
            (
                json!({ "name": "x", "arguments": [1] }),
                "tools/call: params.arguments must be an object of the tool's arguments by name, got an array",
            ),
            (
                json!({ "arguments": {} }),
                "tools/call: params.name is required",
            ),
            (
                json!({ "name": 3 }),
                "tools/call: params.name must be a string",
            ),
            (
                json!({ "name": "x", "inputResponses": [] }),
                "tools/call: params.inputResponses must be an object",
            ),
            (
                json!({ "name": "x", "requestState": {} }),
                "tools/call: params.requestState must be a string",
            ),
            (
                json!({ "name": "x", "_meta": 1 }),
                "tools/call: params._meta must be an object",
            ),
            (json!("x"), "tools/call: params must be an object"),
        ];
        for (params, prefix) in cases {
            let (code, message) = rejected("tools/call", &params);
            assert_eq!(code, -32602, "{params}");
            assert!(message.starts_with(prefix), "{params}: {message}");
        }
        let ok = json!({ "name": "x", "arguments": { "a": [1, 2] }, "arguments_extra": 1 });
        assert!(check(&request("tools/call", &ok), &Limits::default(), false).is_ok());
    }

    #[test]
    fn arguments_over_the_limit() {
        let limits = Limits::default().with_max_arguments_bytes(10);
        let params = json!({ "name": "x", "arguments": { "a": "0123456789" } });
        let error = check(&request("tools/call", &params), &limits, false).unwrap_err();
        assert_eq!(error.code.0, -32602);
        assert!(
            error
                .message
                .contains("params.arguments is 18 bytes, more than the limit of 10"),
            "{}",
            error.message
        );
        let params = json!({ "name": "x", "arguments": { "a": 1 } });
        assert!(check(&request("tools/call", &params), &limits, false).is_ok());
    }

    /// A request's `_meta` over its size or depth limit is refused with `-32602` naming
    /// `params._meta`, the limit and the setter that raises it, whatever the method; within
    /// them it passes.
    #[test]
    fn meta_over_the_limits() {
        let limits = Limits::default()
            .with_max_meta_bytes(64)
            .with_max_meta_depth(3);
        let padded = json!({ "pad": "x".repeat(100) });
        for method in ["tools/call", "tasks/get", "tools/list"] {
            let params = json!({ "name": "x", "taskId": "t", "_meta": padded });
            let error = check(&request(method, &params), &limits, false).unwrap_err();
            assert_eq!(error.code.0, -32602, "{method}");
            assert_eq!(
                error.message,
                format!(
                    "{method}: params._meta is 110 bytes, more than the limit of 64 bytes; \
                     send less, or raise it with Limits::with_max_meta_bytes"
                )
            );
            let data = error.data.unwrap();
            assert_eq!(data["maxMetaBytes"], 64);
            assert_eq!(data["field"], "params._meta");
        }
        let deep = json!({ "a": { "b": { "c": {} } } });
        let params = json!({ "name": "x", "_meta": deep });
        let error = check(&request("tools/call", &params), &limits, false).unwrap_err();
        assert_eq!(error.code.0, -32602);
        assert!(
            error.message.starts_with(
                "tools/call: params._meta nests 4 levels deep, more than the limit of 3 levels"
            ) && error.message.contains("Limits::with_max_meta_depth"),
            "{}",
            error.message
        );
        assert_eq!(error.data.unwrap()["maxMetaDepth"], 3);
        let within = json!({ "name": "x", "_meta": { "a": { "b": {} }, "p": "x".repeat(40) } });
        assert!(check(&request("tools/call", &within), &limits, false).is_ok());
        // Other brackets of the body (arguments, strings) do not count against `_meta`.
        let flat = json!({ "name": "x", "arguments": { "a": [[[["[{"]]]] }, "_meta": {} });
        assert!(check(&request("tools/call", &flat), &limits, false).is_ok());
        // The default limits: 64 KiB and 32 levels.
        let big = json!({ "name": "x", "_meta": { "pad": "x".repeat(64 * 1024) } });
        let error = check(&request("tools/call", &big), &Limits::default(), false).unwrap_err();
        assert!(
            error.message.contains("limit of 65536 bytes"),
            "{}",
            error.message
        );
    }

    #[test]
    fn parse_errors() {
        assert_eq!(parse(b"{\"a\":\xff}").unwrap_err().code.0, -32700);
        assert!(
            parse(b"\xff")
                .unwrap_err()
                .message
                .contains("not valid UTF-8")
        );
        assert!(
            parse(b"{nope")
                .unwrap_err()
                .message
                .contains("not valid JSON")
        );
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(
            parse(deep.as_bytes())
                .unwrap_err()
                .message
                .contains("nests deeper than 128")
        );
        assert!(parse(b"{\"a\":1}").is_ok());
        let array = check(&json!([1]), &Limits::default(), false).unwrap_err();
        assert_eq!(array.code.0, -32600);
    }

    /// A numeric id passes as rmcp decodes it: an integer of 64 signed bits, in float form
    /// too (rmcp answers `1.0` as id `1`).
    #[test]
    fn integer_ids_in_float_form_pass() {
        for id in [json!(1.0), json!(1e2), json!(-3.0), json!(i64::MAX)] {
            let message = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/list" });
            assert!(
                check(&message, &Limits::default(), false).is_ok(),
                "{message}"
            );
        }
    }

    #[test]
    fn malformed_envelopes() {
        let cases = [
            (
                json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": 5 }),
                "params must be an object, got a number",
            ),
            (
                json!({ "jsonrpc": "1.0", "id": 1, "method": "tools/list" }),
                "jsonrpc must be \"2.0\"",
            ),
            (
                json!({ "id": 1, "method": "tools/list" }),
                "jsonrpc must be \"2.0\", got none",
            ),
            (
                json!({ "jsonrpc": "2.0", "id": {}, "method": "tools/list" }),
                "id must be a string or an integer, got an object",
            ),
            (
                json!({ "jsonrpc": "2.0", "id": 1.5, "method": "tools/list" }),
                "id must be a string or an integer, got a fraction",
            ),
            (
                json!({ "jsonrpc": "2.0", "id": 9_223_372_036_854_775_808_u64, "method": "tools/list" }),
                "id must be a string or an integer, got a number outside the 64-bit signed integers",
            ),
            (
                json!({ "jsonrpc": "2.0", "id": 1, "method": 7 }),
                "method must be a string, got a number",
            ),
        ];
        for (message, names) in cases {
            let error = check(&message, &Limits::default(), false).unwrap_err();
            assert_eq!(error.code.0, -32600, "{message}");
            assert!(
                error.message.contains(names),
                "{message}: {}",
                error.message
            );
        }
    }

    #[test]
    fn other_methods_and_notifications_pass() {
        assert!(
            check(
                &json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": { "cursor": 5 } }),
                &Limits::default(),
                false
            )
            .is_ok()
        );
        assert!(
            check(
                &json!({ "jsonrpc": "2.0", "method": "tasks/get", "params": 5 }),
                &Limits::default(),
                false
            )
            .is_ok()
        );
        assert!(
            check(
                &json!({ "jsonrpc": "2.0", "id": 1, "result": {} }),
                &Limits::default(),
                false
            )
            .is_ok()
        );
    }

    /// The fast path and the authority agree: rmcp decodes a request of a method this crate
    /// owns exactly when the authority accepts it, and both negotiate it alike. (On HTTP
    /// rmcp decodes a stateless modern request first and its answer stands when it decoded
    /// it; the authority is asked only when rmcp refused.)
    mod agreement {
        use proptest::prelude::*;

        use super::*;
        use crate::server::negotiation::Negotiation;

        fn scalar() -> impl Strategy<Value = Value> {
            prop_oneof![
                Just(Value::Null),
                Just(json!(true)),
                Just(json!(7)),
                Just(json!(1.5)),
                Just(json!("s")),
                Just(json!([1, "a"])),
                Just(json!({})),
                Just(json!({"a": [1, {"b": null}]})),
            ]
        }

        /// Absent, well-typed or of any type.
        fn field(good: Value) -> impl Strategy<Value = Option<Value>> {
            prop_oneof![
                2 => Just(None),
                3 => Just(Some(good)),
                2 => scalar().prop_map(Some),
            ]
        }

        fn meta() -> impl Strategy<Value = Option<Value>> {
            prop_oneof![
                Just(None),
                Just(Some(declaring())),
                Just(Some(
                    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"})
                )),
                Just(Some(
                    json!({"io.modelcontextprotocol/protocolVersion": "2025-11-25",
                    "io.modelcontextprotocol/clientCapabilities": {"extensions": 5}})
                )),
                Just(Some(json!({"io.modelcontextprotocol/protocolVersion": [1],
                    "io.modelcontextprotocol/clientCapabilities": {}}))),
                scalar().prop_map(Some),
            ]
        }

        fn params() -> impl Strategy<Value = Option<Value>> {
            let object = (
                field(json!("tool")),
                field(json!({"x": 1})),
                field(json!({"k": {"action": "accept"}})),
                field(json!("state")),
                field(json!("task-1")),
                meta(),
            )
                .prop_map(|(name, arguments, responses, state, task, meta)| {
                    let mut params = serde_json::Map::new();
                    for (key, value) in [
                        ("name", name),
                        ("arguments", arguments),
                        ("inputResponses", responses),
                        ("requestState", state),
                        ("taskId", task),
                        ("_meta", meta),
                    ] {
                        if let Some(value) = value {
                            params.insert(key.to_owned(), value);
                        }
                    }
                    Some(Value::Object(params))
                });
            prop_oneof![8 => object, 1 => Just(None), 1 => scalar().prop_map(Some)]
        }

        fn message() -> impl Strategy<Value = (String, String)> {
            let method = prop_oneof![
                Just("tools/call"),
                Just("tasks/get"),
                Just("tasks/update"),
                Just("tasks/cancel"),
            ];
            let id = prop_oneof![
                6 => Just(json!(1)),
                2 => Just(json!("x")),
                1 => Just(json!(1.0)),
                1 => Just(json!(1.5)),
                1 => Just(json!(9_223_372_036_854_775_808_u64)),
                1 => Just(Value::Null),
            ];
            let version = prop_oneof![8 => Just(Some(json!("2.0"))), 1 => Just(None), 1 => Just(Some(json!("1.0")))];
            (method, id, version, params()).prop_map(|(method, id, version, params)| {
                let mut message = json!({"id": id, "method": method});
                if let Some(version) = version {
                    message["jsonrpc"] = version;
                }
                if let Some(params) = params {
                    message["params"] = params;
                }
                (method.to_owned(), message.to_string())
            })
        }

        /// A `_meta` of `depth` levels (0: a string) padded with `pad` bytes, in a request of
        /// `method` with arguments that add brackets of their own.
        fn measured_meta() -> impl Strategy<Value = (String, Value)> {
            let method = prop_oneof![Just("tools/call"), Just("tasks/get"), Just("tools/list")];
            (method, 0..7usize, 0..160usize, 0..6usize).prop_map(
                |(method, depth, pad, brackets)| {
                    let mut meta = json!("x".repeat(pad));
                    for level in 0..depth {
                        meta = if level % 2 == 0 {
                            json!({ "k": meta })
                        } else {
                            json!([meta])
                        };
                    }
                    let mut arguments = json!(1);
                    for _ in 0..brackets {
                        arguments = json!([arguments]);
                    }
                    let params = json!({
                        "name": "x", "taskId": "t",
                        "arguments": { "a": arguments },
                        "_meta": meta,
                    });
                    (
                        method.to_owned(),
                        json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }),
                    )
                },
            )
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]
            /// The authority refuses a request for its `_meta` exactly when its `_meta`, as
            /// compact JSON, is over the size or depth limit; and the fast test
            /// (`meta_cannot_exceed`, which lets rmcp decode a body first) never passes one
            /// that is over.
            #[test]
            fn meta_limits_are_judged_exactly(
                (method, message) in measured_meta(),
                max_bytes in 20..1500usize,
                max_depth in 1..10usize,
            ) {
                let limits = Limits::default()
                    .with_max_meta_bytes(max_bytes)
                    .with_max_meta_depth(max_depth);
                let body = message.to_string();
                let meta = &message["params"]["_meta"];
                let size = serde_json::to_vec(meta).unwrap().len();
                let over = super::super::meta::depth(meta) > max_depth || size > max_bytes;
                let verdict = judge(body.as_bytes(), &limits, false);
                let refused_for_meta = verdict.as_ref().err().is_some_and(|refusal| {
                    refusal.error.code.0 == -32602
                        && refusal.error.message.starts_with(&format!("{method}: params._meta "))
                        && refusal.error.message.contains(", more than the limit of ")
                });
                prop_assert_eq!(refused_for_meta, over, "{}", body);
                if super::super::meta::meta_cannot_exceed(body.as_bytes(), &limits) {
                    prop_assert!(!over, "the fast test passed a _meta over its limits: {}", body);
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]
            #[test]
            fn rmcp_decodes_what_the_authority_accepts((method, body) in message()) {
                let authority = judge(body.as_bytes(), &Limits::default(), false);
                // A request that does not decode as its method's is rmcp's `CustomRequest`
                // (answered as an unknown method).
                let decoded = match serde_json::from_str::<ClientJsonRpcMessage>(&body) {
                    Ok(ClientJsonRpcMessage::Request(request))
                        if !matches!(request.request, ClientRequest::CustomRequest(_)) =>
                    {
                        assert_eq!(request.request.method(), method);
                        Some(request)
                    }
                    _ => None,
                };
                prop_assert_eq!(authority.is_ok(), decoded.is_some(), "{}: {:?}", body, authority);
                if let (Ok(verdict), Some(request)) = (authority, decoded) {
                    let checked = verdict.checked.expect("a verdict for an owned method");
                    let value = serde_json::to_value(&request).unwrap();
                    let meta: RequestMetaObject = value
                        .pointer("/params/_meta")
                        .map(|meta| serde_json::from_value(meta.clone()).unwrap())
                        .unwrap_or_default();
                    let (negotiation, capabilities) = Negotiation::of_meta(&meta, false);
                    prop_assert_eq!(checked.negotiation, negotiation, "{}", body);
                    prop_assert_eq!(checked.capabilities, capabilities, "{}", body);
                }
            }
        }
    }
}
