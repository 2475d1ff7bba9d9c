//! Running tools: inline, or as tasks under supervision.
//!
//! Each task's work is one tokio task. Its outcome (a result, a JSON-RPC error, a honoured
//! cancellation, or a panic) is written to the [`TaskStore`] as the task's one terminal
//! state. What only a running process needs (the cancellation token, the channels that carry
//! answers to waiting input requests) lives here, never in the store.
//!
//! Each submodule's docs say what it does (the life of a call in `call/`, recovery in
//! `recover.rs`, the cluster in `cluster.rs`, starts and shutdowns in `lifecycle.rs`, ...);
//! this module holds the process-local registry of running tasks and the expiry sweep.
//!
//! # Writes of running work
//!
//! Every write a running task's work makes (status, input requests, steps, its outcome)
//! goes through this module. In cluster mode a task's work runs only under its lease, and
//! each of those writes is the store's fenced call with that lease; a write refused as
//! [`StoreError::Fenced`] (the lease was lost: another instance took the task over) cancels
//! the local work and marks it fenced, and from then on the work writes nothing, not even
//! its outcome ([`WriteError::LeaseLost`]): it is forgotten when it ends. A write that
//! failed for a passing reason (the connection was lost, the database restarts) is made
//! again, with a growing pause, until it is stored or the lease is lost: a database restart
//! neither fails the work nor leaves its task with no work behind it.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use parking_lot::Mutex;

use rmcp::model::{CallToolResult, ErrorData, InputResponses, JsonObject};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::{
    Limits, errors,
    rate::{Limiter, step_key},
    store::{Lease, Notice, StoreError, TaskSnapshot, TaskStore, ToolVersions},
    toolkit::{StateMap, Toolkit},
};

pub(crate) mod call;
mod capacity;
pub(crate) mod cluster;
mod held;
pub(crate) mod lifecycle;
mod outcome;
mod park;
mod parking;
pub(crate) mod placement;
pub(crate) mod recover;
#[cfg(feature = "admin")]
pub(crate) mod retry;
mod start;
mod versions;
mod waiting;
pub(crate) mod worker;
mod write;

pub use cluster::ClusterConfig;
pub use lifecycle::{ShutdownReport, StartError};
pub use worker::{Worker, WorkerHandle};

use lifecycle::Lifecycle;
use placement::Placement;

pub(crate) use capacity::{Capacity, OwnerSlot, unhold};
use capacity::{ToolLimits, at_capacity};
pub(crate) use write::WriteError;

pub(crate) use call::Ended;

/// The `statusMessage` (and error message) of a task of a `fail` tool still running when a
/// shutdown's grace period ended.
pub(crate) const SHUT_DOWN_MESSAGE: &str = "the server was shut down while the task was \
    running, and its tool cannot be resumed (restart policy `fail`); call the tool again";

/// How often the reaper applies due expiry, unless the engine says otherwise.
pub(crate) const DEFAULT_REAP_INTERVAL: Duration = Duration::from_secs(1);

struct LiveTask {
    cancel: CancellationToken,
    waiters: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    /// The owner's quota slot, given back when the task's work ends (or held by the park of
    /// its task over a single-process store, `park.rs`).
    slot: Mutex<Option<OwnerSlot>>,
    /// The lease the work runs under (cluster mode), renewed by the cluster driver.
    lease: Mutex<Option<Lease>>,
    /// The lease was lost: the work is cancelled and writes nothing more.
    fenced: AtomicBool,
    /// Drops the work's future (`outcome.rs`, [`Runtime::spawn`]), for the reason set
    /// before it is cancelled: [`LiveTask::halt`] or [`LiveTask::park`].
    drop_work: CancellationToken,
    halted: AtomicBool,
    parked: AtomicBool,
    /// Held (shared) by every step write under way: the drain waits for them (exclusive)
    /// before it hands the task over, so a step that ran is stored, not run again.
    step_writes: Arc<tokio::sync::RwLock<()>>,
    /// Its place in the running and input-required gauges, for as long as it is registered.
    gauges: crate::metrics::Live,
}

impl LiveTask {
    fn lease(&self) -> Option<Lease> {
        self.lease.lock().clone()
    }

