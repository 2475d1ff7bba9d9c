//! [`AdminStore`] for [`MemoryStore`]: a scan of every shard, one lock at a time.

use std::sync::{Arc, atomic::Ordering};

use async_trait::async_trait;

use super::MemoryStore;
use crate::store::{
    StoreError, TaskSnapshot, TaskStore,
    admin::{AdminStore, StatusCounts, TaskDetail, TaskFilter, TaskPage, TaskQuery, TaskSummary},
};

impl MemoryStore {
    /// Runs `each` on the summary of every task that passes `filter`, after applying the
    /// expiry that is due.
    async fn scan(
        &self,
        filter: &TaskFilter,
        mut each: impl FnMut(TaskSummary),
    ) -> Result<(), StoreError> {
        self.unreported.keep(self.expire_due().await?);
        let now = self.clock.now_ms();
        self.each_entry(|entry| {
            let summary = TaskSummary::of(entry.snapshot(), None);
            if filter.matches(&summary, now) {
                each(summary);
            }
        });
        Ok(())
    }
}

#[async_trait]
impl AdminStore for MemoryStore {
    async fn list(&self, query: &TaskQuery) -> Result<TaskPage, StoreError> {
        let mut found = Vec::new();
        self.scan(&query.filter, |summary| {
            if query
                .after
                .as_ref()
                .is_none_or(|after| after.is_before(summary.task.created_at_ms, &summary.task.id))
            {
                found.push(summary);
            }
        })
        .await?;
        found.sort_unstable_by(|a, b| {
            let (a, b) = (&a.task, &b.task);
            (b.created_at_ms, b.id.as_bytes()).cmp(&(a.created_at_ms, a.id.as_bytes()))
        });
        found.truncate(query.limit + 1);
        Ok(query.page(found))
    }

    async fn count(&self, filter: &TaskFilter) -> Result<StatusCounts, StoreError> {
        let mut counts = StatusCounts::default();
        self.scan(filter, |summary| counts.add(summary.task.status, 1))
            .await?;
        Ok(counts)
    }

    async fn detail(&self, id: &str) -> Result<Option<TaskDetail>, StoreError> {
        StoreError::or_none(self.with_entry(id, |entry, _| {
            let live = entry.live.as_deref().cloned().unwrap_or_default();
            Ok(TaskDetail {
                task: entry.snapshot(),
                origin: entry.origin(),
                steps: live.steps,
                questions: live.pending.input_requests,
                answers: live.pending.answers,
                asked_at_step: live.pending.asked_at_step,
                lease: None,
            })
        }))
    }

    async fn set_tool_version(&self, id: &str, version: &str) -> Result<TaskSnapshot, StoreError> {
        self.with_entry(id, |entry, _| {
            if entry.state.status.is_terminal() {
                return Err(StoreError::Terminal(entry.state.status));
            }
            entry.origin.get_or_insert_with(Box::default).tool_version = Arc::from(version);
            Ok(entry.snapshot())
        })
    }

    async fn purge_finished(&self, before_ms: Option<u64>) -> Result<u64, StoreError> {
        self.unreported.keep(self.expire_due().await?);
        let mut purged = Vec::new();
        for shard in &self.shards {
            let mut shard = shard.lock();
            let finished = shard.tasks.extract_if(|_, entry| {
                entry.state.status.is_terminal()
                    && before_ms.is_none_or(|before| entry.state.last_updated_at_ms < before)
            });
            for (_, entry) in finished {
                self.len.fetch_sub(1, Ordering::Relaxed);
                self.purged(&entry);
                purged.push(entry);
            }
        }
        let count = purged.len() as u64;
        self.forget(purged);
        Ok(count)
    }
}
