//! Batches: a few worker tasks per kind of operation each take every job of that kind queued
//! at that moment and run them as one statement with array parameters, so that under load
//! one round trip (and, for writes, one commit and its WAL flush) covers many tasks. Nothing
//! waits on a timer: a lone job goes at once, and the jobs that arrive while a batch runs
//! form the next one ([`spawn`]).
//!
//! - **Creates**: one multi-row `INSERT` ([`INSERT`]). Creates that carry an owner quota
//!   (cluster mode) take, in the same transaction and before it, a lock per owner
//!   ([`LOCK_OWNERS`]) and count each owner's live tasks ([`COUNT_LIVE`]): a create that
//!   would take its owner past the quota is not inserted and answers
//!   [`Created::OverQuota`]. Instances creating for one owner at once take turns on that
//!   owner's lock, so the count holds across the cluster; other owners do not wait.
//! - **Reads** (`tasks/get`): one `SELECT ... WHERE id = ANY($1)` ([`read_batch`]).
//! - **Fenced finishes** of live tasks: one `UPDATE ... FROM unnest(..)` ([`FINISH`]); a
//!   finish it does not apply (fenced, terminal, past its TTL, a second finish of one task in
//!   the batch) changes nothing and goes back to its caller, which takes the general path.

use std::{
    collections::{HashMap, HashSet},
    future::Future,
    sync::{Arc, LazyLock},
};

use deadpool_postgres::Pool;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_postgres::types::ToSql;

use super::{
    Lease, NewTask, Outcome, PgError, StoreError,
    notice::notice_prefix,
    pool::{Tx, read, write_one},
    row::{self, Row, db_now_ms, int, text},
};
use crate::store::{
    codec::{self, NewRow, end_sql, to_i64, to_json},
    record,
    row::{ORIGIN_COLUMNS, PENDING_COLUMNS},
};

/// The most creates one transaction takes.
const MAX_BATCH: usize = 512;

/// Writer tasks: batches in flight at once.
pub(super) const WRITERS: usize = 4;

/// Inserts a batch; a create whose id or idempotency key conflicts with a stored task is
/// skipped (and reported back as a conflict). When tasks with no runner were inserted, one
/// `q:` notification (naming the first) announces them to workers in the same transaction:
/// one per batch, not per task, because Postgres serializes the commits of notifying
/// transactions.
static INSERT: LazyLock<String> = LazyLock::new(|| {
    // The pending's and then the origin's columns are bound from `$16` on, one text array
    // each, in `PENDING_COLUMNS`' and `ORIGIN_COLUMNS`' order.
    let columns = [PENDING_COLUMNS, ORIGIN_COLUMNS].concat();
    let arrays: String = (0..columns.len())
        .map(|i| format!(", ${}::text[]", 16 + i))
        .collect();
    let aliases: String = (0..columns.len()).map(|i| format!(", c{i}")).collect();
    let values: String = (0..columns.len()).map(|i| format!(", u.c{i}")).collect();
    format!(
        "WITH ins AS (INSERT INTO tasks (id, owner, tool, status, status_message, \
         created_at_ms, last_updated_at_ms, ttl_ms, poll_interval_ms, answer_seq, outcome, \
         cancel_requested, deadline_ms, purge_at_ms, runner, epoch, lease_until_ms, \
         idempotency_key, priority, limit_key, {names}) \
         SELECT u.id, u.owner, u.tool, u.status, u.status_message, u.created, u.created, \
         u.ttl, u.poll, 0, NULL, FALSE, u.deadline, NULL, u.runner, \
         CASE WHEN u.runner IS NULL THEN 0 ELSE 1 END, {now} + u.lease, u.idem, u.priority, \
         u.limit_key{values} \
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], \
         $6::bigint[], $7::bigint[], $8::bigint[], $9::text[], $10::bigint[], $11::text[], \
         $12::text[], $13::int2[], $14::text[]{arrays}) AS u(id, owner, tool, status_message, \
         created, ttl, poll, deadline, runner, lease, idem, status, priority, \
         limit_key{aliases}) \
         ON CONFLICT DO NOTHING RETURNING id, runner), \
         announce AS (SELECT pg_notify($15, '{queued}' || min(id)) FROM ins \
         WHERE runner IS NULL HAVING count(*) > 0) \
         SELECT id FROM ins UNION ALL SELECT NULL FROM announce",
        names = columns.join(", "),
        now = db_now_ms!(),
        queued = notice_prefix!(queued),
    )
});