    /// Drops the work before its lease could lapse anywhere (`cluster.rs`, invariant 6), so
    /// that it runs nowhere else at the same time.
    fn halt(&self) {
        self.halted.store(true, Ordering::Release);
        self.drop_work.cancel();
    }

    fn is_halted(&self) -> bool {
        self.halted.load(Ordering::Acquire)
    }

    /// Drops the work once its task is parked (`park.rs`): the task waits in its row, and
    /// a wake-up runs it again.
    fn park(&self) {
        self.parked.store(true, Ordering::Release);
        self.drop_work.cancel();
    }

    fn is_parked(&self) -> bool {
        self.parked.load(Ordering::Acquire)
    }
}

/// The tools of a runtime, for the tasks it takes back or claims.
#[derive(Clone)]
pub(crate) struct Tools {
    pub(crate) toolkit: Arc<Toolkit>,
    pub(crate) state: Arc<StateMap>,
}

/// What a task's priority is derived from
/// ([`EngineBuilder::with_priority`](crate::EngineBuilder::with_priority)): the call that
/// creates it.
#[derive(Debug)]
#[non_exhaustive]
pub struct PriorityInput<'a> {
    /// Who calls (the authenticated owner).
    pub owner: &'a str,
    /// The tool's wire name.
    pub tool: &'a str,
    /// The call's arguments.
    pub arguments: &'a JsonObject,
}

/// The application's function from a call to its task's priority.
#[derive(Clone)]
pub(crate) struct Priority(pub(crate) Arc<dyn Fn(&PriorityInput<'_>) -> i16 + Send + Sync>);

impl std::fmt::Debug for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Priority(..)")
    }
}

/// How the engine set the runtime up.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) reap_interval: Duration,
    pub(crate) limits: Limits,
    /// The grace period of a shutdown the serving functions make on their own.
    pub(crate) shutdown_grace: Duration,
    /// How many tasks' work may run here at once (`None`: no limit).
    pub(crate) max_running: Option<usize>,
    /// The priority of each task a call records ([`EngineBuilder::with_priority`](crate::EngineBuilder::with_priority)).
    pub(crate) priority: Option<Priority>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            reap_interval: DEFAULT_REAP_INTERVAL,
            limits: Limits::default(),
            shutdown_grace: lifecycle::DEFAULT_SHUTDOWN_GRACE,
            max_running: None,
            priority: None,
        }
    }
}

/// The process-local side of running tasks.
pub(crate) struct Runtime {
    /// The store, timed; its cluster operations are the placement's
    /// ([`Cluster::store`](placement::Cluster)).
    pub(crate) store: Arc<dyn TaskStore>,
    live: Mutex<HashMap<Arc<str>, Arc<LiveTask>>>,
    reap_interval: Duration,
    pub(crate) limits: Limits,
    #[cfg(feature = "http")]
    pub(crate) shutdown_grace: Duration,
    /// The slots of the work that runs here ([`Settings::max_running`]).
    pub(crate) capacity: Arc<Capacity>,
    /// Live tasks per owner, for [`Limits::max_live_tasks_per_owner`].
    owners: Arc<Mutex<HashMap<Arc<str>, usize>>>,
    /// This instance's id (the one its leases carry in cluster mode).
    pub(crate) id: Arc<str>,
    /// Where the work runs: here alone, or as one instance of a cluster (decided once, by
    /// [`Runtime::new`]; `placement.rs`).
    pub(crate) placement: Placement,
    /// The tools, for the tasks this runtime claims.
    pub(crate) tools: Tools,
    /// Who starts and stops the loops and the work.
    pub(crate) lifecycle: Lifecycle,
    /// The change feed over a single-process store ([`Runtime::subscribe`]): a
    /// [`Notice::Changed`] for every task whose status, status message, input requests or
    /// outcome this process changed. Nothing is sent while no one subscribes.
    pub(crate) changes: tokio::sync::broadcast::Sender<Notice>,
    /// The wake-ups of parked tasks (`park.rs`).
    pub(crate) parking: parking::Parking,
    /// The tools with a concurrency limit of their own.
    pub(crate) limited: ToolLimits,
    pub(crate) priority: Option<Priority>,
    /// The tools at their versions, for the claims (`versions.rs`).
    pub(crate) versions: ToolVersions,
    /// The tasks of another version kept here (`versions.rs`).
    pub(crate) waiting: waiting::Waiting,
    /// Whether this instance's claims route by version now (`versions.rs`, invariant 1): on
    /// from the start, and while tasks of a version it does not run are known to wait for a
    /// claim.
    pub(crate) routing: AtomicBool,
}

