//! Task listen streams over Streamable HTTP: the request checks rmcp's service makes, then
//! the stream as server-sent events.

use std::{convert::Infallible, time::Duration};

use axum::{
    body::{Body, Bytes},
    extract::Request,
    http::{HeaderValue, Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use rmcp::transport::streamable_http_server::{
    StreamableHttpService, session::local::LocalSessionManager,
};
use serde_json::Value;

use super::{Refusal, Subscription, open};
use crate::server::{Engine, Owner, guard, negotiation::Checked};

/// An SSE comment this often keeps an idle stream open through proxies.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Serves one task listen over Streamable HTTP: the `Host` and `Origin` checks rmcp's
/// service makes, then the stream as `text/event-stream` (or the refusal as one JSON
/// error, HTTP 400).
pub(crate) async fn serve<S>(
    engine: &Engine,
    service: &StreamableHttpService<S, LocalSessionManager>,
    request: Request,
) -> Response
where
    S: rmcp::ServerHandler + Clone + Send + Sync + 'static,
{
    // rmcp's service checks `Host` and `Origin` before anything else and answers any
    // method other than POST 405: a PUT of the same headers runs exactly its checks.
    let mut probe = axum::http::Request::builder()
        .method(Method::PUT)
        .uri(request.uri().clone())
        .body(Body::empty())
        .expect("a request of a valid method and uri");
    *probe.headers_mut() = request.headers().clone();
    let checked_headers = service.handle(probe).await;
    if checked_headers.status() != StatusCode::METHOD_NOT_ALLOWED {
        return checked_headers.into_response();
    }
    let (parts, body) = request.into_parts();
    let Some(checked) = parts.extensions.get::<Checked>().cloned() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(_) => return StatusCode::BAD_REQUEST.into_response(),
    };
    let message: Value = match guard::parse(&bytes) {
        Ok(message) => message,
        Err(error) => return refuse((None, error)),
    };
    if let Err(refusal) = check_headers(&parts.headers, &message) {
        return refuse(refusal);
    }
    let owner = parts.extensions.get::<Owner>();
    match open(engine, &message, &checked, owner).await {
        Ok(subscription) => sse(subscription),
        Err(refusal) => refuse(refusal),
    }
}

/// `Mcp-Method`, when sent, must name the body's method, and `MCP-Protocol-Version`,
/// when sent, the version of its `_meta` (`-32020` otherwise).
// docs/protocol.md C31-C36.
fn check_headers(headers: &axum::http::HeaderMap, message: &Value) -> Result<(), Refusal> {
    let id = guard::request_id(message);
    let mismatch = |what: String| {
        (
            id.clone(),
            rmcp::model::ErrorData::new(
                rmcp::model::ErrorCode(-32020),
                format!("Header mismatch: {what}"),
                None,
            ),
        )
    };
    if let Some(method) = headers.get("mcp-method")
        && method.as_bytes() != b"subscriptions/listen"
    {
        return Err(mismatch(format!(
            "the Mcp-Method header `{}` does not name the body's method `subscriptions/listen`",
            String::from_utf8_lossy(method.as_bytes())
        )));
    }
    let meta_version = message
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
        .and_then(Value::as_str);
    if let (Some(header), Some(meta)) = (headers.get("mcp-protocol-version"), meta_version)
        && header.as_bytes() != meta.as_bytes()
    {
        return Err(mismatch(format!(
            "the MCP-Protocol-Version header `{}` is not the request's _meta protocol version `{meta}`",
            String::from_utf8_lossy(header.as_bytes())
        )));
    }
    Ok(())
}

fn refuse((id, error): Refusal) -> Response {
    let mut response = Response::new(Body::from(guard::error_response(id, error)));
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The stream as server-sent events, one JSON-RPC message per event. Dropped when the
/// client closes the connection, which ends the subscription.
fn sse(subscription: Subscription) -> Response {
    let events = futures::stream::unfold(Some(subscription), |subscription| async move {
        let mut subscription = subscription?;
        let event = match tokio::time::timeout(KEEP_ALIVE, subscription.next()).await {
            Ok(Some(message)) => {
                let mut event = b"data: ".to_vec();
                event.extend_from_slice(&serde_json::to_vec(&message).unwrap_or_default());
                event.extend_from_slice(b"\n\n");
                event
            }
            Ok(None) => return None,
            Err(_) => b":\n\n".to_vec(),
        };
        Some((Ok::<_, Infallible>(Bytes::from(event)), Some(subscription)))
    });
    let mut response = Response::new(Body::from_stream(events));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
