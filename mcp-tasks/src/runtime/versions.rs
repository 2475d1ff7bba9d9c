//! Versions that route work: a task runs only where its tool has the version that recorded
//! it ([`ToolDefinition::version`](crate::ToolDefinition::version)).
//!
//! # Invariants
//!
//! 1. **Run only by its version.** In a cluster a claim (queued or lapsed) carries the tools
//!    this instance runs at their versions ([`ToolVersions`](crate::store::ToolVersions)),
//!    and the store takes only tasks recorded by one of them; a task of another version stays
//!    queued (or its lease lapsed) for an instance that has it, or until its TTL ends. The
//!    claims route while tasks of a version this instance does not run are known to wait
//!    (from the start, and at each sample of invariant 4: the filter costs each claim a read
//!    of every row it passes); a task of another version claimed in between runs none of its
//!    code: its lease is released at once, and the claims route from then on.
//! 2. **Waiting, not failed.** A single-process server that restarts with another version
//!    of a tool leaves that tool's unfinished tasks as they are (`working`, with a status
//!    message that names the version they wait for), runs none of their code, and keeps
//!    them here ([`Waiting`](super::waiting::Waiting)): a later start of the old version replays them.
//! 3. **Operators decide.** An operator may fail such a task (its code never runs again)
//!    or re-version it (from then on it replays through the version given; over a
//!    single-process store, a task re-versioned to this server's version starts here at
//!    once). A cancel ends a waiting task at once over a single-process store; in a cluster
//!    any instance ends it unrun once no instance of its version took it within the claims'
//!    grace ([`ClusterConfig::cancel_grace`](crate::ClusterConfig::cancel_grace),
//!    `store/postgres/claim.rs`, `runtime/recover.rs`).
//! 4. **Metrics.** `mcp_tasks_tasks_waiting_for_version{tool, version}` counts the tasks of
//!    a version this instance does not run: the tasks kept here, and in a cluster the
//!    queued and lapsed tasks of every version it does not run (sampled with the queue
//!    depth).

use std::sync::{Arc, atomic::Ordering};

use super::Runtime;
use crate::store::{Lease, Recovery, StoreError, Transition};

impl Runtime {
    /// Leaves `task`, recorded by another version of its tool than the `have` this server
    /// runs, for a server that runs its version (invariant 2). Under a `lease` (a claim that
    /// did not route by version) the lease is released at once, untouched, for an instance
    /// that has it, and this instance's claims route from now on (invariant 1).
    pub(crate) async fn wait_for_version(
        &self,
        task: &Recovery,
        have: &str,
        lease: Option<&Lease>,
    ) -> Result<(), StoreError> {
        let wanted = &task.origin.tool_version;
        tracing::info!(task_id = %task.id, tool = %task.tool, %wanted, %have,
            "task waits for its tool's version");
        if let Some(lease) = lease {
            self.routing.store(true, Ordering::Relaxed);
            if let Some(cluster) = self.placement.shared() {
                match cluster.store.release(lease).await {
                    Err(error) if !error.stops_work() => return Err(error),
                    _ => {}
                }
            }
            return Ok(());
        }
        let tool = &task.tool;
        let message = format!(
            "waiting for a server that runs version `{wanted}` of tool `{tool}` (this one runs \
             `{have}`); an operator can fail it or move it to another version"
        );
        let shown = Transition::StatusMessage(Some(message));
        match self.store.apply(&task.id, None, shown).await {
            Ok(()) => {}
            Err(StoreError::Terminal(_) | StoreError::NotFound) => return Ok(()),
            Err(error) => return Err(error),
        }
        self.changed(&task.id);
        let (tool, version) = (Arc::clone(&task.tool), Arc::clone(wanted));
        self.waiting.keep(Arc::clone(&task.id), tool, version);
        Ok(())
    }

    /// Task `id` was moved to another version by an operator: over a single-process store,
    /// one kept here that this server now runs starts at once (invariant 3). Answers whether
    /// it started.
    #[cfg(feature = "admin")]
    pub(crate) async fn reversioned(self: &Arc<Self>, id: &str) -> Result<bool, StoreError> {
        let Some((tool, _)) = self.waiting.remove(id) else {
            return Ok(false);
        };
        let task = match self.store.recovery(id).await? {
            Some(task) if self.versions.runs(&task.tool, &task.origin.tool_version) => task,
            Some(task) => {
                // Still another version than this server's: kept.
                let wanted = Arc::clone(&task.origin.tool_version);
                self.waiting.keep(Arc::clone(&task.id), tool, wanted);
                return Ok(false);
            }
            None => return Ok(false),
        };
        let mut report = super::recover::RecoveryReport::default();
        let cause = super::recover::Cause::Reversioned;
        super::recover::take(self, task, None, cause, &mut report, None).await?;
        Ok(report.resumed > 0)
    }

    /// Task `id` was ended by an operator: no longer kept, and its work here (if any) stops.
    #[cfg(feature = "admin")]
    pub(crate) fn ended_by_operator(&self, id: &str) {
        self.waiting.remove(id);
        self.cancel(id);
        self.changed(id);
    }
}
