//! The request guard's first look at an HTTP body: one borrowed pass that accepts a
//! well-formed request of the methods this crate owns without building a JSON tree.
//!
//! It checks what [`check`](super::guard::check) checks on such a request (the JSON-RPC
//! envelope, the params' field types, the arguments' size, nesting within serde_json's
//! limit) and answers how the request negotiated. It only ever **accepts**: whatever it is
//! not sure of (another method, a field of the wrong type, a duplicate key, a body large
//! enough that the arguments might be over their limit) returns `None`, and the guard's full
//! check decides, with the error a client can act on.

use std::{borrow::Cow, fmt};

use rmcp::model::{ClientCapabilities, RequestId};
use serde::{
    Deserialize, Deserializer,
    de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor},
};
use serde_json::Value;

use super::{
    guard::MAX_DEPTH,
    negotiation::{CLIENT_CAPABILITIES_KEY, Checked, Negotiation, PROTOCOL_VERSION_KEY},
};
use crate::Limits;

/// A compact re-serialization of parsed JSON is at most this many times longer than the
/// text it was parsed from (a float written `1e15` comes back as `1000000000000000.0`;
/// everything else keeps or loses length).
pub(crate) const MAX_GROWTH: usize = 5;

/// `Some` when `bytes` is a well-formed request of `tools/call` or `tasks/*` that the full
/// check would let through, with its verdict; `None` to leave the decision to the full check.
pub(crate) fn accept(bytes: &[u8], limits: &Limits, legacy_session: bool) -> Option<Checked> {
    // JSON cannot nest deeper than it has brackets (those inside strings counted too): with
    // fewer than serde_json's limit, no value of the body is too deep, and the pass below
    // skips values without counting depth. A body with more gets the full check.
    if brackets(bytes) >= MAX_DEPTH {
        return None;
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let envelope = Envelope::deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    if envelope.jsonrpc.as_deref() != Some("2.0") || !matches!(envelope.id, Some(Kind::Id)) {
        return None;
    }
    let params = envelope.params?;
    let meta_ok = matches!(params.meta.kind, None | Some(Kind::Null | Kind::Object));
    let absent_null_or = |kind: Option<Kind>, wanted: Kind| {
        kind.is_none_or(|kind| kind == Kind::Null || kind == wanted)
    };
    let shape_ok = match envelope.method.as_deref()? {
        "tools/call" => {
            params.name == Some(Kind::String)
                && absent_null_or(params.arguments, Kind::Object)
                && absent_null_or(params.input_responses, Kind::Object)
                && absent_null_or(params.request_state, Kind::String)
                // Compact, the arguments are at most MAX_GROWTH times the body: under the
                // limit for any body this small; a larger one gets the exact count.
                && bytes.len().saturating_mul(MAX_GROWTH) <= limits.max_arguments_bytes()
        }
        "tasks/get" | "tasks/cancel" => params.task_id == Some(Kind::String),
        "tasks/update" => {
            params.task_id == Some(Kind::String) && params.input_responses == Some(Kind::Object)
        }
        // A task listen: the push module checks the rest of it. Any other listen is rmcp's.
        "subscriptions/listen" => params.notifications.is_some_and(|filter| filter.task_ids),
        _ => false,
    };
    if !(shape_ok && meta_ok) {
        return None;
    }
    // Decoded in the pass above, straight from the text. Capabilities that do not decode
    // (which the full check takes as none declared) ended the pass with `None`.
    let capabilities = params.meta.capabilities;
    Some(Checked {
        negotiation: Negotiation::new(
            params.meta.protocol_version.as_deref(),
            capabilities.as_ref(),
            legacy_session,
        ),
        capabilities,
        task_listen: envelope.method.as_deref() == Some("subscriptions/listen"),
    })
}

/// How many `[` and `{` bytes `bytes` has. `b | 0x20` maps `[` (0x5B) to `{` (0x7B) and no
/// other byte to it, and per-chunk `u8` sums let the compiler count 32 bytes an instruction.
fn brackets(bytes: &[u8]) -> usize {
    bytes
        .chunks(255)
        .map(|chunk| {
            chunk
                .iter()
                .fold(0u8, |count, &b| count + u8::from(b | 0x20 == b'{')) as usize
        })
        .sum()
}

/// The JSON type of a value (its content skipped), or [`Kind::Id`] for a valid request id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
    /// A string or an integer that fits 64 bits: what a request id may be.
    Id,
}

