//! The task store: the durability contract every backend keeps.
//!
//! A [`TaskStore`] owns the state of every task: its status, message, timestamps, input
//! requests and answers, outcome and cancel intent. The runtime that executes tools holds no
//! task state a restart could lose; it drives the store through the operations below, and a
//! store shared by several processes (SQLite, Postgres) serves them all, because nothing in
//! this trait refers to a process (no join handles, no channels).
//!
//! # What every store keeps
//!
//! A task is created durably before it is visible; it goes `working ↔ input_required` and
//! then to exactly one terminal state (`completed`, `failed`, `cancelled`) that never
//! changes, and an operation that would leave it answers [`StoreError::Terminal`];
//! `lastUpdatedAt` only moves forward. An input key names one request for the whole life of
//! a task; answers are taken only for outstanding keys, and kept (with completed steps and
//! the answers a task was created with) so a restarted process can replay the work. A task
//! not terminal at `createdAt + ttlMs` becomes `failed` ("task expired"); a terminal one is
//! purged at that instant, an expired one after the store's retention, and then reads as
//! unknown. A retried create with the same owner, tool and idempotency key, within the first
//! task's TTL, answers [`Created::Existing`]. One state machine, shared by every store,
//! decides all of this.
//!
//! A store that several processes share (`PostgresStore`) also offers
//! [`TaskStore::cluster`]: leases with a fencing epoch, one claimer per lapsed lease, fenced
//! writes that an instance which lost its lease cannot make, and wake-ups that reach the
//! instance running a task.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use rmcp::model::{
    DetailedTask, InputRequests, InputResponses, JsonObject, Task, TaskPayload, TaskStatus,
};

use crate::clock::rfc3339;
use crate::trace::TraceContext;

pub mod admin;
mod cluster;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) mod codec;
mod error;
pub mod memory;
pub(crate) mod record;
pub(crate) mod row;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub(crate) mod status;

pub use admin::AdminStore;
pub(crate) use cluster::WakeupKind;
pub use cluster::{ClusterStore, Lease, Notice};
pub use error::{BackendError, ConfigError, StoreError};
pub use memory::MemoryStore;
pub use record::Transition;
pub use row::TaskOrigin;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;

/// What a store needs to create a task.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NewTask {
    /// The task id (a creation-time prefix and 128 random bits, so it cannot be guessed).
    pub id: Arc<str>,
    /// Who may read and steer the task: `tasks/get`, `tasks/update` and `tasks/cancel` of
    /// any other principal answer as if the task did not exist.
    // docs/protocol.md R49.
    pub owner: Arc<str>,
    /// The tool's wire name.
    pub tool: Arc<str>,
    /// The initial `statusMessage`.
    pub status_message: Option<String>,
    /// `ttlMs`; `None` is unlimited.
    pub ttl: Option<Duration>,
    /// `pollIntervalMs`.
    pub poll_interval: Option<Duration>,
    /// What the task is created with and keeps unchanged (tool version, arguments, the
    /// request's `_meta`, trace context): replay data, and what the operator's detail shows.
    pub origin: TaskOrigin,
    /// Who runs the work (set by the runtime); `None`: queued for any instance or worker to
    /// claim ([`ClusterStore::claim_queued`]). Single-process stores ignore it.
    pub(crate) runner: Option<Runner>,
    /// The most live tasks (`working`, `input_required`) the owner may have in the whole
    /// task space, counted by a cluster store in the create (set by the runtime in cluster
    /// mode): past it the create answers [`StoreError::OwnerQuota`]. Single-process stores
    /// ignore it (the runtime counts the owner's tasks in the process).
    pub(crate) owner_quota: Option<usize>,
    /// The client's idempotency key for this call: a retry within the first task's TTL
    /// answers that task ([`Created::Existing`]).
    pub idempotency_key: Option<Arc<str>>,
    /// The answers the call was given before its task existed (multi round-trip), by key:
    /// kept as replay data from the create on, their keys used, so a replay does not ask
    /// those questions again.
    pub answers: InputResponses,
}

