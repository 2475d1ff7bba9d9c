//! Serving over Streamable HTTP.

use std::{io, sync::Arc};

use axum::serve::ListenerExt;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tokio::net::TcpListener;

use super::TaskServer;

/// The path [`serve_http`] answers on.
pub const MCP_PATH: &str = "/mcp";

/// rmcp's Streamable HTTP service for `server`: the modern (stateless) wire, plus legacy
/// `initialize` sessions for older clients. A modern request's answer is one
/// `application/json` body unless the handler sends something before it (then SSE).
#[must_use]
pub fn http_service(server: TaskServer) -> StreamableHttpService<TaskServer, LocalSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .with_max_request_body_bytes(server.limits().max_request_bytes());
    StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// An axum router serving `server` at `/mcp`. Add your own layers to it, for example one
/// that authenticates the caller and inserts an [`Owner`](crate::Owner) into the request's
/// extensions.
///
/// In front of rmcp sits the [request guard](crate::server::guard): malformed requests and
/// bodies over [`Limits::max_request_bytes`](crate::Limits::max_request_bytes) are answered
/// with a JSON-RPC error before rmcp parses them ([`http_service`] alone has no guard).
pub fn http_router(server: TaskServer) -> axum::Router {
    let guard =
        axum::middleware::from_fn_with_state(server.limits().clone(), super::guard::http_guard);
    axum::Router::new()
        .nest_service(MCP_PATH, http_service(server))
        .layer(guard)
}

/// Serves `server` at `/mcp` on `listener` until the process ends.
///
/// Every accepted connection gets `TCP_NODELAY`: without it, SSE responses on keep-alive
/// connections stall about 40 ms each (Nagle against delayed ACK).
///
/// # Errors
/// An I/O error of the listener.
pub async fn serve_http(listener: TcpListener, server: TaskServer) -> io::Result<()> {
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::warn!(%error, "could not set TCP_NODELAY");
        }
    });
    axum::serve(listener, http_router(server)).await
}
