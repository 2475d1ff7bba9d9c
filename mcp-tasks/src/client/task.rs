//! [`TaskHandle`]: one task followed from the client, and its [`TaskEnd`].

use std::{collections::BTreeSet, time::Duration};

use futures::Stream;
use rmcp::{
    ErrorData,
    model::{CallToolResult, DetailedTask, InputResponses, Task, TaskPayload, TaskStatus},
};

use super::{ClientError, InputScope, TaskClient, TaskReference, listen::Pushing};

impl TaskClient {
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
        let mut handle = self.task(&reference.task_id).await?;
        handle.answered.extend(reference.answered_keys.clone());
        Ok(handle)
    }
}

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
    answered: BTreeSet<String>,
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
        let snapshot = match task.status {
            TaskStatus::Working => DetailedTask::new(task, TaskPayload::Working),
            _ => client.get_task(&task.task_id).await?,
        };
        let mut handle = Self::from_snapshot(client, snapshot);
        handle.created_poll_ms = created_poll_ms;
        handle.answer_input().await?;
        Ok(handle)
    }

    pub(crate) fn from_snapshot(client: TaskClient, snapshot: DetailedTask) -> Self {
        Self {
            client,
            created_poll_ms: snapshot.task.poll_interval_ms,
            snapshot,
            answered: BTreeSet::new(),
        }
    }

    /// The input keys this handle answered, or was told were answered (sorted).
    #[must_use]
    pub fn answered_keys(&self) -> Vec<&str> {
        self.answered.iter().map(String::as_str).collect()
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
        let inner = &self.client.inner;
        let ms = self.snapshot.task.poll_interval_ms.or(self.created_poll_ms);
        ms.map_or(inner.default_poll_interval, Duration::from_millis)
            .max(inner.min_poll_interval)
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
        let mut follow = Following::new(self);
        loop {
            if let Some(outcome) = TaskEnd::of(&follow.next().await?)? {
                return Ok(outcome);
            }
        }
    }

    /// The current snapshot, then every distinct later one as it happens, answering input
    /// on the way, like [`TaskHandle::wait`]: pushed on a `subscriptions/listen` stream when
    /// the server pushes the task's changes, else polled every
    /// [`TaskHandle::poll_interval`] (and listened for again a while after a stream of no
    /// use). Ends after the terminal snapshot or the first error.
    pub fn updates(&mut self) -> impl Stream<Item = Result<DetailedTask, ClientError>> + '_ {
        futures::stream::unfold(Following::new(self), |mut follow| async move {
            if follow.done {
                return None;
            }
            Some((follow.next().await, follow))
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
            match self.client.inner.handlers.answer(key, request, scope).await {
                Ok(answer) => responses.extend(answer.map(|answer| (key.clone(), answer))),
                Err(error) => first_error = first_error.or(Some(error)),
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

/// The state of [`TaskHandle::wait`] and [`TaskHandle::updates`]: listening, or polling
/// until the next listen.
struct Following<'a> {
    handle: &'a mut TaskHandle,
    first: bool,
    /// After the terminal snapshot or an error.
    done: bool,
    pushing: Option<Pushing>,
    listen_at: tokio::time::Instant,
}

impl<'a> Following<'a> {
    fn new(handle: &'a mut TaskHandle) -> Self {
        Self {
            handle,
            first: true,
            done: false,
            pushing: None,
            listen_at: tokio::time::Instant::now(),
        }
    }

    /// The current snapshot, then each distinct later one. After the terminal one or an
    /// error it is done, its listen stream closed.
    async fn next(&mut self) -> Result<DetailedTask, ClientError> {
        let next = self.changed().await;
        self.done = next
            .as_ref()
            .map_or(true, |snapshot| snapshot.status().is_terminal());
        if self.done
            && let Some(mut pushing) = self.pushing.take()
        {
            pushing.close().await;
        }
        next
    }

    /// The current snapshot the first time, then the next distinct one, listening or polling.
    async fn changed(&mut self) -> Result<DetailedTask, ClientError> {
        if std::mem::take(&mut self.first) {
            return Ok(self.handle.snapshot.clone());
        }
        loop {
            let previous = self.handle.snapshot.clone();
            if let Some(pushing) = self.pushing.as_mut() {
                let Some(snapshot) = pushing.next().await else {
                    // Of no use: poll, and listen again a while later.
                    self.pushing = None;
                    self.listen_at = tokio::time::Instant::now() + RELISTEN_AFTER;
                    continue;
                };
                self.handle.snapshot = snapshot;
                self.handle.answer_input().await?;
            } else if tokio::time::Instant::now() >= self.listen_at
                && self.handle.client.server_supports_tasks()
            {
                let first_within = self.handle.poll_interval() * 2 + FIRST_PUSH_MARGIN;
                self.pushing =
                    Pushing::open(&self.handle.client, self.handle.id(), first_within).await;
                if self.pushing.is_none() {
                    self.listen_at = tokio::time::Instant::now() + RELISTEN_AFTER;
                }
                continue;
            } else {
                tokio::time::sleep(self.handle.poll_interval()).await;
                self.handle.poll().await?;
            }
            if self.handle.snapshot != previous {
                return Ok(self.handle.snapshot.clone());
            }
        }
    }
}
