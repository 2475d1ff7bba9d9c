//! The rmcp glue: [`Engine`] answers `tools/list`, `tools/call` and `tasks/*`;
//! [`TaskServer`] is a ready [`ServerHandler`](rmcp::ServerHandler) built on it.
//!
//! # Negotiation (docs/protocol.md §3)
//!
//! A call runs as a task only when **that request** runs on the modern wire (protocol
//! `2026-07-28` or later, not a session opened with `initialize`) **and** its own `_meta`
//! declares `io.modelcontextprotocol/tasks` (R1-R3). Nothing carries over from earlier
//! requests (C3). On a legacy session the extension is undefined (R53): a declaration made
//! at `initialize` or on the request changes nothing there.
//!
//! | tool mode | declaring request | any other request |
//! | --- | --- | --- |
//! | [`Mode::Required`](crate::Mode::Required) | task | `-32021` (R6) |
//! | [`Mode::Optional`](crate::Mode::Optional) | task, or inline within its inline budget | inline |
//! | [`Mode::Inline`](crate::Mode::Inline) | inline | inline |
//!
//! `tasks/get`, `tasks/update` and `tasks/cancel` answer `-32021` to a request that does not
//! declare the extension (§2.8) and `-32602` for an id that is unknown, purged or owned by
//! someone else (R17, R49). `tasks/result` and `tasks/list` are not methods of this
//! extension and answer `-32601` (R51, R54).
//!
//! # Delegating from an existing handler
//!
//! An rmcp [`ServerHandler`](rmcp::ServerHandler) of your own keeps its other methods and routes five calls and
//! the capability to an [`Engine`]:
//!
//! ```no_run
//! use mcp_tasks::{Engine, Toolkit};
//! use rmcp::{ErrorData, RoleServer, ServerHandler, model::*, service::RequestContext};
//!
//! struct MyServer { tasks: Engine }
//!
//! impl ServerHandler for MyServer {
//!     fn get_info(&self) -> ServerConfig {
//!         ServerConfig::new(self.tasks.capabilities(ServerCapabilities::default()))
//!     }
//!     async fn list_tools(&self, _: Option<PaginatedRequestParams>, _: RequestContext<RoleServer>)
//!         -> Result<ListToolsResult, ErrorData> { Ok(self.tasks.list_tools()) }
//!     async fn call_tool(&self, p: CallToolRequestParams, cx: RequestContext<RoleServer>)
//!         -> Result<CallToolResponse, ErrorData> { self.tasks.call_tool(p, &cx).await }
//!     async fn get_task(&self, p: GetTaskParams, cx: RequestContext<RoleServer>)
//!         -> Result<GetTaskResult, ErrorData> { self.tasks.get_task(p, &cx).await }
//!     async fn update_task(&self, p: UpdateTaskParams, cx: RequestContext<RoleServer>)
//!         -> Result<(), ErrorData> { self.tasks.update_task(p, &cx).await }
//!     async fn cancel_task(&self, p: CancelTaskParams, cx: RequestContext<RoleServer>)
//!         -> Result<(), ErrorData> { self.tasks.cancel_task(p, &cx).await }
//! }
//! ```

use std::sync::Arc;

mod auth;
mod builder;
mod engine;
pub mod guard;
mod request;
mod request_state;
mod router;
#[cfg(feature = "http")]
mod serve_http;
#[cfg(feature = "stdio")]
mod serve_stdio;
mod task_server;

#[cfg(feature = "http")]
pub use auth::{AuthError, ProtectedResourceError, StaticTokens, TokenListError, TokenValidator};
pub use builder::EngineBuilder;
pub use engine::Engine;
pub use request::IDEMPOTENCY_KEY;
pub use request_state::{DEFAULT_REQUEST_STATE_TTL, RequestStateKey, RequestStateKeyError};
#[cfg(feature = "http")]
pub use serve_http::{
    HttpOptions, LOCALHOST_ORIGINS, http_router, http_router_with, http_service, http_service_with,
    serve_http, serve_http_with,
};
#[cfg(feature = "stdio")]
pub use serve_stdio::{serve_io, serve_stdio};
pub use task_server::TaskServer;

/// The principal a task belongs to (docs/protocol.md R49).
///
/// Put one in the request's extensions (for Streamable HTTP: an axum/tower layer that inserts
/// it into the HTTP request's extensions after authenticating the caller). A task records the
/// owner of the request that created it; `tasks/*` requests from any other owner answer as
/// for an unknown id. Requests without one get the engine's default owner.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner(pub Arc<str>);

impl Owner {
    /// An owner named `name`.
    #[must_use]
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Self(name.into())
    }
}

/// The default owner of requests that carry no [`Owner`].
pub const DEFAULT_OWNER: &str = "anonymous";