/// Takes the transaction-scoped advisory lock of each owner of `$1` (one key per owner and
/// schema), in key order, so that two batches never wait on each other in a cycle. The
/// two-key form keeps these locks apart from the migration's one-key lock.
const LOCK_OWNERS: &str = "SELECT pg_advisory_xact_lock(hashtext('mcp-tasks owner quota'), k) \
     FROM (SELECT DISTINCT hashtext(current_schema() || ':' || o) AS k \
     FROM unnest($1::text[]) AS o ORDER BY 1) AS keys";

/// The live tasks of each owner of `$1` (not finished, not past their TTL at `$2`).
const COUNT_LIVE: &str = "SELECT owner, count(*) FROM tasks WHERE owner = ANY($1::text[]) \
     AND purge_at_ms IS NULL AND status IN ('working', 'input_required') \
     AND (deadline_ms IS NULL OR deadline_ms > $2) GROUP BY owner";

/// What happened to one create of a batch.
#[derive(Debug)]
pub(super) enum Created {
    /// Stored, committed.
    Inserted,
    /// Not stored: its id or idempotency key is taken (the caller finds out which). The
    /// create comes back.
    Conflict(Box<NewTask>),
    /// Not stored: its owner has `quota` live tasks in the task space already
    /// ([`NewTask::owner_quota`]). The create comes back (a retry with an idempotency key
    /// may still find the task it created before).
    OverQuota(Box<NewTask>, usize),
}

/// A create waiting for its batch.
pub(super) struct Job {
    pub(super) task: NewTask,
    /// `createdAt`, the caller's clock reading.
    pub(super) now: u64,
    pub(super) reply: oneshot::Sender<Result<Created, StoreError>>,
}

/// Starts `workers` tasks that run the jobs sent to the returned queue in batches of at most
/// [`MAX_BATCH`]: each takes every job queued at that moment and hands them to `run` together,
/// with `state` (the pool, and the store's channel for the writers). They end when every
/// sender is dropped.
pub(super) fn spawn<J, S, F, Fut>(
    runtime: &tokio::runtime::Handle,
    workers: usize,
    state: &S,
    run: F,
) -> mpsc::UnboundedSender<J>
where
    J: Send + 'static,
    S: Clone + Send + Sync + 'static,
    F: Fn(S, Vec<J>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let rx = Arc::new(Mutex::new(rx));
    for _ in 0..workers {
        let (rx, run, state) = (Arc::clone(&rx), run.clone(), state.clone());
        runtime.spawn(async move {
            loop {
                let mut batch = Vec::new();
                // Nothing only once every sender is dropped and the queue is empty.
                if rx.lock().await.recv_many(&mut batch, MAX_BATCH).await == 0 {
                    return;
                }
                run(state.clone(), batch).await;
            }
        });
    }
    tx
}

/// The create writers' batch ([`spawn`]).
pub(super) async fn write_creates((pool, channel): (Pool, Arc<str>), batch: Vec<Job>) {
    let stored = insert(&pool, &batch, &channel).await;
    for (i, job) in batch.into_iter().enumerate() {
        let created = match &stored {
            Ok((_, over)) if let Some(quota) = over.get(&i) => {
                Ok(Created::OverQuota(Box::new(job.task), *quota))
            }
            Ok((inserted, _)) if inserted.contains(&*job.task.id) => Ok(Created::Inserted),
            Ok(_) => Ok(Created::Conflict(Box::new(job.task))),
            // Every create of the batch gets the error (same text and code, its own value).
            Err(error) => Err(PgError::again(
                error,
                " (the create was not stored, unless only the commit's answer was lost)",
            )),
        };
        let _ = job.reply.send(created);
    }
}

