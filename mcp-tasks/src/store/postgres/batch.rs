//! Group commit of creates: a few writer tasks each take every create queued at that moment
//! and store them with one multi-row `INSERT` in one transaction, so that under load a commit
//! (and its WAL flush) covers many creates. Nothing waits on a timer: a lone create goes at
//! once, and the creates that arrive while a batch commits form the next one.

use std::{collections::HashSet, sync::Arc};

use deadpool_postgres::Pool;
use tokio::sync::{Mutex, mpsc, oneshot};

use super::{
    NewTask, StoreError,
    pool::write_one,
    row::{db_now_ms, to_i64, to_json},
};
use crate::clock::millis;

/// The most creates one transaction takes.
const MAX_BATCH: usize = 512;

/// Writer tasks: batches in flight at once.
pub(super) const WRITERS: usize = 4;

/// Inserts a batch; a create whose id or idempotency key conflicts with a stored task is
/// skipped (and reported back as a conflict). When tasks with no runner were inserted, one
/// `q:` notification (naming the first) announces them to workers in the same transaction:
/// one per batch, not per task, because Postgres serializes the commits of notifying
/// transactions.
const INSERT: &str = concat!(
    "WITH ins AS (INSERT INTO tasks (id, owner, tool, tool_version, status, status_message, \
     created_at_ms, last_updated_at_ms, ttl_ms, poll_interval_ms, arguments, request_meta, \
     input_requests, used_keys, answers, answer_seq, outcome, cancel_requested, deadline_ms, \
     purge_at_ms, runner, epoch, lease_until_ms, idempotency_key) \
     SELECT u.id, u.owner, u.tool, u.tool_version, 'working', u.status_message, u.created, \
     u.created, u.ttl, u.poll, u.arguments, u.request_meta, '{}', '[]', '{}', 0, NULL, FALSE, \
     u.deadline, NULL, u.runner, CASE WHEN u.runner IS NULL THEN 0 ELSE 1 END, ",
    db_now_ms!(),
    " + u.lease, u.idem \
     FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], \
     $7::bigint[], $8::bigint[], $9::text[], $10::text[], $11::bigint[], $12::text[], \
     $13::bigint[], $14::text[]) AS u(id, owner, tool, tool_version, status_message, created, \
     ttl, poll, arguments, request_meta, deadline, runner, lease, idem) \
     ON CONFLICT DO NOTHING RETURNING id, runner), \
     announce AS (SELECT pg_notify($15, 'q:' || min(id)) FROM ins WHERE runner IS NULL \
     HAVING count(*) > 0) \
     SELECT id FROM ins UNION ALL SELECT NULL FROM announce"
);

/// What happened to one create of a batch.
#[derive(Debug)]
pub(super) enum Created {
    /// Stored, committed.
    Inserted,
    /// Not stored: its id or idempotency key is taken (the caller finds out which). The
    /// create comes back.
    Conflict(Box<NewTask>),
}

/// A create waiting for its batch.
pub(super) struct Job {
    pub(super) task: NewTask,
    /// `createdAt`, the caller's clock reading.
    pub(super) now: u64,
    pub(super) reply: oneshot::Sender<Result<Created, StoreError>>,
}

/// Starts the writer tasks; they end when every sender of `jobs` is dropped.
pub(super) fn spawn(
    runtime: &tokio::runtime::Handle,
    pool: &Pool,
    channel: &Arc<str>,
) -> mpsc::UnboundedSender<Job> {
    let (tx, rx) = mpsc::unbounded_channel();
    let rx = Arc::new(Mutex::new(rx));
    for _ in 0..WRITERS {
        let (pool, rx, channel) = (pool.clone(), Arc::clone(&rx), Arc::clone(channel));
        runtime.spawn(async move { write_loop(&pool, &rx, &channel).await });
    }
    tx
}

