//! How an instance shares a task space with others ([`ClusterConfig`]) and its defaults:
//! plain settings, read by the runtime's [placement](super::super::placement) and the
//! cluster loops (`runtime/cluster.rs`).

use std::{sync::Arc, time::Duration};

use crate::store::ClaimOrder;

/// Default lease length: how long a task whose instance died waits before another instance
/// takes it over.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// Default interval between two renewals of the leases an instance holds (a third of the
/// lease).
pub const DEFAULT_RENEWAL: Duration = Duration::from_secs(10);
/// Default interval between two claims of lapsed (and queued) tasks.
pub const DEFAULT_CLAIM_INTERVAL: Duration = Duration::from_secs(2);
/// Default interval between two re-reads of the tasks that run here, which cover a lost
/// wake-up.
pub const DEFAULT_REREAD_INTERVAL: Duration = Duration::from_secs(2);

/// How an instance shares a task space with others, when its store is a
/// [`ClusterStore`](crate::store::ClusterStore) (`PostgresStore`); ignored with a
/// single-process store.
///
/// | setting | default |
/// | --- | --- |
/// | [`with_lease`](Self::with_lease) | [`DEFAULT_LEASE`] (30 s) |
/// | [`with_renewal`](Self::with_renewal) | [`DEFAULT_RENEWAL`] (10 s) |
/// | [`with_claim_interval`](Self::with_claim_interval) | [`DEFAULT_CLAIM_INTERVAL`] (2 s) |
/// | [`with_reread_interval`](Self::with_reread_interval) | [`DEFAULT_REREAD_INTERVAL`] (2 s) |
/// | [`with_fence_margin`](Self::with_fence_margin) | a fifth of the lease (6 s) |
/// | [`with_cancel_grace`](Self::with_cancel_grace) | three claim intervals (6 s) |
/// | [`with_queued_calls`](Self::with_queued_calls) | `false`: a call's work runs on the instance that received it |
/// | [`with_execution`](Self::with_execution) | `true`: the instance runs work (takes over lapsed tasks, claims queued ones) |
/// | [`with_claim_order`](Self::with_claim_order) | [`ClaimOrder::OwnersTakeTurns`]: owners share the free slots |
/// | [`with_owner_weight`](Self::with_owner_weight) | every owner 1 |
/// | [`with_priorities`](Self::with_priorities) | off: queued tasks' priorities are not read |
/// | [`with_owner_buckets`](Self::with_owner_buckets) | every owner in the bucket [`DEFAULT_OWNER_BUCKET`] (`all`) |
///
/// ```
/// use std::time::Duration;
/// use mcp_tasks::ClusterConfig;
///
/// // A front that only records tasks; workers run them.
/// let front = ClusterConfig::default()
///     .with_queued_calls(true)
///     .with_execution(false);
/// // Faster takeover: a dead instance's tasks move after about 5 s.
/// let quick = ClusterConfig::default()
///     .with_lease(Duration::from_secs(5))
///     .with_renewal(Duration::from_millis(1500));
/// assert!(quick.lease() > quick.renewal());
/// # let _ = front;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct ClusterConfig {
    pub(crate) lease: Duration,
    pub(crate) renewal: Duration,
    pub(crate) claim_interval: Duration,
    pub(crate) reread_interval: Duration,
    pub(crate) fence_margin: Option<Duration>,
    pub(crate) cancel_grace: Option<Duration>,
    pub(crate) queued_calls: bool,
    pub(crate) execution: bool,
    pub(crate) claim_order: ClaimOrder,
    /// The owners whose weight is not 1, sorted by owner.
    pub(crate) weights: Vec<(Arc<str>, u32)>,
    /// Claims by priority, and how long a task waits to gain one level.
    pub(crate) priority_aging: Option<Duration>,
    /// How the queue metrics group owners.
    pub(crate) owner_buckets: OwnerBuckets,
}

/// The owner bucket of every owner when [`ClusterConfig::with_owner_buckets`] is not set.
pub const DEFAULT_OWNER_BUCKET: &str = "all";

