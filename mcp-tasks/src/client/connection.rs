//! [`TaskClient`]: one connection to a server, the settings its builder fixed, and the
//! requests it sends on rmcp's raw request path.

use std::{sync::Arc, time::Duration};

use rmcp::{
    RoleClient,
    model::{
        CancelTaskParams, CancelTaskRequest, ClientRequest, DetailedTask, GetTaskParams,
        GetTaskRequest, InputResponses, ListToolsRequest, PaginatedRequestParams,
        RequestMetaObject, ServerResult, Tool, UpdateTaskParams, UpdateTaskRequest,
    },
    service::{Peer, PeerRequestOptions, RunningService},
};
use serde_json::Value;
use tokio::sync::Mutex;

use super::{
    endpoint::Endpoint, error::ClientError, followers::Followers, handler::Handler,
    input::InputHandlers,
};

/// What every clone of a [`TaskClient`] shares: the connection and the settings the builder
/// fixed.
pub(super) struct Inner {
    pub(super) service: Mutex<Option<RunningService<RoleClient, Handler>>>,
    pub(super) peer: Peer<RoleClient>,
    pub(super) endpoint: Endpoint,
    pub(super) handlers: InputHandlers,
    /// The `_meta` every request carries: protocol version, client info and capabilities.
    pub(super) meta: RequestMetaObject,
    pub(super) server_tasks: bool,
    /// The handles following tasks by listening (shared with the rmcp handler).
    pub(super) followers: Arc<Followers>,
    pub(super) min_poll_interval: Duration,
    pub(super) default_poll_interval: Duration,
    pub(super) max_input_rounds: usize,
    pub(super) max_input_wait: Duration,
}

/// A connection to one MCP server that follows tool calls to their end. Cheap to clone.
#[derive(Clone)]
pub struct TaskClient {
    pub(super) inner: Arc<Inner>,
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
    pub(super) async fn send(
        &self,
        method: &'static str,
        request: ClientRequest,
    ) -> Result<ServerResult, ClientError> {
        self.send_with(method, request, self.inner.meta.clone())
            .await
    }

    /// Sends `request` with `meta` as its `_meta`.
    pub(super) async fn send_with(
        &self,
        method: &'static str,
        request: ClientRequest,
        meta: RequestMetaObject,
    ) -> Result<ServerResult, ClientError> {
        let options = PeerRequestOptions::no_options().with_meta(meta);
        let answer = async {
            let peer = &self.inner.peer;
            let handle = peer.send_request_with_option(request, options).await?;
            handle.await_response().await
        };
        let result = answer
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

    pub(crate) async fn get_task(&self, task_id: &str) -> Result<DetailedTask, ClientError> {
        const METHOD: &str = "tasks/get";
        let request =
            ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(task_id)));
        match self.send(METHOD, request).await? {
            ServerResult::GetTaskResult(result) if result.result_type.is_complete() => {
                let got = &result.task.task.task_id;
                if got != task_id {
                    return Err(ClientError::InvalidResponse {
                        method: METHOD,
                        reason: format!("asked for task {task_id}, got task {got}"),
                    });
                }
                Ok(result.task)
            }
            other => Err(invalid(METHOD, &other)),
        }
    }

    pub(crate) async fn update_task(
        &self,
        task_id: &str,
        responses: InputResponses,
    ) -> Result<(), ClientError> {
        let request = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(
            UpdateTaskParams::new(task_id, responses),
        ));
        expect_ack("tasks/update", &self.send("tasks/update", request).await?)
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
        expect_ack("tasks/cancel", &self.send("tasks/cancel", request).await?)
    }
}

// R23, R35: the acknowledgement of tasks/update and tasks/cancel.
/// An empty acknowledgement: `resultType` `"complete"` (or absent) and nothing but `_meta`.
fn expect_ack(method: &'static str, result: &ServerResult) -> Result<(), ClientError> {
    let value = serde_json::to_value(result).unwrap_or(Value::Null);
    let object = value.as_object().ok_or_else(|| invalid(method, result))?;
    let complete = matches!(value["resultType"].as_str(), None | Some("complete"));
    // rmcp may decode `{"resultType":"complete"}` as a CallToolResult with empty content.
    let only_ack = object.iter().all(|(key, value)| match key.as_str() {
        "resultType" | "_meta" => true,
        "content" => value.as_array().is_some_and(Vec::is_empty),
        _ => false,
    });
    (complete && only_ack)
        .then_some(())
        .ok_or_else(|| invalid(method, result))
}

fn invalid(method: &'static str, result: &ServerResult) -> ClientError {
    let shown = serde_json::to_string(result).unwrap_or_default();
    let shown: String = shown.chars().take(300).collect();
    ClientError::InvalidResponse {
        method,
        reason: format!("unexpected result {shown}"),
    }
}
