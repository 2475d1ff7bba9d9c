//! The writes of running work (module docs of `runtime`, "Writes of running work"): fenced
//! under the work's lease in cluster mode, retried while they fail for a passing reason.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use super::{Runtime, placement::Fence};
use crate::{
    context::Failure,
    errors,
    store::{Notice, Step, StoreError, Transition},
};

/// The first pause before a write of running work that failed for a passing reason (see
/// [`BackendError::is_retryable`](crate::store::BackendError::is_retryable)) is made again;
/// each failure in a row doubles it, up to [`TRANSIENT_RETRY_MAX`].
const TRANSIENT_RETRY_FIRST: Duration = Duration::from_millis(50);
/// The longest pause between two attempts of a write of running work.
const TRANSIENT_RETRY_MAX: Duration = Duration::from_secs(1);

/// Why a write of running work was not made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// The work lost its lease before this write (or, in cluster mode, runs under none): it
    /// writes nothing more. No store call was made.
    #[error("the task's lease was lost; its work writes nothing more")]
    LeaseLost,
    /// The store refused or failed the write.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl WriteError {
    /// How the work that made this write meets its failure: cancelled when it is to stop
    /// ([`WriteError::stops_work`]), else with the store's error.
    pub(crate) fn to_failure(&self) -> Failure {
        match self {
            Self::Store(error) if !self.stops_work() => {
                Failure::Error(errors::store_failure(error))
            }
            _ => Failure::Cancelled,
        }
    }

    /// Whether the work is to stop: its task ended under it (it expired, or was purged), or
    /// the lease is not (or no longer) this instance's.
    pub(crate) fn stops_work(&self) -> bool {
        matches!(self, Self::LeaseLost) || matches!(self, Self::Store(error) if error.stops_work())
    }
}

impl Runtime {
    /// One write of the running work of task `id`: fenced under its lease in cluster mode
    /// (module docs). A fenced refusal cancels the work; a task that lost its lease, or
    /// that runs here under no lease in cluster mode, writes nothing and answers
    /// [`WriteError::LeaseLost`].
    pub(super) async fn write(&self, id: &str, transition: Transition) -> Result<(), WriteError> {
        let visible = transition.visible();
        let written = self.write_once(id, transition).await;
        if visible && written.is_ok() {
            self.changed(id);
            self.get_live(id).inspect(|live| live.gauges.visible(id));
        }
        written
    }

    /// Publishes on the change feed that task `id` changed: a no-op while no one subscribes,
    /// and in cluster mode, where the store announces it ([`Runtime::subscribe`]).
    pub(crate) fn changed(&self, id: &str) {
        if self.changes.receiver_count() > 0 {
            let _ = self.changes.send(Notice::Changed(Arc::from(id)));
        }
    }

    async fn write_once(&self, id: &str, transition: Transition) -> Result<(), WriteError> {
        let mut retried = false;
        let mut pause = TRANSIENT_RETRY_FIRST;
        loop {
            // Looked up only in a cluster: a single-process write needs nothing of it.
            let mut live = None;
            let held = || {
                live = self.get_live(id);
                live.as_ref()
                    .filter(|live| !live.fenced.load(Ordering::Acquire))
                    .and_then(|live| live.lease())
            };
            let lease = match self.placement.fence(held) {
                // A single-process store has one runner: its writes go unfenced, and are not
                // retried.
                Fence::Unfenced => return Ok(self.store.apply(id, None, transition).await?),
                Fence::Held(_, lease) => lease,
                Fence::Lost => return Err(WriteError::LeaseLost),
            };
            let result = self.store.apply(id, Some(&lease), transition.clone()).await;
            // A passing failure (the connection was lost, the server restarts): the same write
            // again, until it is stored or the lease is lost (the work stops at the lease's
            // fence point when renewals fail too). Every write of running work is safe to
            // repeat: a step or a status is stored again as it is, an input request already
            // stored is kept, a finish already stored answers that the task ended.
            if let Err(StoreError::Backend(error)) = &result
                && error.is_retryable()
            {
                tracing::warn!(task_id = %id, %error, ?pause,
                    "a write of the running work failed for a passing reason; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(TRANSIENT_RETRY_MAX);
                continue;
            }
            if matches!(result, Err(StoreError::Fenced { .. })) {
                // Refused under an epoch this instance replaced meanwhile (it claimed its own
                // lapsed task): once more under the new lease.
                let newer = live
                    .and_then(|live| live.lease())
                    .is_some_and(|now| now.epoch > lease.epoch);
                if newer && !retried {
                    retried = true;
                    continue;
                }
                self.lost_at(id, lease.epoch);
            }
            return Ok(result?);
        }
    }

    /// Sets the `statusMessage` of a running task.
    pub(crate) async fn set_status(
        &self,
        id: &str,
        message: Option<String>,
    ) -> Result<(), WriteError> {
        self.write(id, Transition::StatusMessage(message)).await
    }

    /// Stores a completed step of a running task. The step's work is done (its side
    /// effects happened), so its record is written even when the task's work is dropped
    /// meanwhile by a shutdown: the write runs on its own on the work tracker, and the drain
    /// waits for it before it releases or fails the task.
    pub(crate) async fn save_step(
        self: &Arc<Self>,
        id: &str,
        step: Step,
    ) -> Result<(), WriteError> {
        let Some(live) = self.get_live(id) else {
            return self.write(id, Transition::SaveStep(step)).await;
        };
        let writing = Arc::clone(&live.step_writes).read_owned().await;
        let runtime = Arc::clone(self);
        let id: Arc<str> = Arc::from(id);
        let written = self.lifecycle.work.spawn(async move {
            let written = runtime.write(&id, Transition::SaveStep(step)).await;
            drop(writing);
            written
        });
        // Aborted with the tokio runtime: nothing more is written.
        written.await.unwrap_or(Err(WriteError::LeaseLost))
    }
}
