//! A task store around another whose reads of one task (`get`) go through a hook first: a
//! test counts them, or holds them to make a reader fall behind.

use std::{future::Future, pin::Pin, sync::Arc};

use mcp_tasks::store::{
    ClusterStore, Created, Lease, NewTask, Recovery, StoreError, TaskSnapshot, TaskStore,
    Transition,
};
use rmcp::model::InputResponses;

/// What runs before each read: given the task id, the future the read waits for.
pub type Hook = Arc<dyn Fn(&str) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// `inner`, with `before_get` run before each of its reads.
pub struct ReadHook<S> {
    pub inner: S,
    pub before_get: Hook,
}

#[async_trait::async_trait]
impl<S: TaskStore> TaskStore for ReadHook<S> {
    async fn create(&self, task: NewTask) -> Result<Created, StoreError> {
        self.inner.create(task).await
    }
    async fn get(&self, id: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        (self.before_get)(id).await;
        self.inner.get(id).await
    }
    async fn apply(
        &self,
        id: &str,
        fence: Option<&Lease>,
        transition: Transition,
    ) -> Result<(), StoreError> {
        self.inner.apply(id, fence, transition).await
    }
    async fn deliver_input(
        &self,
        id: &str,
        responses: InputResponses,
    ) -> Result<InputResponses, StoreError> {
        self.inner.deliver_input(id, responses).await
    }
    async fn request_cancel(&self, id: &str) -> Result<(), StoreError> {
        self.inner.request_cancel(id).await
    }
    async fn recoverable(&self) -> Result<Vec<Recovery>, StoreError> {
        self.inner.recoverable().await
    }
    async fn stored_answers(&self, id: &str) -> Result<InputResponses, StoreError> {
        self.inner.stored_answers(id).await
    }
    async fn expire_due(&self) -> Result<Vec<Arc<str>>, StoreError> {
        self.inner.expire_due().await
    }
    fn cluster(&self) -> Option<&dyn ClusterStore> {
        self.inner.cluster()
    }
}