/// Skips one value (its nesting is bounded by [`accept`]'s bracket count).
type Skip = IgnoredAny;

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(KindVisitor { id: false })
    }
}

/// A request id: [`Kind::Id`] for a string or a 64-bit integer, the plain kind otherwise.
struct Id(Kind);

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(KindVisitor { id: true })
            .map(Id)
    }
}

struct KindVisitor {
    /// Strings and integers are [`Kind::Id`].
    id: bool,
}

impl<'de> Visitor<'de> for KindVisitor {
    type Value = Kind;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Kind, E> {
        Ok(Kind::Null)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Kind, E> {
        Ok(Kind::Bool)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Kind, E> {
        Ok(if self.id { Kind::Id } else { Kind::Number })
    }
    fn visit_u64<E>(self, value: u64) -> Result<Kind, E> {
        // An id is an integer of 64 signed bits, as rmcp decodes one.
        Ok(if self.id && i64::try_from(value).is_ok() {
            Kind::Id
        } else {
            Kind::Number
        })
    }
    fn visit_f64<E>(self, value: f64) -> Result<Kind, E> {
        // rmcp takes an integer in float form (`1.0`, `1e2`) as that integer: its own
        // decoder says which (rare; an id is usually written as an integer).
        let id = self.id
            && serde_json::Number::from_f64(value)
                .is_some_and(|n| RequestId::deserialize(&Value::Number(n)).is_ok());
        Ok(if id { Kind::Id } else { Kind::Number })
    }
    fn visit_str<E>(self, _: &str) -> Result<Kind, E> {
        Ok(if self.id { Kind::Id } else { Kind::String })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Kind, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Kind::Array)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Kind, A::Error> {
        while map.next_key::<Skip>()?.is_some() {
            map.next_value::<Skip>()?;
        }
        Ok(Kind::Object)
    }
}

/// Sets `slot` once; a second occurrence of the key is an error (the full check decides).
fn once<T, E: de::Error>(slot: &mut Option<T>, value: T, key: &'static str) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::duplicate_field(key));
    }
    *slot = Some(value);
    Ok(())
}

/// A string, borrowed from the body unless it has escapes; anything else is an error.
struct Str<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s.to_owned())))
            }
        }
        deserializer.deserialize_str(V)
    }
}

/// A protocol version: the string, or `None` for a value of another type (which names no
/// version), skipped.
struct Version<'de>(Option<Cow<'de, str>>);

