//! The cluster operations of [`PostgresStore`]: leases, claims, wake-ups.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use rmcp::model::InputResponses;
use tokio::sync::broadcast;
use tokio_postgres::types::ToSql;

use super::{
    PostgresStore, claim, listener, notice,
    pool::{Tx, read, write_one},
    rate_log::{LOCK_TOOLS, LOG_STARTS, RECENT, room_after, window_ms},
    row::{PgRow, db_now_ms, int, text},
};
use crate::{
    clock::millis,
    rate::Rate,
    store::{
        Claim, ClaimOrder, Claimed, ClusterStore, Lease, Notice, QueueDepth, StoreError,
        codec::{self, Columns, to_i64, to_u64},
    },
};

#[async_trait]
impl ClusterStore for PostgresStore {
    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        // One statement, committed on its own: no BEGIN and COMMIT round trips around it.
        let sql = concat!(
            "UPDATE tasks SET lease_until_ms = ",
            db_now_ms!(),
            " + $4 WHERE id = $1 AND epoch = $2 AND runner = $3 \
             AND purge_at_ms IS NULL RETURNING 1"
        );
        let (epoch, length) = (to_i64(lease.epoch), to_i64(millis(lease.length)));
        let bound: [&(dyn ToSql + Sync); 4] =
            [&&*lease.task_id, &epoch, &&*lease.instance, &length];
        let renewed =
            write_one(&self.pool, sql, &bound, "could not renew the task's lease").await?;
        if renewed.is_empty() {
            return Err(self.explain(&lease.task_id, Some(lease.epoch)).await);
        }
        Ok(lease.clone())
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let tx = Tx::begin(&self.pool).await?;
        let released = tx
            .execute(
                "UPDATE tasks SET lease_until_ms = 0, epoch = epoch + 1 \
                 WHERE id = $1 AND epoch = $2 AND runner = $3 AND purge_at_ms IS NULL",
                &[&&*lease.task_id, &to_i64(lease.epoch), &&*lease.instance],
                "could not release the task's lease",
            )
            .await?;
        if released == 0 {
            tx.rollback().await;
            return Err(self.explain(&lease.task_id, Some(lease.epoch)).await);
        }
        // Announced as a queued task: a claim pass takes lapsed tasks too.
        let queued = [Notice::Queued(Arc::clone(&lease.task_id))];
        let context = "could not announce the released task";
        notice::announce(&tx, &self.channel, queued, context).await?;
        tx.commit().await
    }

    /// A claim (lapsed or queued): the statements that pick and take the rows
    /// (`claim.rs`), then their steps, in one transaction.
    async fn claim(&self, claim: Claim<'_>) -> Result<Claimed, StoreError> {
        let (instance, lease) = (claim.instance, claim.lease);
        let now = to_i64(self.clock.now_ms());
        let limit = i64::try_from(claim.limit).unwrap_or(i64::MAX);
        let lease_ms = to_i64(millis(lease));
        // The claim in turns is planned once per connection (a plan for any parameters):
        // planning it for each claim would cost more than running it. The plan is made again
        // when the table's statistics change (autovacuum's analyze).
        let begin = if claim.queued && claim.order == ClaimOrder::OwnersTakeTurns {
            "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan"
        } else {
            "BEGIN"
        };
        let tx = Tx::begin_with(&self.pool, begin).await?;
        let (rows, rate_room_in) = if claim.queued {
            let bound = claim::Bound {
                instance,
                lease_ms,
                now,
            };
            self.claim_queued(&tx, &claim, &bound).await?
        } else {
            let routing = claim::Routing::of(&claim);
            let mut params: claim::Params<'_> = vec![&instance, &lease_ms, &now, &limit];
            params.extend(routing.params());
            let context = "could not claim tasks";
            (tx.query(claim::CLAIM_LAPSED, &params, context).await?, None)
        };
        let ids = rows
            .iter()
            .map(|r| text(r, 0))
            .collect::<Result<Vec<_>, _>>()?;
        if claim.queued {
            // The claim cleared each task's "queued" status message: the listen streams
            // that follow one read it again.
            let changed = ids.iter().map(|id| Notice::Changed(Arc::from(id.as_str())));
            let context = "could not announce the claimed tasks";
            notice::announce(&tx, &self.channel, changed, context).await?;
        }
        let sql = "SELECT task_id, seq, name, value FROM steps WHERE task_id = ANY($1) \
                   ORDER BY task_id, seq";
        let step_rows = if ids.is_empty() {
            Vec::new()
        } else {
            tx.query(sql, &[&ids], "could not read the claimed tasks' steps")
                .await?
        };
        tx.commit().await?;
        let instance: Arc<str> = Arc::from(instance);
        let recoveries = Self::recoveries(&rows, &step_rows)?;
        let mut claimed = Vec::with_capacity(rows.len());
        for (r, mut recovery) in rows.iter().zip(recoveries) {
            // The park it was woken from, if any (`c.parked`).
            let parked = PgRow(r).opt_int(codec::RECOVERY_COLUMNS + 1)?;
            recovery.woken = parked.is_some();
            recovery.woken_by_timer_ms =
                parked.and_then(|until| crate::store::row::woken_by_timer(to_u64(until)));
            let granted = Lease::granted(
                Arc::clone(&recovery.id),
                Arc::clone(&instance),
                to_u64(int(r, codec::RECOVERY_COLUMNS)?),
                lease,
            );
            claimed.push((recovery, granted));
        }
        Ok(Claimed {
            tasks: claimed,
            rate_room_in,
        })
    }

    /// One start of the step limiter `limiter`, under its lock, logged when its window has
    /// room.
    async fn take_rate(&self, limiter: &str, rate: Rate) -> Result<Option<Duration>, StoreError> {
        let keys = vec![crate::rate::step_key(limiter)];
        let per = window_ms(rate);
        let tx = Tx::begin(&self.pool).await?;
        let context = "could not lock the rate limiter";
        tx.query(LOCK_TOOLS, &[&&*self.channel, &keys], context)
            .await?;
        let context = "could not count the rate limiter's starts";
        let rows = tx
            .query(RECENT, &[&keys, &[per].as_slice()], context)
            .await?;
        let Some(row) = rows.first() else {
            tx.rollback().await;
            return Err(StoreError::backend(
                "counting the rate limiter's starts returned no row",
            ));
        };
        let (count, now) = (int(row, 1)?, int(row, 3)?);
        if count < i64::from(rate.count()) {
            let context = "could not log the rate limiter's start";
            tx.execute(LOG_STARTS, &[&keys], context).await?;
            tx.commit().await?;
            return Ok(None);
        }
        // Nothing logged; what was pruned stays pruned.
        tx.commit().await?;
        Ok(Some(room_after(int(row, 2).ok(), now, per)))
    }

    async fn unclaimed_versions(&self) -> Result<Option<Vec<(String, String, u64)>>, StoreError> {
        // Two index scans (`tasks_queued`, `tasks_lease`), not one scan of the live tasks.
        let sql = concat!(
            "SELECT tool, tool_version, count(*) FROM ( \
               SELECT tool, tool_version FROM tasks WHERE purge_at_ms IS NULL AND runner IS NULL \
               UNION ALL \
               SELECT tool, tool_version FROM tasks WHERE purge_at_ms IS NULL \
               AND runner IS NOT NULL AND parked_until_ms IS NULL AND lease_until_ms < ",
            db_now_ms!(),
            ") w GROUP BY tool, tool_version"
        );
        let rows = read(&self.pool, sql, &[], "could not count the unclaimed tasks").await?;
        rows.iter()
            .map(|row| Ok((text(row, 0)?, text(row, 1)?, to_u64(int(row, 2)?))))
            .collect::<Result<Vec<_>, StoreError>>()
            .map(Some)
    }

    async fn queue_depth(&self, by_owner: bool) -> Result<Option<Vec<QueueDepth>>, StoreError> {
        let now = to_i64(self.clock.now_ms());
        let sql = if by_owner {
            "SELECT tool, owner, count(*) FROM tasks WHERE purge_at_ms IS NULL \
             AND runner IS NULL AND (deadline_ms IS NULL OR deadline_ms > $1) GROUP BY tool, owner"
        } else {
            "SELECT tool, NULL::text, count(*) FROM tasks WHERE purge_at_ms IS NULL \
             AND runner IS NULL AND (deadline_ms IS NULL OR deadline_ms > $1) GROUP BY tool"
        };
        let rows = read(&self.pool, sql, &[&now], "could not count the queued tasks").await?;
        rows.iter()
            .map(|row| {
                Ok(QueueDepth {
                    tool: text(row, 0)?,
                    owner: PgRow(row).opt_text(1)?,
                    tasks: to_u64(int(row, 2)?),
                })
            })
            .collect::<Result<_, StoreError>>()
            .map(Some)
    }

    async fn answers(&self, id: &str) -> Result<InputResponses, StoreError> {
        let sql = "SELECT answers FROM tasks WHERE id = $1";
        let rows = read(&self.pool, sql, &[&id], "could not read the task's answers").await?;
        let row = rows.first().ok_or(StoreError::NotFound)?;
        codec::json(&text(row, 0)?)
    }

    fn wakeups(&self) -> broadcast::Receiver<Notice> {
        self.wakeups
            .get_or_init(|| {
                let (sender, _) = broadcast::channel(self.settings.wakeup_capacity);
                let listener = listener::Listener {
                    config: self.config.clone(),
                    channel: Arc::clone(&self.channel),
                    sender: sender.clone(),
                    stop: self.stop.clone(),
                };
                self.runtime.spawn(listener.run());
                sender
            })
            .subscribe()
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::Arc, time::Duration};

    use super::super::pool::scratch::{SENT, Scratch};
    use crate::store::{Claim, ClusterStore, Lease, NewTask, StoreError, TaskStore};

    /// A task of `store`'s, created queued and claimed by `instance`: its lease.
    async fn leased(store: &super::PostgresStore, id: &str, instance: &str) -> Lease {
        let task = NewTask::new(id.into(), "owner".into(), "tool".into());
        assert!(store.create(task).await.unwrap().is_new());
        let claim = Claim::queued(instance, Duration::from_secs(30), 1);
        let mut claimed = store.claim(claim).await.unwrap().tasks;
        assert_eq!(claimed.len(), 1, "{claimed:?}");
        claimed.pop().unwrap().1
    }

    /// A renewal is one statement (committed on its own), not `BEGIN`, `UPDATE` and
    /// `COMMIT`; one that renews nothing still says why.
    #[tokio::test]
    async fn a_renewal_is_one_statement() {
        let Some(scratch) = Scratch::new("renew_once", 2).await else {
            return;
        };
        let store = &scratch.store;
        let lease = leased(store, "t", "a").await;
        let before = SENT.with(std::cell::Cell::get);
        assert_eq!(store.renew(&lease).await.unwrap(), lease);
        assert_eq!(
            SENT.with(std::cell::Cell::get) - before,
            1,
            "statements sent"
        );
        let stale = Lease::granted(Arc::clone(&lease.task_id), "b".into(), 2, lease.length);
        let refused = store.renew(&stale).await;
        assert!(
            matches!(
                refused,
                Err(StoreError::Fenced {
                    held: Some(2),
                    current: 1
                })
            ),
            "{refused:?}"
        );
        scratch.end().await;
    }
}
