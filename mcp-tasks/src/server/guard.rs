//! The request guard: rejects malformed requests of the methods this crate owns before rmcp
//! parses them, with the JSON-RPC error a client can act on (the table of answers is in the
//! [server module's docs](super)), and hands the engine what it learned (how the request
//! negotiated: [`Checked`], see [`negotiation`](super::negotiation)).
//!
//! rmcp decodes a message into its typed request enum in one step; a `tools/call` whose
//! `arguments` is a string, or a `tasks/get` without `taskId`, does not decode as that method
//! and is answered as an unknown method (`-32601`), and a body that is not JSON gets a
//! plain-text HTTP 415. The guard answers those instead, on both transports (in the `/mcp`
//! service of [`http_router`](crate::http_router), a line filter in
//! [`serve_io`](super::serve_io)), and only ever **rejects**: a message it lets through
//! reaches rmcp unchanged (on HTTP as the same bytes, on stdio as the message it decoded to).
//!
//! On stdio, and on HTTP for a request in a legacy session, a task listen or a body with
//! escapes, it looks before rmcp decodes. A stateless request on the 2026-07-28 wire is
//! decoded by rmcp first (`rmcp_first`): rmcp answers every body it cannot decode, and every
//! request whose params do not decode as their method's, with an HTTP status other than 200
//! or 202, and only then does the guard read the body (`recheck`) and answer its own
//! error instead. A well-formed request is so parsed once.

use rmcp::model::{ErrorData, JsonRpcError, RequestId};
use serde::Deserialize;
use serde_json::Value;

pub(crate) use super::negotiation::Checked;
use super::negotiation::Negotiation;
use crate::{Limits, errors};

/// How deep JSON may nest: serde_json's recursion limit.
pub(crate) const MAX_DEPTH: usize = 128;

/// Decodes one message: UTF-8, then JSON (at most [`MAX_DEPTH`] levels deep).
///
/// # Errors
/// `-32700` saying which of the three it is not.
pub(crate) fn parse(bytes: &[u8]) -> Result<Value, ErrorData> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        errors::parse_error(&format!(
            "the request is not valid UTF-8 (invalid byte at offset {}); send UTF-8 JSON",
            e.valid_up_to()
        ))
    })?;
    serde_json::from_str::<Value>(text).map_err(|e| {
        if e.to_string().starts_with("recursion limit exceeded") {
            errors::parse_error(&format!(
                "the JSON nests deeper than {MAX_DEPTH} levels (at line {}, column {})",
                e.line(),
                e.column()
            ))
        } else {
            errors::parse_error(&format!("the request is not valid JSON: {e}"))
        }
    })
}

/// The `id` of a request, when it has a valid one (a string or an integer).
#[must_use]
pub(crate) fn request_id(message: &Value) -> Option<RequestId> {
    message
        .get("id")
        .and_then(|id| RequestId::deserialize(id).ok())
}

/// One JSON-RPC error response, serialized (without a newline).
#[must_use]
pub(crate) fn error_response(id: Option<RequestId>, error: ErrorData) -> Vec<u8> {
    serde_json::to_vec(&JsonRpcError::new(id, error)).unwrap_or_else(|_| {
        br#"{"jsonrpc":"2.0","error":{"code":-32603,"message":"internal error"}}"#.to_vec()
    })
}

