//! [`PostgresStore`]: one task space on a Postgres server, shared by every instance of a
//! server (and by workers).
//!
//! # Invariants
//!
//! The store keeps the [`TaskStore`] invariants (module docs of
//! [`store`](super)) for every client of the schema at once, and the cluster ones
//! ([`ClusterStore`]). How:
//!
//! - **Rows are the truth.** Every field of a task is a column of `tasks` (status, message,
//!   timestamps, TTL, poll interval, owner, tool and version, arguments, the creating
//!   request's `_meta`, input requests, used keys and answers, result or error, cancel
//!   intent, runner, lease deadline, epoch, idempotency key); completed steps are rows of
//!   `steps`. No instance keeps task state that another one could not read.
//! - **Acknowledged means committed.** A change returns only after the `COMMIT` that holds it
//!   returned, under the server's `synchronous_commit` (the store does not lower it; with the
//!   default `on` a commit waits for the WAL flush). A commit whose answer is lost (the
//!   connection dropped) is reported as a [`StoreError::Backend`] that says so; the task is
//!   then either fully stored or not at all, never half.
//! - **One change at a time per task.** A change reads its row `FOR UPDATE`, applies the
//!   expiry that is due, checks the state machine (and the lease's epoch, for a fenced
//!   write), and writes back in the same transaction.
//! - **Creates in groups.** Creates queued at the same moment share one multi-row `INSERT`
//!   and one commit. The unique index on (owner, tool, idempotency key) makes a
//!   retried create atomic: of concurrent creates with one key, one inserts, every other
//!   answers [`StoreError::Existing`] with that task (within its TTL; past it the key is
//!   released and a new task is created).
//! - **Leases on the database clock.** Lease deadlines are the server's `clock_timestamp()`
//!   plus the lease length, so instances with skewed clocks agree on when a lease lapsed.
//!   Task timestamps and TTL deadlines use the instance's clock, like the other stores.
//! - **Claims skip locked rows.** [`claim_lapsed`](super::ClusterStore::claim_lapsed),
//!   [`claim_queued`](super::ClusterStore::claim_queued) and
//!   [`expire_due`](super::TaskStore::expire_due) select their rows
//!   `FOR UPDATE SKIP LOCKED` in small batches: instances running them at once split the
//!   rows between them, never wait on each other, and never process a row twice (a claim
//!   increments the epoch; an expiry leaves the live set).
//! - **Fencing.** A fenced write whose lease epoch (or instance) is not the row's changes
//!   nothing and answers [`StoreError::Fenced`].
//! - **Wake-ups in the same transaction.** [`deliver_input`](super::TaskStore::deliver_input)
//!   and [`request_cancel`](super::TaskStore::request_cancel) `NOTIFY` the schema's channel in
//!   the transaction of the change, so the notification is sent exactly when the change
//!   commits; so does a create with no runner, or a release. Each store listens on one
//!   connection (opened by the first [`wakeups`](super::ClusterStore::wakeups) call) and
//!   re-reads its leased tasks and the queue every
//!   [`reread_interval`](PostgresBuilder::with_reread_interval), which covers a notification
//!   lost while that connection was down.
//! - **Connections.** A pool ([`deadpool_postgres`]); a connection that fails mid-transaction,
//!   or whose operation is dropped mid-way, is closed, never handed out again in an unknown
//!   state. A read, and a transaction's `BEGIN`, that meet a connection gone stale in the pool
//!   (its backend terminated) are retried once on a fresh connection; no write is retried.
//! - **Schema.** Created and migrated by the store in its own Postgres schema
//!   ([`with_schema`](PostgresBuilder::with_schema); tests use one each), versioned in its
//!   `meta` table, one step per version, each in one transaction, instances taking turns
//!   (an advisory lock). A schema of a newer version is refused and left untouched.

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use rmcp::model::{InputRequest, InputResponses, TaskStatus};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_postgres::NoTls;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::{
    ClusterStore, Lease, NewTask, Outcome, Recovery, Step, StoreError, TaskSnapshot, TaskStore,
    Wakeup, memory::DEFAULT_EXPIRED_RETENTION, new_task_snapshot,
};
use crate::{
    clock::{Clock, millis},
    errors,
};

mod batch;
mod listener;
mod pool;
mod row;
mod schema;

pub use pool::PgError;
pub use schema::SCHEMA_VERSION;

use listener::{Held, Seen};
use pool::{Tx, read};
use row::{EXPIRED_MESSAGE, Row, db_now_ms, json, object, outcome_json, to_i64, to_json, to_u64};

