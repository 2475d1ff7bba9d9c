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
//! seconds later. [`TaskHandle::updates`] and [`TaskHandle::poll`] always poll.
//!
//! Polling, `wait` calls `tasks/get`, sleeping the latest `pollIntervalMs` between polls
//! (the value may change from one snapshot to the next; it is clamped below by
//! [`TaskClientBuilder::with_min_poll_interval`], 10 ms by default) until the task is
//! terminal. [`TaskHandle::updates`] is the same loop as a stream of the distinct
//! snapshots. A `completed` task yields its `CallToolResult`, also when `isError` is true (a
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
//!
//! # Resuming
//!
//! A [`TaskReference`] (endpoint, task id, and the input keys already answered) serializes
//! to JSON. A new process connects to the same endpoint and calls [`TaskClient::resume`] to
//! get a [`TaskHandle`] again; the keys it lists are not asked again, so a person never
//! sees the same question twice. Save the reference again after a poll that answered
//! input ([`TaskHandle::reference`] is cheap).
//!
//! Before a task exists, a handler may answer "later" (`Ok(None)`): the client then asks the
//! handlers again every default poll interval, without re-sending the call, for at most
//! [`TaskClientBuilder::with_max_input_wait`] (5 minutes by default), then fails with
//! [`ClientError::InputNotAnswered`].

// For maintainers, the rules of docs/protocol.md this module follows: the extension declared
// on every request (R1, C6), inline or task answers (R4, R5), HTTP headers (R48, C30-C31,
// C33, C35), polling (R18, R19), results (R46), cancellation (R34, R37), input (R30-R32, C20).

#![allow(
    deprecated,
    reason = "sampling and roots are deprecated by SEP-2577 yet still part of the 2026-07-28 wire"
)]

mod builder;
mod call;
mod endpoint;
mod error;
mod handler;
pub mod input;
mod listen;
mod task;

use std::{sync::Arc, time::Duration};

use rmcp::{
    RoleClient,
    model::{
        CancelTaskParams, CancelTaskRequest, ClientRequest, GetTaskParams, GetTaskRequest,
        InputResponses, ListToolsRequest, PaginatedRequestParams, RequestMetaObject, ServerResult,
        Tool, UpdateTaskParams, UpdateTaskRequest,
    },
    service::{Peer, PeerRequestOptions, RunningService},
};
use serde_json::Value;
use tokio::sync::Mutex;

pub use builder::TaskClientBuilder;
pub use call::Call;
pub use endpoint::{Endpoint, TaskReference};
pub use error::ClientError;
pub use input::{InputAnswer, InputContext, InputError, InputScope};
pub use task::{TaskEnd, TaskHandle};

use handler::Handler;
use input::InputHandlers;

/// The default lower bound of the pause between polls.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_millis(10);
/// How many times a `tools/call` whose answer was lost to a transport failure is sent again
/// (with the same idempotency key, so the server answers the task it created).
pub const CALL_RETRIES: usize = 2;

/// The default limit of `input_required` rounds on one `tools/call`.
pub const MAX_INPUT_ROUNDS: usize = 10;
/// The default longest wait for the handlers to answer an input request before any task
/// exists (5 minutes).
pub const MAX_INPUT_WAIT: Duration = Duration::from_secs(300);

/// What every clone of a [`TaskClient`] shares: the connection and the settings the builder
/// fixed.
struct Inner {
    service: Mutex<Option<RunningService<RoleClient, Handler>>>,
    peer: Peer<RoleClient>,
    endpoint: Endpoint,
    handlers: InputHandlers,
    /// The `_meta` every request carries: protocol version, client info and capabilities.
    meta: RequestMetaObject,
    server_tasks: bool,
    /// The handles following tasks by listening (shared with the rmcp handler).
    followers: Arc<listen::Followers>,
    min_poll_interval: Duration,
    default_poll_interval: Duration,
    max_input_rounds: usize,
    max_input_wait: Duration,
}

/// A connection to one MCP server that follows tool calls to their end. Cheap to clone.
#[derive(Clone)]
pub struct TaskClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for TaskClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskClient")
            .field("endpoint", &self.inner.endpoint)
            .field("handlers", &self.inner.handlers)
            .finish_non_exhaustive()
    }
}

