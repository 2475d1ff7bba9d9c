//! The client half of the Tasks extension: call a tool and follow it to its end, whether the
//! server answers inline or with a task (feature `client`).
//!
//! [`TaskClient`] sits on an rmcp client peer (the modern `2026-07-28` wire, started with
//! `server/discover`). It sends `tools/call` and `tasks/*` on rmcp's raw request path, because
//! rmcp's high-level `call_tool` rejects task results, and stamps on each of them the
//! protocol version, the client info and the client capabilities with
//! `extensions["io.modelcontextprotocol/tasks"] = {}`, so every request declares the extension
//! on its own. On Streamable HTTP, rmcp's transport derives `MCP-Protocol-Version`,
//! `Mcp-Method` and `Mcp-Name` (the tool name, or the task id for `tasks/*`) from that
//! request, and copies the arguments a tool's schema annotates with `x-mcp-header` into
//! `Mcp-Param-*` headers once it has seen that schema in a `tools/list` answer.
//! [`TaskClient::call`] needs no listing first: when a server refuses a call for a missing
//! `Mcp-Param-*` header (`-32020`, before anything runs), it lists the tools once and sends
//! the call again.
//!
//! ```no_run
//! # async fn run() -> Result<(), mcp_tasks::client::ClientError> {
//! use mcp_tasks::client::{TaskEnd, TaskClient};
//! use rmcp::model::{ElicitResult, ElicitationAction};
//!
//! let client = TaskClient::builder()
//!     .with_elicitation(|_request, _cx| async {
//!         Ok(Some(ElicitResult::new(ElicitationAction::Accept)
//!             .with_content(serde_json::json!({ "include": true }))))
//!     })
//!     .connect_http("http://127.0.0.1:8080/mcp")
//!     .await?;
//!
//! // Whether the server answers inline or with a task, the final result:
//! let args = serde_json::json!({ "workspace_id": "acme" });
//! let result = client.call_tool("workspace_report", args.as_object().cloned()).await?;
//!
//! // Or keep the task handle: watch, persist its reference, cancel.
//! if let Some(mut task) = client.call("workspace_report", args.as_object().cloned()).await?.into_task() {
//!     let reference = task.reference().to_json();   // store it to resume later
//!     match task.wait().await? {
//!         TaskEnd::Completed(result) => println!("{result:?}"),
//!         TaskEnd::Failed(error) => eprintln!("failed: {}", error.message),
//!         TaskEnd::Cancelled => eprintln!("cancelled"),
//!         _ => {}
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # Following a task
//!
//! [`TaskHandle::wait`] first listens: it sends `subscriptions/listen` for the task, and
//! the server pushes each change (`notifications/tasks`, the same snapshot `tasks/get`
//! answers), input requests included, which are answered as soon as they arrive. When the
//! server refuses the listen, does not push the task's state within two poll intervals of
//! it, or the stream ends before the task does, `wait` polls instead and listens again ten
//! seconds later. [`TaskHandle::updates`] follows the same way, as a stream of the distinct
//! snapshots; [`TaskHandle::poll`] polls once.
//!
//! Polling, `wait` calls `tasks/get`, sleeping the latest `pollIntervalMs` between polls
//! (the value may change from one snapshot to the next; it is clamped below by
//! [`TaskClientBuilder::with_min_poll_interval`], 10 ms by default) until the task is
//! terminal. A `completed` task yields its `CallToolResult`, also when `isError` is true (a
//! tool's own failure is a result, not an error); `failed` yields the JSON-RPC error it
//! carries; `cancelled` yields [`TaskEnd::Cancelled`]. [`TaskHandle::cancel`] sends
//! `tasks/cancel` and nothing else, never `notifications/cancelled` (which does not cancel a
//! task); cancellation is cooperative, so keep waiting: the task may still complete or fail.
//!
//! # Input
//!
//! When a snapshot is `input_required`, each key of `inputRequests` not answered yet goes to
//! the handler of its kind (see [`input`](self#input) and [`InputContext`]); all answers of
//! that snapshot go in one `tasks/update`, and a key counts as answered only once that update
//! succeeded, so the same request is never answered twice across polls. An
//! `input_required` answer to `tools/call` itself (before a task) is answered with the same
//! handlers and the call retried with `inputResponses`, the echoed `requestState` and a new
//! request id, at most [`TaskClientBuilder::with_max_input_rounds`] times (10 by default).
//! A handler that answers "later" (`Ok(None)`) there is asked again, without re-sending the
//! call, for at most [`TaskClientBuilder::with_max_input_wait`] (5 minutes by default).
//!
//! # Resuming
//!
//! A [`TaskReference`] (endpoint, task id, and the input keys already answered) serializes
//! to JSON. A new process connects to the same endpoint and calls [`TaskClient::resume`] to
//! get a [`TaskHandle`] again; the keys it lists are not asked again, so a person never
//! sees the same question twice. Save the reference again after a poll that answered
//! input ([`TaskHandle::reference`] is cheap).

// For maintainers, the rules of docs/protocol.md this module follows: the extension declared
// on every request (R1, C6), inline or task answers (R4, R5), HTTP headers (R48, C30-C31,
// C33, C35), polling (R18, R19), results (R46), cancellation (R34, R37), input (R30-R32, C20).

#![allow(
    deprecated,
    reason = "sampling and roots are deprecated by SEP-2577 yet still part of the 2026-07-28 wire"
)]

mod builder;
mod call;
mod connection;
mod endpoint;
mod error;
mod followers;
mod handler;
pub mod input;
mod listen;
mod task;

pub use builder::{MAX_INPUT_ROUNDS, MAX_INPUT_WAIT, MIN_POLL_INTERVAL, TaskClientBuilder};
pub use call::{CALL_RETRIES, Call};
pub use connection::TaskClient;
pub use endpoint::{Endpoint, TaskReference};
pub use error::ClientError;
pub use input::{InputAnswer, InputContext, InputError, InputScope, form_field_problem};
pub use task::{TaskEnd, TaskHandle};
