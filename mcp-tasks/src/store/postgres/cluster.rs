//! The cluster operations of [`PostgresStore`]: leases, claims, wake-ups.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::InputResponses;
use tokio::sync::broadcast;

use super::{
    PostgresStore, listener, notice,
    pool::{Tx, read},
    row::{db_now_ms, int, text},
};
use crate::{
    clock::millis,
    store::{
        Claim, ClaimOrder, ClusterStore, Lease, Notice, Recovery, StoreError,
        codec::{self, to_i64, to_u64},
    },
};

impl PostgresStore {
    /// A claim (lapsed or queued): one statement that picks and takes the rows, then their
    /// steps, in one transaction. Owners taking turns, the owner served last is kept for the
    /// next claim.
    async fn claim_by(&self, claim: Claim<'_>) -> Result<Vec<(Recovery, Lease)>, StoreError> {
        let (instance, lease) = (claim.instance, claim.lease);
        let now = to_i64(self.clock.now_ms());
        let limit = i64::try_from(claim.limit).unwrap_or(i64::MAX);
        let lease_ms = to_i64(millis(lease));
        // The claim in turns is planned once per connection (a plan for any parameters):
        // planning it for each claim would cost more than running it. The plan is made again
        // when the table's statistics change (autovacuum's analyze).
        let tx = if claim.queued && claim.order == ClaimOrder::OwnersTakeTurns {
            Tx::begin_with(
                &self.pool,
                "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan",
            )
            .await?
        } else {
            Tx::begin(&self.pool).await?
        };
        let first: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&instance, &lease_ms, &now, &limit];
        let rows = match (claim.queued, claim.order) {
            (false, _) => {
                tx.query(CLAIM_LAPSED, &first, "could not claim tasks")
                    .await?
            }
            (true, ClaimOrder::OldestFirst) => {
                tx.query(CLAIM_OLDEST, &first, "could not claim queued tasks")
                    .await?
            }
            (true, _) => {
                let turn = self.turn.lock().clone();
                let owners: Vec<&str> = claim.weights.iter().map(|(o, _)| &**o).collect();
                let weights: Vec<i32> = (claim.weights.iter())
                    .map(|(_, w)| i32::try_from(*w).unwrap_or(i32::MAX))
                    .collect();
                let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] =
                    [&instance, &lease_ms, &now, &limit, &turn, &owners, &weights];
                tx.query(CLAIM_BY_TURNS, &params, "could not claim queued tasks")
                    .await?
            }
        };
        let ids = rows
            .iter()
            .map(|r| text(r, 0))
            .collect::<Result<Vec<_>, _>>()?;
        let step_rows = if ids.is_empty() {
            Vec::new()
        } else {
            tx.query(
                "SELECT task_id, seq, name, value FROM steps WHERE task_id = ANY($1) \
                 ORDER BY task_id, seq",
                &[&ids],
                "could not read the claimed tasks' steps",
            )
            .await?
        };
        tx.commit().await?;
        if let (true, ClaimOrder::OwnersTakeTurns, Some(row)) =
            (claim.queued, claim.order, rows.first())
        {
            // The owner served last (`CLAIM_BY_TURNS`'s last column, the same on every row).
            let last = row
                .try_get::<_, Option<String>>(codec::RECOVERY_COLUMNS + 2)
                .map_err(|e| super::PgError::owned("an unreadable claimed row", e))?;
            if let Some(last) = last {
                *self.turn.lock() = last;
            }
        }
        let instance: Arc<str> = Arc::from(instance);
        let recoveries = Self::recoveries(&rows, &step_rows)?;
        let mut claimed = Vec::with_capacity(rows.len());
        for (r, mut recovery) in rows.iter().zip(recoveries) {
            // The park it was woken from, if any (`c.parked`).
            let parked = r
                .try_get::<_, Option<i64>>(codec::RECOVERY_COLUMNS + 1)
                .map_err(|e| super::PgError::owned("an unreadable claimed row", e))?;
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
        Ok(claimed)
    }
}

/// The columns a claim returns, in the order [`PostgresStore::claim_by`] reads them: the
/// codec's recovery columns (of `t`), then the lease's.
macro_rules! claimed_columns {
    () => {
        concat!(
            " RETURNING t.id, t.owner, t.tool, t.answers, t.cancel_requested, ",
            crate::store::row::origin_columns!(),
            ", t.epoch, c.parked"
        )
    };
}

