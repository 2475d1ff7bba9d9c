//! Where a runtime's work runs: in this process alone, over a single-process store, or as
//! one instance of several on a store they share ([`ClusterStore`]). Decided once, when the
//! runtime is built ([`Placement::new`]); the rest of the runtime asks its [`Placement`]
//! what the mode implies (the fence of a write, the runner and quota of a new task, ...)
//! instead of asking the store again.

use std::sync::Arc;

use super::cluster::ClusterConfig;
use crate::{
    store::{ClusterStore, Lease, NewTask, TaskStore},
    trace,
};

/// Where a runtime's work runs (see the module docs).
pub(crate) enum Placement {
    /// A single-process store: every task's work runs in this process, its one runner, and
    /// its writes need no fence.
    Local,
    /// A store several instances share: this instance's work runs under leases.
    Cluster(Arc<Cluster>),
}

/// This instance in a cluster: the store's cluster operations, its id and its settings.
pub(crate) struct Cluster {
    /// The store's cluster operations (timed, as the runtime's store is).
    pub(crate) store: Arc<dyn ClusterStore>,
    /// This instance's id, the one its leases carry.
    pub(crate) id: Arc<str>,
    pub(crate) config: ClusterConfig,
}

/// The fence of one write of running work ([`Placement::fence`]).
pub(crate) enum Fence<'a> {
    /// A single-process store: one runner, so no fence (and nothing to retry under).
    Unfenced,
    /// In a cluster, the lease the work runs under.
    Held(&'a Cluster, Lease),
    /// In a cluster, the work runs under no lease (it lost it): it writes nothing.
    Lost,
}

impl Placement {
    /// The placement of a runtime over `store`, with `store` as the runtime uses it (every
    /// call timed, `metrics/store.rs`): a cluster when the store has cluster operations
    /// ([`TaskStore::cluster`]), as instance `id` with `config`; `config` is ignored
    /// otherwise.
    pub(crate) fn new(
        store: Arc<dyn TaskStore>,
        id: &Arc<str>,
        config: ClusterConfig,
    ) -> (Arc<dyn TaskStore>, Self) {
        let (store, cluster) = crate::metrics::timed(store);
        let placement = match cluster {
            Some(cluster) => Self::Cluster(Arc::new(Cluster {
                store: cluster,
                id: Arc::clone(id),
                config,
            })),
            None => Self::Local,
        };
        (store, placement)
    }

    /// This instance in its cluster; `None` over a single-process store.
    pub(crate) fn shared(&self) -> Option<&Arc<Cluster>> {
        match self {
            Self::Local => None,
            Self::Cluster(cluster) => Some(cluster),
        }
    }

    /// `task` as this placement records it: in a cluster with the owner's `quota` (it holds
    /// across the cluster, so the store counts it in the create) and, when its work runs
    /// here (`runs`), this instance as its runner under a first lease; without a runner a
    /// cluster store records it queued.
    pub(crate) fn place(&self, task: NewTask, runs: bool, quota: usize) -> NewTask {
        let Self::Cluster(cluster) = self else {
            return task;
        };
        let task = task.with_owner_quota(quota);
        if runs {
            task.with_runner(Arc::clone(&cluster.id), cluster.config.lease)
        } else {
            task
        }
    }

    /// The first run of a call's task here, for its span: in a cluster under the first lease
    /// (this instance, epoch 1).
    pub(crate) fn first_run(&self) -> trace::Run<'_> {
        match self {
            Self::Local => trace::Run::default(),
            Self::Cluster(cluster) => trace::Run {
                instance: Some(&cluster.id),
                epoch: Some(1),
            },
        }
    }

    /// Whether calls are only recorded, queued, for other instances and workers to run
    /// ([`ClusterConfig::with_queued_calls`]).
    pub(crate) fn queues_calls(&self) -> bool {
        matches!(self, Self::Cluster(cluster) if cluster.config.queued_calls)
    }

    /// Whether a call's task is recorded before any of its work starts: calls are queued;
    /// or the call carries an idempotency key (`keyed`) and, in a cluster, two instances may
    /// receive the same key at the same moment, so only the one whose create wins may run
    /// the work (invariant 9 of `runtime/call`).
    pub(crate) fn records_first(&self, keyed: bool) -> bool {
        matches!(self, Self::Cluster(cluster) if keyed || cluster.config.queued_calls)
    }

    /// The fence of a write of running work whose lease is `held()` (`None` once the work
    /// lost it): none over a single-process store; in a cluster, that lease, or
    /// [`Fence::Lost`] without one.
    pub(crate) fn fence(&self, held: impl FnOnce() -> Option<Lease>) -> Fence<'_> {
        match self {
            Self::Local => Fence::Unfenced,
            Self::Cluster(cluster) => {
                held().map_or(Fence::Lost, |lease| Fence::Held(cluster, lease))
            }
        }
    }
}