/// How many change events the feed holds for a subscriber that is behind; one that lags
/// further is told so and reads every task it follows again.
pub(crate) const CHANGE_FEED_CAPACITY: usize = 4096;

impl Runtime {
    /// A built runtime over `store` for `tools`, not started; in cluster mode (the store is a
    /// [`ClusterStore`](crate::store::ClusterStore)) as instance `instance` with `config`.
    pub(crate) fn new(
        store: Arc<dyn TaskStore>,
        tools: Tools,
        settings: Settings,
        instance: Arc<str>,
        config: ClusterConfig,
    ) -> Arc<Self> {
        let limited = ToolLimits::of(&tools.toolkit);
        let definitions = tools.toolkit.definitions();
        let versions = ToolVersions::new(definitions.map(|d| (d.name(), d.version())));
        let (store, placement) = Placement::new(store, &instance, config);
        let parking = parking::Parking::default();
        Arc::new(Self {
            store,
            live: Mutex::new(HashMap::new()),
            reap_interval: settings.reap_interval,
            limits: settings.limits,
            #[cfg(feature = "http")]
            shutdown_grace: settings.shutdown_grace,
            capacity: Capacity::new(settings.max_running, Arc::clone(&parking.claim_now)),
            owners: Arc::default(),
            id: instance,
            placement,
            tools,
            lifecycle: Lifecycle::new(),
            changes: tokio::sync::broadcast::channel(CHANGE_FEED_CAPACITY).0,
            parking,
            limited,
            priority: settings.priority,
            versions,
            waiting: waiting::Waiting::default(),
            routing: AtomicBool::new(true),
        })
    }

    /// Takes one start of the step limiter `limiter`: across the cluster over a shared
    /// store, in this process otherwise. `None` when taken, else how long until the
    /// limiter's window has room.
    pub(crate) async fn take_rate(
        &self,
        limiter: &Limiter,
    ) -> Result<Option<Duration>, StoreError> {
        let (name, rate) = (limiter.name(), limiter.rate());
        match self.placement.shared() {
            Some(cluster) => cluster.store.take_rate(name, rate).await,
            None => Ok(self.limited.local.take(&step_key(name), rate)),
        }
    }

    /// The one change feed (the push hub and the wake-up loop subscribe to it): in a cluster
    /// the store's notices, which announce every instance's changes (this one's too), or
    /// else what this process publishes ([`Runtime::changed`]).
    pub(crate) fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Notice> {
        match &self.placement {
            Placement::Local => self.changes.subscribe(),
            Placement::Cluster(cluster) => cluster.store.wakeups(),
        }
    }

    /// Takes a slot for a new call's work and counts one more live task of `owner`, or
    /// refuses the call: once a shutdown began, when this instance runs its `max_running`
    /// (after waiting for the claims in flight to give back the slots they hold), or at the
    /// owner's quota ([`Limits::max_live_tasks_per_owner`]).
    pub(crate) async fn admit(&self, owner: &Arc<str>) -> Result<OwnerSlot, ErrorData> {
        if !self.lifecycle.accepting() {
            return Err(errors::shutting_down());
        }
        let running = self
            .capacity
            .take_waiting()
            .await
            .ok_or_else(|| at_capacity(self.capacity.max().unwrap_or(0)))?;
        let quota = self.limits.max_live_tasks_per_owner();
        let mut owners = self.owners.lock();
        let count = owners.entry(owner.clone()).or_insert(0);
        if *count >= quota {
            return Err(errors::owner_quota(owner, quota));
        }
        *count += 1;
        Ok(self.owner_slot(owner, running))
    }

    /// Counts one more live task of `owner` whose work runs here without refusing it (a task
    /// a restarted server takes back, or a claimed one): its slot is counted even over
    /// `max_running`.
    pub(crate) fn reserve(&self, owner: &Arc<str>) -> OwnerSlot {
        let running = self.capacity.take_over();
        *self.owners.lock().entry(owner.clone()).or_insert(0) += 1;
        self.owner_slot(owner, running)
    }

