//! How the work of a task here ends: run to its end with its outcome stored as the task's
//! terminal state, or dropped at the end of a shutdown's grace period and handed over by its
//! tool's restart policy.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use rmcp::model::JsonObject;
use tracing::Instrument;

use super::{
    Ended, Runtime, SHUT_DOWN_MESSAGE, WriteError, lifecycle, placement::Fence, result_object,
};
use crate::{
    errors,
    limits::field_too_deep,
    store::{Outcome, StoreError, Transition},
    tool::RestartPolicy,
};

/// How long the drain waits for a step write under way before it hands the task over.
const STEP_WRITE_WAIT: Duration = Duration::from_secs(5);

/// How a task's work left the race of [`Runtime::spawn`].
enum Run {
    /// It ended on its own.
    Ended(Ended),
    /// The shutdown's grace period ended first: dropped.
    Stopped,
    /// Its lease was about to lapse, or was taken: dropped.
    Halted,
    /// Its task was parked (`park.rs`): dropped.
    Parked,
}

impl Runtime {
    /// Runs a task's work to its end and stores the outcome, on the work tracker, in the
    /// run's `task` span (`trace::task_span`): at the end of a shutdown's grace period
    /// work still running is dropped instead ([`Runtime::abandon`]), and so is work whose
    /// lease is about to lapse or was taken (and then forgotten).
    pub(crate) fn spawn(
        self: &Arc<Self>,
        id: Arc<str>,
        tool: Arc<str>,
        span: tracing::Span,
        work: impl Future<Output = Ended> + Send + 'static,
    ) {
        let runtime = Arc::clone(self);
        let stop = self.lifecycle.stop.clone();
        // Registered before it is spawned; work that is not (none is) is never halted.
        let live = self.get_live(&id);
        let dropped = live
            .as_ref()
            .map_or_else(Default::default, |live| live.drop_work.clone());
        self.lifecycle.work.spawn(
            async move {
                // The work is dropped before the drain writes anything in its place, and
                // before its lease can lapse (`cluster.rs`, invariant 6).
                let ended = tokio::select! {
                    biased;
                    ended = work => Run::Ended(ended),
                    () = stop.cancelled() => Run::Stopped,
                    () = dropped.cancelled() => match live.as_deref() {
                        Some(live) if live.is_halted() => Run::Halted,
                        _ => Run::Parked,
                    },
                };
                drop(live);
                match ended {
                    Run::Ended(ended) => runtime.finish(&id, &tool, ended).await,
                    Run::Stopped => runtime.abandon(&id, &tool).await,
                    // It wrote nothing since it lost the lease (`cluster.rs`, invariant 6).
                    Run::Halted => {
                        tracing::warn!(task_id = %id, "work dropped before its lease could \
                            lapse: the step in flight ends here, and the instance that takes \
                            the task over runs it again");
                        runtime.live.lock().remove(&id);
                    }
                    Run::Parked => runtime.parked(&id).await,
                }
                // In a cluster, a limited tool's place is free now: its queued tasks are
                // claimed at once, not at the next claim interval.
                if runtime.placement.shared().is_some() && runtime.limited.limits(&tool) {
                    runtime.parking.claim_now.notify_one();
                }
            }
            .instrument(span),
        );
    }

