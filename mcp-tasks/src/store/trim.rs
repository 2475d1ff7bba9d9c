//! The owners whose finished tasks a store trims at its next sweep
//! ([`NewTask::max_finished_per_owner`]): a create notes its owner and bound, the store's
//! [`TaskStore::expire_due`](super::TaskStore::expire_due) takes them and removes, for each,
//! the finished tasks past the bound, oldest (by creation) first. Only owners that created
//! since the last sweep are looked at, each by an index of its own finished tasks.

use std::{collections::HashMap, sync::Arc};

use parking_lot::Mutex;

use super::NewTask;

/// Owners to trim, with the bound their latest create carried.
#[derive(Default)]
pub(crate) struct Owners(Mutex<HashMap<Arc<str>, usize>>);

impl Owners {
    /// Notes `task`'s owner when the task carries a bound.
    pub(crate) fn note(&self, task: &NewTask) {
        if let Some(keep) = task.max_finished_per_owner {
            self.0.lock().insert(Arc::clone(&task.owner), keep.max(1));
        }
    }

    /// The owners noted since the last call, with their bounds.
    pub(crate) fn take(&self) -> Vec<(Arc<str>, usize)> {
        std::mem::take(&mut *self.0.lock()).into_iter().collect()
    }
}
