//! Task listen streams over Streamable HTTP: the request checks rmcp's service makes, then
//! the stream as server-sent events.

use std::{convert::Infallible, time::Duration};

use tokio::time::Instant;

use axum::{
    body::{Body, Bytes},
    extract::Request,
    http::{Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use rmcp::transport::streamable_http_server::{
    StreamableHttpService, session::local::LocalSessionManager,
};
use serde_json::Value;

use super::{Refusal, Subscription, open};
use crate::server::{
    Engine, Owner, auth::Presented, guard, http_options::ListenBounds, negotiation::Checked, shape,
};

/// An SSE comment this often keeps an idle stream open through proxies.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Serves one task listen over Streamable HTTP: the `Host` and `Origin` checks rmcp's
/// service makes, then the stream as `text/event-stream` (or the refusal as one JSON
/// error, HTTP 400), within `bounds`.
pub(crate) async fn serve<S>(
    engine: &Engine,
    service: &StreamableHttpService<S, LocalSessionManager>,
    request: Request,
    bounds: ListenBounds,
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
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let presented = parts.extensions.get::<Presented>().cloned();
    let opened = async {
        let message = shape::parse(&bytes).map_err(|error| (None, error))?;
        check_headers(&parts.headers, &message)?;
        open(engine, &message, &checked, parts.extensions.get::<Owner>()).await
    };
    match opened.await {
        Ok(subscription) => sse(subscription, bounds, presented),
        Err((id, error)) => guard::error_reply(StatusCode::BAD_REQUEST, id, error),
    }
}

/// `Mcp-Method`, when sent, must name the body's method, and `MCP-Protocol-Version`,
/// when sent, the version of its `_meta` (`-32020` otherwise).
// docs/protocol.md C31-C36.
fn check_headers(headers: &axum::http::HeaderMap, message: &Value) -> Result<(), Refusal> {
    let id = shape::request_id(message);
    let mismatch = |what: String| {
        let error =
            rmcp::model::ErrorData::header_mismatch(format!("Header mismatch: {what}"), None);
        (id.clone(), error)
    };
    if let Some(method) = headers.get(guard::MCP_METHOD)
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
    if let (Some(header), Some(meta)) = (headers.get(guard::PROTOCOL_VERSION), meta_version)
        && header.as_bytes() != meta.as_bytes()
    {
        return Err(mismatch(format!(
            "the MCP-Protocol-Version header `{}` is not the request's _meta protocol version `{meta}`",
            String::from_utf8_lossy(header.as_bytes())
        )));
    }
    Ok(())
}

/// The stream as server-sent events, one JSON-RPC message per event. Dropped when the
/// client closes the connection, which ends the subscription. It ends cleanly (what is
/// pending, then the graceful result) after `bounds.idle` with nothing to send, at
/// `bounds.max_lifetime`, or at a check (every `bounds.recheck`) that finds the token it
/// was opened with (`presented`) no longer accepted.
fn sse(subscription: Subscription, bounds: ListenBounds, presented: Option<Presented>) -> Response {
    let opened = Instant::now();
    let stream = Stream {
        subscription,
        presented,
        bounds,
        ends_at: opened + bounds.max_lifetime,
        idle_since: opened,
        next_check: opened + bounds.recheck,
        finishing: false,
    };
    let events = futures::stream::unfold(Some(stream), |stream| async move {
        let mut stream = stream?;
        let event = stream.next_event().await?;
        Some((Ok::<_, Infallible>(Bytes::from(event)), Some(stream)))
    });
    let headers = [
        (header::CONTENT_TYPE, "text/event-stream"),
        (header::CACHE_CONTROL, "no-cache"),
    ];
    (headers, Body::from_stream(events)).into_response()
}

/// A listen stream within its bounds.
struct Stream {
    subscription: Subscription,
    presented: Option<Presented>,
    bounds: ListenBounds,
    ends_at: Instant,
    /// When the last message was sent (keep-alive comments do not count).
    idle_since: Instant,
    next_check: Instant,
    /// Ending: no bound is watched any more.
    finishing: bool,
}

impl Stream {
    /// The next SSE event: a message, or a keep-alive comment; `None` at the end.
    async fn next_event(&mut self) -> Option<Vec<u8>> {
        loop {
            let keep_alive = Instant::now() + KEEP_ALIVE;
            let expires = self.ends_at.min(self.idle_since + self.bounds.idle);
            tokio::select! {
                biased;
                message = self.subscription.next() => {
                    let message = message?;
                    self.idle_since = Instant::now();
                    let mut event = b"data: ".to_vec();
                    event.extend_from_slice(&serde_json::to_vec(&message).unwrap_or_default());
                    event.extend_from_slice(b"\n\n");
                    return Some(event);
                }
                () = tokio::time::sleep_until(expires), if !self.finishing => {
                    tracing::debug!("a listen stream ends: idle or at its maximum lifetime");
                    self.end();
                }
                () = tokio::time::sleep_until(self.next_check), if !self.finishing && self.presented.is_some() => {
                    if let Some(presented) = &self.presented && !presented.still_valid().await {
                        tracing::info!("a listen stream ends: its bearer token is no longer accepted");
                        self.end();
                    } else {
                        self.next_check = Instant::now() + self.bounds.recheck;
                    }
                }
                () = tokio::time::sleep_until(keep_alive) => return Some(b":\n\n".to_vec()),
            }
        }
    }

    fn end(&mut self) {
        self.finishing = true;
        self.subscription.finish();
    }
}
