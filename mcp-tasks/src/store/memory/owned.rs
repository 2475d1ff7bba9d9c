//! The memory store's bound on an owner's finished tasks ([`NewTask::max_finished_per_owner`]).
//!
//! A create with a bound appends its id to its owner's list, in one map behind one mutex,
//! and the owner counts how many of its listed tasks are finished and how many are gone
//! (purged, their ids not yet dropped from the list). A create, an end, a purge and a walk's
//! removal are counted under the lock of the task's shard, so a count is never behind what a
//! sweep reads of the task. A walk removes a task only while its owner is past its bound at
//! that moment: a purge meanwhile (an operator's, or another call's expiry) leaves it fewer
//! to remove. The ids a walk drops are counted when it puts the list back, and no other walk
//! takes that owner meanwhile.
//!
//! The sweep ([`TaskStore::expire_due`]) walks the owners that are due, oldest task first,
//! and removes the finished tasks past the bound until as many are left as it keeps: the
//! work is what it removes (plus the few live tasks older than them), not the length of the
//! list. An owner is due when its finished tasks are more than its bound, or when over half
//! of its list is gone; such a walk goes to the end of the list and drops the ids that are
//! gone (so that a list, and the owner once its list is empty, do not outlive its tasks).
//!
//! [`NewTask::max_finished_per_owner`]: crate::store::NewTask::max_finished_per_owner
//! [`TaskStore::expire_due`]: crate::store::TaskStore::expire_due

use std::{
    collections::{HashMap, VecDeque},
    sync::Arc,
};

use parking_lot::Mutex;

/// The tasks of each owner created with a finished-task bound.
#[derive(Default)]
pub(super) struct ByOwner(Mutex<HashMap<Arc<str>, Owned>>);

#[derive(Default)]
struct Owned {
    /// Oldest first; the ids of tasks that are gone go at a walk that reaches them.
    ids: VecDeque<Arc<str>>,
    /// The bound of the owner's latest create.
    keep: usize,
    /// How many of the listed tasks are finished and still stored.
    finished: usize,
    /// How many of the listed tasks are gone, counting those that a walk under way dropped.
    gone: usize,
    /// Whether the next sweep walks this owner.
    due: bool,
    /// How many of its ids a walk under way took out (until [`ByOwner::put_back`]).
    walked: usize,
}

impl Owned {
    /// How many of its finished tasks are past its bound.
    fn excess(&self) -> usize {
        self.finished.saturating_sub(self.keep)
    }

    /// Whether over half of its list (counting the ids a walk under way took out) is gone.
    fn half_gone(&self) -> bool {
        self.gone * 2 > self.ids.len() + self.walked
    }

    /// Whether a walk has work: finished tasks past the bound, or a list over half gone.
    fn needs_walk(&self) -> bool {
        self.excess() > 0 || self.half_gone()
    }
}

/// One owner's walk: its ids (oldest first), taken out of the map until
/// [`ByOwner::put_back`].
pub(super) struct Walk {
    pub(super) owner: Arc<str>,
    pub(super) ids: VecDeque<Arc<str>>,
    /// How many finished tasks it may remove, oldest first: those past the bound when it
    /// began (each removal checks the bound again, [`ByOwner::remove_one`]).
    pub(super) excess: usize,
    /// Whether to walk the whole list, dropping the ids of tasks that are gone.
    pub(super) whole: bool,
}

impl ByOwner {
    /// Task `id` of `owner` was created with the bound `keep` (under its shard's lock).
    pub(super) fn created(&self, owner: Arc<str>, id: Arc<str>, keep: usize) {
        let mut owners = self.0.lock();
        let owned = owners.entry(owner).or_default();
        owned.ids.push_back(id);
        owned.keep = keep;
        owned.due |= owned.needs_walk();
    }

    /// A task of `owner` created with a bound ended (under its shard's lock).
    pub(super) fn ended(&self, owner: &str) {
        self.change(owner, |owned| owned.finished += 1);
    }

    /// A finished task of `owner` created with a bound was purged (under its shard's lock).
    pub(super) fn purged(&self, owner: &str) {
        self.change(owner, |owned| {
            owned.finished = owned.finished.saturating_sub(1);
            owned.gone += 1;
        });
    }

    /// Whether a walk may remove one more finished task of `owner`, which it then does (under
    /// the task's shard lock): only while the owner is past its bound.
    pub(super) fn remove_one(&self, owner: &str) -> bool {
        let mut by_owner = self.0.lock();
        let Some(owned) = by_owner.get_mut(owner).filter(|owned| owned.excess() > 0) else {
            return false;
        };
        owned.finished -= 1;
        true
    }