/// Default connections in the pool.
pub const DEFAULT_POOL_SIZE: usize = 8;
/// Default Postgres schema of the task tables.
pub const DEFAULT_SCHEMA: &str = "mcp_tasks";
/// Default interval of the re-read that covers lost notifications.
pub const DEFAULT_REREAD_INTERVAL: Duration = Duration::from_secs(2);
/// Default time to wait for a new connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `application_name` of the store's connections (when the URL sets none).
pub const DEFAULT_APPLICATION_NAME: &str = "mcp-tasks";

/// How long the server lets a connection of the store sit idle inside a transaction before
/// it ends the session (`idle_in_transaction_session_timeout`). The store's transactions
/// last milliseconds; a process stalled in the middle of one (SIGSTOP, a VM pause) would keep
/// its rows locked, and claims skip locked rows, so without this a stalled instance could
/// keep its tasks from being taken over for as long as it stalls.
const IDLE_IN_TRANSACTION_TIMEOUT_MS: u64 = 10_000;

/// Tasks one expiry or purge statement takes at most (the sweep repeats until none is due).
const SWEEP_BATCH: i64 = 256;

/// How [`PostgresStore::connect`] sets up the store; every setting has a documented default.
#[derive(Debug, Clone)]
#[must_use]
pub struct PostgresBuilder {
    url: String,
    schema: String,
    pool_size: usize,
    reread: Duration,
    connect_timeout: Duration,
    application_name: Option<String>,
    expired_retention: Duration,
}

impl PostgresBuilder {
    /// Sets the Postgres schema that holds the task tables (default [`DEFAULT_SCHEMA`]):
    /// lowercase ASCII letters, digits and `_`, starting with a letter or `_`, at most 48
    /// characters. Every instance of one task space uses the same schema.
    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Sets the most connections the pool opens (default [`DEFAULT_POOL_SIZE`]); the store
    /// opens one more to listen for notifications once wake-ups are asked for.
    pub fn with_pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// Sets how often the store re-reads its leased tasks and the queue, to cover a lost
    /// notification (default [`DEFAULT_REREAD_INTERVAL`]).
    pub fn with_reread_interval(mut self, interval: Duration) -> Self {
        self.reread = interval.max(Duration::from_millis(10));
        self
    }

    /// Sets how long opening a connection may take (default [`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the `application_name` of the store's connections (default: the URL's, else
    /// [`DEFAULT_APPLICATION_NAME`]), as `pg_stat_activity` shows it.
    pub fn with_application_name(mut self, name: impl Into<String>) -> Self {
        self.application_name = Some(name.into());
        self
    }

    /// Sets how long an expired task stays readable as `failed` before it is purged
    /// (default: the memory store's, 5 minutes).
    pub fn with_expired_retention(mut self, retention: Duration) -> Self {
        self.expired_retention = retention;
        self
    }

    /// Connects, creates or migrates the schema, and starts the create writers.
    ///
    /// # Errors
    /// [`StoreError::Backend`], saying what to fix: the URL does not parse, the schema name
    /// is not valid, the server cannot be reached or refuses the login, or the schema was
    /// written by a newer build (it is left untouched).
    pub async fn connect(self) -> Result<PostgresStore, StoreError> {
        if !valid_schema(&self.schema) {
            return Err(PgError::msg(format!(
                "`{}` is not a valid task store schema name: use lowercase ASCII letters, \
                 digits and `_`, starting with a letter or `_`, at most 48 characters",
                self.schema
            )));
        }
        let mut config: tokio_postgres::Config = self.url.parse().map_err(|e| {
            PgError::owned(
                format!(
                    "`{}` is not a valid Postgres URL (expected \
                     postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE)",
                    redact(&self.url)
                ),
                e,
            )
        })?;
        // `enable_seqscan = off`: every statement of the store finds its rows by an index,
        // and must keep doing so. A prepared statement's generic plan is made once, from
        // the table as it is then: made while the table was new and small, a sequential scan
        // was cheapest, and was kept (until the next ANALYZE) however large the table grew,
        // one scan of every row per read (650 scans in a 5-second benchmark of 8,000 tasks).
        // With it off the planner takes the index path wherever there is one.
        let search_path = format!(
            "-c search_path=\"{}\" -c idle_in_transaction_session_timeout={} \
             -c enable_seqscan=off",
            self.schema, IDLE_IN_TRANSACTION_TIMEOUT_MS
        );
        let options = match config.get_options() {
            Some(existing) if !existing.is_empty() => format!("{existing} {search_path}"),
            _ => search_path,
        };
        config.options(&options);
        if let Some(name) = &self.application_name {
            config.application_name(name);
        } else if config.get_application_name().is_none() {
            config.application_name(DEFAULT_APPLICATION_NAME);
        }
        config.connect_timeout(self.connect_timeout);
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(self.pool_size)
            .build()
            .map_err(|e| PgError::msg(format!("could not build the connection pool: {e}")))?;
        let context = format!(
            "could not connect to the Postgres server at {}",
            redact(&self.url)
        );
        let first = pool::get_or(&pool, &context).await?;
        schema::migrate(&first, &self.schema).await?;
        drop(first);
        let runtime = tokio::runtime::Handle::current();
        let channel: Arc<str> = Arc::from(format!("mcp_tasks.{}", self.schema));
        let creates = batch::spawn(&runtime, &pool, &channel);
        let reads = batch::spawn_readers(&runtime, &pool);
        let finishes = batch::spawn_finishers(&runtime, &pool);
        let stop = CancellationToken::new();
        Ok(PostgresStore {
            pool,
            creates,
            reads,
            finishes,
            clock: Clock::new(),
            channel,
            held: Held::default(),
            wakeups: OnceLock::new(),
            runtime,
            config,
            stop: stop.clone(),
            _stop: stop.drop_guard(),
            settings: self,
        })
    }
}