async fn write_loop(pool: &Pool, jobs: &Mutex<mpsc::UnboundedReceiver<Job>>, channel: &str) {
    loop {
        let batch = {
            let mut jobs = jobs.lock().await;
            let Some(first) = jobs.recv().await else {
                return;
            };
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match jobs.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            batch
        };
        match insert(pool, &batch, channel).await {
            Ok(inserted) => {
                for job in batch {
                    let created = if inserted.contains(&*job.task.id) {
                        Created::Inserted
                    } else {
                        Created::Conflict(Box::new(job.task))
                    };
                    let _ = job.reply.send(Ok(created));
                }
            }
            Err(error) => {
                // Every create of the batch gets the error (same text, its own value).
                let text = super::pool::chain(&error);
                for job in batch {
                    let _ = job.reply.send(Err(super::PgError::msg(format!(
                        "{text} (the create was not stored, unless only the commit's answer \
                         was lost)"
                    ))));
                }
            }
        }
    }
}

/// The multi-row insert, as one transaction. The connection goes back to the pool before any
/// caller hears of the result.
async fn insert(pool: &Pool, batch: &[Job], channel: &str) -> Result<HashSet<String>, StoreError> {
    let n = batch.len();
    let mut cols = Columns::with_capacity(n);
    for job in batch {
        cols.push(job)?;
    }
    // One statement, its own transaction: one round trip and one commit per batch.
    let rows = write_one(
        pool,
        INSERT,
        &[
            &cols.id,
            &cols.owner,
            &cols.tool,
            &cols.tool_version,
            &cols.status_message,
            &cols.created,
            &cols.ttl,
            &cols.poll,
            &cols.arguments,
            &cols.request_meta,
            &cols.deadline,
            &cols.runner,
            &cols.lease,
            &cols.idem,
            &channel,
        ],
        "could not store the new tasks",
    )
    .await?;
    Ok(rows
        .iter()
        .filter_map(|row| row.get::<_, Option<String>>(0))
        .collect())
}

/// The batch, column by column (one array parameter each).
struct Columns<'a> {
    id: Vec<&'a str>,
    owner: Vec<&'a str>,
    tool: Vec<&'a str>,
    tool_version: Vec<&'a str>,
    status_message: Vec<Option<&'a str>>,
    created: Vec<i64>,
    ttl: Vec<Option<i64>>,
    poll: Vec<Option<i64>>,
    arguments: Vec<String>,
    request_meta: Vec<String>,
    deadline: Vec<Option<i64>>,
    runner: Vec<Option<&'a str>>,
    lease: Vec<Option<i64>>,
    idem: Vec<Option<&'a str>>,
}

impl<'a> Columns<'a> {
    fn with_capacity(n: usize) -> Self {
        Self {
            id: Vec::with_capacity(n),
            owner: Vec::with_capacity(n),
            tool: Vec::with_capacity(n),
            tool_version: Vec::with_capacity(n),
            status_message: Vec::with_capacity(n),
            created: Vec::with_capacity(n),
            ttl: Vec::with_capacity(n),
            poll: Vec::with_capacity(n),
            arguments: Vec::with_capacity(n),
            request_meta: Vec::with_capacity(n),
            deadline: Vec::with_capacity(n),
            runner: Vec::with_capacity(n),
            lease: Vec::with_capacity(n),
            idem: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, job: &'a Job) -> Result<(), StoreError> {
        let task = &job.task;
        let ttl = task.ttl.map(millis);
        self.id.push(&task.id);
        self.owner.push(&task.owner);
        self.tool.push(&task.tool);
        self.tool_version.push(&task.tool_version);
        self.status_message.push(task.status_message.as_deref());
        self.created.push(to_i64(job.now));
        self.ttl.push(ttl.map(to_i64));
        self.poll
            .push(task.poll_interval.map(|p| to_i64(millis(p))));
        self.arguments.push(to_json(&task.arguments)?);
        self.request_meta.push(to_json(&task.request_meta)?);
        self.deadline
            .push(ttl.map(|ttl| to_i64(job.now.saturating_add(ttl))));
        self.runner.push(task.runner.as_ref().map(|r| &*r.instance));
        self.lease
            .push(task.runner.as_ref().map(|r| to_i64(millis(r.lease))));
        self.idem.push(task.idempotency_key.as_deref());
        Ok(())
    }
}