impl<'de> Deserialize<'de> for Version<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Version<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Version<'de>, E> {
                Ok(Version(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E>(self, s: &str) -> Result<Version<'de>, E> {
                Ok(Version(Some(Cow::Owned(s.to_owned()))))
            }
            fn visit_unit<E>(self) -> Result<Version<'de>, E> {
                Ok(Version(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Version<'de>, E> {
                Ok(Version(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Version<'de>, E> {
                Ok(Version(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Version<'de>, E> {
                Ok(Version(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Version<'de>, E> {
                Ok(Version(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Version<'de>, A::Error> {
                while seq.next_element::<Skip>()?.is_some() {}
                Ok(Version(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Version<'de>, A::Error> {
                while map.next_key::<Skip>()?.is_some() {
                    map.next_value::<Skip>()?;
                }
                Ok(Version(None))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// The top level of a message.
#[derive(Default)]
struct Envelope<'de> {
    jsonrpc: Option<Cow<'de, str>>,
    method: Option<Cow<'de, str>>,
    id: Option<Kind>,
    params: Option<Params<'de>>,
}

impl<'de> Deserialize<'de> for Envelope<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Envelope<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON-RPC message")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope<'de>, A::Error> {
                let mut out = Envelope::default();
                while let Some(Str(key)) = map.next_key()? {
                    match &*key {
                        "jsonrpc" => {
                            once(&mut out.jsonrpc, map.next_value::<Str>()?.0, "jsonrpc")?;
                        }
                        "method" => once(&mut out.method, map.next_value::<Str>()?.0, "method")?,
                        "id" => once(&mut out.id, map.next_value::<Id>()?.0, "id")?,
                        "params" => once(&mut out.params, map.next_value()?, "params")?,
                        _ => {
                            map.next_value::<Skip>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// The fields of `tools/call` and `tasks/*` params, by kind.
#[derive(Default)]
struct Params<'de> {
    name: Option<Kind>,
    arguments: Option<Kind>,
    input_responses: Option<Kind>,
    request_state: Option<Kind>,
    task_id: Option<Kind>,
    notifications: Option<Filter>,
    meta: Meta<'de>,
}

/// What the first look reads of a `subscriptions/listen` filter: whether it names `taskIds`.
#[derive(Clone, Copy, Default)]
struct Filter {
    task_ids: bool,
}

impl<'de> Deserialize<'de> for Filter {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Filter;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a subscription filter")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Filter, A::Error> {
                let mut out = Filter::default();
                while let Some(Str(key)) = map.next_key()? {
                    if key == "taskIds" {
                        if out.task_ids {
                            return Err(de::Error::duplicate_field("taskIds"));
                        }
                        out.task_ids = true;
                    }
                    map.next_value::<Skip>()?;
                }
                Ok(out)
            }
        }
        deserializer.deserialize_map(V)
    }
}

impl<'de> Deserialize<'de> for Params<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Params<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of params")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Params<'de>, A::Error> {
                let mut out = Params::default();
                let mut meta_seen = false;
                while let Some(Str(key)) = map.next_key()? {
                    match &*key {
                        "name" => once(&mut out.name, map.next_value()?, "name")?,
                        "arguments" => once(&mut out.arguments, map.next_value()?, "arguments")?,
                        "inputResponses" => once(
                            &mut out.input_responses,
                            map.next_value()?,
                            "inputResponses",
                        )?,
                        "requestState" => {
                            once(&mut out.request_state, map.next_value()?, "requestState")?;
                        }
                        "taskId" => once(&mut out.task_id, map.next_value()?, "taskId")?,
                        "notifications" => {
                            once(&mut out.notifications, map.next_value()?, "notifications")?;
                        }
                        "_meta" => {
                            if std::mem::replace(&mut meta_seen, true) {
                                return Err(de::Error::duplicate_field("_meta"));
                            }
                            out.meta = map.next_value()?;
                        }
                        _ => {
                            map.next_value::<Skip>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// What negotiation reads of `params._meta`.
#[derive(Default)]
struct Meta<'de> {
    /// `None` when `_meta` is absent.
    kind: Option<Kind>,
    protocol_version: Option<Cow<'de, str>>,
    /// Decoded from the text: capabilities that do not decode end the pass (the full
    /// check then decides, taking them as none declared).
    capabilities: Option<ClientCapabilities>,
}

impl<'de> Deserialize<'de> for Meta<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Meta<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object or null")
            }
            fn visit_unit<E>(self) -> Result<Meta<'de>, E> {
                Ok(Meta {
                    kind: Some(Kind::Null),
                    ..Meta::default()
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Meta<'de>, A::Error> {
                let mut out = Meta {
                    kind: Some(Kind::Object),
                    ..Meta::default()
                };
                let mut version_seen = false;
                while let Some(Str(key)) = map.next_key()? {
                    match &*key {
                        PROTOCOL_VERSION_KEY => {
                            if std::mem::replace(&mut version_seen, true) {
                                return Err(de::Error::duplicate_field(PROTOCOL_VERSION_KEY));
                            }
                            // Anything but a string names no version.
                            out.protocol_version = map.next_value::<Version>()?.0;
                        }
                        CLIENT_CAPABILITIES_KEY => once(
                            &mut out.capabilities,
                            map.next_value()?,
                            CLIENT_CAPABILITIES_KEY,
                        )?,
                        _ => {
                            map.next_value::<Skip>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        deserializer.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::accept;
    use crate::{
        Limits,
        server::guard::{check, parse},
    };

    #[test]
    fn counts_every_bracket_and_nothing_else() {
        assert_eq!(super::brackets(b""), 0);
        assert_eq!(super::brackets(br#"{"a":[1,{"b":"[{"}]}"#), 5);
        // Every byte value once: only `[` and `{` count.
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(super::brackets(&all), 2);
        // Past one chunk's u8 sum, and at the nesting bound.
        assert_eq!(super::brackets(&[b'['; 1000]), 1000);
        assert_eq!(super::brackets(&[b'{'; super::MAX_DEPTH]), super::MAX_DEPTH);
    }

    /// The first look accepts exactly what the full check accepts, with the same verdict.
    fn agrees(body: &str) -> bool {
        let limits = Limits::default();
        let fast = accept(body.as_bytes(), &limits, false);
        let full = parse(body.as_bytes())
            .ok()
            .and_then(|message| check(&message, &limits, false).ok().flatten());
        match (&fast, &full) {
            (Some(fast), Some(full)) => {
                assert_eq!(fast.negotiation, full.negotiation, "{body}");
                assert_eq!(fast.capabilities, full.capabilities, "{body}");
                assert_eq!(fast.task_listen, full.task_listen, "{body}");
                true
            }
            // It may leave a good request to the full check, never accept a bad one.
            (None, _) => false,
            (Some(_), None) => panic!("accepted what the full check refuses: {body}"),
        }
    }

    fn meta() -> serde_json::Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {
                "extensions": {"io.modelcontextprotocol/tasks": {}}
            }
        })
    }

    #[test]
    fn accepts_well_formed_requests_of_owned_methods() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "t", "arguments": {"a": [1, {"b": null}]}, "_meta": meta()}});
        assert!(agrees(&call.to_string()));
        let get = json!({"jsonrpc": "2.0", "id": "x", "method": "tasks/get",
            "params": {"taskId": "abc", "_meta": meta()}});
        assert!(agrees(&get.to_string()));
        let update = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/update",
            "params": {"taskId": "abc", "inputResponses": {}, "_meta": meta()}});
        assert!(agrees(&update.to_string()));
        let legacy = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "t"}});
        assert!(agrees(&legacy.to_string()));
        // Integer ids in float form, as rmcp decodes them.
        for id in ["1.0", "1e2", "-4.0"] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tasks/get","params":{{"taskId":"a"}}}}"#
            );
            assert!(agrees(&body), "{body}");
        }
    }

    #[test]
    fn marks_a_listen_for_task_ids() {
        let listen = json!({"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": true, "taskIds": ["a"]}, "_meta": meta()}});
        assert!(agrees(&listen.to_string()));
        let fast = accept(listen.to_string().as_bytes(), &Limits::default(), false).unwrap();
        assert!(fast.task_listen && fast.negotiation.declares_tasks);
        // Malformed ids are the push module's to refuse; the request is still a task listen.
        let malformed = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": 5}}});
        assert!(agrees(&malformed.to_string()));
        // A listen without taskIds is rmcp's.
        let core = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": true}, "_meta": meta()}});
        assert!(accept(core.to_string().as_bytes(), &Limits::default(), false).is_none());
        let full = check(&core, &Limits::default(), false).unwrap();
        assert!(full.is_none());
    }

    #[test]
    fn leaves_everything_else_to_the_full_check() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":"{}"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["t"]}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/update","params":{"taskId":"a"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a","_meta":5}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","name":"u"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}} x"#,
        ] {
            assert!(!agrees(body), "{body}");
        }
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","x":{}{}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert!(accept(deep.as_bytes(), &Limits::default(), false).is_none());
    }

    #[test]
    fn deep_or_undecodable_capabilities_get_the_full_check() {
        // Nesting past serde_json's limit inside a field the capabilities type ignores: the
        // full check refuses the body as too deep, so the first look must not accept it.
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"x":{}{}}}}}}}}}"#,
            "[".repeat(130),
            "]".repeat(130)
        );
        assert!(accept(deep.as_bytes(), &Limits::default(), false).is_none());
        assert!(parse(deep.as_bytes()).is_err());
        // Capabilities that do not decode declare nothing: the full check's verdict.
        let odd = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "t", "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"extensions": 5}}}});
        assert!(!agrees(&odd.to_string()));
        let full = check(&odd, &Limits::default(), false).unwrap().unwrap();
        assert!(full.negotiation.modern && !full.negotiation.declares_tasks);
        // A version that is not a string names none; the request is still accepted.
        let numeric = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get",
            "params": {"taskId": "a", "_meta": {"io.modelcontextprotocol/protocolVersion": [1]}}});
        assert!(agrees(&numeric.to_string()));
        // Escaped keys and values read as the full check reads them.
        let escaped = r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"t","_meta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}}}"#;
        assert!(agrees(escaped));
    }

    #[test]
    fn large_bodies_get_the_exact_count() {
        let limits = Limits::default().with_max_arguments_bytes(100);
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "t", "arguments": {"a": "x".repeat(30)}}})
        .to_string();
        assert!(accept(body.as_bytes(), &limits, false).is_none());
        assert!(check(&parse(body.as_bytes()).unwrap(), &limits, false).is_ok());
    }
}