    /// Forgets task `id`, whose work was dropped at the end of a shutdown's grace period
    /// (`lifecycle.rs`, step 3): it writes nothing more under its own name, and the drain
    /// decides what becomes of the task by its tool's restart policy: a `resume` task's lease
    /// is released for another instance to claim at once (or, over a single-process store,
    /// the task stays as stored for the next start); a `fail` task ends `failed` saying the
    /// server was shut down. Work dropped because the last handle went away (no shutdown)
    /// leaves its task as stored, as a crash would.
    async fn abandon(&self, id: &Arc<str>, tool: &Arc<str>) {
        let Some(live) = self.get_live(id) else {
            return;
        };
        // A step write under way ends first (the work that would start another is gone);
        // one the store does not answer is not waited for past a bound.
        let _written = tokio::time::timeout(STEP_WRITE_WAIT, live.step_writes.write()).await;
        self.live.lock().remove(id);
        live.fenced.store(true, Ordering::Release);
        live.cancel.cancel();
        if !self.lifecycle.draining() {
            tracing::info!(task_id = %id, "work stopped; the task is left as stored");
            return;
        }
        self.lifecycle.count_drained(lifecycle::Drained::Stopped);
        let resumable = self
            .tools
            .toolkit
            .get(tool)
            .is_some_and(|registered| registered.definition.restart() == RestartPolicy::Resume);
        // In a cluster the work ran under a lease (`Lost` without one).
        let fence = self.placement.fence(|| live.lease());
        if resumable {
            let Fence::Held(cluster, lease) = fence else {
                tracing::info!(task_id = %id, "work stopped by the shutdown; the next start \
                    resumes the task");
                self.lifecycle.count_drained(lifecycle::Drained::Left);
                return;
            };
            match cluster.store.release(&lease).await {
                Ok(()) => {
                    tracing::info!(task_id = %id, epoch = lease.epoch,
                        "work stopped by the shutdown; lease released for another instance");
                    self.lifecycle.count_drained(lifecycle::Drained::Released);
                }
                Err(error) => tracing::warn!(task_id = %id, %error,
                    "lease not released; another instance takes the task once it lapses"),
            }
            return;
        }
        let outcome = Outcome::Failed(errors::to_object(&errors::not_resumed(
            SHUT_DOWN_MESSAGE.to_owned(),
        )));
        let lease = match fence {
            Fence::Unfenced => None,
            Fence::Held(_, lease) => Some(lease),
            // Work runs under a lease in cluster mode: without one it lost it.
            Fence::Lost => return,
        };
        let finish = Transition::Finish(outcome);
        match self.store.apply(id, lease.as_ref(), finish).await {
            Ok(()) => {
                crate::metrics::task_finished(id, tool, rmcp::model::TaskStatus::Failed);
                tracing::info!(task_id = %id, "work stopped by the shutdown; the task failed");
                self.lifecycle.count_drained(lifecycle::Drained::Failed);
            }
            Err(error) => tracing::warn!(task_id = %id, %error,
                "the task stopped by the shutdown was not failed"),
        }
    }

    /// Stores how a task's work ended as its terminal state.
    pub(crate) async fn finish(&self, id: &Arc<str>, tool: &Arc<str>, ended: Ended) {
        let outcome = match ended {
            Ended::Completed(result) => Outcome::Completed(result_object(&result)),
            Ended::Cancelled => Outcome::Cancelled,
            Ended::Failed(error) => Outcome::Failed(errors::to_object(&error)),
            Ended::Panicked(panic) => {
                tracing::error!(task_id = %id, tool = &**tool, panic, "tool panicked");
                Outcome::Failed(errors::to_object(&errors::tool_panicked(tool, &panic)))
            }
        };
        let outcome = readable(tool, outcome);
        let status = outcome.status();
        let span = tracing::info_span!("result", status = ?status);
        let written = self.write(id, Transition::Finish(outcome)).instrument(span);
        match written.await {
            Ok(()) => {
                tracing::debug!(task_id = %id, ?status, "task ended");
                crate::metrics::task_finished(id, tool, status);
            }
            Err(WriteError::Store(StoreError::Terminal(was))) => {
                tracing::debug!(task_id = %id, ?was, "task had already ended (expired)");
            }
            Err(WriteError::LeaseLost | WriteError::Store(StoreError::Fenced { .. })) => {
                tracing::info!(task_id = %id, "outcome not written: the task's lease was lost");
            }
            Err(error) => tracing::error!(task_id = %id, %error, "task outcome not stored"),
        }
        self.live.lock().remove(id);
    }
}

/// The outcome to store: a result or error that nests deeper than
/// [`Limits::MAX_VALUE_DEPTH`](crate::Limits::MAX_VALUE_DEPTH) fails the task instead, with
/// an error that says so (no reader could read it back).
fn readable(tool: &str, outcome: Outcome) -> Outcome {
    let too_deep = |object: &JsonObject| object.values().any(field_too_deep);
    let what = match &outcome {
        Outcome::Completed(result) if too_deep(result) => "result",
        Outcome::Failed(error) if too_deep(error) => "error",
        _ => return outcome,
    };
    Outcome::Failed(errors::to_object(&errors::value_too_deep(tool, what)))
}
