//! Tasks a tool's limit holds back, over a single-process store: a task that finds its
//! tool's gate without room (`capacity.rs`) waits as its row and a small entry in its tool's
//! queue, not as a future.
//!
//! # Invariants
//!
//! 1. **Held, not waiting.** A call of a limited tool whose gate has no room (or whose
//!    tool's queue is not empty) is recorded at once, `working` with a status message that
//!    says which limit holds it, and queued here: no work, no running slot, no entry in the
//!    registry of running tasks. Its owner's count of live tasks stays held
//!    ([`OwnerSlot::hold`](super::OwnerSlot)) until it starts or ends.
//! 2. **Order.** Each tool's queue starts oldest first; a task whose key has no room is
//!    passed over for the next key's, and a tool with no room ends its queue's turn. A new
//!    call goes behind the queue even when its own key has room.
//! 3. **Start.** The dispatcher ([`dispatch_loop`]) looks again whenever a task that passed
//!    gives its places back, a task is held, or a window that refused one has room; it
//!    starts at most as many as this instance has free running slots. A started task is
//!    read from the store and runs as a queued task does in a cluster (`recover.rs`,
//!    `Cause::Queued`): its status message is cleared, and its work holds its places.
//! 4. **End while held.** A cancel takes the task out of its queue and ends it `cancelled`
//!    at once, without running any of its code; an expiry takes it out and writes nothing
//!    (the store ended it). A task the store no longer has live when it would start is
//!    dropped; one whose cancel is stored while it starts is cancelled once its work is
//!    registered (the row is read again after).
//! 5. **Restart.** Over a durable store the held tasks are rows: a restarted process
//!    recovers them as it recovers every unfinished task, and holds them back again.
//! 6. **Metrics.** The held tasks are the queue of a single-process server:
//!    `mcp_tasks_queue_depth{tool, owner_bucket="all"}` counts each tool's held tasks, and
//!    `mcp_tasks_claim_lag_seconds` records, for each held task that starts, the time from
//!    its creation.

use std::{sync::Arc, time::Duration};

use super::{
    Ended, Runtime,
    capacity::{Entry, GatePass, Held},
    placement::Placement,
    recover::{Cause, RecoveryReport, take},
    unhold,
};

/// How long the dispatcher waits before it looks again when this instance's running slots
/// were all taken.
const FULL_RETRY: Duration = Duration::from_millis(50);

/// How long a task whose read failed waits before it is held again.
const READ_RETRY: Duration = Duration::from_secs(1);

impl Runtime {
    /// A task of `tool` (of `key`) at its tool's gate: open in a cluster (the claims keep
    /// the limits) and for a tool without limits.
    pub(crate) fn enter(&self, tool: &str, key: Option<&str>) -> Entry {
        match self.placement {
            Placement::Local => self.limited.enter(tool, key),
            Placement::Cluster(_) => Entry::Open,
        }
    }

    /// Holds back `task`, counting one more live task of its owner (a task whose count was
    /// not held: recovered, or held again after a failed read).
    pub(crate) fn count_and_hold_back(&self, task: Held) {
        *self.owners.lock().entry(task.owner.clone()).or_insert(0) += 1;
        self.hold_back(task);
    }

    /// Holds back `task`, whose owner's count is held already (invariant 1).
    pub(crate) fn hold_back(&self, task: Held) {
        tracing::debug!(task_id = %task.id, tool = %task.tool, "task held back by its tool's limit");
        let tool = Arc::clone(&task.tool);
        self.limited.hold(task);
        self.sample_held(&tool);
    }

    /// The queue depth of `tool`'s held tasks, for the metrics (invariant 6).
    fn sample_held(&self, tool: &str) {
        let depth = u64::try_from(self.limited.held_of(tool)).unwrap_or(u64::MAX);
        crate::metrics::queue_depth(tool, crate::cluster::DEFAULT_OWNER_BUCKET, depth);
    }

