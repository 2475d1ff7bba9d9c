//! [`MemoryStore`]: the embedded default, in process memory.
//!
//! Tasks live in a fixed number of shards, each a hash map behind its own mutex, so a
//! `tasks/get` costs one hash lookup whatever the number of tasks. Expiry uses a min-heap of
//! deadlines per shard: a sweep pops only what is due, never scans all tasks. A read of a task
//! whose deadline has passed applies the expiry on the spot, so no reader sees a stale status
//! between sweeps.
//!
//! Idempotency keys live in one map of their own, (owner, tool, key) to task id, behind a
//! mutex that a create with a key holds from its lookup to its insert, so retries racing
//! each other create one task. Only creates with a key take that lock.

use std::{
    cmp::Reverse,
    collections::{BinaryHeap, HashMap, hash_map::RandomState},
    hash::BuildHasher,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use async_trait::async_trait;
use rmcp::model::{InputRequest, InputRequests, InputResponses, JsonObject, TaskStatus};

use super::{
    NewTask, Outcome, Recovery, Step, StoreError, TaskSnapshot, TaskStore, new_task_millis,
};
use crate::{clock::Clock, errors};

const SHARDS: usize = 64;

/// Default [`MemoryStore`] capacity: 1,000,000 tasks.
pub const DEFAULT_CAPACITY: usize = 1_000_000;
/// Default time an expired task stays readable as `failed` before it is purged.
pub const DEFAULT_EXPIRED_RETENTION: Duration = Duration::from_secs(300);

/// The in-memory task store.
pub struct MemoryStore {
    shards: Box<[Mutex<Shard>]>,
    /// (owner, tool, idempotency key) → the task created with them.
    keys: Mutex<HashMap<IdempotencyKey, Arc<str>>>,
    hasher: RandomState,
    len: AtomicUsize,
    capacity: usize,
    expired_retention_ms: u64,
    clock: Clock,
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
    status: TaskStatus,
    status_message: Option<String>,
    created_at_ms: u64,
    last_updated_at_ms: u64,
    ttl_ms: Option<u64>,
    poll_interval_ms: Option<u64>,
    /// State that only a running task needs; dropped when the task ends.
    live: Option<Box<Live>>,
    outcome: Option<Compact>,
    cancel_requested: bool,
    /// When a terminal task is purged.
    purge_at_ms: Option<u64>,
    /// The idempotency key it was created with, removed from the key map with the task.
    key: Option<Box<IdempotencyKey>>,
}

/// What only a running task needs: dropped when it ends.
#[derive(Default)]
struct Live {
    input_requests: InputRequests,
    used_keys: Vec<Box<str>>,
    arguments: JsonObject,
    tool_version: Arc<str>,
    request_meta: JsonObject,
    answers: InputResponses,
    steps: Vec<Step>,
}

impl Entry {
    fn deadline_ms(&self) -> Option<u64> {
        self.ttl_ms
            .map(|ttl| self.created_at_ms.saturating_add(ttl))
    }

    fn touch(&mut self, now: u64) {
        // lastUpdatedAt moves forward on every change, even within one millisecond (R57).
        self.last_updated_at_ms = now.max(self.last_updated_at_ms + 1);
    }

    fn check_live(&self) -> Result<(), StoreError> {
        if self.status.is_terminal() {
            Err(StoreError::Terminal(self.status))
        } else {
            Ok(())
        }
    }

    fn end(&mut self, outcome: Outcome, now: u64, purge_at_ms: Option<u64>) {
        self.status = outcome.status();
        self.outcome = Some(Compact::from(outcome));
        self.live = None;
        self.purge_at_ms = purge_at_ms;
        self.touch(now);
    }

    fn snapshot(&self) -> TaskSnapshot {
        TaskSnapshot {
            id: self.id.clone(),
            owner: self.owner.clone(),
            tool: self.tool.clone(),
            status: self.status,
            status_message: self.status_message.clone(),
            created_at_ms: self.created_at_ms,
            last_updated_at_ms: self.last_updated_at_ms,
            ttl_ms: self.ttl_ms,
            poll_interval_ms: self.poll_interval_ms,
            input_requests: self
                .live
                .as_ref()
                .map(|l| l.input_requests.clone())
                .unwrap_or_default(),
            outcome: self.outcome.as_ref().map(Compact::expand),
            cancel_requested: self.cancel_requested,
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
            _ => Self::Cancelled,
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

/// What a due deadline did to a task.
enum Expiry {
    Nothing,
    Failed,
    Purge,
}

impl MemoryStore {
    /// A store with [`DEFAULT_CAPACITY`] and [`DEFAULT_EXPIRED_RETENTION`].
    #[must_use]
    pub fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            keys: Mutex::new(HashMap::new()),
            hasher: RandomState::new(),
            len: AtomicUsize::new(0),
            capacity: DEFAULT_CAPACITY,
            expired_retention_ms: crate::clock::millis(DEFAULT_EXPIRED_RETENTION),
            clock: Clock::new(),
        }
    }

    /// Sets how many tasks the store holds at most. At capacity, creating a task fails with
    /// [`StoreError::Full`]; no task is ever evicted to make room.
    #[must_use]
    pub fn with_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
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

    fn shard(&self, id: &str) -> MutexGuard<'_, Shard> {
        let index = usize::try_from(self.hasher.hash_one(id) % SHARDS as u64).unwrap_or(0);
        // A poisoned shard only means a panic elsewhere while holding the lock; every
        // operation below leaves an entry consistent before it can panic, so keep serving.
        self.shards[index]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Applies a due deadline to one entry.
    fn apply_expiry(&self, entry: &mut Entry, now: u64) -> Expiry {
        if let Some(purge_at) = entry.purge_at_ms {
            return if now >= purge_at {
                Expiry::Purge
            } else {
                Expiry::Nothing
            };
        }
        match entry.deadline_ms() {
            Some(deadline) if now >= deadline && !entry.status.is_terminal() => {
                entry.status_message =
                    Some("task expired: its ttl elapsed before it finished".into());
                let purge_at = deadline.saturating_add(self.expired_retention_ms);
                entry.end(
                    Outcome::Failed(errors::to_object(&errors::task_expired())),
                    now,
                    Some(purge_at),
                );
                Expiry::Failed
            }
            _ => Expiry::Nothing,
        }
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
        match self.apply_expiry(entry, now) {
            Expiry::Purge => {
                let purged = shard.tasks.remove(id);
                self.len.fetch_sub(1, Ordering::Relaxed);
                drop(guard);
                if forget {
                    self.forget_keys(purged);
                }
                return Err(StoreError::NotFound);
            }
            Expiry::Failed => {
                let due = (entry.purge_at_ms.unwrap_or(now), entry.id.clone());
                shard.deadlines.push(Reverse(due));
            }
            Expiry::Nothing => {}
        }
        let entry = shard.tasks.get_mut(id).ok_or(StoreError::NotFound)?;
        f(entry, now)
    }

    /// Removes a purged task's idempotency key (unless a newer task took it over).
    fn forget_keys(&self, purged: Option<Entry>) {
        let Some(Entry {
            id, key: Some(key), ..
        }) = purged
        else {
            return;
        };
        let mut keys = self
            .keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
        if self.len.fetch_add(1, Ordering::Relaxed) >= self.capacity {
            self.len.fetch_sub(1, Ordering::Relaxed);
            return Err(StoreError::Full {
                capacity: self.capacity,
            });
        }
        let now = self.clock.now_ms();
        let (ttl_ms, poll_interval_ms) = new_task_millis(&task);
        let entry = Entry {
            id: task.id.clone(),
            owner: task.owner,
            tool: task.tool,
            status: TaskStatus::Working,
            status_message: task.status_message,
            created_at_ms: now,
            last_updated_at_ms: now,
            ttl_ms,
            poll_interval_ms,
            live: Some(Box::new(Live {
                used_keys: task.answers.keys().map(|k| k.as_str().into()).collect(),
                answers: task.answers,
                arguments: task.arguments,
                tool_version: task.tool_version,
                request_meta: task.request_meta,
                ..Live::default()
            })),
            outcome: None,
            cancel_requested: false,
            purge_at_ms: None,
            key: key.map(Box::new),
        };
        let snapshot = entry.snapshot();
        let mut shard = self.shard(&task.id);
        if shard.tasks.contains_key(&task.id) {
            drop(shard);
            self.len.fetch_sub(1, Ordering::Relaxed);
            return Err(StoreError::DuplicateId);
        }
        if let Some(deadline) = entry.deadline_ms() {
            shard.deadlines.push(Reverse((deadline, task.id.clone())));
        }
        shard.tasks.insert(task.id, entry);
        Ok(snapshot)
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
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl TaskStore for MemoryStore {
    async fn create(&self, mut task: NewTask) -> Result<TaskSnapshot, StoreError> {
        let Some(key) = task.idempotency_key.take() else {
            return self.insert(task, None);
        };
        let key = (Arc::clone(&task.owner), Arc::clone(&task.tool), key);
        let mut keys = self
            .keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(existing) = keys.get(&key) {
            let now = self.clock.now_ms();
            let snapshot = |entry: &mut Entry, _| Ok(entry.snapshot());
            let first = match self.with_entry_purging(existing, snapshot, false) {
                Ok(first) => Some(first),
                Err(StoreError::NotFound) => None,
                Err(e) => return Err(e),
            };
            let found = match first {
                // Within the first task's TTL: a retry of the same call.
                Some(first)
                    if first
                        .ttl_ms
                        .is_none_or(|ttl| now < first.created_at_ms + ttl) =>
                {
                    Some(first)
                }
                _ => None,
            };
            if let Some(first) = found {
                return Err(StoreError::Existing(Box::new(first)));
            }
        }
        let id = Arc::clone(&task.id);
        let snapshot = self.insert(task, Some(key.clone()))?;
        keys.insert(key, id);
        Ok(snapshot)
    }

    async fn get(&self, id: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        match self.with_entry(id, |entry, _| Ok(entry.snapshot())) {
            Ok(snapshot) => Ok(Some(snapshot)),
            Err(StoreError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn set_status_message(
        &self,
        id: &str,
        message: Option<String>,
    ) -> Result<(), StoreError> {
        self.with_entry(id, |entry, now| {
            entry.check_live()?;
            if entry.status_message != message {
                entry.status_message = message;
                entry.touch(now);
            }
            Ok(())
        })
    }

    async fn request_input(
        &self,
        id: &str,
        key: &str,
        request: InputRequest,
    ) -> Result<(), StoreError> {
        self.with_entry(id, |entry, now| {
            entry.check_live()?;
            let live = entry.live.get_or_insert_with(Box::default);
            if live.input_requests.contains_key(key) {
                return Ok(());
            }
            if live.used_keys.iter().any(|k| k.as_ref() == key) {
                return Err(StoreError::KeyReused(key.to_owned()));
            }
            live.used_keys.push(key.into());
            live.input_requests.insert(key.to_owned(), request);
            entry.status = TaskStatus::InputRequired;
            entry.touch(now);
            Ok(())
        })
    }

    async fn deliver_input(
        &self,
        id: &str,
        responses: InputResponses,
    ) -> Result<InputResponses, StoreError> {
        self.with_entry(id, |entry, now| {
            let mut accepted = InputResponses::new();
            if entry.status.is_terminal() {
                return Ok(accepted);
            }
            let Some(live) = entry.live.as_mut() else {
                return Ok(accepted);
            };
            for (key, value) in responses {
                if live.input_requests.remove(&key).is_some() {
                    live.answers.insert(key.clone(), value.clone());
                    accepted.insert(key, value);
                }
            }
            if !accepted.is_empty() {
                if live.input_requests.is_empty() {
                    entry.status = TaskStatus::Working;
                }
                entry.touch(now);
            }
            Ok(accepted)
        })
    }

    async fn finish(&self, id: &str, outcome: Outcome) -> Result<(), StoreError> {
        self.with_entry(id, |entry, now| {
            entry.check_live()?;
            // A finished task is purged when its TTL runs out (R20).
            let purge_at = entry.deadline_ms();
            entry.status_message = outcome.status_message();
            entry.end(outcome, now, purge_at);
            Ok(())
        })
    }

    async fn request_cancel(&self, id: &str) -> Result<(), StoreError> {
        self.with_entry(id, |entry, now| {
            if !entry.cancel_requested && !entry.status.is_terminal() {
                entry.cancel_requested = true;
                entry.touch(now);
            }
            Ok(())
        })
    }

    async fn save_step(&self, id: &str, step: Step) -> Result<(), StoreError> {
        self.with_entry(id, |entry, now| {
            entry.check_live()?;
            entry.live.get_or_insert_with(Box::default).steps.push(step);
            entry.touch(now);
            Ok(())
        })
    }

    async fn recoverable(&self) -> Result<Vec<Recovery>, StoreError> {
        let mut found = Vec::new();
        for shard in &self.shards {
            let shard = shard
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for entry in shard.tasks.values() {
                if entry.status.is_terminal() {
                    continue;
                }
                let live = entry.live.as_deref();
                found.push(Recovery {
                    id: entry.id.clone(),
                    owner: entry.owner.clone(),
                    tool: entry.tool.clone(),
                    tool_version: live.map(|l| l.tool_version.clone()).unwrap_or_default(),
                    arguments: live.map(|l| l.arguments.clone()).unwrap_or_default(),
                    request_meta: live.map(|l| l.request_meta.clone()).unwrap_or_default(),
                    answers: live.map(|l| l.answers.clone()).unwrap_or_default(),
                    steps: live.map(|l| l.steps.clone()).unwrap_or_default(),
                });
            }
        }
        Ok(found)
    }

    async fn stored_answers(&self, id: &str) -> Result<InputResponses, StoreError> {
        self.with_entry(id, |entry, _| {
            Ok(entry
                .live
                .as_ref()
                .map(|live| live.answers.clone())
                .unwrap_or_default())
        })
    }

    async fn expire_due(&self) -> Result<Vec<Arc<str>>, StoreError> {
        let now = self.clock.now_ms();
        let mut failed = Vec::new();
        let mut purged_keys = Vec::new();
        for shard in &self.shards {
            let mut shard = shard
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let shard = &mut *shard;
            while let Some(Reverse((due, _))) = shard.deadlines.peek() {
                if *due > now {
                    break;
                }
                let Some(Reverse((_, id))) = shard.deadlines.pop() else {
                    break;
                };
                let Some(entry) = shard.tasks.get_mut(&id) else {
                    continue;
                };
                match self.apply_expiry(entry, now) {
                    Expiry::Purge => {
                        if let Some(entry) = shard.tasks.remove(&id)
                            && entry.key.is_some()
                        {
                            purged_keys.push(entry);
                        }
                        self.len.fetch_sub(1, Ordering::Relaxed);
                    }
                    Expiry::Failed => {
                        let purge_at = entry.purge_at_ms.unwrap_or(now);
                        shard.deadlines.push(Reverse((purge_at, id.clone())));
                        failed.push(id);
                    }
                    Expiry::Nothing => {}
                }
            }
        }
        for entry in purged_keys {
            self.forget_keys(Some(entry));
        }
        Ok(failed)
    }
}
