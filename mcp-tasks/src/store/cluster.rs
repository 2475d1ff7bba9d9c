//! Several instances, one task space: leases with a fencing epoch, claims, fenced writes and
//! wake-ups ([`ClusterStore`]).

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use rmcp::model::{InputRequest, InputResponses};

use super::{NewTask, Outcome, Recovery, Step, StoreError};

/// The right of one instance to run one task's work, until the store's lease deadline; every
/// change of holder increments its epoch, and a write under an old epoch is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lease {
    /// The task.
    pub task_id: Arc<str>,
    /// The instance holding it.
    pub instance: Arc<str>,
    /// The fencing epoch: incremented on every change of holder.
    pub epoch: u64,
    /// How long the lease lasts from its last grant or renewal; renew well within it.
    pub length: Duration,
    /// This process's own deadline for the lease, on its monotonic clock: the instant the
    /// request that granted or last renewed it was sent, plus [`length`](Self::length). The
    /// store's deadline (on the database clock) is never earlier, since the store set it
    /// after the request left; work still running here near this instant stops (see
    /// `runtime/cluster.rs`, self-fencing). `None` until the runtime stamps it.
    pub(crate) deadline: Option<tokio::time::Instant>,
}

impl Lease {
    /// The lease a task created [`with_runner`](NewTask::with_runner) starts with: held by
    /// its runner at epoch 1. `None` when the task has no runner. Its local deadline counts
    /// from now: made right before the create is sent.
    #[must_use]
    pub(crate) fn first(task: &NewTask) -> Option<Self> {
        task.runner.as_ref().map(|runner| {
            Self {
                task_id: Arc::clone(&task.id),
                instance: Arc::clone(&runner.instance),
                epoch: 1,
                length: runner.lease,
                deadline: None,
            }
            .sent_at(tokio::time::Instant::now())
        })
    }

    /// A lease granted or renewed by the store.
    #[must_use]
    #[cfg(any(test, feature = "postgres"))]
    pub(crate) fn granted(
        task_id: Arc<str>,
        instance: Arc<str>,
        epoch: u64,
        length: Duration,
    ) -> Self {
        Self {
            task_id,
            instance,
            epoch,
            length,
            deadline: None,
        }
    }

    /// The lease with its local deadline counted from `sent`, the instant the request that
    /// granted or renewed it was sent.
    #[must_use]
    pub(crate) fn sent_at(mut self, sent: tokio::time::Instant) -> Self {
        self.deadline = Some(sent + self.length);
        self
    }
}

/// What woke a task up on another instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WakeupKind {
    /// Answers to its input requests were stored.
    Answers,
    /// A cancel intent was recorded.
    Cancel,
    /// The task was recorded with no runner: claim it. Tasks
    /// queued together may be announced by one wake-up naming one of them; claim with a
    /// limit above one.
    Queued,
    /// Wake-ups may have been missed (the store's listening connection was lost and is
    /// back): re-read every task running here, and claim. Its `task_id` is empty.
    Missed,
    /// What `tasks/get` answers for the task changed (its status, status message, input
    /// requests or outcome), for the instances whose clients follow it
    /// (`subscriptions/listen`); the instance running its work has nothing to do.
    Changed,
}

/// A change to a task that the instance running it (or a worker) must act on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Wakeup {
    /// The task.
    pub task_id: Arc<str>,
    /// What happened.
    pub kind: WakeupKind,
}

/// Leases, claims, fenced writes and wake-ups: what a runtime needs to share one task space
/// between several instances: leases with a fencing epoch, claims of lapsed and queued tasks
/// (each by exactly one instance), fenced writes and wake-ups.
#[async_trait]
pub trait ClusterStore: Send + Sync {
    /// Extends the lease by its length from now. [`StoreError::Fenced`] when it was lost.
    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError>;

    /// Claims up to `limit` live tasks whose lease lapsed, each for exactly one of the
    /// instances asking, at the next epoch, with what a replay needs.
    async fn claim_lapsed(
        &self,
        instance: &str,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<(Recovery, Lease)>, StoreError>;

    /// Claims up to `limit` tasks recorded with no runner (worker mode), oldest first, the
    /// same way.
    async fn claim_queued(
        &self,
        instance: &str,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<(Recovery, Lease)>, StoreError>;

    /// Gives up `lease` while its task is still live: the lease lapses at once (and the
    /// epoch moves on, so nothing more is written under it), and the task space is woken
    /// as for a queued task, so that an instance claims the task now, as a lapsed one
    /// ([`claim_lapsed`](Self::claim_lapsed)), rather than when the lease would have run
    /// out. What a draining instance does with the work it stops at the end of its grace
    /// period. [`StoreError::Fenced`] when the lease was lost already,
    /// [`StoreError::Terminal`] or [`StoreError::NotFound`] when the task ended.
    async fn release(&self, lease: &Lease) -> Result<(), StoreError>;

    /// [`TaskStore::set_status_message`](super::TaskStore::set_status_message) under `lease`.
    async fn set_status_message_fenced(
        &self,
        lease: &Lease,
        message: Option<String>,
    ) -> Result<(), StoreError>;

    /// [`TaskStore::request_input`](super::TaskStore::request_input) under `lease`.
    async fn request_input_fenced(
        &self,
        lease: &Lease,
        key: &str,
        request: InputRequest,
    ) -> Result<(), StoreError>;

    /// [`TaskStore::save_step`](super::TaskStore::save_step) under `lease`.
    async fn save_step_fenced(&self, lease: &Lease, step: Step) -> Result<(), StoreError>;

    /// [`TaskStore::finish`](super::TaskStore::finish) under `lease`; the lease ends with the task.
    async fn finish_fenced(&self, lease: &Lease, outcome: Outcome) -> Result<(), StoreError>;

    /// Every answer stored for task `id`'s input requests, by key: what the instance running
    /// it reads on a [`WakeupKind::Answers`] wake-up. [`StoreError::NotFound`] for an
    /// unknown or purged id.
    async fn answers(&self, id: &str) -> Result<InputResponses, StoreError>;

    /// How many live tasks are queued with no runner, waiting for a claim (the
    /// `mcp_tasks_queue_depth` gauge); `None` (the default) when the store does not count
    /// them.
    async fn queue_depth(&self) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }

    /// The wake-ups of the task space: answers and cancel intents of every task, and queued
    /// tasks (a runtime keeps the ones of the tasks it runs). The first call starts the
    /// listener.
    fn wakeups(&self) -> tokio::sync::broadcast::Receiver<Wakeup>;
}