/// The multi-row insert, as one transaction: the ids inserted, and the creates (by index in
/// the batch) refused for their owner's quota, with the quota. The connection goes back to the
/// pool before any caller hears of the result.
async fn insert(
    pool: &Pool,
    batch: &[Job],
    channel: &str,
) -> Result<(HashSet<String>, HashMap<usize, usize>), StoreError> {
    // The owners whose creates carry a quota (each create is held to its own).
    let mut owners: Vec<&str> = batch
        .iter()
        .filter(|job| job.task.owner_quota.is_some())
        .map(|job| &*job.task.owner)
        .collect();
    if owners.is_empty() {
        // One statement, its own transaction: one round trip and one commit per batch.
        let rows = batch
            .iter()
            .map(|job| NewRow::encode(&job.task, job.now))
            .collect::<Result<Vec<_>, _>>()?;
        let bound = bind(&rows, channel);
        let params: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|b| &**b as _).collect();
        let rows = write_one(pool, &INSERT, &params, "could not store the new tasks").await?;
        return Ok((inserted_ids(&rows), HashMap::new()));
    }
    owners.sort_unstable();
    owners.dedup();
    let tx = Tx::begin(pool).await?;
    tx.query(LOCK_OWNERS, &[&owners], "could not lock the owners' quotas")
        .await?;
    // A statement after the locks: it sees every create that held them before.
    let now = batch.iter().map(|job| job.now).min().map_or(0, to_i64);
    let context = "could not count the owners' live tasks";
    let mut live: HashMap<String, usize> = HashMap::new();
    for row in tx.query(COUNT_LIVE, &[&owners, &now], context).await? {
        let count = usize::try_from(int(&row, 1)?).unwrap_or(usize::MAX);
        live.insert(text(&row, 0)?, count);
    }
    let mut over = HashMap::new();
    let mut rows = Vec::with_capacity(batch.len());
    for (i, job) in batch.iter().enumerate() {
        if let Some(quota) = job.task.owner_quota {
            let count = live.entry(job.task.owner.to_string()).or_insert(0);
            if *count >= quota {
                over.insert(i, quota);
                continue;
            }
            *count += 1;
        }
        rows.push(NewRow::encode(&job.task, job.now)?);
    }
    if rows.is_empty() {
        tx.rollback().await;
        return Ok((HashSet::new(), over));
    }
    let bound = bind(&rows, channel);
    let params: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|b| &**b as _).collect();
    let rows = tx
        .query(&INSERT, &params, "could not store the new tasks")
        .await?;
    tx.commit().await?;
    Ok((inserted_ids(&rows), over))
}

/// The ids an [`INSERT`] returned (the notification's row has none).
fn inserted_ids(rows: &[tokio_postgres::Row]) -> HashSet<String> {
    rows.iter().filter_map(|row| text(row, 0).ok()).collect()
}

/// The parameters of [`INSERT`]: column by column from `rows` (one array each), the channel as
/// `$15`. The one place the batch binds a new row.
fn bind<'r>(rows: &'r [NewRow<'r>], channel: &'r str) -> Vec<Box<dyn ToSql + Sync + Send + 'r>> {
    fn column<'r, T: ToSql + Sync + Send + 'r>(
        rows: &'r [NewRow<'r>],
        field: impl Fn(&'r NewRow<'r>) -> T,
    ) -> Box<dyn ToSql + Sync + Send + 'r> {
        Box::new(rows.iter().map(field).collect::<Vec<T>>())
    }
    let mut bound = vec![
        column(rows, |r| r.id),
        column(rows, |r| r.owner),
        column(rows, |r| r.tool),
        column(rows, |r| r.status_message.as_deref()),
        column(rows, |r| r.created_at_ms),
        column(rows, |r| r.ttl_ms),
        column(rows, |r| r.poll_interval_ms),
        column(rows, |r| r.deadline_ms),
        column(rows, |r| r.runner),
        column(rows, |r| r.lease_ms),
        column(rows, |r| r.idempotency_key),
        column(rows, |r| r.status),
        column(rows, |r| r.priority),
        column(rows, |r| r.limit_key),
        Box::new(channel),
    ];
    bound.extend((0..PENDING_COLUMNS.len()).map(|i| column(rows, move |r| r.pending[i].as_str())));
    bound.extend((0..ORIGIN_COLUMNS.len()).map(|i| column(rows, move |r| r.origin[i].as_deref())));
    bound
}

// ---------------------------------------------------------------------------------------
// Reads.

/// A `tasks/get` waiting for its batch: the task's row as stored (`None`: no such task).
pub(super) struct ReadJob {
    pub(super) id: Arc<str>,
    pub(super) reply: oneshot::Sender<Result<Option<Row>, StoreError>>,
}

/// Reads in flight at once.
pub(super) const READERS: usize = 4;

/// Every row of the readers' batch in one `SELECT`; each caller gets its own (decoded) row.
pub(super) async fn read_batch(pool: Pool, batch: Vec<ReadJob>) {
    let ids: Vec<&str> = batch.iter().map(|job| &*job.id).collect();
    let rows = if let [id] = ids[..] {
        read(&pool, row::SELECT, &[&id], "could not read the task").await
    } else {
        read(&pool, row::SELECT_ANY, &[&ids], "could not read the task").await
    };
    let by_id = rows.and_then(|rows| {
        rows.into_iter()
            .map(|raw| Ok((text(&raw, 0)?, raw)))
            .collect::<Result<HashMap<_, _>, StoreError>>()
    });
    for job in batch {
        let row = match &by_id {
            Ok(by_id) => by_id.get(&*job.id).map(Row::decode).transpose(),
            Err(error) => Err(PgError::again(error, "")),
        };
        let _ = job.reply.send(row);
    }
}

