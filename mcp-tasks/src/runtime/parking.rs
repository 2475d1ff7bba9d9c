//! What this process keeps of the tasks parked here (`park.rs`): the earliest timer it
//! knows, and the owners whose quota counts parked tasks hold. A leaf: the parking itself
//! is `park.rs`.

use std::{
    collections::{HashMap, hash_map::Entry},
    hash::BuildHasher as _,
    sync::Arc,
};

use parking_lot::Mutex;
use tokio::sync::Notify;

/// The wake-ups of the tasks parked here ([`wake_loop`](super::park::wake_loop)).
#[derive(Default)]
pub(crate) struct Parking {
    /// The earliest timer known to this process (milliseconds since the Unix epoch).
    pub(super) next: Mutex<Option<u64>>,
    /// Tells the wake loop of an earlier timer.
    pub(super) armed: Notify,
    /// In a cluster, runs a claim pass at once (the claim loop's).
    pub(crate) claim_now: Arc<Notify>,
    /// Over a single-process store, the owner of each task parked here, whose quota count
    /// is held until the task is woken or expires (invariant 7); a cluster store counts an
    /// owner's live tasks, parked ones included, itself.
    pub(super) holds: Mutex<Holds>,
    /// The tasks parked before this process started are held (once: `Runtime::hold_parked`).
    pub(super) held_at_start: std::sync::atomic::AtomicBool,
}

/// The owners whose counts parked tasks hold, by task: compact, since it is all a parked
/// task costs this process (a hash of the id and the index of an owner, about 20 bytes a
/// task; the rare ids whose hashes collide are kept whole). An owner is indexed while a
/// hold of theirs is: its index is reused once their last hold goes.
#[derive(Default)]
pub(super) struct Holds {
    hasher: std::collections::hash_map::RandomState,
    by_hash: HashMap<u64, u32>,
    collided: HashMap<Arc<str>, u32>,
    /// Each index's owner and their count of holds; `None` once free.
    owners: Vec<(Option<Arc<str>>, u32)>,
    owner_index: HashMap<Arc<str>, u32>,
    /// The indices whose owner has no hold left.
    free: Vec<u32>,
}

impl Holds {
    /// Holds `owner`'s count for task `id`: `true` when this added a hold, `false` when `id`
    /// was held already (nothing changes then, so the count it holds is counted once). An
    /// id held already is one whose hash is held for the same owner (two ids of one owner
    /// whose 64-bit hashes collide would be taken for one: not worth keeping every id).
    pub(super) fn insert(&mut self, id: &str, owner: Arc<str>) -> bool {
        let (owners, free) = (&mut self.owners, &mut self.free);
        let index = *self.owner_index.entry(owner).or_insert_with_key(|owner| {
            let named = (Some(Arc::clone(owner)), 0);
            match free.pop() {
                Some(index) => {
                    owners[index as usize] = named;
                    index
                }
                None => {
                    owners.push(named);
                    u32::try_from(owners.len() - 1).unwrap_or(u32::MAX)
                }
            }
        });
        let added = match self.by_hash.entry(self.hasher.hash_one(id)) {
            Entry::Vacant(vacant) => {
                vacant.insert(index);
                true
            }
            Entry::Occupied(held) if *held.get() == index => false,
            Entry::Occupied(_) if self.collided.contains_key(id) => false,
            Entry::Occupied(_) => {
                self.collided.insert(Arc::from(id), index);
                true
            }
        };
        if added {
            self.owners[index as usize].1 += 1;
        } else {
            // An owner indexed by this call alone goes again.
            self.release(index, 0);
        }
        added
    }

    /// The owner held for `id`, no longer held.
    pub(super) fn remove(&mut self, id: &str) -> Option<Arc<str>> {
        // Most reads of an ended task find nothing held: no hashing then.
        if self.by_hash.is_empty() && self.collided.is_empty() {
            return None;
        }
        let index = match self.collided.remove(id) {
            Some(index) => index,
            None => self.by_hash.remove(&self.hasher.hash_one(id))?,
        };
        let owner = self.owners.get(index as usize)?.0.clone();
        self.release(index, 1);
        owner
    }