/// Checks one decoded message. Messages that are not requests of `tools/call`, `tasks/get`,
/// `tasks/update` or `tasks/cancel` pass (rmcp answers them); so do well-formed ones, with
/// the [`Checked`] verdict the engine reads (how the request negotiated, its client
/// capabilities). `legacy_session` is whether the message arrives in a session opened with
/// `initialize`, where the extension is undefined.
///
/// # Errors
/// The error to answer instead of dispatching (see the [module docs](self)).
// docs/protocol.md R53.
pub(crate) fn check(
    message: &Value,
    limits: &Limits,
    legacy_session: bool,
) -> Result<Option<Checked>, ErrorData> {
    let Some(object) = message.as_object() else {
        return Err(errors::not_a_message(kind(message)));
    };
    check_envelope(object)?;
    let (Some(Value::String(method)), Some(_)) = (object.get("method"), object.get("id")) else {
        return Ok(None);
    };
    let params = object.get("params");
    let negotiate = || {
        let (negotiation, capabilities) =
            Negotiation::of_raw_meta(params.and_then(|p| p.get("_meta")), legacy_session);
        Checked {
            negotiation,
            capabilities,
            task_listen: false,
        }
    };
    match method.as_str() {
        "tools/call" => {
            check_call(params, limits)?;
            Ok(Some(negotiate()))
        }
        "tasks/get" | "tasks/cancel" | "tasks/update" => {
            let checked = negotiate();
            if let Err(error) = check_task_request(method, params) {
                // The capability check comes first for tasks/*, malformed or not.
                return Err(if checked.negotiation.declares_tasks {
                    error
                } else {
                    errors::tasks_capability_required()
                });
            }
            Ok(Some(checked))
        }
        // Served by the push module, which checks the rest of it.
        "subscriptions/listen" if super::push::names_task_ids(params) => Ok(Some(Checked {
            task_listen: true,
            ..negotiate()
        })),
        _ => match params {
            None | Some(Value::Object(_)) => Ok(None),
            Some(other) => Err(errors::malformed_envelope(
                "params",
                "an object",
                kind(other),
            )),
        },
    }
}

/// The JSON-RPC 2.0 envelope: `jsonrpc: "2.0"`, a string `method`, an `id` that is a string
/// or an integer.
fn check_envelope(object: &serde_json::Map<String, Value>) -> Result<(), ErrorData> {
    match object.get("jsonrpc") {
        Some(Value::String(version)) if version == "2.0" => {}
        Some(Value::String(_)) => {
            return Err(errors::malformed_envelope(
                "jsonrpc",
                "\"2.0\"",
                "another version",
            ));
        }
        Some(other) => {
            return Err(errors::malformed_envelope(
                "jsonrpc",
                "\"2.0\"",
                kind(other),
            ));
        }
        None => return Err(errors::malformed_envelope("jsonrpc", "\"2.0\"", "none")),
    }
    match object.get("method") {
        None | Some(Value::String(_)) => {}
        Some(other) => {
            return Err(errors::malformed_envelope(
                "method",
                "a string",
                kind(other),
            ));
        }
    }
    match object.get("id") {
        None | Some(Value::String(_)) => Ok(()),
        // rmcp's rule for a numeric id, so that what passes here it decodes as the same id:
        // an integer of 64 signed bits, also when written in float form (`1.0`, `1e2`).
        Some(id @ Value::Number(n)) => match RequestId::deserialize(id) {
            Ok(_) => Ok(()),
            Err(_) => Err(errors::malformed_envelope(
                "id",
                "a string or an integer",
                if n.as_f64().is_some_and(|f| f.fract() != 0.0) {
                    "a fraction"
                } else {
                    "a number outside the 64-bit signed integers"
                },
            )),
        },
        Some(other) => Err(errors::malformed_envelope(
            "id",
            "a string or an integer",
            kind(other),
        )),
    }
}

/// The methods whose requests [`check`] decodes in full.
#[cfg(feature = "http")]
const OWNED: [&str; 4] = ["tools/call", "tasks/get", "tasks/update", "tasks/cancel"];

/// Whether `message` is a request (with an `id`) of a method [`check`] decodes in full.
#[cfg(feature = "http")]
fn is_owned(message: &Value) -> bool {
    message.get("id").is_some()
        && message
            .get("method")
            .and_then(Value::as_str)
            .is_some_and(|method| OWNED.contains(&method))
}

/// What a JSON value is, for messages.
pub(super) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The params object, or the error naming what it must be.
fn params_object<'a>(
    method: &str,
    params: Option<&'a Value>,
    expected: &str,
) -> Result<&'a serde_json::Map<String, Value>, ErrorData> {
    match params {
        Some(Value::Object(map)) => Ok(map),
        None => Err(errors::malformed_param(method, "", expected, "none")),
        Some(other) => Err(errors::malformed_param(method, "", expected, kind(other))),
    }
}

