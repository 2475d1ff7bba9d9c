//! The memory store's bound on an owner's finished tasks ([`NewTask::max_finished_per_owner`]).
//!
//! A create with a bound appends its id to its owner's list, in one map behind one mutex.
//! The sweep ([`TaskStore::expire_due`]) walks, newest first, the lists of the owners that
//! are due and removes their finished tasks past the bound. An owner is due when a create
//! left it with more tasks than its bound (only then can its finished ones be past it), or
//! when one of its tasks was purged (so that its list, and the owner once its list is empty,
//! do not outlive its tasks).
//!
//! [`NewTask::max_finished_per_owner`]: crate::store::NewTask::max_finished_per_owner
//! [`TaskStore::expire_due`]: crate::store::TaskStore::expire_due

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, atomic::Ordering},
};

use parking_lot::Mutex;

use super::{Entry, MemoryStore};

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
}

impl ByOwner {
    /// Task `id` of `owner` was created with the bound `keep`.
    pub(super) fn created(&self, owner: Arc<str>, id: Arc<str>, keep: usize) {
        let mut owners = self.0.lock();
        let owned = owners.entry(owner).or_default();
        owned.ids.push_back(id);
        owned.keep = keep;
        owned.due |= owned.ids.len() > keep;
    }

    /// How many owners the map holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().len()
    }
}

impl MemoryStore {
    /// Tasks removed from the store (purged): their idempotency keys are forgotten (unless
    /// a newer task took one over), and their owners are walked at the next sweep.
    pub(super) fn forget(&self, removed: impl IntoIterator<Item = Entry>) {
        let mut owners = Vec::new();
        for entry in removed {
            owners.push(Arc::clone(&entry.owner));
            self.forget_keys(Some(entry));
        }
        if owners.is_empty() {
            return;
        }
        let mut by_owner = self.by_owner.0.lock();
        for owner in owners {
            if let Some(owned) = by_owner.get_mut(&owner) {
                owned.due = true;
            }
        }
    }

    /// The sweep's part: walks each owner that is due.
    pub(super) fn trim_due(&self) {
        let due: Vec<(Arc<str>, usize)> = self
            .by_owner
            .0
            .lock()
            .iter_mut()
            .filter_map(|(owner, owned)| {
                std::mem::take(&mut owned.due).then(|| (Arc::clone(owner), owned.keep))
            })
            .collect();
        for (owner, keep) in due {
            self.trim_owner(&owner, keep);
        }
    }

    /// Keeps `owner`'s `keep` newest finished tasks (by creation) and removes the older
    /// finished ones; live tasks stay. Forgets the ids of tasks that are gone, and the owner
    /// once none is left.
    fn trim_owner(&self, owner: &Arc<str>, keep: usize) {
        let ids = match self.by_owner.0.lock().get_mut(owner) {
            Some(owned) => std::mem::take(&mut owned.ids),
            None => return,
        };
        let mut kept = VecDeque::with_capacity(ids.len().min(keep));
        let mut finished = 0;
        for id in ids.into_iter().rev() {
            let mut shard = self.shard(&id);
            let Some(entry) = shard.tasks.get(&id) else {
                continue;
            };
            if entry.state.status.is_terminal() {
                finished += 1;
                if finished > keep {
                    let removed = shard.tasks.remove(&id);
                    drop(shard);
                    self.len.fetch_sub(1, Ordering::Relaxed);
                    self.forget_keys(removed);
                    continue;
                }
            }
            drop(shard);
            kept.push_front(id);
        }
        let mut by_owner = self.by_owner.0.lock();
        let Some(owned) = by_owner.get_mut(owner) else {
            return;
        };
        // Tasks created while this ran come after the ones it kept.
        let newer = std::mem::replace(&mut owned.ids, kept);
        owned.ids.extend(newer);
        if owned.ids.is_empty() && !owned.due {
            by_owner.remove(owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::MemoryStore;
    use crate::store::{NewTask, Outcome, TaskStore, Transition};

    fn task(id: &str, owner: &str) -> NewTask {
        NewTask::new(id.into(), owner.into(), "tool".into())
            .with_ttl(Some(Duration::from_secs(1)))
            .with_max_finished_per_owner(10)
    }

    /// An owner's entry does not outlive its tasks: once they are purged, the next sweeps
    /// forget it, whether or not it created more than its bound.
    #[tokio::test(start_paused = true)]
    async fn owners_whose_tasks_are_gone_are_forgotten() {
        let store = MemoryStore::new().with_expired_retention(Duration::from_secs(1));
        for owner in 0..100 {
            let id = format!("t-{owner}");
            store
                .create(task(&id, &format!("o-{owner}")))
                .await
                .unwrap();
            let end = Transition::Finish(Outcome::Cancelled);
            store.apply(&id, None, end).await.unwrap();
        }
        for i in 0..20 {
            store.create(task(&format!("m-{i}"), "many")).await.unwrap();
        }
        store.expire_due().await.unwrap();
        assert_eq!(store.by_owner.len(), 101, "every owner has a task");
        for _ in 0..2 {
            tokio::time::advance(Duration::from_secs(10)).await;
            store.expire_due().await.unwrap();
        }
        assert!(store.is_empty(), "every task is purged");
        assert_eq!(store.by_owner.len(), 0, "and no owner is kept");
    }
}
