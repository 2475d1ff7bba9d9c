//! The rmcp glue: [`Engine`] answers `tools/list`, `tools/call` and `tasks/*`;
//! [`TaskServer`] is a ready [`ServerHandler`](rmcp::ServerHandler) built on it.
//!
//! # Negotiation
//!
//! A call runs as a task only when **that request** runs on the modern wire (protocol
//! `2026-07-28` or later, not a session opened with `initialize`) **and** its own `_meta`
//! declares `io.modelcontextprotocol/tasks`. Nothing carries over from earlier
//! requests. On a legacy session the extension is undefined: a declaration made
//! at `initialize` or on the request changes nothing there.
//!
//! | tool mode | declaring request | any other request |
//! | --- | --- | --- |
//! | [`Mode::Required`](crate::Mode::Required) | task | `-32021` |
//! | [`Mode::Optional`](crate::Mode::Optional) | task, or inline within its inline budget | inline |
//! | [`Mode::Inline`](crate::Mode::Inline) | inline | inline |
//!
//! `tasks/get`, `tasks/update` and `tasks/cancel` answer `-32021` to a request that does not
//! declare the extension and `-32602` for an id that is unknown, purged or owned by
//! someone else (the three look the same, so an id reveals nothing). `tasks/result` and
//! `tasks/list` are not methods of this extension and answer `-32601`.
//!
//! # Malformed requests
//!
//! On both transports ([`serve_http`], [`serve_io`]) a
//! request guard answers what rmcp would answer poorly or not at all, and nothing of such a
//! request is dispatched. One authority decides what is well-formed: a borrowed reading of
//! the message into one derived shape. (A well-formed request on the 2026-07-28 wire over
//! HTTP is decoded once, by rmcp: the guard reads its body only when rmcp refused it; a
//! property test holds rmcp's decoder and the authority to the same answers.)
//!
//! | what arrives | answer | HTTP status |
//! | --- | --- | --- |
//! | not UTF-8, not JSON, nested deeper than 128 levels | `-32700`, no `id` | 400 |
//! | JSON that is not one object | `-32600`, no `id` | 400 |
//! | an object that is not a JSON-RPC 2.0 message (`jsonrpc`, `method`, `id`, `params` of the wrong type) | `-32600` | 400 |
//! | a key given twice (in the envelope, in `params` or its `_meta` where the guard reads them) | `-32600`, no `id` | 400 |
//! | larger than [`Limits::max_request_bytes`](crate::Limits::max_request_bytes) | `-32600`, no `id` | 413 |
//! | a `tasks/*` request with malformed params that does not declare the extension | `-32021` (checked first, as for well-formed ones) | 400 |
//! | malformed params of `tools/call`, `tasks/get`, `tasks/update`, `tasks/cancel` | `-32602` naming the field and what it must be | 400 (200 in a legacy session) |
//! | `tools/call` arguments over [`Limits::max_arguments_bytes`](crate::Limits::max_arguments_bytes) | `-32602` | 400 (200 in a legacy session) |
//! | a request's `params._meta` over [`Limits::max_meta_bytes`](crate::Limits::max_meta_bytes) or nesting deeper than [`Limits::max_meta_depth`](crate::Limits::max_meta_depth) | `-32602` naming `params._meta` and the limit | 400 (200 in a legacy session) |
//! | any other request that rmcp's message types do not decode | `-32600` | 400 |
//!
//! A malformed request is answered `400` like one lacking a required `_meta` field; requests of a legacy (`initialize`) session keep rmcp's HTTP 200 for JSON-RPC errors.
//! On stdio each rejection is one error line and the stream goes on.
//!
//! # Delegating from an existing handler
//!
//! An rmcp [`ServerHandler`](rmcp::ServerHandler) of your own keeps its other methods and routes five calls and
//! the capability to an [`Engine`]; `AsRef<Engine>` names the engine
//! [`serve_http`] serves (starts, bounds by its limits, serves task listens with):
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
//!
//! impl AsRef<Engine> for MyServer {
//!     fn as_ref(&self) -> &Engine { &self.tasks }
//! }
//! ```

#[cfg(feature = "http")]
mod auth;
mod builder;
#[cfg(feature = "http")]
mod connections;
mod engine;
#[cfg(feature = "http")]
mod guard;
#[cfg(feature = "http")]
mod http_options;
mod negotiation;
mod owner;
#[cfg(any(feature = "http", feature = "stdio"))]
mod push;
mod request;
mod request_state;
mod router;
#[cfg(feature = "http")]
mod serve_http;
#[cfg(feature = "stdio")]
mod serve_stdio;
#[cfg(any(feature = "http", feature = "stdio"))]
mod shape;
mod task_server;

#[cfg(feature = "http")]
pub use auth::{AuthError, ProtectedResourceError, StaticTokens, TokenListError, TokenValidator};
pub use builder::EngineBuilder;
pub use engine::Engine;
#[cfg(feature = "http")]
pub use http_options::{HttpOptions, LOCALHOST_ORIGINS};
pub use owner::{DEFAULT_OWNER, Owner};
#[cfg(any(feature = "http", feature = "stdio"))]
pub use push::{MAX_LISTEN_STREAMS_PER_OWNER, MAX_TASK_IDS_PER_LISTEN};
pub use request::IDEMPOTENCY_KEY;
pub use request_state::{DEFAULT_REQUEST_STATE_TTL, RequestStateKey, RequestStateKeyError};
#[cfg(feature = "http")]
pub use serve_http::{
    LIVENESS_PATH, READINESS_PATH, READINESS_STORE_TIMEOUT, http_router, serve_http,
    serve_http_with_shutdown,
};
#[cfg(feature = "stdio")]
pub use serve_stdio::{serve_io, serve_stdio};
pub use task_server::TaskServer;