/// An owner's bucket in the queue metrics.
type Bucket = dyn Fn(&str) -> String + Send + Sync;

/// How the queue metrics group owners ([`ClusterConfig::with_owner_buckets`]): equal when
/// both are the default, or the same function.
#[derive(Clone, Default)]
pub(crate) struct OwnerBuckets(Option<Arc<Bucket>>);

impl OwnerBuckets {
    /// Whether owners are grouped (else every owner is in [`DEFAULT_OWNER_BUCKET`]).
    pub(crate) fn grouped(&self) -> bool {
        self.0.is_some()
    }

    /// The bucket of `owner`.
    pub(crate) fn of(&self, owner: &str) -> std::borrow::Cow<'static, str> {
        match &self.0 {
            Some(bucket) => bucket(owner).into(),
            None => DEFAULT_OWNER_BUCKET.into(),
        }
    }
}

impl std::fmt::Debug for OwnerBuckets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.grouped() {
            "OwnerBuckets(fn)"
        } else {
            "OwnerBuckets(all)"
        })
    }
}

impl PartialEq for OwnerBuckets {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for OwnerBuckets {}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            lease: DEFAULT_LEASE,
            renewal: DEFAULT_RENEWAL,
            claim_interval: DEFAULT_CLAIM_INTERVAL,
            reread_interval: DEFAULT_REREAD_INTERVAL,
            fence_margin: None,
            cancel_grace: None,
            queued_calls: false,
            execution: true,
            claim_order: ClaimOrder::OwnersTakeTurns,
            weights: Vec::new(),
            priority_aging: None,
            owner_buckets: OwnerBuckets::default(),
        }
    }
}