/// `_meta`, if present, must be an object.
fn check_meta(method: &str, params: &serde_json::Map<String, Value>) -> Result<(), ErrorData> {
    match params.get("_meta") {
        None | Some(Value::Null | Value::Object(_)) => Ok(()),
        Some(other) => Err(errors::malformed_param(
            method,
            "_meta",
            "an object",
            kind(other),
        )),
    }
}

/// An optional field that must be an object when present (`null` counts as absent, as the
/// wire types decode it).
fn optional_object(
    method: &str,
    params: &serde_json::Map<String, Value>,
    field: &str,
    expected: &str,
) -> Result<(), ErrorData> {
    match params.get(field) {
        None | Some(Value::Null | Value::Object(_)) => Ok(()),
        Some(Value::String(_)) if field == "arguments" => Err(errors::malformed_param(
            method,
            field,
            expected,
            "a string (send the arguments as a JSON object, not as a JSON-encoded string)",
        )),
        Some(other) => Err(errors::malformed_param(
            method,
            field,
            expected,
            kind(other),
        )),
    }
}

fn check_call(raw: Option<&Value>, limits: &Limits) -> Result<(), ErrorData> {
    const METHOD: &str = "tools/call";
    let params = params_object(
        METHOD,
        raw,
        "an object with `name` (a string) and optional `arguments` (an object)",
    )?;
    match params.get("name") {
        Some(Value::String(_)) => {}
        None => {
            return Err(errors::missing_param(
                METHOD,
                "name",
                "the name of the tool to call, a string",
            ));
        }
        Some(other) => {
            return Err(errors::malformed_param(
                METHOD,
                "name",
                "a string (the name of the tool to call)",
                kind(other),
            ));
        }
    }
    optional_object(
        METHOD,
        params,
        "arguments",
        "an object of the tool's arguments by name",
    )?;
    optional_object(
        METHOD,
        params,
        "inputResponses",
        "an object of responses by input-request key",
    )?;
    match params.get("requestState") {
        None | Some(Value::Null | Value::String(_)) => {}
        Some(other) => {
            return Err(errors::malformed_param(
                METHOD,
                "requestState",
                "a string (the requestState of the last input_required result, as received)",
                kind(other),
            ));
        }
    }
    check_meta(METHOD, params)?;
    if let Some(arguments @ Value::Object(_)) = params.get("arguments") {
        let size = json_size(arguments);
        if size > limits.max_arguments_bytes() {
            return Err(errors::arguments_too_large(
                size,
                limits.max_arguments_bytes(),
            ));
        }
    }
    // Every field rmcp's `CallToolRequestParams` decodes is checked above (unknown fields
    // are ignored), so rmcp decodes what passes: no typed decode here.
    Ok(())
}

fn check_task_request(method: &str, raw: Option<&Value>) -> Result<(), ErrorData> {
    let update = method == "tasks/update";
    let expected = if update {
        "an object with `taskId` (a string) and `inputResponses` (an object)"
    } else {
        "an object with `taskId` (a string)"
    };
    let params = params_object(method, raw, expected)?;
    match params.get("taskId") {
        Some(Value::String(_)) => {}
        None => {
            return Err(errors::missing_param(
                method,
                "taskId",
                "the taskId the task was created with, a string",
            ));
        }
        Some(other) => {
            return Err(errors::malformed_param(
                method,
                "taskId",
                "a string",
                kind(other),
            ));
        }
    }
    if update {
        match params.get("inputResponses") {
            Some(Value::Object(_)) => {}
            None => {
                return Err(errors::missing_param(
                    method,
                    "inputResponses",
                    "an object of responses by input-request key",
                ));
            }
            Some(other) => {
                return Err(errors::malformed_param(
                    method,
                    "inputResponses",
                    "an object of responses by input-request key",
                    kind(other),
                ));
            }
        }
    }
    // As for tools/call: what passes these checks decodes as rmcp's params type.
    check_meta(method, params)
}

/// The size of `value` as compact JSON, in bytes.
fn json_size(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(feature = "http")]
pub(crate) use http::{admit, is_json, read_body, recheck, rmcp_first};