impl TaskClient {
    /// A builder.
    pub fn builder() -> TaskClientBuilder {
        TaskClientBuilder::default()
    }

    /// Connects with the default settings (no input handlers: elicitation is declined).
    ///
    /// # Errors
    /// As for [`TaskClientBuilder::connect`].
    pub async fn connect(endpoint: &Endpoint) -> Result<Self, ClientError> {
        Self::builder().connect(endpoint).await
    }

    /// The server endpoint.
    #[must_use]
    pub fn endpoint(&self) -> &Endpoint {
        &self.inner.endpoint
    }

    /// Whether the server advertises the tasks extension in `server/discover`.
    #[must_use]
    pub fn server_supports_tasks(&self) -> bool {
        self.inner.server_tasks
    }

    /// The rmcp peer, for requests this client does not wrap.
    #[must_use]
    pub fn peer(&self) -> &Peer<RoleClient> {
        &self.inner.peer
    }

    /// Closes the connection (and ends a stdio child process).
    pub async fn close(&self) {
        if let Some(service) = self.inner.service.lock().await.take() {
            let _ = service.cancel().await;
        }
    }

    /// Sends `request` with the extension's `_meta` and returns the raw result.
    async fn send(
        &self,
        method: &'static str,
        request: ClientRequest,
    ) -> Result<ServerResult, ClientError> {
        self.send_with(method, request, self.inner.meta.clone())
            .await
    }

    /// Sends `request` with `meta` as its `_meta`.
    async fn send_with(
        &self,
        method: &'static str,
        request: ClientRequest,
        meta: RequestMetaObject,
    ) -> Result<ServerResult, ClientError> {
        let options = PeerRequestOptions::no_options().with_meta(meta);
        let handle = self
            .inner
            .peer
            .send_request_with_option(request, options)
            .await
            .map_err(|source| ClientError::service(method, source))?;
        let result = handle
            .await_response()
            .await
            .map_err(|source| ClientError::service(method, source))?;
        if matches!(result, ServerResult::CreateTaskResult(_)) && method != "tools/call" {
            return Err(ClientError::InvalidResponse {
                method,
                // R5: only tools/call may create a task.
                reason: "it is a task (resultType \"task\"), but only tools/call can start a \
                         task; the server does not follow the tasks extension"
                    .to_owned(),
            });
        }
        Ok(result)
    }

    /// Every tool of the server (all pages of `tools/list`).
    ///
    /// # Errors
    /// [`ClientError::Rpc`], [`ClientError::Transport`], or [`ClientError::InvalidResponse`]
    /// (also when the server answers with a task, which only `tools/call` may).
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ClientError> {
        let mut tools = Vec::new();
        let mut cursor = None;
        loop {
            let params = PaginatedRequestParams::default().with_cursor(cursor);
            let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
            match self.send("tools/list", request).await? {
                ServerResult::ListToolsResult(page) => {
                    tools.extend(page.tools);
                    match page.next_cursor {
                        Some(next) => cursor = Some(next),
                        None => return Ok(tools),
                    }
                }
                other => return Err(invalid("tools/list", &other)),
            }
        }
    }

    /// A handle on task `task_id` of this server, with its current snapshot (`tasks/get`).
    ///
    /// # Errors
    /// [`ClientError::Rpc`] with `-32602` for a task that is unknown, expired, or not yours.
    pub async fn task(&self, task_id: &str) -> Result<TaskHandle, ClientError> {
        let snapshot = self.get_task(task_id).await?;
        Ok(TaskHandle::from_snapshot(self.clone(), snapshot))
    }

    /// Continues following the task of `reference`, e.g. in a new process after a restart.
    /// The client must be connected to the reference's endpoint. Input keys the reference
    /// lists as answered are never asked again, even while a server's snapshots still show
    /// them.
    ///
    /// # Errors
    /// [`ClientError::EndpointMismatch`]; otherwise as for [`TaskClient::task`].
    pub async fn resume(&self, reference: &TaskReference) -> Result<TaskHandle, ClientError> {
        if reference.endpoint != self.inner.endpoint {
            return Err(ClientError::EndpointMismatch {
                reference: reference.endpoint.to_string(),
                connected: self.inner.endpoint.to_string(),
            });
        }
        let snapshot = self.get_task(&reference.task_id).await?;
        Ok(TaskHandle::from_snapshot(self.clone(), snapshot)
            .with_answered(reference.answered_keys.iter().cloned()))
    }

