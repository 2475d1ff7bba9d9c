//! Parked tasks: a task whose work waits long (for an answer, or in a durable sleep) gives
//! back everything it holds here, and only its row waits.
//!
//! # Invariants
//!
//! 1. **Who parks.** Only the task of a tool that resumes, over a store that keeps parked
//!    tasks ([`TaskStore::parks`](crate::TaskStore::parks)), once it waited its tool's
//!    [`park_after`](crate::ToolDefinition::park_after), and only as a task (a call whose
//!    creating request is still open does not park).
//! 2. **A park is a write** ([`Transition::Park`]), fenced in a cluster (the store gives the
//!    lease up with it). The store refuses it ([`StoreError::Woken`]) when what the task
//!    waits for came first; the work then goes on here as if nothing happened.
//! 3. **Nothing stays.** Once the park is stored, the work's future is dropped
//!    ([`Runtime::spawn`]'s parked branch) and its entry in the registry of running tasks
//!    goes, with its owner's slot: a parked task costs this process no memory.
//! 4. **Wake-ups.** An answer taken or a cancel recorded makes the parked row due at once; a
//!    timer makes it due at its instant; an expiry ends it (nothing to wake). Over a
//!    single-process store this process wakes it: right after the `tasks/update` or
//!    `tasks/cancel` that woke it, and at its timer ([`wake_loop`]). In a cluster the
//!    lapsed-lease claims take it (the store announces an answer's or a cancel's wake-up as
//!    queued work, and a parked task's lease deadline is its timer), on whichever instance
//!    claims first.
//! 5. **Woken work is a replay** ([`Cause::Woken`]): stored steps return their results and
//!    answered questions their answers; no status message of its own, so a client sees no
//!    difference but speed. A task woken by a cancel replays cancelled.
//! 6. **One waker.** The store hands a woken task to one waker only; an answer stored
//!    between the park and the drop is found by the parked branch's own wake-up.
//! 7. **Quotas.** A parked task still counts against its owner's live tasks
//!    ([`Limits::max_live_tasks_per_owner`](crate::Limits::max_live_tasks_per_owner)): a
//!    cluster store counts every live row; over a single-process store this process holds
//!    the count (a few dozen bytes a task) until the task is woken or expires. The tasks an
//!    earlier process parked are held again at start-up ([`Runtime::hold_parked`], from
//!    [`Engine::recover`](crate::Engine::recover)).

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use super::{
    Runtime, WriteError,
    placement::Placement,
    recover::{Cause, RecoveryReport, take},
};
use crate::{
    clock::system_now_ms as now_ms,
    store::{StoreError, Transition, Wait},
};

/// How many woken tasks one store call takes.
const WAKE_BATCH: usize = 256;

/// How many parked tasks one store call reads at start-up ([`Runtime::hold_parked`]).
const HOLD_PAGE: usize = 4096;

/// How often the wake loop samples the number of parked tasks for
/// [`PARKED_TASKS`](crate::metrics::PARKED_TASKS) (a count of the store's rows).
const SAMPLE_PARKED_EVERY: Duration = Duration::from_secs(15);

impl Runtime {
    /// How long a task of `tool` waits before it parks here; `None`: it never does
    /// (invariant 1).
    pub(crate) fn park_after(&self, tool: &str) -> Option<Duration> {
        if !self.store.parks() {
            return None;
        }
        self.tools.toolkit.get(tool)?.definition.park_after()
    }

    /// Parks task `id` (invariant 2): `Ok(true)` once stored, and its work is being dropped;
    /// `Ok(false)` when the store found it woken already (the work goes on).
    pub(crate) async fn park(&self, id: &str, wait: Wait) -> Result<bool, WriteError> {
        let until = wait.until_ms;
        // This work's entry: a wake-up right after the write registers the next run's.
        let live = self.get_live(id);
        // The owner's count moves to the hold before the park is stored, so that a wake-up
        // right after it finds the hold to give back (invariant 7).
        if matches!(self.placement, Placement::Local)
            && let Some(slot) = live.as_ref().and_then(|live| live.slot.lock().take())
        {
            // Never held already: a park is stored (and read by `hold_parked`) after its hold.
            self.parking.holds.lock().insert(id, slot.hold());
        }
        if let Err(error) = self.write(id, Transition::Park(wait)).await {
            // Not parked: the work keeps its count (and takes a running slot again).
            let owner = self.parking.holds.lock().remove(id);
            if let (Some(live), Some(owner)) = (&live, owner) {
                *live.slot.lock() = Some(self.owner_slot(&owner, self.capacity.take_over()));
            }
            return match error {
                WriteError::Store(StoreError::Woken) => Ok(false),
                error => Err(error),
            };
        }
        tracing::debug!(task_id = %id, ?until, "task parked");
        crate::metrics::parked();
        if let Some(until) = until {
            self.arm(until);
        }
        if let Some(live) = live {
            // Its lease went with the park: no renewal, no fenced write after it.
            live.fenced.store(true, Ordering::Release);
            live.park();
        }
        Ok(true)
    }

    /// The work of task `id` was dropped for its park (invariant 3): its entry goes, unless
    /// a wake-up registered the task's next run meanwhile; then a wake-up of its own
    /// (invariant 6).
    pub(super) async fn parked(self: &Arc<Self>, id: &Arc<str>) {
        {
            let mut live = self.live.lock();
            if live.get(id).is_some_and(|live| live.is_parked()) {
                live.remove(id);
            }
        }
        self.wake_one(id).await;
    }

    /// Gives back the owner's count held for parked task `id`, if any (it was woken, or it
    /// expired).
    pub(crate) fn release_hold(&self, id: &str) {
        let owner = self.parking.holds.lock().remove(id);
        if let Some(owner) = owner {
            super::unhold(&self.owners, &owner);
        }
    }

