//! The memory store's scans of live tasks for [`TaskStore`](crate::store::TaskStore)'s
//! restarts and parked tasks: what a restart replays, the parked tasks due to be woken, the
//! earliest timer. The parked tasks are not indexed in memory: each is a scan of every
//! shard, one lock at a time (the memory store is for one process and modest numbers of
//! tasks).

use std::sync::Arc;

use super::{Entry, MemoryStore};
use crate::store::{Recovery, StoreError, record, row};

impl MemoryStore {
    /// Runs `each` on every task, one shard locked at a time.
    pub(super) fn each_entry(&self, mut each: impl FnMut(&Entry)) {
        for shard in &self.shards {
            shard.lock().tasks.values().for_each(&mut each);
        }
    }

    /// Every live task whose work runs nowhere after a restart: not the parked ones, whose
    /// wake-up replays them.
    pub(super) fn unparked_live(&self) -> Vec<Recovery> {
        let mut found = Vec::new();
        self.each_entry(|entry| {
            if !entry.state.status.is_terminal() && entry.state.parked_until_ms.is_none() {
                found.push(entry.recovery(false));
            }
        });
        found
    }

    /// Up to `limit` parked tasks that are due (only task `only`, if given), taken out of
    /// their park.
    pub(super) fn take_woken(
        &self,
        only: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Recovery>, StoreError> {
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

    /// Up to `limit` parked tasks after `after`, by id: id and owner.
    pub(super) fn parked_page(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Vec<(Arc<str>, Arc<str>)> {
        let mut found: Vec<(Arc<str>, Arc<str>)> = Vec::new();
        self.each_entry(|entry| {
            if entry.is_parked() && after.is_none_or(|after| &*entry.id > after) {
                found.push((entry.id.clone(), entry.owner.clone()));
            }
        });
        found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        found.truncate(limit);
        found
    }

    /// How many live tasks are parked.
    pub(super) fn parked_now(&self) -> u64 {
        let mut count = 0;
        self.each_entry(|entry| count += u64::from(entry.is_parked()));
        count
    }

    /// The earliest timer of a parked task.
    pub(super) fn earliest_timer(&self) -> Option<u64> {
        self.shards
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
            .min()
    }
}
