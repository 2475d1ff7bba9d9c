//! [`MemoryStore`]: the embedded default, in process memory.
//!
//! Tasks live in shards, each a hash map behind its own mutex: a `tasks/get` is one hash
//! lookup whatever the number of tasks. Expiry uses a min-heap of deadlines per shard (a
//! sweep pops only what is due); a read past a task's deadline applies its expiry at once.
//!
//! Idempotency keys live in one map, (owner, tool, key) to task id, behind a mutex that a
//! create with a key holds from its lookup to its insert (racing retries create one task).
//!
//! The bound on an owner's finished tasks is kept by the sweep (`owned.rs`).

use std::{
    cmp::Reverse,
    collections::{BinaryHeap, HashMap, hash_map::RandomState},
    hash::BuildHasher,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use parking_lot::{Mutex, MutexGuard};

use rmcp::model::JsonObject;

use super::{
    NewTask, Outcome, Recovery, Step, StoreError, TaskSnapshot,
    record::{self, Due, Record},
    row::{self, Pending, State, TaskOrigin},
};
use crate::clock::Clock;

mod admin;
mod owned;
mod tasks;

const SHARDS: usize = 64;

/// Default most tasks a [`MemoryStore`] holds: 1,000,000.
pub const DEFAULT_MAX_TASKS: usize = 1_000_000;
/// Default time an expired task stays readable as `failed` before it is purged.
pub const DEFAULT_EXPIRED_RETENTION: Duration = Duration::from_secs(300);

/// The in-memory task store.
pub struct MemoryStore {
    shards: Box<[Mutex<Shard>]>,
    /// (owner, tool, idempotency key) → the task created with them.
    keys: Mutex<HashMap<IdempotencyKey, Arc<str>>>,
    hasher: RandomState,
    len: AtomicUsize,
    max_tasks: usize,
    expired_retention_ms: u64,
    clock: Clock,
    /// The tasks of each owner created with a finished-task bound
    /// ([`NewTask::max_finished_per_owner`]).
    by_owner: owned::ByOwner,
    /// Expiries an operator's read applied, for the next sweep to report.
    unreported: super::unreported::Unreported,
}

type IdempotencyKey = (Arc<str>, Arc<str>, Arc<str>);

#[derive(Default)]
struct Shard {
    tasks: HashMap<Arc<str>, Entry>,
    /// (due instant in epoch ms, id). Stale entries (task gone or due moved) are skipped.
    deadlines: BinaryHeap<Reverse<(u64, Arc<str>)>>,
}

struct Entry {
    id: Arc<str>,
    owner: Arc<str>,
    tool: Arc<str>,
    /// What the state machine changes ([`record`]).
    state: State,
    poll_interval_ms: Option<u64>,
    /// Steps and answers: dropped when the task completes (`record::keeps_history`).
    live: Option<Box<Live>>,
    outcome: Option<Compact>,
    /// The idempotency key it was created with, removed from the key map with the task.
    key: Option<Box<IdempotencyKey>>,
    /// Its origin; once it ended, what it keeps of it ([`record::keeps_history`]).
    origin: Option<Box<TaskOrigin>>,
    /// Whether it was created with a finished-task bound (its owner's list has it).
    bounded: bool,
}

/// What only a running task (or a failed or cancelled one) needs.
#[derive(Clone, Default)]
struct Live {
    pending: Pending,
    steps: Vec<Step>,
}

impl Record for Entry {
    fn state(&self) -> &State {
        &self.state
    }

    fn state_mut(&mut self) -> &mut State {
        &mut self.state
    }

    fn pending_mut(&mut self) -> &mut Pending {
        &mut self.live.get_or_insert_with(Box::default).pending
    }

    fn end_with(&mut self, outcome: Outcome) {
        let keeps = record::keeps_history(outcome.status());
        self.outcome = Some(Compact::from(outcome));
        // What the row's end leaves of its pending data (`Pending::end`); a task that drops
        // its history drops its steps with it, below.
        if let (true, Some(live)) = (keeps, &mut self.live) {
            live.pending.end(true);
        }
        if keeps {
            return;
        }
        self.live = None;
        let origin = self.origin.take().map(|origin| Box::new(origin.ended()));
        self.origin = origin.filter(|origin| !origin.is_empty());
    }
}

impl Entry {
    fn snapshot(&self) -> TaskSnapshot {
        row::snapshot(
            (self.id.clone(), self.owner.clone(), self.tool.clone()),
            self.state.clone(),
            self.poll_interval_ms,
            self.live
                .as_ref()
                .map(|l| l.pending.input_requests.clone())
                .unwrap_or_default(),
            self.outcome.as_ref().map(Compact::expand),
        )
    }

    /// What the task was created with (or, once ended, what it keeps of it).
    fn origin(&self) -> TaskOrigin {
        self.origin.as_deref().cloned().unwrap_or_default()
    }

    /// Whether the task is live and parked.
    fn is_parked(&self) -> bool {
        self.state.parked_until_ms.is_some() && !self.state.status.is_terminal()
    }

    /// What a replay of the live task needs.
    fn recovery(&self, woken: bool) -> Recovery {
        let live = self.live.as_deref();
        Recovery {
            id: self.id.clone(),
            owner: self.owner.clone(),
            tool: self.tool.clone(),
            origin: self.origin(),
            answers: live.map(|l| l.pending.answers.clone()).unwrap_or_default(),
            steps: live.map(|l| l.steps.clone()).unwrap_or_default(),
            cancel_requested: self.state.cancel_requested,
            woken,
            woken_by_timer_ms: None,
        }
    }
}

/// A finished task's outcome as compact JSON text: a few hundred bytes where a parsed JSON
/// map takes kilobytes, which is what most of a retained task's memory would otherwise be.
/// Reads parse it back (serde_json's `float_roundtrip` keeps numbers exact).
enum Compact {
    Completed(Box<str>),
    Failed(Box<str>),
    Cancelled,
}

impl From<Outcome> for Compact {
    fn from(outcome: Outcome) -> Self {
        let text = |map: &JsonObject| {
            serde_json::to_string(map)
                .unwrap_or_else(|_| "{}".to_owned())
                .into_boxed_str()
        };
        match &outcome {
            Outcome::Completed(result) => Self::Completed(text(result)),
            Outcome::Failed(error) => Self::Failed(text(error)),
            Outcome::Cancelled => Self::Cancelled,
        }
    }
}

impl Compact {
    fn expand(&self) -> Outcome {
        // The text was written from a JSON object by `from`, so it parses back.
        let map = |text: &str| serde_json::from_str::<JsonObject>(text).unwrap_or_default();
        match self {
            Self::Completed(text) => Outcome::Completed(map(text)),
            Self::Failed(text) => Outcome::Failed(map(text)),
            Self::Cancelled => Outcome::Cancelled,
        }
    }
}

impl MemoryStore {
    /// A store with [`DEFAULT_MAX_TASKS`] and [`DEFAULT_EXPIRED_RETENTION`].
    #[must_use]
    pub fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            keys: Mutex::new(HashMap::new()),
            hasher: RandomState::new(),
            len: AtomicUsize::new(0),
            max_tasks: DEFAULT_MAX_TASKS,
            expired_retention_ms: crate::clock::millis(DEFAULT_EXPIRED_RETENTION),
            clock: Clock::new(),
            by_owner: owned::ByOwner::default(),
            unreported: super::unreported::Unreported::default(),
        }
    }

    /// Sets how many tasks the store holds at most, live or finished (a finished task counts
    /// until it is purged): a hard limit, not a hint. At the limit, creating a task fails with
    /// [`StoreError::Full`]; no task is ever evicted to make room.
    #[must_use]
    pub fn with_max_tasks(mut self, max_tasks: usize) -> Self {
        self.max_tasks = max_tasks;
        self
    }

    /// Sets how long an expired task stays readable as `failed` before it is purged.
    #[must_use]
    pub fn with_expired_retention(mut self, retention: Duration) -> Self {
        self.expired_retention_ms = crate::clock::millis(retention);
        self
    }

    /// The number of tasks held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Whether no task is held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs `each` on every task, one shard locked at a time.
    fn each_entry(&self, mut each: impl FnMut(&Entry)) {
        for shard in &self.shards {
            shard.lock().tasks.values().for_each(&mut each);
        }
    }

    fn shard(&self, id: &str) -> MutexGuard<'_, Shard> {
        let index = usize::try_from(self.hasher.hash_one(id) % SHARDS as u64).unwrap_or(0);
        self.shards[index].lock()
    }

    /// Task `id`, after applying due expiry; `None` when there is none.
    fn snapshot_of(&self, id: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        StoreError::or_none(self.with_entry(id, |entry, _| Ok(entry.snapshot())))
    }

    /// Runs `f` on a live view of the task, after applying due expiry.
    fn with_entry<R>(
        &self,
        id: &str,
        f: impl FnOnce(&mut Entry, u64) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        self.with_entry_purging(id, f, true)
    }

    /// [`with_entry`](Self::with_entry); a task it purges leaves its idempotency key in the
    /// key map when `forget` is false (the caller holds that map's lock).
    fn with_entry_purging<R>(
        &self,
        id: &str,
        f: impl FnOnce(&mut Entry, u64) -> Result<R, StoreError>,
        forget: bool,
    ) -> Result<R, StoreError> {
        let now = self.clock.now_ms();
        let mut guard = self.shard(id);
        let shard = &mut *guard;
        let entry = shard.tasks.get_mut(id).ok_or(StoreError::NotFound)?;
        let was_live = !entry.state.status.is_terminal();
        match record::apply_due(entry, now, self.expired_retention_ms) {
            Due::Purge => {
                let purged = shard.tasks.remove(id);
                self.len.fetch_sub(1, Ordering::Relaxed);
                if let Some(entry) = &purged {
                    self.purged(entry);
                }
                drop(guard);
                // A caller that holds the key map (`forget` false) maps the key anew itself.
                if let Some(mut entry) = purged {
                    if !forget {
                        entry.key = None;
                    }
                    self.forget_keys(Some(entry));
                }
                return Err(StoreError::NotFound);
            }
            Due::Expiry => {
                let due = (entry.state.purge_at_ms.unwrap_or(now), entry.id.clone());
                shard.deadlines.push(Reverse(due));
            }
            Due::Nothing => {}
        }
        let done = f(entry, now);
        // Ended here (by `f` or by its expiry): its owner may be past its bound now.
        if was_live && entry.bounded && entry.state.status.is_terminal() {
            self.by_owner.ended(&entry.owner);
        }
        done
    }

    /// Counts a finished task removed from its shard (purged), under the shard's lock,
    /// against its owner's bound.
    fn purged(&self, entry: &Entry) {
        if entry.bounded {
            self.by_owner.purged(&entry.owner);
        }
    }

    /// Removes a purged task's idempotency key (unless a newer task took it over).
    fn forget_keys(&self, purged: Option<Entry>) {
        let Some(Entry {
            id, key: Some(key), ..
        }) = purged
        else {
            return;
        };
        let mut keys = self.keys.lock();
        if keys.get(&*key).is_some_and(|owner| *owner == id) {
            keys.remove(&*key);
        }
    }

    /// Inserts a new task, created with `key` if it has one.
    fn insert(
        &self,
        task: NewTask,
        key: Option<IdempotencyKey>,
    ) -> Result<TaskSnapshot, StoreError> {
        if self.len.fetch_add(1, Ordering::Relaxed) >= self.max_tasks {
            self.len.fetch_sub(1, Ordering::Relaxed);
            return Err(StoreError::Full {
                max_tasks: self.max_tasks,
            });
        }
        let bound = task.max_finished_per_owner.map(|keep| keep.max(1));
        let entry = Entry {
            id: task.id.clone(),
            owner: task.owner,
            tool: task.tool,
            state: record::create(task.status_message, task.ttl, self.clock.now_ms()),
            poll_interval_ms: task.poll_interval.map(crate::clock::millis),
            live: Some(Box::new(Live {
                pending: record::create_pending(task.answers, task.asked_at_step),
                steps: Vec::new(),
            })),
            outcome: None,
            key: key.map(Box::new),
            origin: Some(Box::new(task.origin)),
            bounded: bound.is_some(),
        };
        let snapshot = entry.snapshot();
        let mut shard = self.shard(&task.id);
        if shard.tasks.contains_key(&task.id) {
            drop(shard);
            self.len.fetch_sub(1, Ordering::Relaxed);
            return Err(StoreError::DuplicateId);
        }
        if let Some(deadline) = entry.state.deadline_ms() {
            shard.deadlines.push(Reverse((deadline, task.id.clone())));
        }
        if let Some(keep) = bound {
            let owner = Arc::clone(&entry.owner);
            self.by_owner.created(owner, Arc::clone(&task.id), keep);
        }
        shard.tasks.insert(task.id, entry);
        drop(shard);
        Ok(snapshot)
    }

    /// Tasks removed from the store (purged, and counted by [`purged`](Self::purged)):
    /// their idempotency keys are forgotten (unless a newer task took one over).
    fn forget(&self, removed: impl IntoIterator<Item = Entry>) {
        for entry in removed {
            self.forget_keys(Some(entry));
        }
    }

    /// The sweep's part of the bound on finished tasks (`owned.rs`): for each owner due,
    /// removes its oldest finished tasks (by creation) until it keeps its bound of them,
    /// and, on a walk of the whole list, drops the ids of the tasks that are gone. Live
    /// tasks stay. Returns how many ids it read.
    fn trim_due(&self) -> usize {
        let walks = self.by_owner.take_due();
        walks.into_iter().map(|walk| self.trim(walk)).sum()
    }

    /// One owner's part of [`MemoryStore::trim_due`]; returns how many ids it read. It
    /// stops at the first finished task it may not remove (a purge since the walk began
    /// brought the owner to its bound), unless it walks the whole list.
    fn trim(&self, mut walk: owned::Walk) -> usize {
        let (mut read, mut removed, mut dropped) = (0, 0, 0);
        let mut kept = Vec::new();
        while (walk.whole || removed < walk.excess)
            && let Some(id) = walk.ids.pop_front()
        {
            read += 1;
            let mut shard = self.shard(&id);
            match shard.tasks.get(&id) {
                None => dropped += 1,
                Some(entry) if removed < walk.excess && entry.state.status.is_terminal() => {
                    if !self.by_owner.remove_one(&walk.owner) {
                        walk.excess = removed;
                        kept.push(id);
                        continue;
                    }
                    let entry = shard.tasks.remove(&id);
                    drop(shard);
                    removed += 1;
                    self.len.fetch_sub(1, Ordering::Relaxed);
                    self.forget_keys(entry);
                }
                Some(_) => kept.push(id),
            }
        }
        for id in kept.into_iter().rev() {
            walk.ids.push_front(id);
        }
        self.by_owner.put_back(walk, dropped);
        read
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("len", &self.len())
            .field("max_tasks", &self.max_tasks)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::MemoryStore;
    use crate::store::{NewTask, Outcome, TaskStore, Transition, admin::AdminStore};

    /// A task of owner `o`, which keeps `keep` finished tasks.
    fn bounded(id: String, keep: usize) -> NewTask {
        NewTask::new(id.into(), "o".into(), "tool".into()).with_max_finished_per_owner(keep)
    }

    fn task(id: &str, owner: &str) -> NewTask {
        NewTask::new(id.into(), owner.into(), "tool".into())
            .with_ttl(Some(Duration::from_secs(1)))
            .with_max_finished_per_owner(10)
    }

    /// An owner's list of bounded tasks does not outlive its tasks: once they are purged,
    /// the next sweeps forget the owner, whether or not it created more than its bound.
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

    /// A sweep's work on an owner at its bound is what it removes: one more finished task
    /// reads one id (the oldest, which it removes), not the owner's whole list.
    #[tokio::test]
    async fn a_trim_reads_what_it_removes() {
        let store = MemoryStore::new();
        let bounded = |i: usize| bounded(format!("t{i:04}"), 1_000);
        let end = || Transition::Finish(Outcome::Cancelled);
        store.create(bounded(9_999)).await.unwrap();
        for i in 0..1_001 {
            store.create(bounded(i)).await.unwrap();
            store.apply(&format!("t{i:04}"), None, end()).await.unwrap();
            if i == 999 {
                assert_eq!(store.trim_due(), 0, "at the bound, nothing to read");
            }
        }
        assert_eq!(
            store.trim_due(),
            2,
            "the live task, then the oldest finished one"
        );
        assert_eq!(store.len(), 1_001);
        assert!(
            store.get("t0000").await.unwrap().is_none(),
            "the oldest finished went"
        );
        assert!(
            store.get("t9999").await.unwrap().is_some(),
            "the live one stays"
        );
        assert_eq!(store.trim_due(), 0, "and the next sweep reads none");
    }

    /// A walk that a purge brought to the owner's bound since it began stops at the first
    /// finished task it may not remove: it does not read the rest of the list.
    #[tokio::test(start_paused = true)]
    async fn a_walk_stops_where_a_purge_met_the_bound() {
        let store = MemoryStore::new();
        let bounded = |i: usize| bounded(format!("t{i}"), 2);
        let end = || Transition::Finish(Outcome::Cancelled);
        for i in 0..6 {
            store.create(bounded(i)).await.unwrap();
        }
        store.apply("t5", None, end()).await.unwrap();
        tokio::time::advance(Duration::from_secs(10)).await;
        for i in 0..5 {
            store.apply(&format!("t{i}"), None, end()).await.unwrap();
        }
        let walk = store.by_owner.take_due().pop().expect("past its bound");
        assert_eq!(walk.excess, 4);
        let before = store.clock.now_ms() - 5_000;
        assert_eq!(store.purge_finished(Some(before)).await.unwrap(), 1);
        assert_eq!(
            store.trim(walk),
            4,
            "three removed, then the one it may not"
        );
        let left: Vec<_> = (0..6)
            .filter(|i| {
                store
                    .shard(&format!("t{i}"))
                    .tasks
                    .contains_key(format!("t{i}").as_str())
            })
            .collect();
        assert_eq!(left, [3, 4], "the owner keeps its bound");
    }

    /// An owner that created past its bound while its tasks ran, and then created no more,
    /// keeps only its bound of finished tasks from the first sweep after they end: whether
    /// they end by a write or by their TTL.
    #[tokio::test(start_paused = true)]
    async fn a_burst_past_the_bound_is_trimmed_as_it_ends() {
        let store = MemoryStore::new().with_expired_retention(Duration::from_secs(60));
        let ids = |owner: &str| {
            (0..15)
                .map(|i| format!("{owner}-{i:02}"))
                .collect::<Vec<_>>()
        };
        let (written, expired) = (ids("written"), ids("expired"));
        for id in written.iter().chain(&expired) {
            let owner = id.split('-').next().unwrap();
            store.create(task(id, owner)).await.unwrap();
        }
        store.expire_due().await.unwrap();
        let present = |ids: &[String]| -> Vec<String> {
            let stored = |id: &&String| store.shard(id).tasks.contains_key(id.as_str());
            ids.iter().filter(stored).cloned().collect()
        };
        assert_eq!(present(&written).len(), 15, "live tasks stay");
        for id in &written {
            let end = Transition::Finish(Outcome::Cancelled);
            store.apply(id, None, end).await.unwrap();
        }
        store.expire_due().await.unwrap();
        assert_eq!(present(&written), written[5..], "ended by a write");
        assert_eq!(present(&expired).len(), 15, "the other owner's run on");
        tokio::time::advance(Duration::from_secs(2)).await;
        store.expire_due().await.unwrap();
        assert_eq!(present(&expired), expired[5..], "ended by their TTL");
    }
}