    /// A call's task is held back while the engine is not started (served by hand without
    /// `Engine::start`): said once, since nothing starts held tasks until it is. Recovery,
    /// which holds tasks back before the start, does not call it.
    pub(crate) fn warn_if_not_started(&self, tool: &str) {
        if self.lifecycle.is_running() || self.lifecycle.is_stopped() {
            return;
        }
        static TOLD: std::sync::Once = std::sync::Once::new();
        TOLD.call_once(|| {
            tracing::warn!(
                tool,
                "a call's task is held back by its tool's limit on an engine that is not \
                 started: it starts only once `Engine::start` runs (the serving functions call it)"
            );
        });
    }

    /// A cancel of task `id`: ended `cancelled` at once, without running any of its code,
    /// when it waits here with no work, held back (invariant 4) or for its version
    /// (`versions.rs`, invariant 3).
    pub(crate) fn cancel_unrun(self: &Arc<Self>, id: &str) {
        let held = self.unqueue_held(id).map(|task| task.tool);
        let Some(tool) = held.or_else(|| self.waiting.remove(id).map(|(tool, _)| tool)) else {
            return;
        };
        let (runtime, id) = (Arc::clone(self), Arc::<str>::from(id));
        self.lifecycle.work.spawn(async move {
            runtime.finish(&id, &tool, Ended::Cancelled).await;
        });
    }

    /// Task `id`, if held back here: out of its queue, its owner's count given back (it
    /// ended: an expiry, or a cancel; invariant 4).
    pub(crate) fn unqueue_held(&self, id: &str) -> Option<Held> {
        let task = self.limited.unhold(id)?;
        unhold(&self.owners, &task.owner);
        self.sample_held(&task.tool);
        Some(task)
    }

    /// Starts the held tasks that may start now (invariant 3); how long until a window
    /// that refused one has room, or until the running slots are looked at again.
    fn start_held(self: &Arc<Self>) -> Option<Duration> {
        let room = self.capacity.free();
        let (ready, wait) = self.limited.startable(room);
        let full = ready.len() == room && self.limited.held() > 0;
        let mut sampled: Vec<Arc<str>> = Vec::new();
        for (task, pass) in ready {
            if !sampled.contains(&task.tool) {
                self.sample_held(&task.tool);
                sampled.push(Arc::clone(&task.tool));
            }
            let bucket = crate::cluster::DEFAULT_OWNER_BUCKET;
            crate::metrics::claimed_queued(&task.id, &task.tool, bucket);
            let runtime = Arc::clone(self);
            self.lifecycle
                .work
                .spawn(async move { runtime.start_one(task, pass).await });
        }
        if full {
            return Some(wait.map_or(FULL_RETRY, |wait| wait.min(FULL_RETRY)));
        }
        wait
    }

    /// Starts one held task with its places.
    async fn start_one(self: &Arc<Self>, task: Held, pass: GatePass) {
        // Its run counts against its owner's quota from here, as its hold did.
        unhold(&self.owners, &task.owner);
        match self.store.recovery(&task.id).await {
            Ok(Some(found)) if found.cancel_requested => {
                drop(pass);
                self.finish(&task.id, &task.tool, Ended::Cancelled).await;
            }
            Ok(Some(found)) => {
                let _ = self.set_status(&task.id, None).await;
                let mut report = RecoveryReport::default();
                let taken = take(self, found, None, Cause::Queued, &mut report, Some(pass));
                if let Err(error) = taken.await {
                    tracing::warn!(task_id = %task.id, %error, "a held task did not start");
                }
                // A cancel stored between the read and the work's registration found neither
                // a queue entry nor work to signal: the row has it, so the work hears it now.
                if let Ok(Some(now)) = self.store.get(&task.id).await
                    && now.cancel_requested
                {
                    self.cancel(&task.id);
                }
            }
            // It ended while held (an expiry, a purge).
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(task_id = %task.id, %error, "a held task not read; held again");
                drop(pass);
                tokio::time::sleep(READ_RETRY).await;
                self.count_and_hold_back(task);
            }
        }
    }
}

/// Starts the held tasks as places free, until intake stops (invariant 3); over a
/// single-process store whose toolkit limits a tool.
pub(crate) async fn dispatch_loop(runtime: Arc<Runtime>) {
    let stop = runtime.lifecycle.intake.clone();
    let mut wait = None;
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            () = runtime.limited.freed.notified() => {}
            () = tokio::time::sleep(wait.unwrap_or(Duration::from_secs(3600))) => {}
        }
        wait = runtime.start_held();
    }
}