    /// Takes `holds` off the count of the owner at `index`; once it has none, the index is
    /// free (and with no owner left, the table is empty again).
    fn release(&mut self, index: u32, holds: u32) {
        let Some((owner, count)) = self.owners.get_mut(index as usize) else {
            return;
        };
        *count = count.saturating_sub(holds);
        if *count > 0 {
            return;
        }
        if let Some(owner) = owner.take() {
            self.owner_index.remove(&owner);
        }
        if self.owner_index.is_empty() {
            self.owners.clear();
            self.free.clear();
        } else {
            self.free.push(index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hold inserted twice is held once: one removal gives it back, and its count is
    /// counted once (`Runtime::hold_parked` counts only what `insert` added).
    #[test]
    fn a_hold_inserted_twice_is_held_once() {
        let mut holds = Holds::default();
        let ada: Arc<str> = Arc::from("ada");
        assert!(holds.insert("t1", Arc::clone(&ada)));
        assert!(!holds.insert("t1", Arc::clone(&ada)));
        assert!(holds.insert("t2", Arc::clone(&ada)));
        assert_eq!(holds.remove("t1").as_deref(), Some("ada"));
        assert_eq!(holds.remove("t1"), None);
        assert_eq!(holds.remove("t2").as_deref(), Some("ada"));
        assert_eq!(holds.remove("t2"), None);
        assert!(holds.owner_index.is_empty(), "no hold of ada's left");
    }

    /// An owner is indexed while a hold of theirs is: many owners come and go, and nothing
    /// of them stays.
    #[test]
    fn an_owner_goes_with_their_last_hold() {
        let mut holds = Holds::default();
        for n in 0..10_000 {
            let owner: Arc<str> = Arc::from(format!("owner {n}"));
            assert!(holds.insert(&format!("t{n}"), Arc::clone(&owner)));
            assert!(holds.insert(&format!("u{n}"), owner));
        }
        for n in 0..10_000 {
            let owner = format!("owner {n}");
            assert_eq!(holds.remove(&format!("t{n}")).as_deref(), Some(&*owner));
            assert_eq!(holds.remove(&format!("u{n}")).as_deref(), Some(&*owner));
        }
        assert!(holds.owner_index.is_empty());
        assert!(holds.owners.is_empty() && holds.free.is_empty());
        // A freed index serves the next owner, while another's hold keeps theirs.
        let (ada, bob, cy): (Arc<str>, Arc<str>, Arc<str>) =
            (Arc::from("ada"), Arc::from("bob"), Arc::from("cy"));
        assert!(holds.insert("a1", ada));
        assert!(holds.insert("b1", bob));
        assert_eq!(holds.remove("a1").as_deref(), Some("ada"));
        assert!(holds.insert("c1", cy));
        assert_eq!(holds.owners.len(), 2, "cy took ada's index");
        assert_eq!(holds.remove("b1").as_deref(), Some("bob"));
        assert_eq!(holds.remove("c1").as_deref(), Some("cy"));
        assert!(holds.owner_index.is_empty() && holds.owners.is_empty());
    }

    /// A collision of two ids' hashes (of two owners) keeps both holds, each given back once.
    #[test]
    fn colliding_ids_of_two_owners_are_both_held() {
        let mut holds = Holds::default();
        let (ada, bob): (Arc<str>, Arc<str>) = (Arc::from("ada"), Arc::from("bob"));
        assert!(holds.insert("t1", Arc::clone(&ada)));
        // t1's hold moved under t2's hash: t2 then collides with a hold of another owner, and
        // is kept whole.
        let hash = holds.hasher.hash_one("t1");
        let index = holds.by_hash[&hash];
        holds.by_hash.remove(&hash);
        holds.by_hash.insert(holds.hasher.hash_one("t2"), index);
        assert!(holds.insert("t2", Arc::clone(&bob)));
        assert!(!holds.insert("t2", Arc::clone(&bob)));
        assert_eq!(holds.remove("t2").as_deref(), Some("bob"));
        assert_eq!(holds.remove("t2").as_deref(), Some("ada"));
        assert_eq!(holds.remove("t2"), None);
        assert!(holds.owner_index.is_empty(), "no hold left");
    }
}
