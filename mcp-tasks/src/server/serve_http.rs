//! Serving over Streamable HTTP.

use std::{io, sync::Arc};

use axum::serve::ListenerExt;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tokio::net::TcpListener;

use rmcp::ServerHandler;

/// The path [`serve_http`] answers on.
pub const MCP_PATH: &str = "/mcp";

/// rmcp's Streamable HTTP service for `server` (a [`TaskServer`](crate::TaskServer), or an
/// rmcp handler of your own that routes to an [`Engine`](crate::Engine)): the modern
/// (stateless) wire, plus legacy `initialize` sessions for older clients. A modern request's
/// answer is one `application/json` body unless the handler sends something before it (then
/// SSE).
#[must_use]
pub fn http_service<S>(server: S) -> StreamableHttpService<S, LocalSessionManager>
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default().with_json_response(true),
    )
}

/// An axum router serving `server` at `/mcp`. Add your own layers to it, for example one
/// that authenticates the caller and inserts an [`Owner`](crate::Owner) into the request's
/// extensions.
pub fn http_router<S>(server: S) -> axum::Router
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    axum::Router::new().nest_service(MCP_PATH, http_service(server))
}

/// Serves `server` at `/mcp` on `listener` until the process ends.
///
/// Every accepted connection gets `TCP_NODELAY`: without it, SSE responses on keep-alive
/// connections stall about 40 ms each (Nagle against delayed ACK).
///
/// # Errors
/// An I/O error of the listener.
pub async fn serve_http<S>(listener: TcpListener, server: S) -> io::Result<()>
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::warn!(%error, "could not set TCP_NODELAY");
        }
    });
    axum::serve(listener, http_router(server)).await
}