/// The URL without its password, for error messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

fn valid_schema(schema: &str) -> bool {
    let mut chars = schema.chars();
    schema.len() <= 48
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The shared task store on a Postgres server. See the [module docs](self).
pub struct PostgresStore {
    pool: Pool,
    creates: mpsc::UnboundedSender<batch::Job>,
    reads: mpsc::UnboundedSender<batch::ReadJob>,
    finishes: mpsc::UnboundedSender<batch::FinishJob>,
    clock: Clock,
    channel: Arc<str>,
    held: Held,
    wakeups: OnceLock<broadcast::Sender<Wakeup>>,
    runtime: tokio::runtime::Handle,
    config: tokio_postgres::Config,
    stop: CancellationToken,
    /// Stops the listener when the store is dropped.
    _stop: DropGuard,
    settings: PostgresBuilder,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("schema", &self.settings.schema)
            .field("pool_size", &self.settings.pool_size)
            .finish_non_exhaustive()
    }
}

/// What a change did besides its row.
#[derive(Default)]
struct Effects {
    /// The row changed: write it back.
    dirty: bool,
    /// The task ended: its steps go.
    ended: bool,
    /// A step to store.
    step: Option<Step>,
    /// A notification to send with the commit.
    notify: Option<String>,
}

impl PostgresStore {
    /// A builder for the store at `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`).
    pub fn builder(url: impl Into<String>) -> PostgresBuilder {
        PostgresBuilder {
            url: url.into(),
            schema: DEFAULT_SCHEMA.to_owned(),
            pool_size: DEFAULT_POOL_SIZE,
            reread: DEFAULT_REREAD_INTERVAL,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            application_name: None,
            expired_retention: DEFAULT_EXPIRED_RETENTION,
        }
    }

    /// The store at `url` with every default setting ([`PostgresStore::builder`]).
    ///
    /// # Errors
    /// As [`PostgresBuilder::connect`].
    pub async fn connect(url: impl Into<String>) -> Result<Self, StoreError> {
        Self::builder(url).connect().await
    }

    /// The Postgres schema of the task tables.
    #[must_use]
    pub fn schema(&self) -> &str {
        &self.settings.schema
    }

    /// How often the store re-reads its leased tasks and the queue.
    #[must_use]
    pub fn reread_interval(&self) -> Duration {
        self.settings.reread
    }

    fn retention_ms(&self) -> u64 {
        millis(self.settings.expired_retention)
    }

    /// One change of one task, in one transaction: lock the row, apply due expiry, check the
    /// lease (when fenced), run `change`, write back, notify, commit. The expiry is committed
    /// even when `change` refuses.
    async fn modify<R>(
        &self,
        id: &str,
        fence: Option<&Lease>,
        change: impl FnOnce(&mut Row, &mut Effects, u64) -> Result<R, StoreError> + Send,
    ) -> Result<R, StoreError> {
        let now = self.clock.now_ms();
        let tx = Tx::begin(&self.pool).await?;
        let rows = tx
            .query(row::SELECT_FOR_UPDATE, &[&id], "could not read the task")
            .await?;
        let Some(raw) = rows.first() else {
            tx.rollback().await;
            return Err(StoreError::NotFound);
        };
        let mut row = Row::decode(raw)?;
        if row.purge_due(now) {
            tx.execute(
                "DELETE FROM tasks WHERE id = $1",
                &[&id],
                "could not purge the task",
            )
            .await?;
            tx.commit().await?;
            return Err(StoreError::NotFound);
        }
        let mut effects = Effects::default();
        if row.expiry_due(now) {
            row.expire(now, self.retention_ms());
            effects.dirty = true;
            effects.ended = true;
        }
        let result = match fence {
            Some(lease)
                if lease.epoch != row.epoch || row.runner.as_deref() != Some(&*lease.instance) =>
            {
                Err(StoreError::Fenced {
                    held: Some(lease.epoch),
                    current: row.epoch,
                })
            }
            _ => change(&mut row, &mut effects, now),
        };
        if result.is_err() {
            // Only the expiry (if any) is kept.
            effects.step = None;
            effects.notify = None;
        }
        if !effects.dirty && effects.step.is_none() && effects.notify.is_none() {
            tx.rollback().await;
            return result;
        }
        if effects.dirty {
            row.write_back(&tx).await?;
        }
        if effects.ended {
            tx.execute(
                "DELETE FROM steps WHERE task_id = $1",
                &[&id],
                "could not drop the finished task's steps",
            )
            .await?;
        }
        if let Some(step) = &effects.step {
            tx.execute(
                "INSERT INTO steps (task_id, seq, name, value) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (task_id, seq) DO UPDATE SET name = EXCLUDED.name, \
                 value = EXCLUDED.value",
                &[&id, &to_i64(step.seq), &step.name, &to_json(&step.value)?],
                "could not store the step",
            )
            .await?;
        }
        if let Some(payload) = &effects.notify {
            tx.execute(
                "SELECT pg_notify($1, $2)",
                &[&&*self.channel, payload],
                "could not notify the instance running the task",
            )
            .await?;
        }
        tx.commit().await?;
        result
    }

