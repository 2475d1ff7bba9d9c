//! The task store as the runtime sees it: every call timed into
//! `mcp_tasks_store_operation_seconds{operation}`, and every task created counted.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use async_trait::async_trait;
use rmcp::model::{InputRequest, InputResponses};

use crate::store::{
    AdminStore, ClusterStore, Created, Lease, NewTask, Notice, Outcome, Recovery, Step, StoreError,
    TaskSnapshot, TaskStore,
};

/// `store`, timed.
pub(crate) fn timed(store: Arc<dyn TaskStore>) -> Arc<dyn TaskStore> {
    Arc::new(Timed(store))
}

/// Runs `call`, recording how long it took under `operation`.
async fn time<T>(operation: &'static str, call: impl Future<Output = T>) -> T {
    let start = Instant::now();
    let out = call.await;
    ::metrics::histogram!(super::STORE_OPERATION, "operation" => operation)
        .record(start.elapsed().as_secs_f64());
    out
}

/// Counts a write of running work the store refused as fenced.
fn fenced<T>(written: Result<T, StoreError>) -> Result<T, StoreError> {
    if let Err(StoreError::Fenced { .. }) = &written {
        super::fenced_write();
    }
    written
}

/// A store whose every call is timed.
struct Timed(Arc<dyn TaskStore>);

impl Timed {
    fn cluster_store(&self) -> Result<&dyn ClusterStore, StoreError> {
        // `cluster()` answers `Some(self)` only when the inner store is a cluster store.
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

    async fn set_status_message(
        &self,
        id: &str,
        message: Option<String>,
    ) -> Result<(), StoreError> {
        time("set_status_message", self.0.set_status_message(id, message)).await
    }

    async fn request_input(
        &self,
        id: &str,
        key: &str,
        request: InputRequest,
    ) -> Result<(), StoreError> {
        time("request_input", self.0.request_input(id, key, request)).await
    }

    async fn deliver_input(
        &self,
        id: &str,
        responses: InputResponses,
    ) -> Result<InputResponses, StoreError> {
        time("deliver_input", self.0.deliver_input(id, responses)).await
    }

    async fn finish(&self, id: &str, outcome: Outcome) -> Result<(), StoreError> {
        time("finish", self.0.finish(id, outcome)).await
    }

    async fn request_cancel(&self, id: &str) -> Result<(), StoreError> {
        time("request_cancel", self.0.request_cancel(id)).await
    }

    async fn save_step(&self, id: &str, step: Step) -> Result<(), StoreError> {
        time("save_step", self.0.save_step(id, step)).await
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

    fn cluster(&self) -> Option<&dyn ClusterStore> {
        self.0.cluster().map(|_| self as &dyn ClusterStore)
    }

    fn admin(&self) -> Option<&dyn AdminStore> {
        self.0.admin()
    }
}

#[async_trait]
impl ClusterStore for Timed {
    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        time("renew", self.cluster_store()?.renew(lease)).await
    }

    async fn claim_lapsed(
        &self,
        instance: &str,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<(Recovery, Lease)>, StoreError> {
        let cluster = self.cluster_store()?;
        time("claim_lapsed", cluster.claim_lapsed(instance, lease, limit)).await
    }

    async fn claim_queued(
        &self,
        instance: &str,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<(Recovery, Lease)>, StoreError> {
        let cluster = self.cluster_store()?;
        let claimed = time("claim_queued", cluster.claim_queued(instance, lease, limit)).await;
        if let Ok(claimed) = &claimed {
            for (task, _) in claimed {
                super::claimed_queued(&task.id);
            }
        }
        claimed
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        time("release", self.cluster_store()?.release(lease)).await
    }

    async fn set_status_message_fenced(
        &self,
        lease: &Lease,
        message: Option<String>,
    ) -> Result<(), StoreError> {
        let cluster = self.cluster_store()?;
        fenced(
            time(
                "set_status_message",
                cluster.set_status_message_fenced(lease, message),
            )
            .await,
        )
    }

    async fn request_input_fenced(
        &self,
        lease: &Lease,
        key: &str,
        request: InputRequest,
    ) -> Result<(), StoreError> {
        let cluster = self.cluster_store()?;
        fenced(
            time(
                "request_input",
                cluster.request_input_fenced(lease, key, request),
            )
            .await,
        )
    }

    async fn save_step_fenced(&self, lease: &Lease, step: Step) -> Result<(), StoreError> {
        fenced(
            time(
                "save_step",
                self.cluster_store()?.save_step_fenced(lease, step),
            )
            .await,
        )
    }

    async fn finish_fenced(&self, lease: &Lease, outcome: Outcome) -> Result<(), StoreError> {
        fenced(
            time(
                "finish",
                self.cluster_store()?.finish_fenced(lease, outcome),
            )
            .await,
        )
    }

    async fn answers(&self, id: &str) -> Result<InputResponses, StoreError> {
        time("answers", self.cluster_store()?.answers(id)).await
    }

    async fn queue_depth(&self) -> Result<Option<u64>, StoreError> {
        time("queue_depth", self.cluster_store()?.queue_depth()).await
    }

    fn wakeups(&self) -> tokio::sync::broadcast::Receiver<Notice> {
        match self.0.cluster() {
            Some(cluster) => cluster.wakeups(),
            // Never reached: `cluster()` is `None` then. A closed channel.
            None => tokio::sync::broadcast::channel(1).1,
        }
    }
}
