//! The memory store's bound on an owner's finished tasks ([`NewTask::max_finished_per_owner`]).
//!
//! A create with a bound appends its id to its owner's list, in one map behind one mutex.
//! The sweep ([`TaskStore::expire_due`]) walks, newest first, the lists of the owners that
//! are due and removes their finished tasks past the bound. An owner is due when a create
//! or the end of one of its tasks left it with more tasks than its bound (only then can its
//! finished ones be past it: an owner that created past its bound while its tasks ran, and
//! then created no more, is walked again as they end), or when one of its tasks was purged
//! (so that its list, and the owner once its list is empty, do not outlive its tasks).
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
    /// Oldest first; the ids of tasks that are gone go at the owner's next walk.
    ids: VecDeque<Arc<str>>,
    /// The bound of the owner's latest create.
    keep: usize,
    /// Whether the next sweep walks this owner.
    due: bool,
    /// How many of its ids a walk under way took out (until [`ByOwner::put_back`]).
    walked: usize,
}

impl Owned {
    /// Whether it holds more tasks than its bound, counting those a walk under way took
    /// out: only then can its finished tasks be past the bound.
    fn over_bound(&self) -> bool {
        self.ids.len() + self.walked > self.keep
    }
}

impl ByOwner {
    /// Task `id` of `owner` was created with the bound `keep`.
    pub(super) fn created(&self, owner: Arc<str>, id: Arc<str>, keep: usize) {
        let mut owners = self.0.lock();
        let owned = owners.entry(owner).or_default();
        owned.ids.push_back(id);
        owned.keep = keep;
        owned.due |= owned.over_bound();
    }

    /// Tasks of `owners` ended, or were `purged`: the next sweep walks each owner whose
    /// tasks were purged, and each that holds more tasks than its bound.
    pub(super) fn ended(&self, owners: &[Arc<str>], purged: bool) {
        if owners.is_empty() {
            return;
        }
        let mut by_owner = self.0.lock();
        for owner in owners {
            if let Some(owned) = by_owner.get_mut(owner) {
                owned.due |= purged || owned.over_bound();
            }
        }
    }

    /// The owners the sweep walks now, each with its bound and its ids (oldest first), taken
    /// out until [`ByOwner::put_back`].
    pub(super) fn take_due(&self) -> Vec<(Arc<str>, usize, VecDeque<Arc<str>>)> {
        let mut by_owner = self.0.lock();
        by_owner
            .iter_mut()
            .filter_map(|(owner, owned)| {
                let ids = std::mem::take(&mut owned.due).then(|| std::mem::take(&mut owned.ids))?;
                owned.walked = ids.len();
                Some((Arc::clone(owner), owned.keep, ids))
            })
            .collect()
    }

    /// The ids the walk of `owner` kept (oldest first), before those of the tasks created
    /// meanwhile; an owner left with none is forgotten.
    pub(super) fn put_back(&self, owner: &Arc<str>, kept: VecDeque<Arc<str>>) {
        let mut by_owner = self.0.lock();
        let Some(owned) = by_owner.get_mut(owner) else {
            return;
        };
        let newer = std::mem::replace(&mut owned.ids, kept);
        owned.ids.extend(newer);
        owned.walked = 0;
        if owned.ids.is_empty() && !owned.due {
            by_owner.remove(owner);
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

    /// A create or an end while the sweep walks an owner counts the ids the walk took out:
    /// an owner over its bound is walked again at the next sweep.
    #[test]
    fn changes_during_a_walk_count_the_walked_tasks() {
        let by_owner = ByOwner::default();
        let owner: Arc<str> = Arc::from("o");
        for i in 0..3 {
            by_owner.created(Arc::clone(&owner), Arc::from(format!("t{i}")), 2);
        }
        let walk = || {
            let mut due = by_owner.take_due();
            assert_eq!(due.len(), 1, "the owner is due");
            due.pop().unwrap().2
        };
        let walked = walk();
        by_owner.ended(&[Arc::clone(&owner)], false);
        by_owner.put_back(&owner, walked);
        let walked = walk();
        by_owner.created(Arc::clone(&owner), Arc::from("t3"), 2);
        by_owner.put_back(&owner, walked);
        walk();
    }
}