    /// The slot of one live task of `owner`, counted already.
    fn owner_slot(&self, owner: &Arc<str>, running: capacity::RunSlot) -> OwnerSlot {
        OwnerSlot {
            owner: owner.clone(),
            owners: self.owners.clone(),
            _running: running,
            counted: true,
        }
    }

    /// The ids of the tasks whose work runs here, with their leases.
    pub(crate) fn leases(&self) -> Vec<Lease> {
        self.live
            .lock()
            .values()
            .filter(|live| !live.fenced.load(Ordering::Acquire))
            .filter_map(|live| live.lease())
            .collect()
    }

    /// Whether the work of task `id` runs here (and did not lose its lease).
    pub(crate) fn runs(&self, id: &str) -> bool {
        self.get_live(id)
            .is_some_and(|live| !live.fenced.load(Ordering::Acquire))
    }

    /// The ids of the tasks whose work runs here.
    pub(crate) fn live_ids(&self) -> Vec<Arc<str>> {
        self.live.lock().keys().cloned().collect()
    }

    /// The lease of task `id` was lost (refused as fenced, or taken over): its local work is
    /// cancelled and writes nothing more.
    pub(crate) fn lost(&self, id: &str) {
        if let Some(live) = self.get_live(id) {
            if !live.fenced.swap(true, Ordering::AcqRel) {
                crate::metrics::lease_lost(crate::metrics::LeaseLoss::Refused);
                tracing::warn!(task_id = %id, "lease lost: the local work stops and writes nothing");
            }
            live.cancel.cancel();
        }
    }

    /// As [`Runtime::lost`], unless the work here holds a newer lease than the one at
    /// `epoch` that was refused (this instance claimed its own lapsed task meanwhile).
    /// Another instance holds the lease now (or will soon): the work is also dropped at
    /// once (invariant 6 of `cluster.rs`), not only cancelled.
    pub(crate) fn lost_at(&self, id: &str, epoch: u64) {
        let live = self.get_live(id);
        let current = live.as_ref().and_then(|live| live.lease());
        if current.is_none_or(|lease| lease.epoch <= epoch) {
            self.lost(id);
            if let Some(live) = live {
                live.halt();
            }
        }
    }

    /// Replaces the lease of task `id` with its renewal, unless the work lost it meanwhile.
    pub(crate) fn renewed(&self, lease: Lease) {
        if let Some(live) = self.get_live(&lease.task_id) {
            let mut held = live.lease.lock();
            if held.as_ref().is_some_and(|h| h.epoch == lease.epoch) {
                *held = Some(lease);
            }
        }
    }

    /// How many tasks' work runs in this process.
    pub(crate) fn live_count(&self) -> usize {
        self.live.lock().len()
    }

    /// A task as the store has it now (a terminal one as the reaper would find it,
    /// `read_ended`).
    pub(crate) async fn read(&self, id: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        let snapshot = self.store.get(id).await?;
        Ok(snapshot.inspect(|snapshot| self.read_ended(snapshot)))
    }

    /// A read found `snapshot`: when it has ended, the read may have been the first to apply
    /// its expiry, before the reaper. A parked task's quota hold goes, and work that still
    /// runs here stops, exactly as the reaper would do.
    fn read_ended(&self, snapshot: &TaskSnapshot) {
        if !snapshot.status.is_terminal() {
            return;
        }
        self.release_hold(&snapshot.id);
        if let Some(live) = self.get_live(&snapshot.id) {
            live.cancel.cancel();
            live.gauges.expired(Some(snapshot));
            self.changed(&snapshot.id);
        }
    }

    /// Several tasks as the store has them now, in one read of the store
    /// ([`TaskStore::get_many`]), each as [`Runtime::read`] reads it.
    #[cfg(any(feature = "http", feature = "stdio"))]
    pub(crate) async fn read_many(
        &self,
        ids: &[Arc<str>],
    ) -> Result<Vec<Option<TaskSnapshot>>, StoreError> {
        let snapshots = self.store.get_many(ids).await?;
        for snapshot in snapshots.iter().flatten() {
            self.read_ended(snapshot);
        }
        Ok(snapshots)
    }

