//! An operator's cancel or failure of any owner's task.

use super::Cancelled;
use crate::store::{Outcome, StoreError, TaskSnapshot, TaskStore, Transition};

/// Records a cancel intent for task `id`, whoever owns it, through the state machine
/// ([`TaskStore::request_cancel`]).
///
/// # Errors
/// [`StoreError::NotFound`] for an unknown or purged id; a failure of the store.
pub async fn cancel(store: &dyn TaskStore, id: &str) -> Result<Cancelled, StoreError> {
    let before = store.get(id).await?.ok_or(StoreError::NotFound)?;
    if before.status.is_terminal() {
        return Ok(Cancelled::AlreadyEnded(before));
    }
    store.request_cancel(id).await?;
    let after = store.get(id).await?.ok_or(StoreError::NotFound)?;
    Ok(Cancelled::Requested(after))
}

/// Ends the live task `id`, whoever owns it, `failed` with `reason` (an operator's choice:
/// its code never runs again), through the state machine; answers the ended task.
///
/// # Errors
/// [`StoreError::NotFound`] for an unknown or purged id, [`StoreError::Terminal`] for a task
/// that ended; a failure of the store.
pub async fn fail(
    store: &dyn TaskStore,
    id: &str,
    reason: &str,
) -> Result<TaskSnapshot, StoreError> {
    let message = format!("failed by an operator: {reason}");
    let error = crate::errors::to_object(&crate::errors::not_resumed(message));
    store
        .apply(id, None, Transition::Finish(Outcome::Failed(error)))
        .await?;
    store.get(id).await?.ok_or(StoreError::NotFound)
}

/// Task `id` if it is live (read as a read does, applying the expiry that is due): the SQL
/// stores' check before an operator's change of a live task.
///
/// # Errors
/// [`StoreError::NotFound`] for an unknown or purged id, [`StoreError::Terminal`] for a task
/// that ended; a failure of the store.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) async fn live(store: &dyn TaskStore, id: &str) -> Result<TaskSnapshot, StoreError> {
    let task = store.get(id).await?.ok_or(StoreError::NotFound)?;
    if task.status.is_terminal() {
        return Err(StoreError::Terminal(task.status));
    }
    Ok(task)
}
