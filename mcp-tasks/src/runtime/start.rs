//! Starting a built runtime: its background loops (`lifecycle.rs`), and what it does with
//! the tasks it finds unfinished. Above the registry of running tasks (`mod.rs`) and the
//! cluster loops (`cluster.rs`), which know nothing of each other's start.

use std::sync::Arc;

use super::{
    Runtime, StartError, cluster,
    placement::Placement,
    recover::{RecoveryReport, recover},
};
use crate::store::StoreError;

impl Runtime {
    /// Starts every background loop, once (`lifecycle.rs`): the expiry sweep and, in cluster
    /// mode, renewals, wake-ups and (on an executing instance) claims. A running runtime is
    /// left as it is. The store learns the bound on each owner's finished tasks first, so
    /// that the sweep trims, from the rows, the owners an earlier process left past it.
    pub(crate) fn start(self: &Arc<Self>) -> Result<(), StartError> {
        if !self.lifecycle.begin()? {
            return Ok(());
        }
        self.store
            .set_max_finished_per_owner(self.limits.max_finished_tasks_per_owner());
        let loops = &self.lifecycle.loops;
        loops.spawn(super::reap_loop(Arc::clone(self)));
        if self.store.parks() {
            loops.spawn(super::park::wake_loop(Arc::clone(self)));
        }
        match &self.placement {
            Placement::Cluster(instance) => cluster::start(self, instance),
            Placement::Local if self.limited.any() => {
                loops.spawn(super::held::dispatch_loop(Arc::clone(self)));
            }
            Placement::Local => {}
        }
        Ok(())
    }

    /// Deals with the tasks a previous process left unfinished
    /// ([`Engine::recover`](crate::Engine::recover)): over a single-process store replays or
    /// fails each one (`recover.rs`); in a cluster claims at once the lapsed and queued tasks
    /// (an instance without execution claims nothing): other live instances run the rest.
    pub(crate) async fn recover(self: &Arc<Self>) -> Result<RecoveryReport, StoreError> {
        match &self.placement {
            Placement::Local => {
                // The parked tasks first: none of the replays runs yet, so none parks while
                // their pages are read (a park it stored would be held twice).
                self.hold_parked().await?;
                recover(self).await
            }
            Placement::Cluster(instance) if instance.config.execution => {
                cluster::claim(self, instance).await
            }
            Placement::Cluster(_) => Ok(RecoveryReport::default()),
        }
    }
}
