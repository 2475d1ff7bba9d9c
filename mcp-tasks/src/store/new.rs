//! What a store needs to create a task ([`NewTask`]), built by the runtime for each call.

use std::{sync::Arc, time::Duration};

use rmcp::model::{InputResponses, JsonObject};

use super::row::{AskedAtStep, TaskOrigin};
use crate::trace::TraceContext;

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
    /// claim ([`Claim::queued`](super::Claim::queued)). Single-process stores ignore it.
    pub(crate) runner: Option<Runner>,
    /// The most live tasks (`working`, `input_required`) the owner may have in the whole
    /// task space, counted by a cluster store in the create (set by the runtime in cluster
    /// mode): past it the create answers [`StoreError::OwnerQuota`]. Single-process stores
    /// ignore it (the runtime counts the owner's tasks in the process).
    pub(crate) owner_quota: Option<usize>,
    /// The most finished tasks the owner keeps in the store (set by the runtime from
    /// [`Limits::max_finished_tasks_per_owner`](crate::Limits::max_finished_tasks_per_owner)):
    /// at its next [`TaskStore::expire_due`](super::TaskStore::expire_due) sweep the store
    /// removes the owner's oldest finished tasks past it. `None`: no bound.
    pub max_finished_per_owner: Option<usize>,
    /// The client's idempotency key for this call: a retry within the first task's TTL
    /// answers that task ([`Created::Existing`](super::Created::Existing)).
    pub idempotency_key: Option<Arc<str>>,
    /// The answers the call was given before its task existed (multi round-trip), by key:
    /// kept as replay data from the create on, their keys used, so a replay does not ask
    /// those questions again.
    pub answers: InputResponses,
    /// When each of [`NewTask::answers`]' questions was asked, when they come from an earlier
    /// task (an operator's retry or fork): how many steps its run had begun then; a key not
    /// listed was asked before the first step. Empty for a call's own answers.
    pub asked_at_step: AskedAtStep,
    /// The priority of a queued task (default 0; higher is claimed first, see
    /// [`ClusterConfig::with_priorities`](crate::ClusterConfig::with_priorities)). Only a
    /// cluster store keeps it: single-process stores have no queue.
    pub priority: i16,
    /// The key the tool's per-key concurrency limit counts this task under
    /// ([`ToolDefinition::with_key_concurrency`](crate::ToolDefinition::with_key_concurrency));
    /// `None` when the tool has none. Only a cluster store keeps it, for its claims.
    pub limit_key: Option<Arc<str>>,
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
            max_finished_per_owner: None,
            idempotency_key: None,
            answers: InputResponses::new(),
            asked_at_step: AskedAtStep::new(),
            priority: 0,
            limit_key: None,
        }
    }

    /// Sets the key of the tool's per-key concurrency limit ([`NewTask::limit_key`]).
    #[must_use]
    pub fn with_limit_key(mut self, key: Arc<str>) -> Self {
        self.limit_key = Some(key);
        self
    }

    /// Sets the priority of the task while it is queued ([`NewTask::priority`]).
    #[must_use]
    pub fn with_priority(mut self, priority: i16) -> Self {
        self.priority = priority;
        self
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

    /// When each answer's question was asked ([`NewTask::asked_at_step`]).
    #[must_use]
    pub fn with_asked_at_step(mut self, asked_at_step: AskedAtStep) -> Self {
        self.asked_at_step = asked_at_step;
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

    /// The owner keeps at most `tasks` finished tasks in the store
    /// ([`NewTask::max_finished_per_owner`]).
    #[must_use]
    pub fn with_max_finished_per_owner(mut self, tasks: usize) -> Self {
        self.max_finished_per_owner = Some(tasks);
        self
    }

    /// Sets the client's idempotency key: a retry with the same owner, tool and key within
    /// the first task's TTL answers [`Created::Existing`](super::Created::Existing) instead of creating a second task.
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
