//! The task store as the runtime sees it: every call timed into
//! `mcp_tasks_store_operation_seconds{operation}`, and every task created counted.

use std::{sync::Arc, time::Instant};

use async_trait::async_trait;
use rmcp::model::InputResponses;

use crate::store::{
    AdminStore, Claim, Claimed, ClusterStore, Created, Lease, NewTask, Notice, QueueDepth,
    Recovery, StoreError, TaskSnapshot, TaskStore, Transition,
};

/// `store`, timed, and its cluster operations, timed too, when it has some
/// ([`TaskStore::cluster`]): the runtime's placement keeps them apart (`runtime/placement.rs`),
/// so the timed store itself answers `None` to `cluster()` and every cluster operation goes
/// through the one timed cluster half.
pub(crate) fn timed(
    store: Arc<dyn TaskStore>,
) -> (Arc<dyn TaskStore>, Option<Arc<dyn ClusterStore>>) {
    let cluster = store
        .cluster()
        .is_some()
        .then(|| Arc::new(TimedCluster(Arc::clone(&store))) as Arc<dyn ClusterStore>);
    (Arc::new(Timed(store)), cluster)
}

/// Runs `call`, recording how long it took under `operation`.
async fn time<T>(operation: &'static str, call: impl Future<Output = T>) -> T {
    let start = Instant::now();
    let out = call.await;
    ::metrics::histogram!(super::STORE_OPERATION, "operation" => operation)
        .record(start.elapsed().as_secs_f64());
    out
}

/// A store whose every call is timed.
struct Timed(Arc<dyn TaskStore>);

/// The cluster operations of a store that has them, each call timed.
struct TimedCluster(Arc<dyn TaskStore>);

impl TimedCluster {
    /// The store's cluster operations: made only for a store that has them ([`timed`]); one
    /// that stopped offering them since answers [`StoreError::NotFound`].
    fn inner(&self) -> Result<&dyn ClusterStore, StoreError> {
        self.0.cluster().ok_or(StoreError::NotFound)
    }
}

#[async_trait]
impl TaskStore for Timed {
    async fn create(&self, task: NewTask) -> Result<Created, StoreError> {
        let tool = Arc::clone(&task.tool);
        let created = time("create", self.0.create(task)).await;
        if let Ok(Created::New(_)) = &created {
            super::task_created(&tool);
        }
        created
    }

    async fn get(&self, id: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        time("get", self.0.get(id)).await
    }

    async fn get_many(&self, ids: &[Arc<str>]) -> Result<Vec<Option<TaskSnapshot>>, StoreError> {
        time("get_many", self.0.get_many(ids)).await
    }

    async fn apply(
        &self,
        id: &str,
        fence: Option<&Lease>,
        transition: Transition,
    ) -> Result<(), StoreError> {
        let applied = time(transition.name(), self.0.apply(id, fence, transition)).await;
        if let Err(StoreError::Fenced { .. }) = &applied {
            ::metrics::counter!(super::FENCED_WRITES).increment(1);
        }
        applied
    }

    async fn deliver_input(
        &self,
        id: &str,
        responses: InputResponses,
    ) -> Result<InputResponses, StoreError> {
        time("deliver_input", self.0.deliver_input(id, responses)).await
    }

    async fn request_cancel(&self, id: &str) -> Result<(), StoreError> {
        time("request_cancel", self.0.request_cancel(id)).await
    }

    async fn recoverable(&self) -> Result<Vec<Recovery>, StoreError> {
        time("recoverable", self.0.recoverable()).await
    }

    async fn stored_answers(&self, id: &str) -> Result<InputResponses, StoreError> {
        time("stored_answers", self.0.stored_answers(id)).await
    }

    async fn expire_due(&self) -> Result<Vec<Arc<str>>, StoreError> {
        time("expire_due", self.0.expire_due()).await
    }

    fn set_max_finished_per_owner(&self, tasks: usize) {
        self.0.set_max_finished_per_owner(tasks);
    }

    fn parks(&self) -> bool {
        self.0.parks()
    }

    async fn wake(&self, only: Option<&str>, limit: usize) -> Result<Vec<Recovery>, StoreError> {
        time("wake", self.0.wake(only, limit)).await
    }

    async fn next_wake(&self) -> Result<Option<u64>, StoreError> {
        time("next_wake", self.0.next_wake()).await
    }

    async fn parked_count(&self) -> Result<Option<u64>, StoreError> {
        time("parked_count", self.0.parked_count()).await
    }

    async fn parked_owners(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(Arc<str>, Arc<str>)>, StoreError> {
        time("parked_owners", self.0.parked_owners(after, limit)).await
    }

    fn admin(&self) -> Option<&dyn AdminStore> {
        self.0.admin()
    }
}

#[async_trait]
impl ClusterStore for TimedCluster {
    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        time("renew", self.inner()?.renew(lease)).await
    }

    async fn claim(&self, claim: Claim<'_>) -> Result<Claimed, StoreError> {
        let operation = if claim.queued {
            "claim_queued"
        } else {
            "claim_lapsed"
        };
        time(operation, self.inner()?.claim(claim)).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        time("release", self.inner()?.release(lease)).await
    }

    async fn answers(&self, id: &str) -> Result<InputResponses, StoreError> {
        time("answers", self.inner()?.answers(id)).await
    }

    async fn queue_depth(&self, by_owner: bool) -> Result<Option<Vec<QueueDepth>>, StoreError> {
        time("queue_depth", self.inner()?.queue_depth(by_owner)).await
    }

    async fn unclaimed_versions(&self) -> Result<Option<Vec<(String, String, u64)>>, StoreError> {
        time("unclaimed_versions", self.inner()?.unclaimed_versions()).await
    }

    async fn take_rate(
        &self,
        limiter: &str,
        rate: crate::rate::Rate,
    ) -> Result<Option<std::time::Duration>, StoreError> {
        time("take_rate", self.inner()?.take_rate(limiter, rate)).await
    }

    fn wakeups(&self) -> tokio::sync::broadcast::Receiver<Notice> {
        // A store that stopped offering cluster operations: a closed feed.
        self.inner().map_or_else(
            |_| tokio::sync::broadcast::channel(1).1,
            ClusterStore::wakeups,
        )
    }
}
