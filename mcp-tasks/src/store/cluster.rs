//! Several instances, one task space ([`ClusterStore`]).

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use rmcp::model::InputResponses;

use super::{NewTask, Recovery, StoreError};
use crate::rate::Rate;

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
            let (id, instance) = (Arc::clone(&task.id), Arc::clone(&runner.instance));
            Self::granted(id, instance, 1, runner.lease).sent_at(tokio::time::Instant::now())
        })
    }

    /// A lease granted or renewed by the store.
    #[must_use]
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

/// The order in which queued tasks are claimed ([`Claim::order`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClaimOrder {
    /// Owners take turns (the default): each claim gives the next owners in turn (in owner
    /// order, after the one the claiming store served last) their oldest queued task, so an
    /// owner who queued thousands of tasks does not make the others wait behind them. An
    /// owner with a weight of `w` ([`Claim::weights`]) takes up to `w` tasks a turn. Within
    /// an owner, oldest first. When the claim has more slots than owners are waiting, the
    /// owners take further turns, then the oldest tasks fill what is left.
    #[default]
    OwnersTakeTurns,
    /// Oldest first, whoever queued it (the order before owners took turns).
    OldestFirst,
}

/// What a [`ClusterStore::claim`] takes: up to `limit` tasks of one kind, for `instance`,
/// each under a lease of length `lease`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Claim<'a> {
    /// Tasks recorded with no runner; otherwise live tasks whose lease lapsed.
    pub queued: bool,
    /// The instance claiming.
    pub instance: &'a str,
    /// The length of the leases granted.
    pub lease: Duration,
    /// The most tasks taken.
    pub limit: usize,
    /// The order of a claim of queued tasks (lapsed tasks are taken by lease deadline).
    pub order: ClaimOrder,
    /// The owners with a weight other than 1 (at least 1 each), for
    /// [`ClaimOrder::OwnersTakeTurns`].
    pub weights: &'a [(Arc<str>, u32)],
    /// The tools with a concurrency limit, `(tool, limit)` sorted by tool: a claim of queued
    /// tasks takes a task of one only while fewer than `limit` of its tasks hold a runner
    /// (running, or parked in their wait) across every instance.
    pub limits: &'a [(Arc<str>, u32)],
    /// The tools with a rate limit, `(tool, rate)` sorted by tool: a claim of queued tasks
    /// takes a task of one only while fewer than [`Rate::count`] of its tasks started (were
    /// claimed from the queue) within the last [`Rate::per`], across every instance, and
    /// logs each start it makes.
    pub rates: &'a [(Arc<str>, Rate)],
    /// The tools with a per-key concurrency limit, `(tool, limit)` sorted by tool: a claim
    /// of queued tasks takes a task of one only while fewer than `limit` of the tool's tasks
    /// with the same [`NewTask::limit_key`] hold a runner across every instance.
    pub key_limits: &'a [(Arc<str>, u32)],
    /// The tools with a per-key rate limit, `(tool, rate)` sorted by tool: a claim of
    /// queued tasks takes a task of one only while fewer than [`Rate::count`] of the tool's
    /// tasks with the same [`NewTask::limit_key`] started within the last [`Rate::per`],
    /// across every instance, and logs each start it makes by key.
    pub key_rates: &'a [(Arc<str>, Rate)],
    /// Claims by priority ([`NewTask::priority`]), a task gaining one level for each of
    /// this long it waited; `None`: priorities are not read.
    pub priority_aging: Option<Duration>,
    /// The tools the claiming instance runs, each at its version: a claim (queued or
    /// lapsed) takes only tasks of one of them recorded by that version
    /// ([`TaskOrigin::tool_version`](super::TaskOrigin::tool_version)); the others wait for
    /// an instance that has their tool at their version. `None`: every task.
    pub versions: Option<&'a ToolVersions>,
    /// With [`Claim::versions`]: how long a task of another version whose cancel was asked
    /// for is left to an instance of its version (whose replay runs the tool's own handling
    /// of the cancel), from its last change or its lease's end; after that this claim takes
    /// it, to end it `cancelled` without running its code. Default [`DEFAULT_CANCEL_GRACE`].
    pub cancel_grace: Duration,
}

/// The default [`Claim::cancel_grace`]: three default claim intervals
/// ([`DEFAULT_CLAIM_INTERVAL`](crate::cluster::DEFAULT_CLAIM_INTERVAL)), as a
/// [`ClusterConfig`](crate::ClusterConfig) without a grace of its own waits (written here as
/// a number, not derived, so the store does not use the runtime's configuration;
/// `tests/retry.rs` holds the two together).
pub const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(6);

/// The tools an instance runs, each with its version ([`Claim::versions`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolVersions {
    tools: Vec<String>,
    versions: Vec<String>,
}