#[cfg(feature = "http")]
mod http {
    use axum::{
        body::{Body, Bytes},
        extract::Request,
        http::{HeaderMap, HeaderName, StatusCode, header},
        response::Response,
    };
    use http_body_util::LengthLimitError;
    use rmcp::model::{ClientJsonRpcMessage, ErrorCode, ErrorData, RequestId};
    use serde::Deserialize;

    use super::{check, error_response, is_owned, parse, request_id};
    use crate::server::{first_look, negotiation::Negotiation};
    use crate::{Limits, errors};

    /// The header of a legacy (`initialize`) session.
    const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

    /// The guard on HTTP: a `POST` with a JSON body, read already (`bytes`, at most the
    /// request limit), is checked before rmcp sees it. `Ok` is the request to serve, the
    /// same bytes with the guard's [`Checked`](super::Checked) verdict in its extensions
    /// (for a method this crate owns); `Err` the answer to send instead.
    pub(crate) fn admit(
        limits: &Limits,
        mut parts: axum::http::request::Parts,
        bytes: Bytes,
    ) -> Result<Request, Box<Response>> {
        let legacy_session = parts.headers.contains_key(SESSION_ID);
        if let Some(checked) = verdict(limits, &bytes, legacy_session)? {
            // The engine reads it from the `Parts` rmcp hands the handler.
            parts.extensions.insert(checked);
        }
        Ok(Request::from_parts(parts, Body::from(bytes)))
    }

    /// The guard's verdict on one body: `Ok` with how a request of a method this crate owns
    /// negotiated (`None` for other messages), or the refusal to answer instead.
    pub(crate) fn verdict(
        limits: &Limits,
        bytes: &[u8],
        legacy_session: bool,
    ) -> Result<Option<super::Checked>, Box<Response>> {
        if let Some(checked) = first_look::accept(bytes, limits, legacy_session) {
            // A well-formed request of a method this crate owns: no tree built.
            return Ok(Some(checked));
        }
        let message = match parse(bytes) {
            Ok(message) => message,
            Err(error) => return Err(Box::new(reject(StatusCode::BAD_REQUEST, None, error))),
        };
        let checked = match check(&message, limits, legacy_session) {
            Ok(checked) => checked,
            Err(error) => {
                let modern = || {
                    let meta = message.get("params").and_then(|p| p.get("_meta"));
                    Negotiation::of_raw_meta(meta, legacy_session).0.modern
                };
                let status = if error.code == ErrorCode::INVALID_REQUEST || modern() {
                    StatusCode::BAD_REQUEST
                } else {
                    StatusCode::OK
                };
                return Err(Box::new(reject(status, request_id(&message), error)));
            }
        };
        // What rmcp cannot decode it answers with a plain-text 415; answer -32600 instead.
        // (`check` already decoded the params of the methods this crate owns.)
        if !is_owned(&message)
            && let Err(error) = ClientJsonRpcMessage::deserialize(&message)
        {
            return Err(Box::new(reject(
                StatusCode::BAD_REQUEST,
                request_id(&message),
                errors::undecodable_message(&error.to_string()),
            )));
        }
        Ok(checked)
    }

