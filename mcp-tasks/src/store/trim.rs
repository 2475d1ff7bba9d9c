//! The owners whose finished tasks a store trims at its next sweep
//! ([`NewTask::max_finished_per_owner`]): a create notes its owner and bound, the store's
//! [`TaskStore::expire_due`](super::TaskStore::expire_due) takes them and removes, for each,
//! the finished tasks past the bound, oldest (by creation) first. Only owners noted since the
//! last sweep are looked at, each by an index of its own finished tasks. An owner whose
//! tasks were still running past its bound at the sweep is noted again: by the store that
//! sees it there (Postgres counts them), or at the end of each of its tasks (SQLite).

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use parking_lot::Mutex;

use super::NewTask;

/// Owners to trim, with the bound their latest create carried.
#[derive(Default)]
pub(crate) struct Owners {
    due: Mutex<HashMap<Arc<str>, usize>>,
    /// The bound the latest create carried; 0 before one carried a bound.
    latest: AtomicUsize,
}

impl Owners {
    /// Notes `task`'s owner when the task carries a bound.
    pub(crate) fn note(&self, task: &NewTask) {
        if let Some(keep) = task.max_finished_per_owner {
            let keep = keep.max(1);
            self.latest.store(keep, Ordering::Relaxed);
            self.due.lock().insert(Arc::clone(&task.owner), keep);
        }
    }

    /// Notes `owner` again, with `keep`, unless a create noted it since the sweep took it.
    pub(crate) fn again(&self, owner: &Arc<str>, keep: usize) {
        self.due.lock().entry(Arc::clone(owner)).or_insert(keep);
    }

    /// Notes the owner of a task that ended, with the bound the latest create carried (none
    /// before a create in this process carried one).
    #[cfg_attr(
        not(feature = "sqlite"),
        allow(dead_code, reason = "only the SQLite store notes ends")
    )]
    pub(crate) fn ended(&self, owner: &Arc<str>) {
        let keep = self.latest.load(Ordering::Relaxed);
        if keep > 0 {
            self.again(owner, keep);
        }
    }

    /// The owners noted since the last call, with their bounds.
    pub(crate) fn take(&self) -> Vec<(Arc<str>, usize)> {
        std::mem::take(&mut *self.due.lock()).into_iter().collect()
    }
}