    /// The task's epoch, for an error that explains why a lease operation did nothing.
    async fn explain(&self, id: &str, held: Option<u64>) -> StoreError {
        match self.get(id).await {
            Ok(None) => StoreError::NotFound,
            Ok(Some(task)) if task.status.is_terminal() => StoreError::Terminal(task.status),
            Ok(Some(_)) => match read(
                &self.pool,
                "SELECT epoch FROM tasks WHERE id = $1",
                &[&id],
                "could not read the task's epoch",
            )
            .await
            {
                Ok(rows) => rows
                    .first()
                    .map_or(StoreError::NotFound, |r| StoreError::Fenced {
                        held,
                        current: to_u64(r.get(0)),
                    }),
                Err(error) => error,
            },
            Err(error) => error,
        }
    }

    /// Resolves a create the batch skipped: an idempotent retry (the existing task), a
    /// duplicate id, or a key whose task is past its TTL (released, then created anew).
    async fn create_conflicted(&self, mut task: NewTask, now: u64) -> Result<(), StoreError> {
        for _ in 0..3 {
            let tx = Tx::begin(&self.pool).await?;
            if let Some(key) = &task.idempotency_key {
                let rows = tx
                    .query(
                        "SELECT id FROM tasks WHERE owner = $1 AND tool = $2 \
                         AND idempotency_key = $3 FOR UPDATE",
                        &[&&*task.owner, &&*task.tool, &&**key],
                        "could not look up the idempotency key",
                    )
                    .await?;
                if let Some(existing) = rows.first() {
                    let existing: String = existing.get(0);
                    let found = tx
                        .query(
                            row::SELECT,
                            &[&existing],
                            "could not read the existing task",
                        )
                        .await?;
                    let found = found.first().map(Row::decode).transpose()?;
                    match found {
                        Some(row)
                            if row
                                .snapshot
                                .ttl_ms
                                .is_none_or(|ttl| now < row.snapshot.created_at_ms + ttl) =>
                        {
                            tx.rollback().await;
                            return Err(StoreError::Existing(Box::new(row.snapshot)));
                        }
                        _ => {
                            // Past its TTL: the key is free again.
                            tx.execute(
                                "UPDATE tasks SET idempotency_key = NULL WHERE id = $1",
                                &[&existing],
                                "could not release the idempotency key",
                            )
                            .await?;
                        }
                    }
                }
            }
            let taken = tx
                .query(
                    "SELECT 1 FROM tasks WHERE id = $1",
                    &[&&*task.id],
                    "could not look up the task id",
                )
                .await?;
            if !taken.is_empty() {
                tx.rollback().await;
                return Err(StoreError::DuplicateId);
            }
            tx.commit().await?;
            // The conflicting row is gone (or its key released): queue the create again.
            match self.enqueue(task, now).await? {
                batch::Created::Inserted => return Ok(()),
                batch::Created::Conflict(again) => task = *again,
            }
        }
        Err(PgError::msg(format!(
            "could not create task {}: its id or idempotency key kept conflicting with tasks \
             created at the same time",
            task.id
        )))
    }