/// The instance that runs a new task's work, and for how long its first lease lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Runner {
    /// The instance id.
    pub(crate) instance: Arc<str>,
    /// The length of the lease.
    pub(crate) lease: Duration,
}

impl NewTask {
    /// A new task record for `tool`, owned by `owner`.
    #[must_use]
    pub fn new(id: Arc<str>, owner: Arc<str>, tool: Arc<str>) -> Self {
        Self {
            id,
            owner,
            tool,
            status_message: None,
            ttl: None,
            poll_interval: None,
            origin: TaskOrigin::default(),
            runner: None,
            owner_quota: None,
            idempotency_key: None,
            answers: InputResponses::new(),
        }
    }

    /// Sets the creating call's trace context ([`TaskOrigin::trace_context`]).
    #[must_use]
    pub fn with_trace_context(mut self, trace: Option<TraceContext>) -> Self {
        self.origin.trace_context = trace;
        self
    }

    /// The answers the call was given before its task existed ([`NewTask::answers`]).
    #[must_use]
    pub fn with_answers(mut self, answers: InputResponses) -> Self {
        self.answers = answers;
        self
    }

    /// The owner may have at most `quota` live tasks in the task space
    /// ([`NewTask::owner_quota`]).
    #[must_use]
    pub(crate) fn with_owner_quota(mut self, quota: usize) -> Self {
        self.owner_quota = Some(quota);
        self
    }

    /// The creating instance runs the work: it holds the task's lease from the start, at
    /// epoch 1 ([`Lease::first`]). Without it a cluster store records the task as queued.
    #[must_use]
    pub(crate) fn with_runner(mut self, instance: Arc<str>, lease: Duration) -> Self {
        self.runner = Some(Runner { instance, lease });
        self
    }

    /// Sets the client's idempotency key: a retry with the same owner, tool and key within
    /// the first task's TTL answers [`Created::Existing`] instead of creating a second task.
    #[must_use]
    pub fn with_idempotency_key(mut self, key: Arc<str>) -> Self {
        self.idempotency_key = Some(key);
        self
    }

    /// Sets the version of the tool.
    #[must_use]
    pub fn with_tool_version(mut self, version: Arc<str>) -> Self {
        self.origin.tool_version = version;
        self
    }

    /// Sets the creating request's `_meta`.
    #[must_use]
    pub fn with_request_meta(mut self, meta: JsonObject) -> Self {
        self.origin.request_meta = meta;
        self
    }

    /// Sets the initial `statusMessage`.
    #[must_use]
    pub fn with_status_message(mut self, message: Option<String>) -> Self {
        self.status_message = message;
        self
    }

    /// Sets `ttlMs` (`None`: unlimited).
    #[must_use]
    pub fn with_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets `pollIntervalMs`.
    #[must_use]
    pub fn with_poll_interval(mut self, poll_interval: Duration) -> Self {
        self.poll_interval = Some(poll_interval);
        self
    }

    /// Sets the arguments.
    #[must_use]
    pub fn with_arguments(mut self, arguments: JsonObject) -> Self {
        self.origin.arguments = arguments;
        self
    }
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Outcome {
    /// `completed` with this `CallToolResult`, whether its `isError` is set or not.
    // docs/protocol.md R46.
    Completed(JsonObject),
    /// `failed` with this JSON-RPC error object.
    // docs/protocol.md R45.
    Failed(JsonObject),
    /// `cancelled`.
    Cancelled,
}

impl Outcome {
    /// The `statusMessage` a task gets when it ends with this outcome: a `failed` task's
    /// says why, as its error's message does; a `completed` or `cancelled` task keeps no
    /// progress text.
    #[must_use]
    pub fn status_message(&self) -> Option<String> {
        match self {
            Self::Failed(error) => Some(
                error
                    .get("message")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("the task failed")
                    .to_owned(),
            ),
            Self::Completed(_) | Self::Cancelled => None,
        }
    }