    /// `tasks/get`.
    pub(crate) async fn get_task(
        &self,
        task_id: &str,
    ) -> Result<rmcp::model::DetailedTask, ClientError> {
        const METHOD: &str = "tasks/get";
        let request =
            ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(task_id)));
        match self.send(METHOD, request).await? {
            ServerResult::GetTaskResult(result) if result.result_type.is_complete() => {
                if result.task.task.task_id != task_id {
                    return Err(ClientError::InvalidResponse {
                        method: METHOD,
                        reason: format!(
                            "asked for task {task_id}, got task {}",
                            result.task.task.task_id
                        ),
                    });
                }
                Ok(result.task)
            }
            other => Err(invalid(METHOD, &other)),
        }
    }

    /// `tasks/update` with `responses`.
    pub(crate) async fn update_task(
        &self,
        task_id: &str,
        responses: InputResponses,
    ) -> Result<(), ClientError> {
        let request = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(
            UpdateTaskParams::new(task_id, responses),
        ));
        let result = self.send("tasks/update", request).await?;
        expect_ack("tasks/update", &result)
    }

    /// Asks the server to cancel task `task_id` with `tasks/cancel` (never with
    /// `notifications/cancelled`, which does not cancel a task).
    ///
    /// # Errors
    /// [`ClientError::Rpc`] with `-32602` for an unknown task; transport errors.
    pub async fn cancel_task(&self, task_id: &str) -> Result<(), ClientError> {
        let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(
            CancelTaskParams::new(task_id),
        ));
        let result = self.send("tasks/cancel", request).await?;
        expect_ack("tasks/cancel", &result)
    }

    /// Sends `subscriptions/listen` for task `task_id`; the handle's `rx` answers when the
    /// stream ends. Its notifications reach the [`listen::Followers`] registered for it.
    // docs/protocol.md R43, C6.
    pub(crate) async fn open_listen(
        &self,
        task_id: &str,
    ) -> Result<rmcp::service::RequestHandle<RoleClient>, rmcp::ServiceError> {
        let params = serde_json::json!({ "notifications": { "taskIds": [task_id] } });
        let request = ClientRequest::CustomRequest(rmcp::model::CustomRequest::new(
            "subscriptions/listen",
            Some(params),
        ));
        let options = PeerRequestOptions::no_options().with_meta(self.inner.meta.clone());
        self.inner
            .peer
            .send_request_with_option(request, options)
            .await
    }

    pub(crate) fn followers(&self) -> &Arc<listen::Followers> {
        &self.inner.followers
    }

    pub(crate) fn min_poll_interval(&self) -> Duration {
        self.inner.min_poll_interval
    }

    pub(crate) fn default_poll_interval(&self) -> Duration {
        self.inner.default_poll_interval
    }

    pub(crate) fn handlers(&self) -> &InputHandlers {
        &self.inner.handlers
    }
}

// R23, R35: the acknowledgement of tasks/update and tasks/cancel.
/// An empty acknowledgement: `resultType` `"complete"` (or absent) and nothing but `_meta`.
fn expect_ack(method: &'static str, result: &ServerResult) -> Result<(), ClientError> {
    let value = serde_json::to_value(result).unwrap_or(Value::Null);
    let Some(object) = value.as_object() else {
        return Err(invalid(method, result));
    };
    let complete = matches!(
        object.get("resultType").and_then(Value::as_str),
        None | Some("complete")
    );
    // rmcp may decode `{"resultType":"complete"}` as a CallToolResult with empty content.
    let only_ack = object.iter().all(|(key, value)| match key.as_str() {
        "resultType" | "_meta" => true,
        "content" => value.as_array().is_some_and(Vec::is_empty),
        _ => false,
    });
    if complete && only_ack {
        Ok(())
    } else {
        Err(invalid(method, result))
    }
}

fn invalid(method: &'static str, result: &ServerResult) -> ClientError {
    let shown = serde_json::to_string(result).unwrap_or_default();
    let shown: String = shown.chars().take(300).collect();
    ClientError::InvalidResponse {
        method,
        reason: format!("unexpected result {shown}"),
    }
}
