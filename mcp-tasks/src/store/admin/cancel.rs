//! An operator's cancel of any owner's task.

use super::Cancelled;
use crate::store::{StoreError, TaskStore};

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