    /// The terminal status this outcome gives.
    #[must_use]
    pub const fn status(&self) -> TaskStatus {
        match self {
            Self::Completed(_) => TaskStatus::Completed,
            Self::Failed(_) => TaskStatus::Failed,
            Self::Cancelled => TaskStatus::Cancelled,
        }
    }
}

/// A completed unit of work of a running task, with its serialized result.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Step {
    /// The position of the step in the task's run: 1, 2, ...
    pub seq: u64,
    /// The step's name, as the tool gave it.
    pub name: String,
    /// The step's result, as JSON.
    pub value: serde_json::Value,
}

impl Step {
    /// Step number `seq`, named `name`, that returned `value`.
    #[must_use]
    pub fn new(seq: u64, name: impl Into<String>, value: serde_json::Value) -> Self {
        Self {
            seq,
            name: name.into(),
            value,
        }
    }
}

/// What a restarted process needs to decide about, and replay, a task that a previous
/// process left running.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Recovery {
    /// The id.
    pub id: Arc<str>,
    /// The owner.
    pub owner: Arc<str>,
    /// The tool's wire name.
    pub tool: Arc<str>,
    /// What the task was created with: tool version, arguments, the request's `_meta`,
    /// trace context.
    pub origin: TaskOrigin,
    /// Every answer delivered to an input request, by key.
    pub answers: InputResponses,
    /// The completed steps, in order.
    pub steps: Vec<Step>,
}

/// A task as the store holds it at one instant.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskSnapshot {
    /// The id.
    pub id: Arc<str>,
    /// The owner: the only principal that may read and steer the task.
    // docs/protocol.md R49.
    pub owner: Arc<str>,
    /// The tool's wire name.
    pub tool: Arc<str>,
    /// The status.
    pub status: TaskStatus,
    /// The `statusMessage`.
    pub status_message: Option<String>,
    /// `createdAt`, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// `lastUpdatedAt`, milliseconds since the Unix epoch.
    pub last_updated_at_ms: u64,
    /// `ttlMs`.
    pub ttl_ms: Option<u64>,
    /// `pollIntervalMs`.
    pub poll_interval_ms: Option<u64>,
    /// The outstanding input requests (non-empty exactly when `input_required`).
    pub input_requests: InputRequests,
    /// The outcome, once terminal.
    pub outcome: Option<Outcome>,
    /// Whether a `tasks/cancel` was received.
    pub cancel_requested: bool,
}

impl TaskSnapshot {
    /// The base `Task` fields, as `CreateTaskResult` carries them.
    #[must_use]
    pub fn to_task(&self) -> Task {
        let mut task = Task::new(
            self.id.as_ref(),
            self.status,
            rfc3339(self.created_at_ms),
            rfc3339(self.last_updated_at_ms),
        );
        task.status_message = self.status_message.clone();
        task.ttl_ms = self.ttl_ms;
        task.poll_interval_ms = self.poll_interval_ms;
        task
    }

    /// The `DetailedTask`, as `tasks/get` answers it, moving the payload out.
    // docs/protocol.md R14.
    #[must_use]
    pub fn into_detailed(self) -> DetailedTask {
        let task = self.to_task();
        let payload = match (self.outcome, self.status) {
            (Some(Outcome::Completed(result)), _) => TaskPayload::Completed { result },
            (Some(Outcome::Failed(error)), _) => TaskPayload::Failed { error },
            (Some(Outcome::Cancelled), _) => TaskPayload::Cancelled,
            (None, TaskStatus::InputRequired) => TaskPayload::InputRequired {
                input_requests: self.input_requests,
            },
            (None, _) => TaskPayload::Working,
        };
        DetailedTask::new(task, payload)
    }
}

/// What [`TaskStore::create`] did: created the task, or found the one an earlier call with
/// the same idempotency key created (a retry is a success, not an error).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Created {
    /// The task was created.
    New(TaskSnapshot),
    /// A task with the same owner, tool and idempotency key exists already, within its TTL:
    /// this is that task; nothing was created.
    Existing(TaskSnapshot),
}

