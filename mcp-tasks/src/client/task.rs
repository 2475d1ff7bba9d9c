//! [`TaskHandle`]: one task followed from the client, and its [`TaskEnd`].

use std::{collections::HashSet, time::Duration};

use futures::Stream;
use rmcp::{
    ErrorData,
    model::{CallToolResult, DetailedTask, InputResponses, Task, TaskPayload, TaskStatus},
};

use super::{ClientError, InputScope, TaskClient, TaskReference};

/// How a task ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TaskEnd {
    /// `completed`: the tool's result, also when `isError` is true (a tool that reported a
    /// problem still completed).
    Completed(CallToolResult),
    /// `failed`: the JSON-RPC error the task carries (code, message, data).
    Failed(ErrorData),
    /// `cancelled`.
    Cancelled,
}

impl TaskEnd {
    /// The result of a completed task, or the failure as an error.
    ///
    /// # Errors
    /// [`ClientError::TaskFailed`] or [`ClientError::TaskCancelled`].
    pub fn into_result(self, task_id: &str) -> Result<CallToolResult, ClientError> {
        match self {
            Self::Completed(result) => Ok(result),
            Self::Failed(error) => Err(ClientError::TaskFailed {
                task_id: task_id.to_owned(),
                error,
            }),
            Self::Cancelled => Err(ClientError::TaskCancelled {
                task_id: task_id.to_owned(),
            }),
        }
    }

    /// The outcome of a terminal snapshot; `None` while the task runs.
    ///
    /// # Errors
    /// [`ClientError::InvalidResponse`] when the `result` or `error` is malformed.
    pub fn of(snapshot: &DetailedTask) -> Result<Option<Self>, ClientError> {
        match &snapshot.payload {
            TaskPayload::Completed { result } => {
                serde_json::from_value(serde_json::Value::Object(result.clone()))
                    .map(|result| Some(Self::Completed(result)))
                    .map_err(|error| ClientError::InvalidResponse {
                        method: "tasks/get",
                        reason: format!(
                            "the completed task's result is not a CallToolResult: {error}"
                        ),
                    })
            }
            TaskPayload::Failed { error } => {
                serde_json::from_value(serde_json::Value::Object(error.clone()))
                    .map(|error| Some(Self::Failed(error)))
                    .map_err(|error| ClientError::InvalidResponse {
                        method: "tasks/get",
                        reason: format!("the failed task's error is not a JSON-RPC error: {error}"),
                    })
            }
            TaskPayload::Cancelled => Ok(Some(Self::Cancelled)),
            _ => Ok(None),
        }
    }
}

/// One task, followed from the client.
///
/// It keeps the latest snapshot and the input keys already answered, so no question is
/// answered twice.
#[derive(Debug)]
pub struct TaskHandle {
    client: TaskClient,
    snapshot: DetailedTask,
    /// `pollIntervalMs` of the creation result, used while snapshots carry none.
    created_poll_ms: Option<u64>,
    answered: HashSet<String>,
}

fn payload_for(status: TaskStatus) -> Option<TaskPayload> {
    match status {
        TaskStatus::Working => Some(TaskPayload::Working),
        _ => None,
    }
}

/// How long after a listen that was of no use the next one is tried (polling meanwhile).
const RELISTEN_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

/// Beyond two poll intervals, how long a listen waits for the task's first pushed state
/// before it counts as not agreed.
const FIRST_PUSH_MARGIN: std::time::Duration = std::time::Duration::from_millis(500);

impl TaskHandle {
    /// The handle for a `CreateTaskResult`. A task created in any status but `working` is
    /// fetched once with `tasks/get`: its creation result cannot carry the payload.
    pub(crate) async fn created(client: TaskClient, task: Task) -> Result<Self, ClientError> {
        let created_poll_ms = task.poll_interval_ms;
        let snapshot = match payload_for(task.status) {
            Some(payload) => DetailedTask::new(task, payload),
            None => client.get_task(&task.task_id).await?,
        };
        let mut handle = Self {
            client,
            snapshot,
            created_poll_ms,
            answered: HashSet::new(),
        };
        handle.answer_input().await?;
        Ok(handle)
    }

