//! [`TaskStore`] for [`MemoryStore`]: each operation a change of one entry under its shard's
//! lock, decided by the state machine ([`record`]). The parked tasks are not indexed in
//! memory: a scan for them visits every shard, one lock at a time (the memory store is for
//! one process and modest numbers of tasks).

use std::{
    cmp::Reverse,
    sync::{Arc, atomic::Ordering},
};

use async_trait::async_trait;
use rmcp::model::InputResponses;

use super::{Entry, MemoryStore};
use crate::store::{
    Created, Lease, NewTask, Recovery, StoreError, TaskSnapshot, TaskStore, Transition,
    record::{self, Due},
    row,
};

#[async_trait]
impl TaskStore for MemoryStore {
    async fn create(&self, mut task: NewTask) -> Result<Created, StoreError> {
        let Some(key) = task.idempotency_key.take() else {
            return self.insert(task, None).map(Created::New);
        };
        let key = (Arc::clone(&task.owner), Arc::clone(&task.tool), key);
        let mut keys = self.keys.lock();
        if let Some(existing) = keys.get(&key) {
            let retry = |entry: &mut Entry, now| {
                Ok(record::is_retry_of(&entry.state, now).then(|| entry.snapshot()))
            };
            match self.with_entry_purging(existing, retry, false) {
                Ok(Some(first)) => return Ok(Created::Existing(first)),
                Ok(None) | Err(StoreError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        let id = Arc::clone(&task.id);
        let snapshot = self.insert(task, Some(key.clone()))?;
        keys.insert(key, id);
        Ok(Created::New(snapshot))
    }

    async fn get(&self, id: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        self.snapshot_of(id)
    }

    async fn get_many(&self, ids: &[Arc<str>]) -> Result<Vec<Option<TaskSnapshot>>, StoreError> {
        ids.iter().map(|id| self.snapshot_of(id)).collect()
    }

    async fn apply(
        &self,
        id: &str,
        _fence: Option<&Lease>,
        transition: Transition,
    ) -> Result<(), StoreError> {
        self.with_entry(id, |entry, now| {
            if let (_, Some(step)) = record::apply(entry, now, transition)? {
                entry.live.get_or_insert_with(Box::default).steps.push(step);
            }
            Ok(())
        })
    }

    async fn deliver_input(
        &self,
        id: &str,
        responses: InputResponses,
    ) -> Result<InputResponses, StoreError> {
        self.with_entry(id, |entry, now| {
            Ok(record::deliver_input(entry, now, responses).0)
        })
    }

    async fn request_cancel(&self, id: &str) -> Result<(), StoreError> {
        self.with_entry(id, |entry, now| {
            let _ = record::request_cancel(entry, now);
            Ok(())
        })
    }

    /// Every live task whose work runs nowhere after a restart: not the parked ones, whose
    /// wake-up replays them.
    async fn recoverable(&self) -> Result<Vec<Recovery>, StoreError> {
        let mut found = Vec::new();
        self.each_entry(|entry| {
            if !entry.state.status.is_terminal() && entry.state.parked_until_ms.is_none() {
                found.push(entry.recovery(false));
            }
        });
        Ok(found)
    }

    async fn recovery(&self, id: &str) -> Result<Option<Recovery>, StoreError> {
        let live = |entry: &mut Entry, _| {
            Ok((!entry.state.status.is_terminal()).then(|| entry.recovery(false)))
        };
        StoreError::or_none(self.with_entry(id, live)).map(Option::flatten)
    }

    fn parks(&self) -> bool {
        true
    }

    /// Up to `limit` parked tasks that are due (only task `only`, if given), taken out of
    /// their park.
    async fn wake(&self, only: Option<&str>, limit: usize) -> Result<Vec<Recovery>, StoreError> {
        let take = |entry: &mut Entry, now| {
            if !record::woken(&entry.state, now) {
                return None;
            }
            let timer = record::unpark(&mut entry.state);
            let mut recovery = entry.recovery(true);
            recovery.woken_by_timer_ms = timer;
            Some(recovery)
        };
        if let Some(id) = only {
            let woken = StoreError::or_none(self.with_entry(id, |entry, now| Ok(take(entry, now))));
            return woken.map(|woken| woken.flatten().into_iter().collect());
        }
        let now = self.clock.now_ms();
        let mut found = Vec::new();
        for shard in &self.shards {
            let mut shard = shard.lock();
            for entry in shard.tasks.values_mut() {
                if found.len() >= limit {
                    return Ok(found);
                }
                found.extend(take(entry, now));
            }
        }
        Ok(found)
    }

    /// The earliest timer of a parked task.
    async fn next_wake(&self) -> Result<Option<u64>, StoreError> {
        Ok(self
            .shards
            .iter()
            .filter_map(|shard| {
                shard
                    .lock()
                    .tasks
                    .values()
                    .filter(|entry| !entry.state.status.is_terminal())
                    .filter_map(|entry| entry.state.parked_until_ms)
                    .filter(|until| *until < row::PARKED_FOR_ANSWER)
                    .min()
            })
            .min())
    }

    async fn parked_count(&self) -> Result<Option<u64>, StoreError> {
        let mut count = 0;
        self.each_entry(|entry| count += u64::from(entry.is_parked()));
        Ok(Some(count))
    }

    /// Up to `limit` parked tasks after `after`, by id: id and owner.
    async fn parked_owners(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(Arc<str>, Arc<str>)>, StoreError> {
        let mut found: Vec<(Arc<str>, Arc<str>)> = Vec::new();
        self.each_entry(|entry| {
            if entry.is_parked() && after.is_none_or(|after| &*entry.id > after) {
                found.push((entry.id.clone(), entry.owner.clone()));
            }
        });
        found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        found.truncate(limit);
        Ok(found)
    }

    async fn stored_answers(&self, id: &str) -> Result<InputResponses, StoreError> {
        self.with_entry(id, |entry, _| {
            Ok(entry
                .live
                .as_ref()
                .map(|live| live.pending.answers.clone())
                .unwrap_or_default())
        })
    }

    fn admin(&self) -> Option<&dyn crate::store::AdminStore> {
        Some(self)
    }

    async fn expire_due(&self) -> Result<Vec<Arc<str>>, StoreError> {
        let now = self.clock.now_ms();
        let mut failed = self.unreported.take();
        let mut purged = Vec::new();
        for shard in &self.shards {
            let mut shard = shard.lock();
            let shard = &mut *shard;
            while let Some(Reverse((due, _))) = shard.deadlines.peek()
                && *due <= now
                && let Some(Reverse((_, id))) = shard.deadlines.pop()
            {
                let Some(entry) = shard.tasks.get_mut(&id) else {
                    continue;
                };
                match record::apply_due(entry, now, self.expired_retention_ms) {
                    Due::Purge => {
                        if let Some(entry) = shard.tasks.remove(&id) {
                            self.len.fetch_sub(1, Ordering::Relaxed);
                            self.purged(&entry);
                            purged.push(entry);
                        }
                    }
                    Due::Expiry => {
                        let purge_at = entry.state.purge_at_ms.unwrap_or(now);
                        shard.deadlines.push(Reverse((purge_at, id.clone())));
                        if entry.bounded {
                            self.by_owner.ended(&entry.owner);
                        }
                        failed.push(id);
                    }
                    Due::Nothing => {}
                }
            }
        }
        self.forget(purged);
        self.trim_due();
        Ok(failed)
    }
}