impl ToolVersions {
    /// The set of `(tool, version)` pairs; a tool named twice keeps its first version.
    pub fn new<'v>(pairs: impl IntoIterator<Item = (&'v str, &'v str)>) -> Self {
        let mut set = Self::default();
        for (tool, version) in pairs {
            if !set.tools.iter().any(|t| t == tool) {
                set.tools.push(tool.to_owned());
                set.versions.push(version.to_owned());
            }
        }
        set
    }

    /// The version of `tool` this instance runs, if it runs the tool.
    #[must_use]
    pub fn version_of(&self, tool: &str) -> Option<&str> {
        let at = self.tools.iter().position(|t| t == tool)?;
        Some(&self.versions[at])
    }

    /// Whether a task of `tool` recorded by `version` runs here.
    #[must_use]
    pub fn runs(&self, tool: &str, version: &str) -> bool {
        self.version_of(tool) == Some(version)
    }

    /// The tools, and beside them (same positions) their versions.
    #[must_use]
    pub fn columns(&self) -> (&[String], &[String]) {
        (&self.tools, &self.versions)
    }
}

impl<'a> Claim<'a> {
    /// Live tasks whose lease lapsed (their instance died or stalled).
    #[must_use]
    pub fn lapsed(instance: &'a str, lease: Duration, limit: usize) -> Self {
        Self {
            queued: false,
            instance,
            lease,
            limit,
            order: ClaimOrder::OldestFirst,
            weights: &[],
            limits: &[],
            rates: &[],
            key_limits: &[],
            key_rates: &[],
            priority_aging: None,
            versions: None,
            cancel_grace: DEFAULT_CANCEL_GRACE,
        }
    }

    /// Tasks recorded with no runner (worker mode), owners taking turns
    /// ([`ClaimOrder::OwnersTakeTurns`]; see [`Claim::with_order`]).
    #[must_use]
    pub fn queued(instance: &'a str, lease: Duration, limit: usize) -> Self {
        Self {
            queued: true,
            order: ClaimOrder::OwnersTakeTurns,
            ..Self::lapsed(instance, lease, limit)
        }
    }

    /// The claim with queued tasks taken in `order`, owners weighted by `weights`.
    #[must_use]
    pub fn with_order(mut self, order: ClaimOrder, weights: &'a [(Arc<str>, u32)]) -> Self {
        self.order = order;
        self.weights = weights;
        self
    }

    /// The claim taking only the tasks of the tools in `versions`, each recorded by the
    /// version given ([`Claim::versions`]).
    #[must_use]
    pub fn with_versions(mut self, versions: &'a ToolVersions) -> Self {
        self.versions = Some(versions);
        self
    }

    /// The claim leaving a cancelled task of another version to an instance of its version
    /// for `grace` ([`Claim::cancel_grace`]).
    #[must_use]
    pub fn with_cancel_grace(mut self, grace: Duration) -> Self {
        self.cancel_grace = grace;
        self
    }

    /// The claim taking the highest priorities first, a task gaining one level for each
    /// `aging` it waited ([`Claim::priority_aging`]).
    #[must_use]
    pub fn with_priorities(mut self, aging: Option<Duration>) -> Self {
        self.priority_aging = aging;
        self
    }

    /// The claim keeping the tools' concurrency `limits` (`(tool, limit)`, sorted by tool).
    #[must_use]
    pub fn with_limits(mut self, limits: &'a [(Arc<str>, u32)]) -> Self {
        self.limits = limits;
        self
    }

    /// The claim keeping the tools' rate limits (`(tool, rate)`, sorted by tool).
    #[must_use]
    pub fn with_rates(mut self, rates: &'a [(Arc<str>, Rate)]) -> Self {
        self.rates = rates;
        self
    }

    /// The claim keeping the tools' per-key concurrency limits (`(tool, limit)`, sorted by
    /// tool).
    #[must_use]
    pub fn with_key_limits(mut self, limits: &'a [(Arc<str>, u32)]) -> Self {
        self.key_limits = limits;
        self
    }

    /// The claim keeping the tools' per-key rate limits (`(tool, rate)`, sorted by tool).
    #[must_use]
    pub fn with_key_rates(mut self, rates: &'a [(Arc<str>, Rate)]) -> Self {
        self.key_rates = rates;
        self
    }
}

/// What one [`ClusterStore::claim`] took, and when a claim again can take what a rate held
/// back.
#[derive(Debug, Default)]
pub struct Claimed {
    /// The tasks claimed, each with its lease (at most [`Claim::limit`]).
    pub tasks: Vec<(Recovery, Lease)>,
    /// How long until a rate this claim found used up, or used up itself, has room again:
    /// the soonest of a tool's rate ([`Claim::with_rates`]) and of the keys of a per-key
    /// rate ([`Claim::with_key_rates`]) that have tasks queued. The runtime claims again then,
    /// not at its next claim interval. `None` when no rate was used up (and always for a
    /// claim of lapsed tasks).
    pub rate_room_in: Option<Duration>,
}

