//! The request guard: the transports' side of the [request authority](super::shape). It
//! answers a message the authority refuses with its JSON-RPC error (the table of answers is
//! in the [server module's docs](super)), and hands the engine what it learned (how the
//! request negotiated: [`Checked`], see [`negotiation`](super::negotiation)).
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
//! escapes, it asks the authority before rmcp decodes. A stateless request on the 2026-07-28
//! wire is decoded by rmcp first (`rmcp_first`): rmcp answers every body it cannot decode,
//! and every request whose params do not decode as their method's, with an HTTP status
//! other than 200 or 202, and only then does the guard ask the authority (`recheck`) and
//! answer its error instead. A well-formed request is so parsed once. That rmcp decodes
//! exactly what the authority accepts is the property test of `shape.rs`.

use axum::{
    body::{Body, Bytes},
    extract::Request,
    http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use http_body_util::LengthLimitError;
use rmcp::model::{ClientJsonRpcMessage, ErrorData, RequestId};

use super::{
    negotiation::Checked,
    shape::{self, MAX_GROWTH, error_response},
};
use crate::{Limits, errors};

/// The header of a legacy (`initialize`) session.
const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

/// The header that names a request's method (2026-07-28). A constant name: a `&str` is
/// parsed into a header name on every lookup.
pub(crate) const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");

/// The header that names a request's protocol version (2026-07-28), a constant name as
/// [`MCP_METHOD`] is.
pub(crate) const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");

pub(crate) const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// The guard on HTTP: a `POST` with a JSON body, read already (`bytes`, at most the
/// request limit), is checked before rmcp sees it. `Ok` is the request to serve, the
/// same bytes with the guard's [`Checked`] verdict in its extensions
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
) -> Result<Option<Checked>, Box<Response>> {
    let verdict = shape::judge(bytes, limits, legacy_session).map_err(|refusal| {
        let status = if refusal.bad_request {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        };
        Box::new(reject(status, refusal.id, refusal.error))
    })?;
    // What rmcp cannot decode it answers with a plain-text 415; answer -32600 instead.
    // (The authority checked the params of the methods this crate owns; the push module
    // checks a task listen's.)
    if verdict.checked.is_none()
        && let Err(error) = serde_json::from_slice::<ClientJsonRpcMessage>(bytes)
    {
        let error = errors::undecodable_message(&error.to_string());
        return Err(Box::new(reject(StatusCode::BAD_REQUEST, verdict.id, error)));
    }
    Ok(verdict.checked)
}

/// Whether rmcp may decode `bytes` first, the guard looking only when rmcp refuses it
/// (`recheck`): a stateless request on the 2026-07-28 wire (`MCP-Protocol-Version`
/// names it, no `Mcp-Session-Id`), whose body has no escape (so no method name can be
/// spelled in escapes) and names no `subscriptions/listen` (task listens are served
/// here, rmcp has no `taskIds`), and is small and flat enough that neither its arguments
/// nor its `_meta` can be over their limits. Sound because what the guard refuses never
/// decodes as a request of the methods this crate owns (see the module docs).
pub(crate) fn rmcp_first(headers: &HeaderMap, bytes: &[u8], limits: &Limits) -> bool {
    static LISTEN: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"subscriptions/listen"));
    !headers.contains_key(SESSION_ID)
        && headers
            .get(PROTOCOL_VERSION)
            .and_then(|version| version.to_str().ok())
            .is_some_and(|version| version >= rmcp::model::ProtocolVersion::NO_INITIALIZE.as_str())
        && bytes.len().saturating_mul(MAX_GROWTH) <= limits.max_arguments_bytes()
        && shape::meta::meta_cannot_exceed(bytes, limits)
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

/// The whole body, or the answer when it is larger than `limit` or cannot be read.
///
/// A body whose first frame is all of it (a small request's with a `Content-Length`
/// usually is) is kept as it came, uncopied, without a second poll; anything else is
/// read by `axum::body::to_bytes`, after that first frame.
pub(crate) async fn read_body(mut body: Body, limit: usize) -> Result<Bytes, Response> {
    use http_body_util::BodyExt;
    let first = match body.frame().await {
        None => return Ok(Bytes::new()),
        Some(Ok(frame)) => frame.into_data().unwrap_or_default(),
        Some(Err(error)) => return Err(unreadable(&error)),
    };
    if first.len() > limit {
        return Err(too_large(limit));
    }
    if axum::body::HttpBody::is_end_stream(&body) {
        return Ok(first);
    }
    let rest = axum::body::to_bytes(body, limit - first.len())
        .await
        .map_err(|e| {
            if std::error::Error::source(&e).is_some_and(|e| e.is::<LengthLimitError>()) {
                return too_large(limit);
            }
            unreadable(&e)
        })?;
    if first.is_empty() {
        return Ok(rest);
    }
    Ok([&first[..], &rest[..]].concat().into())
}

fn too_large(limit: usize) -> Response {
    let error = errors::request_too_large(limit);
    reject(StatusCode::PAYLOAD_TOO_LARGE, None, error)
}

fn unreadable(error: &dyn std::fmt::Display) -> Response {
    let message = format!("Invalid request: the request body could not be read: {error}");
    let error = ErrorData::invalid_request(message, None);
    reject(StatusCode::BAD_REQUEST, None, error)
}

/// The answer to a body that did not arrive in full within `timeout`: HTTP 408 with a
/// JSON-RPC error, and the connection closed (what is left of the body is not read).
pub(crate) fn body_timed_out(timeout: std::time::Duration) -> Response {
    let message = format!(
        "Request timeout: the request body did not arrive in full within {} ms; send \
         the whole body without pausing, then retry",
        timeout.as_millis()
    );
    let error = ErrorData::invalid_request(message, None);
    let mut response = reject(StatusCode::REQUEST_TIMEOUT, None, error);
    let close = HeaderValue::from_static("close");
    response.headers_mut().insert(header::CONNECTION, close);
    response
}

fn reject(status: StatusCode, id: Option<RequestId>, error: ErrorData) -> Response {
    crate::metrics::request_refused(error.code.0);
    error_reply(status, id, error)
}

/// `error` as a JSON-RPC error response with HTTP `status`.
pub(crate) fn error_reply(status: StatusCode, id: Option<RequestId>, error: ErrorData) -> Response {
    let body = error_response(id, error);
    (status, [(header::CONTENT_TYPE, JSON)], body).into_response()
}

#[cfg(test)]
mod tests {

    /// rmcp decodes first only a stateless modern request it answers with a status when it
    /// cannot decode it, and never a task listen (however its method is spelled) or a body
    /// whose arguments might be over their limit.
    #[cfg(feature = "http")]
    #[test]
    fn rmcp_decodes_first_only_stateless_modern_plain_bodies() {
        use axum::http::{HeaderMap, HeaderValue};

        use super::rmcp_first;

        let limits = crate::Limits::default().with_max_arguments_bytes(1000);
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

        // Nor a body whose `_meta` might be over its size or depth limit.
        let small_meta = limits.clone().with_max_meta_bytes(500);
        assert!(!rmcp_first(&modern, &large, &small_meta));
        large.truncate(100);
        assert!(rmcp_first(&modern, &large, &small_meta));
        let flat = crate::Limits::default().with_max_meta_depth(2);
        let nested = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"a":{}}}}"#;
        assert!(rmcp_first(&modern, nested, &flat));
        let deeper = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"a":[{}]}}}"#;
        assert!(!rmcp_first(&modern, deeper, &flat));
    }
}