    /// Over a single-process store (its one caller, [`Runtime::recover`], checks), at
    /// start-up: the tasks an earlier process parked count against their owners' quotas
    /// again, each held as if it had parked here (invariant 7).
    pub(crate) async fn hold_parked(&self) -> Result<(), StoreError> {
        if !self.store.parks() || self.parking.held_at_start.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let mut after: Option<Arc<str>> = None;
        loop {
            let page = self
                .store
                .parked_owners(after.as_deref(), HOLD_PAGE)
                .await?;
            let full = page.len() == HOLD_PAGE;
            {
                let mut holds = self.parking.holds.lock();
                let mut owners = self.owners.lock();
                for (id, owner) in &page {
                    // A task parked here since the start is held already, its count with it.
                    if holds.insert(id, Arc::clone(owner)) {
                        *owners.entry(Arc::clone(owner)).or_insert(0) += 1;
                    }
                }
            }
            after = page.into_iter().next_back().map(|(id, _)| id);
            if !full {
                return Ok(());
            }
        }
    }

    /// Notes a timer of a task parked here, for the wake loop.
    fn arm(&self, until: u64) {
        let mut next = self.parking.next.lock();
        if next.is_none_or(|next| until < next) {
            *next = Some(until);
            self.parking.armed.notify_one();
        }
    }

    /// Wakes task `id` if it is parked and woken (an answer was taken, a cancel recorded):
    /// over a single-process store it runs again here at once; in a cluster the store's
    /// notice has the claimers take it. Nothing for a task that runs here.
    pub(crate) fn wake_soon(self: &Arc<Self>, id: &str) {
        if !self.store.parks() || self.runs(id) {
            return;
        }
        if let Placement::Cluster(instance) = &self.placement {
            // The store announces the wake-up to every instance; this one, which took the
            // answer or the cancel, claims at once (the first claimer takes the task).
            if instance.config.execution {
                self.parking.claim_now.notify_one();
            }
            return;
        }
        if self.get_live(id).is_some_and(|live| !live.is_parked()) {
            return;
        }
        let runtime = Arc::clone(self);
        let id: Arc<str> = Arc::from(id);
        self.lifecycle
            .work
            .spawn(async move { runtime.wake_one(&id).await });
    }

    /// Over a single-process store, runs task `id` again if the store hands it over woken.
    async fn wake_one(self: &Arc<Self>, id: &str) {
        if !matches!(self.placement, Placement::Local) {
            return;
        }
        match self.store.wake(Some(id), 1).await {
            Ok(woken) => self.run_woken(woken).await,
            Err(error) => tracing::warn!(task_id = %id, %error, "parked task not woken"),
        }
    }

    /// Runs the woken tasks again, by replay (invariant 5).
    async fn run_woken(self: &Arc<Self>, woken: Vec<crate::store::Recovery>) {
        let mut report = RecoveryReport::default();
        for task in woken {
            let id = task.id.clone();
            // Its run counts against its owner's quota from here, as its hold did.
            self.release_hold(&id);
            if let Err(error) = take(self, task, None, Cause::Woken, &mut report, None).await {
                tracing::warn!(task_id = %id, %error, "woken task not run");
            }
        }
    }

    /// Over a single-process store, every parked task that is due: run again, in batches;
    /// then the next timer the store holds is armed.
    async fn wake_due(self: &Arc<Self>) {
        loop {
            match self.store.wake(None, WAKE_BATCH).await {
                Ok(woken) => {
                    let full = woken.len() == WAKE_BATCH;
                    self.run_woken(woken).await;
                    if !full {
                        break;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "parked tasks not woken; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    self.arm(now_ms());
                    return;
                }
            }
        }
        self.arm_from_store().await;
    }

    /// Samples how many tasks the store holds parked, for the metrics (a failed count is not
    /// recorded). A plain count: the operator's counts apply due expiry first, which would
    /// take expired tasks from under the expiry sweep here.
    async fn sample_parked(&self) {
        match self.store.parked_count().await {
            Ok(Some(count)) => crate::metrics::parked_tasks(count),
            Ok(None) => {}
            Err(error) => tracing::debug!(%error, "parked tasks not counted"),
        }
    }

    /// Arms the earliest timer the store holds (a previous process's parked tasks too).
    async fn arm_from_store(&self) {
        match self.store.next_wake().await {
            Ok(Some(next)) => self.arm(next),
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "the next timer of the parked tasks not read"),
        }
    }
}

/// Wakes the parked tasks at their timers, until intake stops: over a single-process store
/// runs them here; in a cluster, a claim pass takes them (the timers of the tasks parked
/// here; another instance's claim passes cover the rest).
pub(crate) async fn wake_loop(runtime: Arc<Runtime>) {
    let stop = runtime.lifecycle.intake.clone();
    if matches!(runtime.placement, Placement::Local) {
        runtime.arm_from_store().await;
    }
    let mut sample = tokio::time::interval(SAMPLE_PARKED_EVERY);
    sample.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let next = *runtime.parking.next.lock();
        let wait = next.map_or(Duration::from_secs(3600), |next| {
            Duration::from_millis(next.saturating_sub(now_ms()))
        });
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            () = runtime.parking.armed.notified() => continue,
            _ = sample.tick() => {
                runtime.sample_parked().await;
                continue;
            }
            () = tokio::time::sleep(wait) => {}
        }
        let Some(due) = next else { continue };
        runtime.parking.next.lock().take_if(|next| *next == due);
        match runtime.placement {
            Placement::Local => runtime.wake_due().await,
            Placement::Cluster(_) => runtime.parking.claim_now.notify_one(),
        }
        runtime.sample_parked().await;
    }
}