impl ClusterConfig {
    /// Sets the lease length (default [`DEFAULT_LEASE`]): a task whose instance died or
    /// stalled is taken over about this long after its last renewal. At least 1 ms.
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(1));
        self
    }

    /// Sets how often the leases are renewed (default [`DEFAULT_RENEWAL`]); keep it well
    /// within the lease (a third is usual). At least 1 ms.
    pub fn with_renewal(mut self, renewal: Duration) -> Self {
        self.renewal = renewal.max(Duration::from_millis(1));
        self
    }

    /// Sets how often the instance claims lapsed and queued tasks when nothing started a
    /// claim sooner (a task queued, a parked task answered, a slot of `max_running` freed, a
    /// rate that held tasks back having room again) (default [`DEFAULT_CLAIM_INTERVAL`]).
    /// At least 1 ms.
    pub fn with_claim_interval(mut self, interval: Duration) -> Self {
        self.claim_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// Sets how often the instance re-reads the tasks whose work runs here, for a cancel
    /// intent or answers whose wake-up was lost (default [`DEFAULT_REREAD_INTERVAL`]). At
    /// least 1 ms.
    pub fn with_reread_interval(mut self, interval: Duration) -> Self {
        self.reread_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// Sets how long before a lease's local deadline work whose lease could not be renewed
    /// stops here (default: a fifth of the lease, 6 s of the default 30 s). The work is
    /// cancelled as a `tasks/cancel` cancels it, and writes nothing more; half the margin
    /// before the deadline, work still running is dropped (the step in flight ends there,
    /// and runs again from its start on the instance that takes the task over), all before
    /// any other instance can claim the task. Give it twice the time the tools' code needs
    /// to notice a cancellation and end on its own. Kept below the lease.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_tasks::ClusterConfig;
    ///
    /// let config = ClusterConfig::default().with_lease(Duration::from_secs(10));
    /// assert_eq!(config.fence_margin(), Duration::from_secs(2));
    /// let config = config.with_fence_margin(Duration::from_secs(3));
    /// assert_eq!(config.fence_margin(), Duration::from_secs(3));
    /// ```
    pub fn with_fence_margin(mut self, margin: Duration) -> Self {
        self.fence_margin = Some(margin);
        self
    }

    /// Sets how long a task of another version of a tool, whose cancel was asked for, is
    /// left to an instance that runs its version (default: three claim intervals). That
    /// instance's replay runs the tool's own handling of the cancel (the code after
    /// `ctx.cancelled()`); after the grace, this instance ends the task `cancelled` without
    /// running any of its code, so a cancel never waits for a version no instance runs.
    /// Give it more than the claim interval of the instances of the other versions.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_tasks::ClusterConfig;
    ///
    /// let config = ClusterConfig::default().with_claim_interval(Duration::from_secs(5));
    /// assert_eq!(config.cancel_grace(), Duration::from_secs(15));
    /// let config = config.with_cancel_grace(Duration::from_secs(60));
    /// assert_eq!(config.cancel_grace(), Duration::from_secs(60));
    /// ```
    pub fn with_cancel_grace(mut self, grace: Duration) -> Self {
        self.cancel_grace = Some(grace);
        self
    }

    /// With `true`, a `tools/call` that runs as a task only records the task, queued, and
    /// starts no work here: any executing instance or [`Worker`](crate::Worker) claims it
    /// and runs it under a lease (default `false`: the receiving instance runs it).
    ///
    /// Questions a tool asks before its task exists (`before_task`, answered inline by
    /// multi round-trip requests) cannot be asked by a front that does not run the work:
    /// with queued calls they are asked through the task (`input_required`, answered with
    /// `tasks/update`), like every other question. The inline budget of `optional` tools
    /// does not apply either: a declaring call always gets a task.
    pub fn with_queued_calls(mut self, queued: bool) -> Self {
        self.queued_calls = queued;
        self
    }

    /// With `false`, this instance runs no work of other instances' calls: it neither takes
    /// over lapsed tasks nor claims queued ones (a pure front; default `true`).
    pub fn with_execution(mut self, execution: bool) -> Self {
        self.execution = execution;
        self
    }

    /// Sets the order in which this instance claims queued tasks (default
    /// [`ClaimOrder::OwnersTakeTurns`]: owners share the free slots, so one caller's
    /// thousands of queued tasks do not hold back everyone else's).
    /// [`ClaimOrder::OldestFirst`] ignores owners. Give every instance of a cluster the same
    /// order.
    pub fn with_claim_order(mut self, order: ClaimOrder) -> Self {
        self.claim_order = order;
        self
    }

    /// Gives `owner` a weight (default 1 for every owner; at least 1): when owners take
    /// turns at the free slots, this owner takes up to `weight` tasks a turn. Give every
    /// instance of a cluster the same weights.
    ///
    /// ```
    /// use mcp_tasks::ClusterConfig;
    ///
    /// // The interactive front end's owner gets four slots for every one of a batch owner.
    /// let config = ClusterConfig::default().with_owner_weight("web-ui", 4);
    /// assert_eq!(config.owner_weight("web-ui"), 4);
    /// assert_eq!(config.owner_weight("nightly-batch"), 1);
    /// ```
    pub fn with_owner_weight(mut self, owner: impl Into<Arc<str>>, weight: u32) -> Self {
        let owner = owner.into();
        let weight = weight.max(1);
        match self.weights.binary_search_by(|(o, _)| o.cmp(&owner)) {
            Ok(at) => self.weights[at].1 = weight,
            Err(at) => self.weights.insert(at, (owner, weight)),
        }
        self.weights.retain(|(_, w)| *w != 1);
        self
    }

    /// Claims queued tasks by priority (set on each call by
    /// [`EngineBuilder::with_priority`](crate::EngineBuilder::with_priority)): the tasks of
    /// the highest priority waiting first, in the claim order within a priority. No task
    /// starves: a task gains one level of priority for every `aging` it has waited, so a
    /// task of priority 0 goes before new tasks of priority 5 once it has waited five times
    /// `aging`. At least 1 ms. Give every instance and worker the same setting.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_tasks::ClusterConfig;
    ///
    /// let config = ClusterConfig::default().with_priorities(Duration::from_secs(30));
    /// assert_eq!(config.priority_aging(), Some(Duration::from_secs(30)));
    /// ```
    pub fn with_priorities(mut self, aging: Duration) -> Self {
        self.priority_aging = Some(aging.max(Duration::from_millis(1)));
        self
    }

    /// Groups owners in the queue metrics (`mcp_tasks_queue_depth`,
    /// `mcp_tasks_claim_lag_seconds`, label `owner_bucket`): `bucket` maps an owner to a few
    /// names, e.g. the owner's plan or tenant tier. Keep the names few: each is a series of
    /// every tool, and an owner id as a label would be one per caller. Default: every owner in
    /// [`DEFAULT_OWNER_BUCKET`]. With buckets, the queue depth is counted by tool and owner
    /// (one row per owner with queued tasks, each sample), without them by tool.
    ///
    /// ```
    /// use mcp_tasks::ClusterConfig;
    ///
    /// let config = ClusterConfig::default().with_owner_buckets(|owner: &str| {
    ///     if owner.starts_with("trial-") { "trial" } else { "paid" }.to_owned()
    /// });
    /// assert_eq!(config.owner_bucket("trial-42"), "trial");
    /// assert_eq!(ClusterConfig::default().owner_bucket("trial-42"), "all");
    /// ```
    pub fn with_owner_buckets(
        mut self,
        bucket: impl Fn(&str) -> String + Send + Sync + 'static,
    ) -> Self {
        self.owner_buckets = OwnerBuckets(Some(Arc::new(bucket)));
        self
    }

    /// The owner bucket of `owner` in the queue metrics (see
    /// [`with_owner_buckets`](Self::with_owner_buckets)).
    #[must_use]
    pub fn owner_bucket(&self, owner: &str) -> String {
        self.owner_buckets.of(owner).into_owned()
    }

    /// How long a queued task waits to gain one level of priority; `None`: claims do not
    /// read priorities (see [`with_priorities`](Self::with_priorities)).
    #[must_use]
    pub fn priority_aging(&self) -> Option<Duration> {
        self.priority_aging
    }

    /// The weight of `owner` (see [`with_owner_weight`](Self::with_owner_weight)).
    #[must_use]
    pub fn owner_weight(&self, owner: &str) -> u32 {
        self.weights
            .binary_search_by(|(o, _)| (**o).cmp(owner))
            .map_or(1, |at| self.weights[at].1)
    }

    /// The order of claims of queued tasks.
    #[must_use]
    pub fn claim_order(&self) -> ClaimOrder {
        self.claim_order
    }

    /// The lease length.
    #[must_use]
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The renewal interval.
    #[must_use]
    pub fn renewal(&self) -> Duration {
        self.renewal
    }

    /// The claim interval.
    #[must_use]
    pub fn claim_interval(&self) -> Duration {
        self.claim_interval
    }

    /// The re-read interval.
    #[must_use]
    pub fn reread_interval(&self) -> Duration {
        self.reread_interval
    }

    /// How long a cancelled task of another version is left to an instance of its version
    /// (see [`with_cancel_grace`](Self::with_cancel_grace)).
    #[must_use]
    pub fn cancel_grace(&self) -> Duration {
        self.cancel_grace.unwrap_or(self.claim_interval * 3)
    }

    /// How long before a lease's local deadline unrenewed work stops here (see
    /// [`with_fence_margin`](Self::with_fence_margin)); always below the lease.
    #[must_use]
    pub fn fence_margin(&self) -> Duration {
        let margin = self.fence_margin.unwrap_or(self.lease / 5);
        margin.min(self.lease.saturating_sub(Duration::from_millis(1)))
    }

    /// Whether calls are only recorded, queued.
    #[must_use]
    pub fn queued_calls(&self) -> bool {
        self.queued_calls
    }

    /// Whether this instance takes over lapsed tasks and claims queued ones.
    #[must_use]
    pub fn execution(&self) -> bool {
        self.execution
    }
}

/// A random instance id: `instance-` and 64 random bits in hex.
pub(crate) fn random_instance_id() -> Arc<str> {
    let id = crate::id::new_task_id();
    Arc::from(format!("instance-{}", &id[id.len() - 16..]))
}