impl Claimed {
    /// A claim that took `tasks` and found no rate used up.
    #[must_use]
    pub fn of(tasks: Vec<(Recovery, Lease)>) -> Self {
        Self {
            tasks,
            rate_room_in: None,
        }
    }
}

/// The queued tasks of one tool, or of one tool and owner
/// ([`ClusterStore::queue_depth`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueDepth {
    /// The tool.
    pub tool: String,
    /// The owner, when counted by owner.
    pub owner: Option<String>,
    /// How many of its live tasks wait for a claim.
    pub tasks: u64,
}

/// A change in the task space, as the runtime's one change feed carries it (in cluster mode,
/// from [`ClusterStore::wakeups`]). A hint: its reader re-reads the task.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// Answers to the task's input requests were stored.
    Answers {
        /// The task.
        task_id: Arc<str>,
        /// The task's answer sequence after this delivery.
        seq: u64,
    },
    /// The task's work must stop: a cancel intent was recorded for it, or someone other than
    /// its runner ended it (an operator's fail, its TTL).
    Cancel(Arc<str>),
    /// The task was recorded with no runner (or its lease released): claim, with a limit
    /// above one (tasks queued together are announced by one notice naming one of them).
    Queued(Arc<str>),
    /// What `tasks/get` answers for the task changed (for the listen streams that follow it).
    Changed(Arc<str>),
    /// Notices may have been missed (the store's listening connection was lost and is
    /// back): every task followed or running here is read again, and claims run.
    Missed,
}

/// What a runtime needs to share one task space between several instances: leases with a
/// fencing epoch, claims of lapsed and queued tasks (each by exactly one instance) and
/// wake-ups. Fenced writes are [`TaskStore::apply`](super::TaskStore::apply) under a lease.
#[async_trait]
pub trait ClusterStore: Send + Sync {
    /// Extends the lease by its length from now. [`StoreError::Fenced`] when it was lost.
    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError>;

    /// Claims up to [`Claim::limit`] tasks of its kind, each for exactly one of the instances
    /// asking, at the next epoch, with what a replay needs: live tasks whose lease lapsed
    /// ([`Claim::lapsed`]), or tasks recorded with no runner (worker mode), in the claim's
    /// [`order`](Claim::order) ([`Claim::queued`]); and, when a tool's or a key's rate held
    /// tasks back, when it has room again ([`Claimed::rate_room_in`]).
    async fn claim(&self, claim: Claim<'_>) -> Result<Claimed, StoreError>;

    /// Gives up `lease` while its task is still live: the lease lapses at once (and the
    /// epoch moves on, so nothing more is written under it), and the task space is woken
    /// as for a queued task, so that an instance claims the task now, as a lapsed one
    /// ([`Claim::lapsed`]), rather than when the lease would have run
    /// out. What a draining instance does with the work it stops at the end of its grace
    /// period. [`StoreError::Fenced`] when the lease was lost already,
    /// [`StoreError::Terminal`] or [`StoreError::NotFound`] when the task ended.
    async fn release(&self, lease: &Lease) -> Result<(), StoreError>;

    /// Every answer stored for task `id`'s input requests, by key: what the instance running
    /// it reads on a [`Notice::Answers`]. [`StoreError::NotFound`] for an
    /// unknown or purged id.
    async fn answers(&self, id: &str) -> Result<InputResponses, StoreError>;

    /// Takes one start of the step limiter `limiter` under `rate`, across every instance:
    /// `None` when taken (the start is logged), else how long until the window has room
    /// (nothing is logged; take again then). Starts are counted by the store's clock, under
    /// a lock per limiter, so two instances never both take the last place.
    async fn take_rate(&self, limiter: &str, rate: Rate) -> Result<Option<Duration>, StoreError>;

    /// How many live tasks are queued with no runner, waiting for a claim (the
    /// `mcp_tasks_queue_depth` gauge): by tool, and by owner too when `by_owner`; `None`
    /// (the default) when the store does not count them.
    async fn queue_depth(&self, by_owner: bool) -> Result<Option<Vec<QueueDepth>>, StoreError> {
        let _ = by_owner;
        Ok(None)
    }

    /// How many live tasks wait for a claim (queued with no runner, or their lease lapsed,
    /// not parked), by tool and tool version: `(tool, version, tasks)`; the runtime counts
    /// those of the versions it does not run (`mcp_tasks_tasks_waiting_for_version`). `None`
    /// (the default) when the store does not count them.
    async fn unclaimed_versions(&self) -> Result<Option<Vec<(String, String, u64)>>, StoreError> {
        Ok(None)
    }

    /// The notices of the task space, every instance's writes included: answers, cancel
    /// intents and changes of every task, and queued tasks (a runtime keeps the ones it acts
    /// on). The first call starts the listener.
    fn wakeups(&self) -> tokio::sync::broadcast::Receiver<Notice>;
}