    pub(crate) fn from_snapshot(client: TaskClient, snapshot: DetailedTask) -> Self {
        Self {
            client,
            created_poll_ms: snapshot.task.poll_interval_ms,
            snapshot,
            answered: HashSet::new(),
        }
    }

    /// Marks `keys` as answered: they are never answered again.
    pub(crate) fn with_answered(mut self, keys: impl IntoIterator<Item = String>) -> Self {
        self.answered.extend(keys);
        self
    }

    /// The input keys this handle answered, or was told were answered (sorted).
    #[must_use]
    pub fn answered_keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = self.answered.iter().map(String::as_str).collect();
        keys.sort_unstable();
        keys
    }

    /// The task id.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.snapshot.task.task_id
    }

    /// The latest snapshot seen.
    #[must_use]
    pub fn snapshot(&self) -> &DetailedTask {
        &self.snapshot
    }

    /// The latest status seen.
    #[must_use]
    pub fn status(&self) -> TaskStatus {
        self.snapshot.status()
    }

    /// What to persist to resume this task later ([`TaskClient::resume`]): the endpoint,
    /// the task id and the input keys answered so far.
    #[must_use]
    pub fn reference(&self) -> TaskReference {
        TaskReference::new(self.client.endpoint().clone(), self.id())
            .with_answered_keys(self.answered.iter().cloned())
    }

    /// The pause before the next poll: the latest `pollIntervalMs` (else the creation
    /// result's, else the client default), never below the client's minimum.
    #[must_use]
    pub fn poll_interval(&self) -> Duration {
        self.snapshot
            .task
            .poll_interval_ms
            .or(self.created_poll_ms)
            .map_or(self.client.default_poll_interval(), Duration::from_millis)
            .max(self.client.min_poll_interval())
    }

    /// The outcome, once the latest snapshot is terminal.
    ///
    /// # Errors
    /// [`ClientError::InvalidResponse`] for a malformed `result` or `error`.
    pub fn outcome(&self) -> Result<Option<TaskEnd>, ClientError> {
        TaskEnd::of(&self.snapshot)
    }

    /// Polls once: `tasks/get`, then answers new input requests. Returns the snapshot.
    ///
    /// # Errors
    /// [`ClientError::Rpc`] (e.g. `-32602` for a task the server no longer knows), input
    /// and transport errors.
    pub async fn poll(&mut self) -> Result<&DetailedTask, ClientError> {
        self.snapshot = self.client.get_task(self.id()).await?;
        self.answer_input().await?;
        Ok(&self.snapshot)
    }

    /// Follows the task until it is terminal, answering input on the way: by listening when
    /// the server pushes the task's changes, else by polling, sleeping
    /// [`TaskHandle::poll_interval`] between polls (see [following a
    /// task](super#following-a-task)).
    ///
    /// # Errors
    /// As for [`TaskHandle::poll`]. An error leaves the handle usable: call `wait` again to
    /// go on (input not yet delivered is asked again).
    pub async fn wait(&mut self) -> Result<TaskEnd, ClientError> {
        let mut listen_at = tokio::time::Instant::now();
        loop {
            if let Some(outcome) = self.outcome()? {
                return Ok(outcome);
            }
            if self.client.server_supports_tasks() && tokio::time::Instant::now() >= listen_at {
                self.follow_pushed().await?;
                if let Some(outcome) = self.outcome()? {
                    return Ok(outcome);
                }
                // Not agreed, refused or dropped: poll, and listen again a while later.
                listen_at = tokio::time::Instant::now() + RELISTEN_AFTER;
            }
            tokio::time::sleep(self.poll_interval()).await;
            self.poll().await?;
        }
    }

    /// Follows the task on a `subscriptions/listen` stream until its terminal state, or
    /// until the stream is of no use: refused, the task not agreed (no state pushed within
    /// two poll intervals of the listen), or ended by the server or the transport. Pushed
    /// input requests are answered at once. The stream is closed on return.
    // docs/protocol.md R39-R41, C23-C25.
    async fn follow_pushed(&mut self) -> Result<(), ClientError> {
        let (_following, mut pushed) = self.client.followers().register(self.id());
        let Ok(mut listen) = self.client.open_listen(self.id()).await else {
            return Ok(());
        };
        let subscription = listen.id.clone();
        let first_by = tokio::time::sleep(self.poll_interval() * 2 + FIRST_PUSH_MARGIN);
        let mut first_by = std::pin::pin!(first_by);
        let mut agreed = false;
        let result = loop {
            tokio::select! {
                message = pushed.recv() => {
                    let Some((on, snapshot)) = message else { break Ok(()) };
                    // Another handle's stream for the same task.
                    if on.is_some_and(|on| on != subscription) {
                        continue;
                    }
                    agreed = true;
                    self.snapshot = snapshot;
                    if let Err(error) = self.answer_input().await {
                        break Err(error);
                    }
                    if self.status().is_terminal() {
                        break Ok(());
                    }
                }
                // The stream ended (the server's graceful end, an error, a dropped transport).
                _ = &mut listen.rx => break Ok(()),
                () = &mut first_by, if !agreed => break Ok(()),
            }
        };
        let _ = listen
            .cancel(Some("the task is followed no more".to_owned()))
            .await;
        result
    }

    /// The current snapshot, then every distinct later one, polling like
    /// [`TaskHandle::wait`]; ends after the terminal snapshot or the first error.
    pub fn updates(&mut self) -> impl Stream<Item = Result<DetailedTask, ClientError>> + '_ {
        futures::stream::unfold((self, true, false), |(handle, first, done)| async move {
            if done {
                return None;
            }
            if first {
                let snapshot = handle.snapshot.clone();
                let terminal = snapshot.status().is_terminal();
                return Some((Ok(snapshot), (handle, false, terminal)));
            }
            loop {
                tokio::time::sleep(handle.poll_interval()).await;
                let previous = handle.snapshot.clone();
                if let Err(error) = handle.poll().await {
                    return Some((Err(error), (handle, false, true)));
                }
                if handle.snapshot != previous {
                    let snapshot = handle.snapshot.clone();
                    let terminal = snapshot.status().is_terminal();
                    return Some((Ok(snapshot), (handle, false, terminal)));
                }
            }
        })
    }

    /// Asks the server to cancel the task with `tasks/cancel`. Cancellation is
    /// cooperative: keep polling to see how the task ends (it may still complete or fail).
    ///
    /// # Errors
    /// [`ClientError::Rpc`] (`-32602` for an unknown task), transport errors.
    pub async fn cancel(&self) -> Result<(), ClientError> {
        self.client.cancel_task(self.id()).await
    }

    /// Answers the input requests of the latest snapshot not answered yet, all in one
    /// `tasks/update`; keys count as answered once the update succeeded.
    // docs/protocol.md R30-R32.
    async fn answer_input(&mut self) -> Result<(), ClientError> {
        let TaskPayload::InputRequired { input_requests } = &self.snapshot.payload else {
            return Ok(());
        };
        let task_id = self.snapshot.task.task_id.clone();
        let mut responses = InputResponses::new();
        let mut first_error = None;
        for (key, request) in input_requests {
            if self.answered.contains(key) {
                continue;
            }
            let scope = InputScope::Task {
                task_id: task_id.clone(),
            };
            match self.client.handlers().answer(key, request, scope).await {
                Ok(Some(answer)) => {
                    responses.insert(key.clone(), answer);
                }
                Ok(None) => {}
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        if !responses.is_empty() {
            let keys: Vec<String> = responses.keys().cloned().collect();
            self.client.update_task(&task_id, responses).await?;
            self.answered.extend(keys);
        }
        first_error.map_or(Ok(()), Err)
    }
}