    /// Tracks a running task of `tool` so `tasks/cancel` and `tasks/update` reach it (and
    /// counts it in the gauges as its `run`); in cluster mode its work runs under `lease`.
    pub(crate) fn register(
        self: &Arc<Self>,
        id: Arc<str>,
        tool: &Arc<str>,
        run: crate::metrics::Run,
        cancel: CancellationToken,
        lease: Option<Lease>,
        slot: OwnerSlot,
    ) {
        let live = Arc::new(LiveTask {
            cancel,
            waiters: Mutex::default(),
            slot: Mutex::new(Some(slot)),
            lease: Mutex::new(lease),
            fenced: AtomicBool::new(false),
            drop_work: CancellationToken::new(),
            halted: AtomicBool::new(false),
            parked: AtomicBool::new(false),
            step_writes: Arc::default(),
            gauges: crate::metrics::Live::new(tool, run),
        });
        self.live.lock().insert(id, live);
    }

    fn get_live(&self, id: &str) -> Option<Arc<LiveTask>> {
        self.live.lock().get(id).cloned()
    }

    /// Signals the work of a task to stop, if it runs in this process.
    pub(crate) fn cancel(&self, id: &str) {
        if let Some(live) = self.get_live(id) {
            live.cancel.cancel();
        }
    }

    /// A receiver for the answer to input request `key` of task `id`. Registered before the
    /// request is stored, so no answer can arrive unseen.
    ///
    /// # Errors
    /// `-32603` when the task already has [`Limits::max_input_requests`] outstanding.
    pub(crate) fn await_input(
        &self,
        id: &str,
        key: &str,
    ) -> Result<oneshot::Receiver<Value>, ErrorData> {
        let (tx, rx) = oneshot::channel();
        if let Some(live) = self.get_live(id) {
            let mut waiters = live.waiters.lock();
            let limit = self.limits.max_input_requests();
            if waiters.len() >= limit && !waiters.contains_key(key) {
                return Err(errors::too_many_input_requests(limit));
            }
            waiters.insert(key.to_owned(), tx);
            live.gauges.set_waiting(true);
        }
        Ok(rx)
    }

    /// Drops the waiter of input request `key` of task `id`: its answer came another way.
    pub(crate) fn forget_input(&self, id: &str, key: &str) {
        if let Some(live) = self.get_live(id) {
            let mut waiters = live.waiters.lock();
            waiters.remove(key);
            live.gauges.set_waiting(!waiters.is_empty());
        }
    }

    /// Whether the work of task `id` here waits for an answer.
    pub(crate) fn awaits_input(&self, id: &str) -> bool {
        self.get_live(id)
            .is_some_and(|live| !live.waiters.lock().is_empty())
    }

    /// Hands answers the store accepted to the work waiting for them.
    pub(crate) fn deliver(&self, id: &str, accepted: InputResponses) {
        let Some(live) = self.get_live(id) else {
            return;
        };
        let mut waiters = live.waiters.lock();
        for (key, value) in accepted {
            if let Some(tx) = waiters.remove(&key) {
                let _ = tx.send(value);
            }
        }
        live.gauges.set_waiting(!waiters.is_empty());
    }

    /// One pass of the expiry sweep: applies due expiry, stops the work of expired tasks.
    async fn reap(&self) {
        let expired = self
            .store
            .expire_due()
            .await
            .inspect_err(|error| tracing::warn!(%error, "expiry sweep failed"))
            .unwrap_or_default();
        for id in expired {
            self.release_hold(&id);
            self.unqueue_held(&id);
            self.waiting.remove(&id);
            match self.get_live(&id) {
                Some(live) => live.gauges.expired(None),
                None => crate::metrics::tasks_expired(1),
            }
            tracing::info!(task_id = %id, "task expired");
            self.cancel(&id);
            self.changed(&id);
        }
    }
}

/// The expiry sweep, every reap interval, until intake stops (`lifecycle.rs`, step 1).
pub(crate) async fn reap_loop(runtime: Arc<Runtime>) {
    let stop = runtime.lifecycle.intake.clone();
    lifecycle::periodic(stop, runtime.reap_interval, false, || runtime.reap()).await;
}

/// The `CallToolResult` as the JSON object `result` of a completed task.
// docs/protocol.md R47.
pub(crate) fn result_object(result: &CallToolResult) -> JsonObject {
    match serde_json::to_value(result) {
        Ok(Value::Object(map)) => map,
        _ => errors::to_object(&errors::unserializable_result()),
    }
}
