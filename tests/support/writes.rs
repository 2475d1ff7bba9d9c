//! The writes of running work as the tests make them: each one [`TaskStore::apply`] of one
//! transition, unfenced, or under a lease with [`Writes::under`].
#![allow(
    dead_code,
    async_fn_in_trait,
    reason = "each test binary uses a few of them"
)]

use mcp_tasks::store::{Lease, Outcome, Step, StoreError, TaskStore, Transition};
use rmcp::model::InputRequest;

/// The writes of running work, on any store.
pub trait Writes: TaskStore {
    /// [`Transition::StatusMessage`], unfenced.
    async fn set_status_message(
        &self,
        id: &str,
        message: Option<String>,
    ) -> Result<(), StoreError> {
        self.apply(id, None, Transition::StatusMessage(message))
            .await
    }

    /// [`Transition::RequestInput`] before the run's first step, unfenced.
    async fn request_input(
        &self,
        id: &str,
        key: &str,
        request: InputRequest,
    ) -> Result<(), StoreError> {
        let key = key.to_owned();
        let ask = Transition::RequestInput {
            key,
            request,
            at_step: 0,
        };
        self.apply(id, None, ask).await
    }

    /// [`Transition::SaveStep`], unfenced.
    async fn save_step(&self, id: &str, step: Step) -> Result<(), StoreError> {
        self.apply(id, None, Transition::SaveStep(step)).await
    }

    /// [`Transition::Finish`], unfenced.
    async fn finish(&self, id: &str, outcome: Outcome) -> Result<(), StoreError> {
        self.apply(id, None, Transition::Finish(outcome)).await
    }

    /// `transition` of the lease's task, under `lease`.
    async fn under(&self, lease: &Lease, transition: Transition) -> Result<(), StoreError> {
        self.apply(&lease.task_id, Some(lease), transition).await
    }
}

impl<S: TaskStore + ?Sized> Writes for S {}
