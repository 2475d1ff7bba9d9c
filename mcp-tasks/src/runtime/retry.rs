//! An operator's retry or fork of a task that failed or was cancelled: a new task, with a new
//! id, that replays the old one's history.
//!
//! # Invariants
//!
//! 1. **A new task.** The old task stays as it ended (a terminal status is final on the
//!    wire); the new one has its own id, the old task's owner, tool, tool version,
//!    arguments, the request's `_meta`, trace context, TTL and poll interval, and starts
//!    `working` with a status message that names the old task.
//! 2. **Its history.** A retry copies every step the old task stored and every answer it
//!    took, so its run replays them and goes on from where the old one stopped; a fork from
//!    step `n` copies the steps before `n`, and the answers to the questions asked before
//!    the last of those began (`row::asked_before`), so the run does step `n` and what
//!    follows again, and asks again what it asked there. The steps are stored before any of
//!    its work runs: no other instance can claim it first (in a cluster it is created under
//!    this instance's first lease).
//! 3. **Where it runs.** Where its tool runs at its version: here at once; in a cluster on
//!    another instance otherwise, or when this instance runs no work (the lease is released
//!    at once for the claims, which route by version); over a single-process store without
//!    the version it waits, as a restart leaves such a task (`versions.rs`).

use std::sync::Arc;

use super::{
    Runtime,
    recover::{Cause, RecoveryReport, take},
};
use crate::store::{
    Created, Lease, NewTask, Recovery, StoreError, Transition, admin::TaskDetail,
    record::keeps_history, row::asked_before,
};

/// Why a retry or fork was refused.
#[derive(Debug)]
pub(crate) enum RetryRefused {
    /// The task has not failed and was not cancelled (its status).
    Status(rmcp::model::TaskStatus),
    /// The task kept no history (it ended before this build kept one).
    NoHistory,
    /// A fork from a step past the stored ones (how many were stored).
    NoSuchStep(usize),
    /// The store failed.
    Store(StoreError),
}

impl From<StoreError> for RetryRefused {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

impl Runtime {
    /// Retries the task `old` (`from_step: None`: from its last stored step) or forks it
    /// from step `from_step` (see the module docs); answers the new task's id.
    pub(crate) async fn retry(
        self: &Arc<Self>,
        old: TaskDetail,
        from_step: Option<usize>,
    ) -> Result<Arc<str>, RetryRefused> {
        let task = &old.task;
        if !keeps_history(task.status) {
            return Err(RetryRefused::Status(task.status));
        }
        if old.origin.tool_version.is_empty() {
            return Err(RetryRefused::NoHistory);
        }
        let (mut steps, mut answers, mut asked) = (old.steps, old.answers, old.asked_at_step);
        if let Some(n) = from_step {
            if n > steps.len() {
                return Err(RetryRefused::NoSuchStep(steps.len()));
            }
            steps.truncate(n);
            let kept = u64::try_from(n).unwrap_or(u64::MAX);
            answers.retain(|key, _| asked_before(&asked, key, kept));
        }
        // The new task keeps when its answers' questions were asked, for a fork of it.
        asked.retain(|key, _| answers.contains_key(key));
        let id: Arc<str> = Arc::from(crate::id::new_task_id());
        let message = match from_step {
            None => format!("retried from task {} by an operator", task.id),
            Some(n) => format!("forked from step {n} of task {} by an operator", task.id),
        };
        let mut record = NewTask::new(Arc::clone(&id), task.owner.clone(), task.tool.clone())
            .with_status_message(Some(message))
            .with_ttl(task.ttl_ms.map(std::time::Duration::from_millis));
        record.poll_interval = task.poll_interval_ms.map(std::time::Duration::from_millis);
        // The whole origin, so that a field added to it is carried over too.
        record.origin = old.origin.clone();
        record = record
            .with_answers(answers.clone())
            .with_asked_at_step(asked);
        let key = self
            .limited
            .key_of(&task.tool, &task.owner, &old.origin.arguments);
        record.limit_key = key.map(Arc::from);
        let record = self.placement.place(record, true, usize::MAX);
        let lease = Lease::first(&record);
        if let Created::Existing(_) = self.store.create(record).await? {
            return Err(RetryRefused::Store(StoreError::NotFound));
        }
        for step in &steps {
            let save = Transition::SaveStep(step.clone());
            self.store.apply(&id, lease.as_ref(), save).await?;
        }
        crate::metrics::task_created(&task.tool);
        // Not on a front that runs no work, nor without the version.
        let executes = self
            .placement
            .shared()
            .is_none_or(|cluster| cluster.config.execution);
        let runs_here = executes && self.versions.runs(&task.tool, &old.origin.tool_version);
        if let (Some(lease), false) = (&lease, runs_here) {
            // For an instance that runs it (the claims route by version).
            if let Some(cluster) = self.placement.shared() {
                cluster.store.release(lease).await?;
            }
            return Ok(id);
        }
        let recovery = Recovery {
            id: Arc::clone(&id),
            owner: task.owner.clone(),
            tool: task.tool.clone(),
            origin: old.origin,
            answers,
            steps,
            cancel_requested: false,
            woken: false,
            woken_by_timer_ms: None,
        };
        let mut report = RecoveryReport::default();
        take(self, recovery, lease, Cause::Retried, &mut report, None).await?;
        Ok(id)
    }
}