    fn change(&self, owner: &str, f: impl FnOnce(&mut Owned)) {
        if let Some(owned) = self.0.lock().get_mut(owner) {
            f(owned);
            owned.due |= owned.needs_walk();
        }
    }

    /// The owners the sweep walks now, their ids taken out until [`ByOwner::put_back`]. An
    /// owner that a walk under way holds waits for the next sweep.
    pub(super) fn take_due(&self) -> Vec<Walk> {
        let mut by_owner = self.0.lock();
        by_owner
            .iter_mut()
            .filter(|(_, owned)| owned.due && owned.walked == 0)
            .filter_map(|(owner, owned)| {
                owned.due = false;
                let (excess, whole) = (owned.excess(), owned.half_gone());
                if excess == 0 && !whole {
                    return None;
                }
                owned.walked = owned.ids.len();
                let ids = std::mem::take(&mut owned.ids);
                let owner = Arc::clone(owner);
                Some(Walk {
                    owner,
                    ids,
                    excess,
                    whole,
                })
            })
            .collect()
    }

    /// The end of `walk`: its ids are what it left (oldest first), before those of the tasks
    /// created meanwhile; it `dropped` the ids of tasks that were gone. An owner left with
    /// none is forgotten.
    pub(super) fn put_back(&self, walk: Walk, dropped: usize) {
        let mut by_owner = self.0.lock();
        let Some(owned) = by_owner.get_mut(&walk.owner) else {
            return;
        };
        let newer = std::mem::replace(&mut owned.ids, walk.ids);
        owned.ids.extend(newer);
        owned.walked = 0;
        owned.gone = owned.gone.saturating_sub(dropped);
        owned.due |= owned.needs_walk();
        if owned.ids.is_empty() && !owned.due {
            by_owner.remove(&walk.owner);
        }
    }

    /// How many owners the map holds.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::ByOwner;

    /// Owner `o` with `tasks` finished tasks, `t0` first, each created with a bound of 2.
    fn finished_tasks(tasks: usize) -> ByOwner {
        let by_owner = ByOwner::default();
        for i in 0..tasks {
            by_owner.created(Arc::from("o"), Arc::from(format!("t{i}")), 2);
            by_owner.ended("o");
        }
        by_owner
    }

    /// An end while the sweep walks an owner waits for that walk: the owner is walked again
    /// at the next sweep, not by a second walk over the ids created meanwhile.
    #[test]
    fn changes_during_a_walk_wait_for_it() {
        let by_owner = finished_tasks(3);
        let mut due = by_owner.take_due();
        assert_eq!(due.len(), 1, "the owner is due");
        let walk = due.pop().unwrap();
        assert_eq!((walk.ids.len(), walk.excess), (3, 1));
        by_owner.created(Arc::from("o"), Arc::from("t3"), 2);
        by_owner.ended("o");
        assert!(
            by_owner.take_due().is_empty(),
            "the walk under way holds it"
        );
        let mut walk = walk;
        walk.ids.pop_front();
        assert!(by_owner.remove_one("o"));
        by_owner.put_back(walk, 0);
        let due = by_owner.take_due();
        assert_eq!(due.len(), 1, "due again");
        assert_eq!((due[0].ids.len(), due[0].excess), (3, 1));
    }

    /// A purge while a walk is under way (an operator's, or another call's expiry) leaves
    /// the walk fewer tasks to remove: it never takes the owner below its bound.
    #[test]
    fn a_purge_during_a_walk_leaves_it_less_to_remove() {
        let by_owner = finished_tasks(4);
        let walk = by_owner.take_due().pop().expect("the owner is due");
        assert_eq!(walk.excess, 2);
        by_owner.purged("o");
        assert!(by_owner.remove_one("o"), "one is still past the bound");
        assert!(!by_owner.remove_one("o"), "the purge took the other");
        by_owner.put_back(walk, 0);
        assert!(by_owner.take_due().is_empty(), "at its bound");
    }

    /// An owner due with nothing left to do by the sweep (a purge brought it back to its
    /// bound) keeps its list, and is walked when it is past its bound again.
    #[test]
    fn an_owner_due_for_nothing_keeps_its_list() {
        let by_owner = finished_tasks(3);
        by_owner.purged("o");
        assert!(by_owner.take_due().is_empty(), "at its bound again");
        by_owner.created(Arc::from("o"), Arc::from("t3"), 2);
        by_owner.ended("o");
        let due = by_owner.take_due();
        assert_eq!(due.len(), 1, "past it again");
        assert_eq!(
            (due[0].ids.len(), due[0].excess),
            (4, 1),
            "with its whole list"
        );
    }
}