impl Created {
    /// The task, new or existing.
    #[must_use]
    pub fn snapshot(&self) -> &TaskSnapshot {
        match self {
            Self::New(task) | Self::Existing(task) => task,
        }
    }

    /// The task, new or existing, moved out.
    #[must_use]
    pub fn into_snapshot(self) -> TaskSnapshot {
        match self {
            Self::New(task) | Self::Existing(task) => task,
        }
    }

    /// Whether the task was created by this call.
    #[must_use]
    pub fn is_new(&self) -> bool {
        matches!(self, Self::New(_))
    }
}

/// The durability contract; see the [module docs](self).
#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Creates a `working` task. Returns only once a [`TaskStore::get`] of the id succeeds.
    /// A retry of a create with an idempotency key, within the first task's TTL, creates
    /// nothing and answers that task ([`Created::Existing`]).
    async fn create(&self, task: NewTask) -> Result<Created, StoreError>;

    /// The task, or `None` when unknown or purged. Applies expiry that is due.
    async fn get(&self, id: &str) -> Result<Option<TaskSnapshot>, StoreError>;

    /// Applies a write of the task's running work ([`Transition`]). Under `fence`, a
    /// [`ClusterStore`] refuses it with [`StoreError::Fenced`], changing nothing, once the
    /// task's epoch is no longer the lease's (module docs of the state machine, invariant
    /// 12); a single-process store has one runner, so every fence holds there. A refused
    /// transition answers [`StoreError::Terminal`] or [`StoreError::KeyReused`].
    async fn apply(
        &self,
        id: &str,
        fence: Option<&Lease>,
        transition: Transition,
    ) -> Result<(), StoreError>;

    /// Takes the answers whose keys are outstanding, ignores the rest, keeps them for replay,
    /// and returns what it took. When no request stays outstanding the task is `working`
    /// again.
    async fn deliver_input(
        &self,
        id: &str,
        responses: InputResponses,
    ) -> Result<InputResponses, StoreError>;

    /// Records a cancel intent. Succeeds on terminal tasks too: `tasks/cancel` acknowledges
    /// every task the caller owns, and a task that already ended keeps its state.
    // docs/protocol.md R35, R37.
    async fn request_cancel(&self, id: &str) -> Result<(), StoreError>;

    /// Every task that is not terminal, with what a replay needs. A process calls it once,
    /// at start-up, before serving.
    async fn recoverable(&self) -> Result<Vec<Recovery>, StoreError>;

    /// Every answer stored for task `id`'s input requests, by key (the replay data); empty for a
    /// task that ended (its replay data is gone). A replay reads it when it asks again a
    /// question that was open when it started, so an answer stored after the replay data was
    /// read still reaches it. [`StoreError::NotFound`] for an unknown or purged id.
    ///
    /// The default scans [`TaskStore::recoverable`] for the task; stores override it with a
    /// direct read (a [`ClusterStore`] with its [`ClusterStore::answers`]).
    async fn stored_answers(&self, id: &str) -> Result<InputResponses, StoreError> {
        let recoverable = self.recoverable().await?;
        if let Some(task) = recoverable.into_iter().find(|task| &*task.id == id) {
            return Ok(task.answers);
        }
        match self.get(id).await? {
            Some(_) => Ok(InputResponses::new()),
            None => Err(StoreError::NotFound),
        }
    }

    /// Applies every expiry that is due: non-terminal tasks past their TTL become `failed`
    /// (their ids are returned, so their work can be stopped); purgeable ones are removed.
    async fn expire_due(&self) -> Result<Vec<Arc<str>>, StoreError>;

    /// The cluster operations of a store that several instances share; `None` (the default)
    /// for a single-process store.
    fn cluster(&self) -> Option<&dyn ClusterStore> {
        None
    }

    /// The operator operations of the store ([`admin`]): list, detail, purge. `None` (the
    /// default) for a store that does not offer them; every store of this crate does.
    fn admin(&self) -> Option<&dyn AdminStore> {
        None
    }
}