// ---------------------------------------------------------------------------------------
// Fenced finishes.

/// The fenced finish of live tasks, one statement for the batch (its own transaction): what
/// `end` and `PostgresStore::modify` do, for the common case only. A task changes only when
/// it is live, held by the job's instance at the job's epoch and not past its TTL at the
/// job's time; its steps go with it. Each task it finished is announced (`u:<id>` on the
/// store's channel, `$8`) for the listen streams of every instance, in the same statement:
/// the batch's one transaction notifies for all of them. Returns the ids it finished.
///
/// The plan must look tasks up by primary key only: `t.runner = u.runner` would imply the
/// predicate of the lease index (`runner IS NOT NULL`), and the generic plan then read that
/// whole index (every live task and every dead entry not yet vacuumed) on every batch.
/// `IS NOT DISTINCT FROM` (the same test, as no lease has a NULL instance) implies nothing,
/// and `t.id = ANY($1)` gives the primary key its condition.
static FINISH: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH u AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], \
         $5::text[], $6::text[], $7::bigint[]) AS u(id, epoch, runner, status, outcome, message, \
         now)), \
         done AS (UPDATE tasks t SET {set} FROM u \
         WHERE t.id = ANY($1) AND t.id = u.id AND t.epoch = u.epoch \
         AND t.runner IS NOT DISTINCT FROM u.runner AND {live} RETURNING t.id, t.status), \
         dropped AS (DELETE FROM steps s USING done WHERE s.task_id = done.id AND {drops}) \
     SELECT done.id FROM done CROSS JOIN LATERAL pg_notify($8, '{changed}' || done.id) AS announced",
        set = end_sql::set(
            "u.status",
            "u.outcome",
            "u.message",
            "u.now",
            &end_sql::finish_purge()
        ),
        live = end_sql::live("u.now"),
        drops = crate::store::codec::drops_history("done.status"),
        changed = notice_prefix!(changed),
    )
});

/// A fenced finish waiting for its batch: `true` when the batch finished the task, `false`
/// when it changed nothing (the caller takes the general path).
pub(super) struct FinishJob {
    pub(super) lease: Lease,
    pub(super) outcome: Outcome,
    /// The caller's clock reading.
    pub(super) now: u64,
    pub(super) reply: oneshot::Sender<Result<bool, StoreError>>,
}

/// The finish writers' batch ([`spawn`]).
pub(super) async fn finish_batch((pool, channel): (Pool, Arc<str>), jobs: Vec<FinishJob>) {
    // One finish per task in a statement: a second one changes nothing here and goes back
    // (the general path answers it, after the first is stored).
    let mut seen = HashSet::new();
    let (batch, again): (Vec<_>, Vec<_>) = jobs
        .into_iter()
        .partition(|job| seen.insert(Arc::clone(&job.lease.task_id)));
    for job in again {
        let _ = job.reply.send(Ok(false));
    }
    let finished = finish(&pool, &batch, &channel).await;
    for job in batch {
        let done = match &finished {
            Ok(done) => Ok(done.contains(&*job.lease.task_id)),
            Err(error) => Err(PgError::again(error, "")),
        };
        let _ = job.reply.send(done);
    }
}

async fn finish(
    pool: &Pool,
    batch: &[FinishJob],
    channel: &str,
) -> Result<HashSet<String>, StoreError> {
    let id: Vec<&str> = batch.iter().map(|job| &*job.lease.task_id).collect();
    let epoch: Vec<i64> = batch.iter().map(|job| to_i64(job.lease.epoch)).collect();
    let runner: Vec<&str> = batch.iter().map(|job| &*job.lease.instance).collect();
    // What the finish transition writes (record::finish), for many tasks at once.
    let (ended, message): (Vec<_>, Vec<_>) = batch
        .iter()
        .map(|job| record::finished(&job.outcome))
        .unzip();
    let status: Vec<_> = ended
        .into_iter()
        .map(codec::status_name)
        .collect::<Result<_, _>>()?;
    let outcome: Vec<_> = batch
        .iter()
        .map(|job| to_json(&job.outcome))
        .collect::<Result<_, _>>()?;
    let now: Vec<i64> = batch.iter().map(|job| to_i64(job.now)).collect();
    let bound: [&(dyn ToSql + Sync); 8] = [
        &id, &epoch, &runner, &status, &outcome, &message, &now, &channel,
    ];
    let rows = write_one(pool, &FINISH, &bound, "could not finish the task").await?;
    rows.iter().map(|row| text(row, 0)).collect()
}