    /// Whether rmcp may decode `bytes` first, the guard looking only when rmcp refuses it
    /// (`recheck`): a stateless request on the 2026-07-28 wire (`MCP-Protocol-Version`
    /// names it, no `Mcp-Session-Id`), whose body has no escape (so no method name can be
    /// spelled in escapes) and names no `subscriptions/listen` (task listens are served
    /// here, rmcp has no `taskIds`), and is small enough that its arguments cannot be over
    /// their limit.
    ///
    /// On that wire rmcp answers what it cannot decode, and the `-32601` of a method whose
    /// params do not decode as their type, with a status other than 200 or 202, and what
    /// the guard refuses never decodes as a request of the methods this crate owns: a
    /// well-formed request is parsed once (by rmcp), and the engine negotiates from the
    /// `_meta` rmcp decoded.
    pub(crate) fn rmcp_first(headers: &HeaderMap, bytes: &[u8], limits: &Limits) -> bool {
        static LISTEN: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"subscriptions/listen"));
        const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
        !headers.contains_key(SESSION_ID)
            && headers
                .get(PROTOCOL_VERSION)
                .and_then(|version| version.to_str().ok())
                .is_some_and(|version| {
                    version >= rmcp::model::ProtocolVersion::NO_INITIALIZE.as_str()
                })
            && bytes.len().saturating_mul(first_look::MAX_GROWTH) <= limits.max_arguments_bytes()
            && memchr::memchr(b'\\', bytes).is_none()
            && LISTEN.find(bytes).is_none()
    }

    /// After rmcp answered a body it decoded first (`rmcp_first`) with `status`: the
    /// guard's refusal, when it has one for the body, to answer instead. `None` keeps
    /// rmcp's answer (always so for 200 and 202).
    pub(crate) fn recheck(status: StatusCode, bytes: &[u8], limits: &Limits) -> Option<Response> {
        if matches!(status, StatusCode::OK | StatusCode::ACCEPTED) {
            return None;
        }
        verdict(limits, bytes, false).err().map(|refusal| *refusal)
    }

    /// Whether the request says its body is JSON (`Content-Type: application/json`).
    pub(crate) fn is_json(headers: &HeaderMap) -> bool {
        headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| {
                let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
                essence.trim().eq_ignore_ascii_case("application/json")
            })
    }

    /// The whole body, or the answer when it is larger than `limit` or cannot be read. A body
    /// that arrives in one chunk (a small request usually does) is kept as it came, uncopied.
    pub(crate) async fn read_body(body: Body, limit: usize) -> Result<Bytes, Response> {
        axum::body::to_bytes(body, limit).await.map_err(|e| {
            if std::error::Error::source(&e).is_some_and(|e| e.is::<LengthLimitError>()) {
                return reject(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    None,
                    errors::request_too_large(limit),
                );
            }
            let message = format!("Invalid request: the request body could not be read: {e}");
            reject(
                StatusCode::BAD_REQUEST,
                None,
                ErrorData::invalid_request(message, None),
            )
        })
    }

    fn reject(status: StatusCode, id: Option<RequestId>, error: ErrorData) -> Response {
        crate::metrics::request_refused(error.code.0);
        let mut response = Response::new(Body::from(error_response(id, error)));
        *response.status_mut() = status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        response
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{check, parse};
    use crate::Limits;

    /// rmcp decodes first only a stateless modern request it answers with a status when it
    /// cannot decode it, and never a task listen (however its method is spelled) or a body
    /// whose arguments might be over their limit.
    #[cfg(feature = "http")]
    #[test]
    fn rmcp_decodes_first_only_stateless_modern_plain_bodies() {
        use axum::http::{HeaderMap, HeaderValue};

        use super::rmcp_first;

        let limits = Limits::default().with_max_arguments_bytes(1000);
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut headers = HeaderMap::new();
            for &(name, value) in pairs {
                headers.insert(name, HeaderValue::from_static(value));
            }
            headers
        };
        let modern = headers(&[("mcp-protocol-version", "2026-07-28")]);
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#;
        assert!(rmcp_first(&modern, call, &limits));
        assert!(rmcp_first(
            &headers(&[("mcp-protocol-version", "2027-01-01")]),
            call,
            &limits
        ));
        // The legacy wire: rmcp answers what it cannot decode with HTTP 200 there.
        assert!(!rmcp_first(&HeaderMap::new(), call, &limits));
        assert!(!rmcp_first(
            &headers(&[("mcp-protocol-version", "2025-11-25")]),
            call,
            &limits
        ));
        let session = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-session-id", "s"),
        ]);
        assert!(!rmcp_first(&session, call, &limits));
        // Task listens are served here, however the method is spelled.
        let listen = br#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}"#;
        assert!(!rmcp_first(&modern, listen, &limits));
        let escaped = br#"{"jsonrpc":"2.0","id":1,"method":"subscriptions\/listen","params":{}}"#;
        assert!(!rmcp_first(&modern, escaped, &limits));
        // 201 bytes might hold arguments over 1000 once re-serialized; 200 cannot.
        let mut large = call.to_vec();
        large.resize(201, b' ');
        assert!(!rmcp_first(&modern, &large, &limits));
        large.truncate(200);
        assert!(rmcp_first(&modern, &large, &limits));
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
}