/// Takes up to `$4` live tasks whose lease lapsed (and whose TTL has not), for `$1`: also
/// the parked tasks that are woken (their lease deadline is their wake-up time), taken out
/// of their park.
const CLAIM_LAPSED: &str = concat!(
    "WITH c AS (SELECT id, parked_until_ms AS parked FROM tasks \
     WHERE purge_at_ms IS NULL AND runner IS NOT NULL AND lease_until_ms < ",
    db_now_ms!(),
    " AND (deadline_ms IS NULL OR deadline_ms > $3) ORDER BY lease_until_ms LIMIT $4 \
     FOR UPDATE SKIP LOCKED) \
     UPDATE tasks t SET runner = $1, epoch = t.epoch + 1, parked_until_ms = NULL, \
     lease_until_ms = ",
    db_now_ms!(),
    " + $2 FROM c WHERE t.id = c.id",
    claimed_columns!()
);

/// Takes up to `$4` live tasks that have no runner, oldest first, for `$1`
/// ([`ClaimOrder::OldestFirst`]).
const CLAIM_OLDEST: &str = concat!(
    "WITH c AS (SELECT id, NULL::bigint AS parked FROM tasks WHERE purge_at_ms IS NULL AND runner IS NULL \
     AND (deadline_ms IS NULL OR deadline_ms > $3) ORDER BY created_at_ms LIMIT $4 \
     FOR UPDATE SKIP LOCKED) \
     UPDATE tasks t SET runner = $1, epoch = t.epoch + 1, lease_until_ms = ",
    db_now_ms!(),
    " + $2 FROM c WHERE t.id = c.id",
    claimed_columns!()
);

/// Takes up to `$4` live tasks that have no runner, for `$1`, owners taking turns
/// ([`ClaimOrder::OwnersTakeTurns`]): the owners with queued tasks after `$5` (the owner this
/// store served last), then from the first owner up to `$5`, at most `$4` of them, are
/// visited in that order (a skip scan of `tasks_queued_owner`, one index probe per owner);
/// each takes its oldest task, or up to its weight (`$6`, `$7`), a turn. With fewer owners
/// than slots, the owners take further turns, and the `$4` oldest tasks (whoever's) are
/// the last candidates, so a claim fills whenever enough is queued. Candidates are locked as
/// they are read, skipping rows another claim holds, so claims on several instances run at
/// once and never pick the same task. The last column is the owner served last (in the
/// last turn): the next claim's `$5`.
const CLAIM_BY_TURNS: &str = concat!(
    "WITH RECURSIVE after_turn(owner, pos) AS ( \
       SELECT (SELECT q.owner FROM tasks q WHERE q.purge_at_ms IS NULL AND q.runner IS NULL \
               AND q.owner > $5 ORDER BY q.owner LIMIT 1), 1::bigint \
       UNION ALL \
       SELECT (SELECT q.owner FROM tasks q WHERE q.purge_at_ms IS NULL AND q.runner IS NULL \
               AND q.owner > a.owner ORDER BY q.owner LIMIT 1), a.pos + 1 \
       FROM after_turn a WHERE a.owner IS NOT NULL AND a.pos < $4), \
     up_to_turn(owner, pos) AS ( \
       SELECT (SELECT q.owner FROM tasks q WHERE q.purge_at_ms IS NULL AND q.runner IS NULL \
               AND q.owner <= $5 ORDER BY q.owner LIMIT 1), \
              (SELECT count(owner) FROM after_turn) + 1 \
       UNION ALL \
       SELECT (SELECT q.owner FROM tasks q WHERE q.purge_at_ms IS NULL AND q.runner IS NULL \
               AND q.owner > u.owner AND q.owner <= $5 ORDER BY q.owner LIMIT 1), u.pos + 1 \
       FROM up_to_turn u WHERE u.owner IS NOT NULL AND u.pos < $4), \
     visited AS ( \
       SELECT v.owner, v.pos, coalesce(w.weight, 1) AS weight \
       FROM (SELECT owner, pos FROM after_turn UNION ALL SELECT owner, pos FROM up_to_turn) v \
       LEFT JOIN unnest($6::text[], $7::int4[]) AS w(owner, weight) ON w.owner = v.owner \
       WHERE v.owner IS NOT NULL AND v.pos <= $4), \
     share AS (SELECT ceil($4::bigint::float8 / greatest(count(*), 1))::bigint AS turns FROM visited), \
     candidates AS ( \
       SELECT h.id, h.owner, h.created_at_ms FROM visited v CROSS JOIN share s \
       CROSS JOIN LATERAL (SELECT q.id, q.owner, q.created_at_ms FROM tasks q \
         WHERE q.owner = v.owner AND q.purge_at_ms IS NULL AND q.runner IS NULL \
         AND (q.deadline_ms IS NULL OR q.deadline_ms > $3) \
         ORDER BY q.created_at_ms, q.id LIMIT s.turns * v.weight FOR UPDATE SKIP LOCKED) h \
       UNION \
       SELECT o.id, o.owner, o.created_at_ms FROM (SELECT q.id, q.owner, q.created_at_ms \
         FROM tasks q WHERE q.purge_at_ms IS NULL AND q.runner IS NULL \
         AND (q.deadline_ms IS NULL OR q.deadline_ms > $3) ORDER BY q.created_at_ms LIMIT $4 \
         FOR UPDATE SKIP LOCKED) o), \
     picked AS ( \
       SELECT c.id, v.owner, v.pos, ceil(row_number() OVER (PARTITION BY c.owner \
         ORDER BY c.created_at_ms, c.id)::float8 / coalesce(v.weight, 1)) AS turn \
       FROM candidates c LEFT JOIN visited v ON v.owner = c.owner \
       ORDER BY turn, v.pos NULLS LAST, c.created_at_ms, c.id LIMIT $4), \
     c AS (SELECT id, NULL::bigint AS parked FROM tasks \
       WHERE id = ANY(ARRAY(SELECT id FROM picked))) \
     UPDATE tasks t SET runner = $1, epoch = t.epoch + 1, lease_until_ms = ",
    db_now_ms!(),
    " + $2 FROM c WHERE t.id = c.id",
    claimed_columns!(),
    ", (SELECT owner FROM picked WHERE pos IS NOT NULL ORDER BY turn DESC, pos DESC LIMIT 1)"
);