    /// A fenced finish through the finish writers ([`batch`]): `true` when it ended the task,
    /// `false` when it changed nothing (not live under this lease, or past its TTL).
    async fn finish_batched(&self, lease: &Lease, outcome: &Outcome) -> Result<bool, StoreError> {
        let (reply, answer) = oneshot::channel();
        let stopped = || PgError::msg("the store's finish writers have stopped".into());
        self.finishes
            .send(batch::FinishJob {
                lease: lease.clone(),
                outcome: outcome.clone(),
                now: self.clock.now_ms(),
                reply,
            })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    async fn enqueue(&self, task: NewTask, now: u64) -> Result<batch::Created, StoreError> {
        let (reply, answer) = oneshot::channel();
        let stopped = || PgError::msg("the Postgres create writers have stopped".into());
        self.creates
            .send(batch::Job { task, now, reply })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Notes a lease taken through this store, for the re-read.
    fn hold(&self, lease: &Lease, answer_seq: i64) {
        listener::lock(&self.held).insert(
            Arc::clone(&lease.task_id),
            Seen {
                id: Arc::clone(&lease.task_id),
                epoch: lease.epoch,
                cancel: false,
                answer_seq,
            },
        );
    }

    fn unhold(&self, lease: &Lease) {
        let mut held = listener::lock(&self.held);
        if held
            .get(&*lease.task_id)
            .is_some_and(|seen| seen.epoch == lease.epoch)
        {
            held.remove(&*lease.task_id);
        }
    }

    /// A claim (lapsed or queued): one statement that picks and takes the rows, then their
    /// steps, in one transaction.
    async fn claim(
        &self,
        pick: &str,
        instance: &str,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<(Recovery, Lease)>, StoreError> {
        let now = to_i64(self.clock.now_ms());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let lease_ms = to_i64(millis(lease));
        let tx = Tx::begin(&self.pool).await?;
        let rows = tx
            .query(
                pick,
                &[&instance, &lease_ms, &now, &limit],
                "could not claim tasks",
            )
            .await?;
        let ids: Vec<String> = rows.iter().map(|r| r.get::<_, String>(0)).collect();
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
        let mut steps: std::collections::HashMap<String, Vec<Step>> =
            std::collections::HashMap::new();
        for r in &step_rows {
            steps.entry(r.get(0)).or_default().push(Step::new(
                to_u64(r.get(1)),
                r.get::<_, String>(2),
                json(r.get::<_, &str>(3))?,
            ));
        }
        let instance: Arc<str> = Arc::from(instance);
        let mut claimed = Vec::with_capacity(rows.len());
        for r in &rows {
            let id: Arc<str> = Arc::from(r.get::<_, &str>(0));
            let recovery = Recovery {
                id: Arc::clone(&id),
                owner: Arc::from(r.get::<_, &str>(1)),
                tool: Arc::from(r.get::<_, &str>(2)),
                tool_version: Arc::from(r.get::<_, &str>(3)),
                arguments: object(r.get(4))?,
                request_meta: object(r.get(5))?,
                answers: json(r.get(6))?,
                steps: steps.remove(&*id).unwrap_or_default(),
            };
            let granted = Lease {
                task_id: id,
                instance: Arc::clone(&instance),
                epoch: to_u64(r.get(7)),
                length: lease,
            };
            self.hold(&granted, r.get(8));
            claimed.push((recovery, granted));
        }
        Ok(claimed)
    }
}

/// The columns a claim returns, in the order [`PostgresStore::claim`] reads them.
macro_rules! claimed_columns {
    () => {
        " RETURNING t.id, t.owner, t.tool, t.tool_version, t.arguments, t.request_meta, \
         t.answers, t.epoch, t.answer_seq"
    };
}

/// Takes up to `$4` live tasks whose lease lapsed (and whose TTL has not), for `$1`.
const CLAIM_LAPSED: &str = concat!(
    "WITH c AS (SELECT id FROM tasks WHERE purge_at_ms IS NULL AND runner IS NOT NULL \
     AND lease_until_ms < ",
    db_now_ms!(),
    " AND (deadline_ms IS NULL OR deadline_ms > $3) ORDER BY lease_until_ms LIMIT $4 \
     FOR UPDATE SKIP LOCKED) \
     UPDATE tasks t SET runner = $1, epoch = t.epoch + 1, lease_until_ms = ",
    db_now_ms!(),
    " + $2 FROM c WHERE t.id = c.id",
    claimed_columns!()
);

/// Takes up to `$4` live tasks that have no runner, oldest first, for `$1`.
const CLAIM_QUEUED: &str = concat!(
    "WITH c AS (SELECT id FROM tasks WHERE purge_at_ms IS NULL AND runner IS NULL \
     AND (deadline_ms IS NULL OR deadline_ms > $3) ORDER BY created_at_ms LIMIT $4 \
     FOR UPDATE SKIP LOCKED) \
     UPDATE tasks t SET runner = $1, epoch = t.epoch + 1, lease_until_ms = ",
    db_now_ms!(),
    " + $2 FROM c WHERE t.id = c.id",
    claimed_columns!()
);

fn live(row: &Row) -> Result<(), StoreError> {
    if row.snapshot.status.is_terminal() {
        Err(StoreError::Terminal(row.snapshot.status))
    } else {
        Ok(())
    }
}

fn set_message(
    row: &mut Row,
    fx: &mut Effects,
    now: u64,
    message: Option<String>,
) -> Result<(), StoreError> {
    live(row)?;
    if row.snapshot.status_message != message {
        row.snapshot.status_message = message;
        row.touch(now);
        fx.dirty = true;
    }
    Ok(())
}

fn ask(
    row: &mut Row,
    fx: &mut Effects,
    now: u64,
    key: &str,
    request: InputRequest,
) -> Result<(), StoreError> {
    live(row)?;
    if row.snapshot.input_requests.contains_key(key) {
        return Ok(());
    }
    if row.used_keys.iter().any(|k| k == key) {
        return Err(StoreError::KeyReused(key.to_owned()));
    }
    row.used_keys.push(key.to_owned());
    row.snapshot.input_requests.insert(key.to_owned(), request);
    row.snapshot.status = TaskStatus::InputRequired;
    row.touch(now);
    fx.dirty = true;
    Ok(())
}

fn step(row: &mut Row, fx: &mut Effects, now: u64, step: Step) -> Result<(), StoreError> {
    live(row)?;
    row.touch(now);
    fx.dirty = true;
    fx.step = Some(step);
    Ok(())
}

fn end(row: &mut Row, fx: &mut Effects, now: u64, outcome: Outcome) -> Result<(), StoreError> {
    live(row)?;
    // A finished task is purged when its TTL runs out (R20).
    let purge_at = row.deadline_ms;
    row.snapshot.status_message = outcome.status_message();
    row.end(outcome, now, purge_at);
    fx.dirty = true;
    fx.ended = true;
    Ok(())
}

#[async_trait]
impl TaskStore for PostgresStore {
    async fn create(&self, task: NewTask) -> Result<TaskSnapshot, StoreError> {
        let now = self.clock.now_ms();
        let snapshot = new_task_snapshot(&task, now);
        let first = Lease::first(&task);
        match self.enqueue(task, now).await? {
            batch::Created::Inserted => {}
            batch::Created::Conflict(task) => self.create_conflicted(*task, now).await?,
        }
        if let Some(lease) = first {
            self.hold(&lease, 0);
        }
        Ok(snapshot)
    }

    async fn get(&self, id: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        let now = self.clock.now_ms();
        let (reply, answer) = oneshot::channel();
        self.reads
            .send(batch::ReadJob {
                id: Arc::from(id),
                reply,
            })
            .map_err(|_| PgError::msg("the store's readers have stopped".into()))?;
        let row = answer
            .await
            .map_err(|_| PgError::msg("the store's readers have stopped".into()))??;
        let Some(row) = row else {
            return Ok(None);
        };
        if !row.purge_due(now) && !row.expiry_due(now) {
            return Ok(Some(row.snapshot));
        }
        match self
            .modify(id, None, |row, _, _| Ok(row.snapshot.clone()))
            .await
        {
            Ok(snapshot) => Ok(Some(snapshot)),
            Err(StoreError::NotFound) => Ok(None),
            Err(error) => Err(error),
        }
    }

    async fn set_status_message(
        &self,
        id: &str,
        message: Option<String>,
    ) -> Result<(), StoreError> {
        self.modify(id, None, |row, fx, now| set_message(row, fx, now, message))
            .await
    }

    async fn request_input(
        &self,
        id: &str,
        key: &str,
        request: InputRequest,
    ) -> Result<(), StoreError> {
        self.modify(id, None, |row, fx, now| ask(row, fx, now, key, request))
            .await
    }

    async fn deliver_input(
        &self,
        id: &str,
        responses: InputResponses,
    ) -> Result<InputResponses, StoreError> {
        self.modify(id, None, |row, fx, now| {
            let mut accepted = InputResponses::new();
            if row.snapshot.status.is_terminal() {
                return Ok(accepted);
            }
            for (key, value) in responses {
                if row.snapshot.input_requests.remove(&key).is_some() {
                    row.answers.insert(key.clone(), value.clone());
                    accepted.insert(key, value);
                }
            }
            if !accepted.is_empty() {
                if row.snapshot.input_requests.is_empty() {
                    row.snapshot.status = TaskStatus::Working;
                }
                row.answer_seq += 1;
                row.touch(now);
                fx.dirty = true;
                fx.notify = Some(format!("a:{}:{}", row.answer_seq, row.snapshot.id));
            }
            Ok(accepted)
        })
        .await
    }

    async fn finish(&self, id: &str, outcome: Outcome) -> Result<(), StoreError> {
        self.modify(id, None, |row, fx, now| end(row, fx, now, outcome))
            .await
    }

    async fn request_cancel(&self, id: &str) -> Result<(), StoreError> {
        self.modify(id, None, |row, fx, now| {
            if !row.snapshot.cancel_requested && !row.snapshot.status.is_terminal() {
                row.snapshot.cancel_requested = true;
                row.touch(now);
                fx.dirty = true;
                fx.notify = Some(format!("c:{}", row.snapshot.id));
            }
            Ok(())
        })
        .await
    }

    async fn save_step(&self, id: &str, s: Step) -> Result<(), StoreError> {
        self.modify(id, None, |row, fx, now| step(row, fx, now, s))
            .await
    }

    async fn recoverable(&self) -> Result<Vec<Recovery>, StoreError> {
        let rows = read(
            &self.pool,
            "SELECT id, owner, tool, tool_version, arguments, request_meta, answers \
             FROM tasks WHERE purge_at_ms IS NULL ORDER BY id",
            &[],
            "could not list the live tasks",
        )
        .await?;
        let step_rows = read(
            &self.pool,
            "SELECT s.task_id, s.seq, s.name, s.value FROM steps s JOIN tasks t \
             ON t.id = s.task_id WHERE t.purge_at_ms IS NULL ORDER BY s.task_id, s.seq",
            &[],
            "could not list the live tasks' steps",
        )
        .await?;
        let mut steps: std::collections::HashMap<String, Vec<Step>> =
            std::collections::HashMap::new();
        for r in &step_rows {
            steps.entry(r.get(0)).or_default().push(Step::new(
                to_u64(r.get(1)),
                r.get::<_, String>(2),
                json(r.get::<_, &str>(3))?,
            ));
        }
        rows.iter()
            .map(|r| {
                let id: String = r.get(0);
                Ok(Recovery {
                    steps: steps.remove(&id).unwrap_or_default(),
                    id: Arc::from(id),
                    owner: Arc::from(r.get::<_, &str>(1)),
                    tool: Arc::from(r.get::<_, &str>(2)),
                    tool_version: Arc::from(r.get::<_, &str>(3)),
                    arguments: object(r.get(4))?,
                    request_meta: object(r.get(5))?,
                    answers: json(r.get(6))?,
                })
            })
            .collect()
    }

    async fn expire_due(&self) -> Result<Vec<Arc<str>>, StoreError> {
        let now = to_i64(self.clock.now_ms());
        let retention = to_i64(self.retention_ms());
        let error = to_json(&outcome_json(&Outcome::Failed(errors::to_object(
            &errors::task_expired(),
        ))))?;
        let mut failed = Vec::new();
        loop {
            let tx = Tx::begin(&self.pool).await?;
            let rows = tx
                .query(
                    "WITH due AS (SELECT id FROM tasks WHERE purge_at_ms IS NULL \
                     AND deadline_ms <= $1 ORDER BY deadline_ms LIMIT $5 \
                     FOR UPDATE SKIP LOCKED) \
                     UPDATE tasks t SET status = 'failed', status_message = $2, outcome = $3, \
                     purge_at_ms = LEAST(t.deadline_ms + $4, 9223372036854775807), \
                     input_requests = '{}', used_keys = '[]', answers = '{}', \
                     last_updated_at_ms = GREATEST($1, t.last_updated_at_ms + 1) \
                     FROM due WHERE t.id = due.id RETURNING t.id",
                    &[&now, &EXPIRED_MESSAGE, &error, &retention, &SWEEP_BATCH],
                    "could not expire the tasks past their TTL",
                )
                .await?;
            let ids: Vec<String> = rows.iter().map(|r| r.get::<_, String>(0)).collect();
            if !ids.is_empty() {
                tx.execute(
                    "DELETE FROM steps WHERE task_id = ANY($1)",
                    &[&ids],
                    "could not drop the expired tasks' steps",
                )
                .await?;
            }
            tx.commit().await?;
            let full = i64::try_from(ids.len()).unwrap_or(i64::MAX) >= SWEEP_BATCH;
            failed.extend(ids.into_iter().map(Arc::from));
            if !full {
                break;
            }
        }
        loop {
            let tx = Tx::begin(&self.pool).await?;
            let purged = tx
                .execute(
                    "DELETE FROM tasks WHERE id IN (SELECT id FROM tasks WHERE purge_at_ms <= $1 \
                     LIMIT $2 FOR UPDATE SKIP LOCKED)",
                    &[&now, &SWEEP_BATCH],
                    "could not purge the tasks past their retention",
                )
                .await?;
            tx.commit().await?;
            if purged < u64::try_from(SWEEP_BATCH).unwrap_or(u64::MAX) {
                break;
            }
        }
        Ok(failed)
    }

    fn cluster(&self) -> Option<&dyn ClusterStore> {
        Some(self)
    }
}

#[async_trait]
impl ClusterStore for PostgresStore {
    async fn acquire(
        &self,
        id: &str,
        instance: &str,
        lease: Duration,
    ) -> Result<Lease, StoreError> {
        let now = to_i64(self.clock.now_ms());
        let tx = Tx::begin(&self.pool).await?;
        let rows = tx
            .query(
                concat!(
                    "UPDATE tasks SET runner = $2, epoch = epoch + 1, lease_until_ms = ",
                    db_now_ms!(),
                    " + $3 WHERE id = $1 AND purge_at_ms IS NULL \
                     AND (deadline_ms IS NULL OR deadline_ms > $4) \
                     AND (runner IS NULL OR runner = $2 OR lease_until_ms < ",
                    db_now_ms!(),
                    ") RETURNING epoch, answer_seq"
                ),
                &[&id, &instance, &to_i64(millis(lease)), &now],
                "could not acquire the task's lease",
            )
            .await?;
        tx.commit().await?;
        let Some(r) = rows.first() else {
            return Err(self.explain(id, None).await);
        };
        let granted = Lease {
            task_id: Arc::from(id),
            instance: Arc::from(instance),
            epoch: to_u64(r.get(0)),
            length: lease,
        };
        self.hold(&granted, r.get(1));
        Ok(granted)
    }

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
            self.unhold(lease);
            return Err(self.explain(&lease.task_id, Some(lease.epoch)).await);
        }
        Ok(lease.clone())
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let tx = Tx::begin(&self.pool).await?;
        let released = tx
            .execute(
                "UPDATE tasks SET runner = NULL, lease_until_ms = NULL \
                 WHERE id = $1 AND epoch = $2 AND runner = $3 AND purge_at_ms IS NULL",
                &[&&*lease.task_id, &to_i64(lease.epoch), &&*lease.instance],
                "could not release the task's lease",
            )
            .await?;
        if released > 0 {
            let payload = format!("q:{}", lease.task_id);
            tx.execute(
                "SELECT pg_notify($1, $2)",
                &[&&*self.channel, &payload],
                "could not announce the released task",
            )
            .await?;
        }
        tx.commit().await?;
        self.unhold(lease);
        Ok(())
    }

    async fn claim_lapsed(
        &self,
        instance: &str,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<(Recovery, Lease)>, StoreError> {
        self.claim(CLAIM_LAPSED, instance, lease, limit).await
    }

    async fn claim_queued(
        &self,
        instance: &str,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<(Recovery, Lease)>, StoreError> {
        self.claim(CLAIM_QUEUED, instance, lease, limit).await
    }

    async fn set_status_message_fenced(
        &self,
        lease: &Lease,
        message: Option<String>,
    ) -> Result<(), StoreError> {
        self.modify(&lease.task_id, Some(lease), |row, fx, now| {
            set_message(row, fx, now, message)
        })
        .await
    }

    async fn request_input_fenced(
        &self,
        lease: &Lease,
        key: &str,
        request: InputRequest,
    ) -> Result<(), StoreError> {
        self.modify(&lease.task_id, Some(lease), |row, fx, now| {
            ask(row, fx, now, key, request)
        })
        .await
    }

    async fn save_step_fenced(&self, lease: &Lease, s: Step) -> Result<(), StoreError> {
        self.modify(&lease.task_id, Some(lease), |row, fx, now| {
            step(row, fx, now, s)
        })
        .await
    }

    async fn finish_fenced(&self, lease: &Lease, outcome: Outcome) -> Result<(), StoreError> {
        let result = match self.finish_batched(lease, &outcome).await {
            Ok(true) => Ok(()),
            // The task is not (or no longer) live under this lease, or is past its TTL:
            // the general path finds out which and answers for it.
            Ok(false) => {
                self.modify(&lease.task_id, Some(lease), |row, fx, now| {
                    end(row, fx, now, outcome)
                })
                .await
            }
            Err(error) => Err(error),
        };
        if !matches!(result, Err(StoreError::Backend(_))) {
            self.unhold(lease);
        }
        result
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
            Some(row) => json(row.get::<_, &str>(0)),
            None => Err(StoreError::NotFound),
        }
    }

    fn wakeups(&self) -> broadcast::Receiver<Wakeup> {
        self.wakeups
            .get_or_init(|| {
                let (sender, _) = broadcast::channel(1024);
                let listener = listener::Listener {
                    config: self.config.clone(),
                    pool: self.pool.clone(),
                    channel: Arc::clone(&self.channel),
                    held: Arc::clone(&self.held),
                    sender: sender.clone(),
                    reread: self.settings.reread,
                    stop: self.stop.clone(),
                };
                self.runtime.spawn(listener.run());
                sender
            })
            .subscribe()
    }
}
