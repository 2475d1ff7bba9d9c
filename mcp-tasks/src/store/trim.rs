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

/// How many owners at most wait for a bound ([`Owners::ended`] before any create carried
/// one): a store whose creates never carry one does not remember every owner.
const MAX_WAITING: usize = 10_000;

/// Owners to trim, with the bound their latest create carried.
#[derive(Default)]
pub(crate) struct Owners {
    due: Mutex<HashMap<Arc<str>, usize>>,
    /// The bound the latest create carried; 0 before one carried a bound (and in `due`, an
    /// owner waiting for one).
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
    #[cfg_attr(
        not(feature = "postgres"),
        allow(dead_code, reason = "only the Postgres store looks at an owner again")
    )]
    pub(crate) fn again(&self, owner: &Arc<str>, keep: usize) {
        self.due.lock().entry(Arc::clone(owner)).or_insert(keep);
    }

    /// Notes the owner of a task that ended, with the bound the latest create carried; before
    /// a create in this process carried one (after a restart), with none yet: the owner waits
    /// for the first bound a create brings.
    #[cfg_attr(
        not(feature = "sqlite"),
        allow(dead_code, reason = "only the SQLite store notes ends")
    )]
    pub(crate) fn ended(&self, owner: &Arc<str>) {
        let keep = self.latest.load(Ordering::Relaxed);
        let mut due = self.due.lock();
        if keep > 0 || due.len() < MAX_WAITING {
            due.entry(Arc::clone(owner)).or_insert(keep);
        }
    }

    /// The owners noted since the last call, with their bounds; an owner noted before any
    /// bound was known stays noted until one is.
    pub(crate) fn take(&self) -> Vec<(Arc<str>, usize)> {
        let latest = self.latest.load(Ordering::Relaxed);
        if latest == 0 {
            return Vec::new();
        }
        std::mem::take(&mut *self.due.lock())
            .into_iter()
            .map(|(owner, keep)| (owner, if keep == 0 { latest } else { keep }))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{MAX_WAITING, NewTask, Owners};

    /// Owners whose tasks end before any bound is known wait for one, at most
    /// [`MAX_WAITING`] of them, and get the first bound a create brings.
    #[test]
    fn ends_before_a_bound_wait_for_one_and_are_bounded() {
        let owners = Owners::default();
        for i in 0..=MAX_WAITING {
            owners.ended(&Arc::from(format!("owner-{i}")));
        }
        assert!(owners.take().is_empty(), "no bound yet: nothing to trim");
        assert_eq!(owners.due.lock().len(), MAX_WAITING, "at most so many wait");
        let task = NewTask::new(Arc::from("t"), Arc::from("bob"), Arc::from("tool"))
            .with_max_finished_per_owner(7);
        owners.note(&task);
        let due = owners.take();
        assert_eq!(due.len(), MAX_WAITING + 1, "the waiting owners and bob");
        assert!(due.iter().all(|(_, keep)| *keep == 7), "all with the bound");
        owners.ended(&Arc::from("late"));
        assert_eq!(owners.take(), vec![(Arc::from("late"), 7)]);
    }
}