#[async_trait]
impl ClusterStore for PostgresStore {
    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        let tx = Tx::begin(&self.pool).await?;
        let renewed = tx
            .execute(
                concat!(
                    "UPDATE tasks SET lease_until_ms = ",
                    db_now_ms!(),
                    " + $4 WHERE id = $1 AND epoch = $2 AND runner = $3 \
                     AND purge_at_ms IS NULL"
                ),
                &[
                    &&*lease.task_id,
                    &to_i64(lease.epoch),
                    &&*lease.instance,
                    &to_i64(millis(lease.length)),
                ],
                "could not renew the task's lease",
            )
            .await?;
        tx.commit().await?;
        if renewed == 0 {
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
        tx.execute(
            "SELECT pg_notify($1, $2)",
            &[
                &&*self.channel,
                &notice::encode(&Notice::Queued(Arc::clone(&lease.task_id))),
            ],
            "could not announce the released task",
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn claim(&self, claim: Claim<'_>) -> Result<Vec<(Recovery, Lease)>, StoreError> {
        self.claim_by(claim).await
    }

    async fn queue_depth(&self) -> Result<Option<u64>, StoreError> {
        let now = to_i64(self.clock.now_ms());
        let rows = read(
            &self.pool,
            "SELECT count(*) FROM tasks WHERE purge_at_ms IS NULL AND runner IS NULL \
             AND (deadline_ms IS NULL OR deadline_ms > $1)",
            &[&now],
            "could not count the queued tasks",
        )
        .await?;
        match rows.first() {
            Some(row) => Ok(Some(to_u64(int(row, 0)?))),
            None => Ok(Some(0)),
        }
    }

    async fn answers(&self, id: &str) -> Result<InputResponses, StoreError> {
        let rows = read(
            &self.pool,
            "SELECT answers FROM tasks WHERE id = $1",
            &[&id],
            "could not read the task's answers",
        )
        .await?;
        match rows.first() {
            Some(row) => codec::json(&text(row, 0)?),
            None => Err(StoreError::NotFound),
        }
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
