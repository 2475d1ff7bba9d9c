//! # mcp-tasks
//!
//! Long-running MCP tools as **tasks**, under the Tasks extension
//! `io.modelcontextprotocol/tasks` ([`EXTENSION_ID`]), revision [`REVISION`], on
//! [rmcp](https://docs.rs/rmcp), the official Rust MCP SDK.
//!
//! A tool implements [`TaskTool`] (the `#[task_tool]` attribute writes that for an ordinary
//! `async fn`); a [`Toolkit`] collects tools; a [`TaskServer`] serves them over stdio or
//! Streamable HTTP. A client that declares the extension on a `tools/call` may get a task
//! handle back and follows it with `tasks/get`, `tasks/update` and `tasks/cancel`; every
//! other client sees ordinary MCP.
//!
//! Tasks are kept in a [`TaskStore`]: [`MemoryStore`] is the embedded default.
//!
//! | feature | what it adds |
//! | --- | --- |
//! | `stdio` | [`serve_stdio`] |
//! | `http` | [`serve_http`], [`http_router`], [`http_service`] (Streamable HTTP via axum) |
//! | `client` | [`client::TaskClient`]: call tools and follow tasks (poll, input, cancel, resume) over stdio child processes and `http://` |
//! | `https` | `https://` endpoints for the client (rustls) |
//! | `cli` | the `mcp-tasks` command-line client |

#[cfg(feature = "client")]
pub mod client;
pub mod clock;
pub mod errors;
mod id;
pub mod runtime;
pub mod server;
pub mod store;
pub mod tool;
pub mod toolkit;

pub use id::new_task_id;
pub use runtime::TaskContext;
#[cfg(feature = "stdio")]
pub use server::serve_stdio;
pub use server::{DEFAULT_OWNER, Engine, Owner, TaskServer};
#[cfg(feature = "http")]
pub use server::{http_router, http_service, serve_http};
pub use store::{MemoryStore, TaskStore};
pub use tool::{
    ArgumentError, Failure, Mode, TaskTool, ToolDefinition, ToolError, ToolFuture, Ttl,
};
pub use toolkit::{StateMap, Toolkit, ToolkitError};

/// The extension identifier: the capability key and reserved label of SEP-2663.
pub const EXTENSION_ID: &str = rmcp::model::TASKS_EXTENSION_ID;

/// The revision of the Tasks extension this crate implements: `2026-07-28`.
///
/// "Targeting 2026-07-28" means: the wire shapes, status machine and error codes are those of
/// the extension's stable `2026-07-28` release (flat `CreateTaskResult` with
/// `resultType: "task"`, `DetailedTask` in `tasks/get`, input through `inputRequests` and
/// `tasks/update`, ack-only `tasks/cancel`, `-32021` for a missing capability), negotiated per
/// request on the core protocol version `2026-07-28` or later. Requests on older protocol
/// versions (the `initialize` handshake) never see a task, and the `2025-11-25` experimental
/// tasks (`params.task`, `tasks/result`, `tasks/list`) are not offered.
pub const REVISION: &str = "2026-07-28";

#[doc(hidden)]
pub mod __private {
    //! What `#[task_tool]` and `toolkit!` expand to. Not a public API.
    pub use futures;
    pub use rmcp;
    pub use schemars;
    pub use serde;
    pub use serde_json;
}
