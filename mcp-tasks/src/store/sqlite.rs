//! [`SqliteStore`]: the embedded durable store, one SQLite file.
//!
//! - **Durable before acknowledged.** The database runs in WAL mode with
//!   `synchronous = FULL`: a commit returns only once the log is fsync'd. Every change goes
//!   through one writer thread and is acknowledged only after the commit that holds it, and
//!   readers see a change only once that commit has returned.
//! - **Group commit.** The writer opens a transaction for the first change queued, runs every
//!   change as it arrives, and commits once the callers of its last batch are back: under
//!   load, durability costs one fsync per batch, not per task. A change that may write more
//!   than once runs inside its own savepoint, so one failing change does not undo the others.
//! - **Appends, not scattered writes.** Task ids begin with their creation time,
//!   so new rows land at one edge of the table, and a
//!   create writes that one B-tree: live tasks are not indexed in the file. The writer keeps
//!   them in memory for expiry, and recovery scans the table from `meta.live_from`, a bound
//!   kept below every live id (`writer::LiveSet`); only finished tasks are indexed, by purge
//!   time. A batch of 64 creates writes about 6 pages (8 KiB each, the page size of a new
//!   file).
//! - **Checkpoints** (copying the log into the database) run on a thread of their own, not
//!   inside the writer's commits.
//! - **Reads** use their own connections (WAL readers never wait for the writer) and see
//!   only committed changes, so a task is readable as soon as its creation is acknowledged
//!   (docs/protocol.md R10).
//! - **Schema** is created and migrated by the store itself, one step per version in one
//!   transaction each; the version is SQLite's `user_version`. A file written by a newer
//!   build is refused, not altered: the version is checked and the schema migrated before
//!   the file is switched to WAL, so a refused rollback-mode file keeps its bytes.
//! - **Capacity** is a number of tasks, live or finished (until purged), as for
//!   [`MemoryStore`](super::MemoryStore): [`SqliteStore::with_capacity`], the same
//!   [`StoreError::Full`] when reached. The writer counts the rows as it changes them.
//! - Every field of a task is persisted: status, message, timestamps, TTL, poll interval,
//!   owner, tool name and version, arguments, the creating request's `_meta`, input requests
//!   and answers, steps, result or error, cancel intent, idempotency key (a table of its own,
//!   written only by the creates that carry a key). Deadlines are wall-clock epoch
//!   milliseconds, so expiry keeps working across restarts.

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
        mpsc,
    },
    time::Duration,
};

use async_trait::async_trait;
use rmcp::model::{InputRequest, InputRequests, InputResponses, JsonObject, TaskStatus};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use tokio::sync::oneshot;

use super::{
    NewTask, Outcome, Recovery, Step, StoreError, TaskSnapshot, TaskStore,
    memory::{DEFAULT_CAPACITY, DEFAULT_EXPIRED_RETENTION},
    new_task_millis, new_task_snapshot,
};
use crate::{clock::Clock, errors};

mod writer;
use writer::{Effect, Job, LiveSet, Nudge, Pending, Tx};

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 3;

/// `purge_at_ms` of a finished task that is never purged (no TTL). In schema 2 a NULL
/// `purge_at_ms` means exactly "not finished yet": recovery selects live tasks by it, and
/// the purge index holds finished tasks only.
const NEVER: i64 = i64::MAX;

const READERS: usize = 4;

/// The page size of a new database file, in bytes.
const PAGE_SIZE: i64 = 8192;

const SCHEMA_V1: &str = "
CREATE TABLE tasks (
    id                  TEXT PRIMARY KEY,
    owner               TEXT NOT NULL,
    tool                TEXT NOT NULL,
    tool_version        TEXT NOT NULL,
    status              TEXT NOT NULL,
    status_message      TEXT,
    created_at_ms       INTEGER NOT NULL,
    last_updated_at_ms  INTEGER NOT NULL,
    ttl_ms              INTEGER,
    poll_interval_ms    INTEGER,
    arguments           TEXT NOT NULL,
    request_meta        TEXT NOT NULL,
    input_requests      TEXT NOT NULL,
    used_keys           TEXT NOT NULL,
    answers             TEXT NOT NULL,
    outcome             TEXT,
    cancel_requested    INTEGER NOT NULL,
    deadline_ms         INTEGER,
    purge_at_ms         INTEGER
) WITHOUT ROWID;
CREATE INDEX tasks_live_deadline ON tasks (deadline_ms) WHERE purge_at_ms IS NULL AND deadline_ms IS NOT NULL;
CREATE INDEX tasks_purge ON tasks (purge_at_ms) WHERE purge_at_ms IS NOT NULL;
CREATE INDEX tasks_live ON tasks (status) WHERE status IN ('working', 'input_required');
CREATE TABLE steps (
    task_id  TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    name     TEXT NOT NULL,
    value    TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
) WITHOUT ROWID;
";

/// Schema 1 → 2: creates write one B-tree, not four. Schema 1 kept three indexes, each
/// written by every create; schema 2 indexes finished tasks only (by purge time, for
/// purging), while the writer keeps the live ones in memory ([`LiveSet`]) and recovery
/// scans the table from `meta.live_from`, an id below every live task. A NULL
/// `purge_at_ms` now means exactly "live": a finished task without a TTL, NULL in schema 1,
/// gets [`NEVER`].
const MIGRATE_V1_TO_V2: &str = "
DROP INDEX tasks_live_deadline;
DROP INDEX tasks_purge;
DROP INDEX tasks_live;
UPDATE tasks SET purge_at_ms = 9223372036854775807
    WHERE purge_at_ms IS NULL AND status NOT IN ('working', 'input_required');
CREATE INDEX tasks_purge ON tasks (purge_at_ms) WHERE purge_at_ms IS NOT NULL;
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
INSERT INTO meta (name, value) VALUES ('live_from', '');
";

/// Schema 2 → 3: idempotency keys (store invariant 9). One row per task created with a key,
/// (owner, tool, key) → task id, so a create without a key still writes only the `tasks`
/// B-tree. The index by task id lets a purge remove a task's key with it.
const MIGRATE_V2_TO_V3: &str = "
CREATE TABLE idempotency (
    owner    TEXT NOT NULL,
    tool     TEXT NOT NULL,
    key      TEXT NOT NULL,
    task_id  TEXT NOT NULL,
    PRIMARY KEY (owner, tool, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_task ON idempotency (task_id);
";

/// `MIGRATIONS[v]` takes a file from schema `v` to `v + 1` (`0` is a new, empty file).
const MIGRATIONS: [&str; 3] = [SCHEMA_V1, MIGRATE_V1_TO_V2, MIGRATE_V2_TO_V3];

/// The durable task store on one SQLite file. See the [module docs](self).
pub struct SqliteStore {
    writer: mpsc::Sender<Job>,
    readers: Arc<[Mutex<Connection>]>,
    next_reader: AtomicUsize,
    clock: Clock,
    expired_retention_ms: u64,
    capacity: usize,
    path: PathBuf,
    /// A way to run code on the checkpointer's connection, for the tests.
    #[cfg(test)]
    checkpointer: mpsc::Sender<Nudge>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn backend(error: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Backend(Box::new(error))
}

fn backend_msg(message: String) -> StoreError {
    StoreError::Backend(message.into())
}

/// A connection with the settings every connection of the store has. It changes nothing in
/// the file: the journal mode is set by [`open`] (readers, checkpointer) or, for the writer,
/// only once the schema version has been checked ([`SqliteStore::open`]).
fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    // `synchronous = FULL` in WAL mode: a commit returns only once the log is fsync'd, and a
    // checkpoint syncs the log before copying it and the database after. This is what "on
    // disk before acknowledged" rests on; `tests::every_writing_connection_syncs` holds it.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// A connection to a file the writer has already switched to WAL.
fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = connect(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    Ok(conn)
}

fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(backend)?;
    if version > SCHEMA_VERSION {
        return Err(backend_msg(format!(
            "the task database was written by a newer build (schema version {version}; this \
             build knows up to {SCHEMA_VERSION}); it is left untouched"
        )));
    }
    for (from, step) in MIGRATIONS
        .iter()
        .enumerate()
        .skip(usize::try_from(version).unwrap_or(0))
    {
        let to = from + 1;
        // Each step and its version number commit together: a crash leaves the file at one
        // version or the next, never in between.
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {step} PRAGMA user_version = {to}; COMMIT;"
        ))
        .map_err(|error| {
            let _ = conn.execute_batch("ROLLBACK");
            backend_msg(format!(
                "could not migrate the task database from schema version {from} to {to}: \
                     {error}"
            ))
        })?;
    }
    Ok(())
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`, migrating its schema to this build's.
    ///
    /// # Errors
    /// The file cannot be opened or written, or was written by a newer build.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_owned();
        let writer = connect(&path).map_err(backend)?;
        // For a new file only (an existing one keeps its page size): a commit of 64 creates
        // writes about 6 pages of 8 KiB instead of 8 of 4 KiB, each page two writes to the
        // log. It takes effect with the first write, the schema's.
        writer
            .pragma_update(None, "page_size", PAGE_SIZE)
            .map_err(backend)?;
        // The version is checked (and the schema migrated, each step in its own transaction)
        // before the switch to WAL: a file this build refuses is left byte for byte as it was.
        migrate(&writer)?;
        writer
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(backend)?;
        let readers = (0..READERS)
            .map(|_| open(&path).map(Mutex::new))
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(backend)?
            .into();
        // Checkpoints run on a thread of their own, not inside the writer's commits.
        writer
            .pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(backend)?;
        let checkpointer = open(&path).map_err(backend)?;
        let (wal_grew, grown) = mpsc::channel::<Nudge>();
        #[cfg(test)]
        let checkpointer_probe = wal_grew.clone();
        std::thread::Builder::new()
            .name("mcp-tasks-sqlite-checkpointer".into())
            .spawn(move || writer::checkpoint_loop(&checkpointer, &grown))
            .map_err(backend)?;
        let live = LiveSet::load(&writer).map_err(backend)?;
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("mcp-tasks-sqlite-writer".into())
            .spawn(move || writer::write_loop(&writer, &rx, &wal_grew, live))
            .map_err(backend)?;
        Ok(Self {
            writer: tx,
            readers,
            next_reader: AtomicUsize::new(0),
            clock: Clock::new(),
            expired_retention_ms: crate::clock::millis(DEFAULT_EXPIRED_RETENTION),
            capacity: DEFAULT_CAPACITY,
            path,
            #[cfg(test)]
            checkpointer: checkpointer_probe,
        })
    }

    /// Sets how long an expired task stays readable as `failed` before it is purged.
    #[must_use]
    pub fn with_expired_retention(mut self, retention: Duration) -> Self {
        self.expired_retention_ms = crate::clock::millis(retention);
        self
    }

    /// Sets how many tasks the file holds at most, live or finished (a finished task counts
    /// until it is purged); the default is [`DEFAULT_CAPACITY`], as for
    /// [`MemoryStore`](super::MemoryStore). At capacity, creating a task fails with
    /// [`StoreError::Full`]; no task is ever evicted to make room.
    #[must_use]
    pub fn with_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// The file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `change` in the writer's next batch; resolves once that batch is committed.
    async fn write<R: Send + 'static>(
        &self,
        change: impl FnOnce(&mut Tx<'_>) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        self.submit(true, change).await
    }

    /// [`write`](Self::write) for a change that makes at most one write (one statement).
    async fn write_once<R: Send + 'static>(
        &self,
        change: impl FnOnce(&mut Tx<'_>) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        self.submit(false, change).await
    }

    async fn submit<R: Send + 'static>(
        &self,
        savepoint: bool,
        change: impl FnOnce(&mut Tx<'_>) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        let now = self.clock.now_ms();
        let retention = self.expired_retention_ms;
        let (tx, rx) = oneshot::channel();
        let job = Job {
            savepoint,
            change: Box::new(Pending {
                change: Some(change),
                now,
                retention,
                result: None,
                tx,
            }),
        };
        self.writer
            .send(job)
            .map_err(|_| backend_msg("the SQLite writer thread has stopped".into()))?;
        rx.await
            .map_err(|_| backend_msg("the SQLite writer thread has stopped".into()))?
    }

    /// Runs `query` on a reader connection. A point read takes microseconds and, in WAL
    /// mode, never waits for the writer, so it runs right here on a free reader; only when
    /// every reader is busy does it move to a blocking thread.
    async fn read<R: Send + 'static>(
        &self,
        query: impl FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        for i in 0..READERS {
            if let Ok(conn) = self.readers[(start + i) % READERS].try_lock() {
                return query(&conn);
            }
        }
        let index = start % READERS;
        let readers = Arc::clone(&self.readers);
        tokio::task::spawn_blocking(move || {
            let conn = readers[index]
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            query(&conn)
        })
        .await
        .map_err(backend)?
    }
}

/// A row of `tasks`, decoded.
struct Row {
    snapshot: TaskSnapshot,
    used_keys: Vec<String>,
    answers: InputResponses,
    deadline_ms: Option<u64>,
    purge_at_ms: Option<u64>,
}

const SELECT_TASK: &str = "SELECT id, owner, tool, status, status_message, created_at_ms, \
    last_updated_at_ms, ttl_ms, poll_interval_ms, input_requests, used_keys, answers, outcome, \
    cancel_requested, deadline_ms, purge_at_ms FROM tasks WHERE id = ?1";

fn parse_status(text: &str) -> Result<TaskStatus, StoreError> {
    crate::store::status_from_name(text)
        .ok_or_else(|| backend_msg(format!("unknown task status `{text}` in the database")))
}

fn json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(backend)
}

fn to_json(value: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(backend)
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn outcome_json(outcome: &Outcome) -> Value {
    match outcome {
        Outcome::Completed(result) => serde_json::json!({ "completed": result }),
        Outcome::Failed(error) => serde_json::json!({ "failed": error }),
        Outcome::Cancelled => serde_json::json!("cancelled"),
    }
}

fn parse_outcome(value: Value) -> Result<Outcome, StoreError> {
    match value {
        Value::String(s) if s == "cancelled" => Ok(Outcome::Cancelled),
        Value::Object(mut map) => {
            if let Some(Value::Object(result)) = map.remove("completed") {
                Ok(Outcome::Completed(result))
            } else if let Some(Value::Object(error)) = map.remove("failed") {
                Ok(Outcome::Failed(error))
            } else {
                Err(backend_msg(
                    "an unreadable task outcome in the database".into(),
                ))
            }
        }
        _ => Err(backend_msg(
            "an unreadable task outcome in the database".into(),
        )),
    }
}

fn load(conn: &Connection, id: &str) -> Result<Option<Row>, StoreError> {
    let mut statement = conn.prepare_cached(SELECT_TASK).map_err(backend)?;
    let raw = statement
        .query_row(params![id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, i64>(6)?,
                r.get::<_, Option<i64>>(7)?,
                r.get::<_, Option<i64>>(8)?,
                r.get::<_, String>(9)?,
                r.get::<_, String>(10)?,
                r.get::<_, String>(11)?,
                r.get::<_, Option<String>>(12)?,
                r.get::<_, i64>(13)?,
                r.get::<_, Option<i64>>(14)?,
                r.get::<_, Option<i64>>(15)?,
            ))
        })
        .optional()
        .map_err(backend)?;
    let Some((
        id,
        owner,
        tool,
        status,
        status_message,
        created,
        updated,
        ttl,
        poll,
        input_requests,
        used_keys,
        answers,
        outcome,
        cancel,
        deadline,
        purge,
    )) = raw
    else {
        return Ok(None);
    };
    let outcome = outcome
        .map(|o| json(&o).and_then(parse_outcome))
        .transpose()?;
    Ok(Some(Row {
        snapshot: TaskSnapshot {
            id: Arc::from(id),
            owner: Arc::from(owner),
            tool: Arc::from(tool),
            status: parse_status(&status)?,
            status_message,
            created_at_ms: to_u64(created),
            last_updated_at_ms: to_u64(updated),
            ttl_ms: ttl.map(to_u64),
            poll_interval_ms: poll.map(to_u64),
            input_requests: json::<InputRequests>(&input_requests)?,
            outcome,
            cancel_requested: cancel != 0,
        },
        used_keys: json(&used_keys)?,
        answers: json(&answers)?,
        deadline_ms: deadline.map(to_u64),
        purge_at_ms: purge.map(to_u64),
    }))
}

/// Whether a row read at `now` is due for expiry or purge.
fn due(row: &Row, now: u64) -> bool {
    match row.purge_at_ms {
        Some(purge) => now >= purge,
        None => row.deadline_ms.is_some_and(|d| now >= d) && !row.snapshot.status.is_terminal(),
    }
}

/// Applies what is due to task `id` at the change's time; returns the row as it then is
/// (`None` when purged), and whether it just expired.
fn load_live(tx: &mut Tx<'_>, id: &str) -> Result<(Option<Row>, bool), StoreError> {
    let (conn, now) = (tx.conn, tx.now);
    let Some(row) = load(conn, id)? else {
        return Ok((None, false));
    };
    if !due(&row, now) {
        return Ok((Some(row), false));
    }
    if row.purge_at_ms.is_some() {
        exec(conn, "DELETE FROM steps WHERE task_id = ?1", params![id]).map_err(backend)?;
        exec(
            conn,
            "DELETE FROM idempotency WHERE task_id = ?1",
            params![id],
        )
        .map_err(backend)?;
        let purged = exec(conn, "DELETE FROM tasks WHERE id = ?1", params![id]).map_err(backend)?;
        tx.effects.push(Effect::Purged(purged));
        return Ok((None, false));
    }
    let deadline = row.deadline_ms.unwrap_or(now);
    let error = Outcome::Failed(errors::to_object(&errors::task_expired()));
    let purge_at = deadline.saturating_add(tx.retention);
    end(
        tx,
        id,
        &error,
        Some("task expired: its ttl elapsed before it finished"),
        Some(purge_at),
    )?;
    Ok((load(conn, id)?, true))
}

/// The `SET` clause that moves `lastUpdatedAt` to `?2` (never backwards, always forwards):
/// a literal, so the statements using it are built at compile time, not on every change.
macro_rules! touch {
    () => {
        "last_updated_at_ms = MAX(?2, last_updated_at_ms + 1)"
    };
}

/// Runs one statement through the connection's statement cache.
fn exec(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// Writes a terminal state: outcome, its status message, purge time, and drops what only a
/// running task needs.
fn end(
    tx: &mut Tx<'_>,
    id: &str,
    outcome: &Outcome,
    message: Option<&str>,
    purge_at: Option<u64>,
) -> Result<(), StoreError> {
    exec(
        tx.conn,
        concat!(
            "UPDATE tasks SET status = ?3, outcome = ?4, status_message = ?5, purge_at_ms = ?6, \
             input_requests = '{}', used_keys = '[]', answers = '{}', ",
            touch!(),
            " WHERE id = ?1"
        ),
        params![
            id,
            to_i64(tx.now),
            crate::store::status_name(outcome.status()),
            to_json(&outcome_json(outcome))?,
            message,
            purge_at.map_or(NEVER, to_i64),
        ],
    )
    .map_err(backend)?;
    exec(tx.conn, "DELETE FROM steps WHERE task_id = ?1", params![id]).map_err(backend)?;
    tx.effects.push(Effect::Ended(Arc::from(id)));
    Ok(())
}

fn live_row(tx: &mut Tx<'_>, id: &str) -> Result<Row, StoreError> {
    let row = load_live(tx, id)?.0.ok_or(StoreError::NotFound)?;
    if row.snapshot.status.is_terminal() {
        return Err(StoreError::Terminal(row.snapshot.status));
    }
    Ok(row)
}

/// Inserts a new task's row (store invariant 1): refused at capacity, or when the id is taken.
fn insert_task(
    tx: &mut Tx<'_>,
    task: NewTask,
    capacity: usize,
) -> Result<TaskSnapshot, StoreError> {
    let (ttl_ms, poll_interval_ms) = new_task_millis(&task);
    let (conn, now) = (tx.conn, tx.now);
    if tx.live.rows() >= capacity {
        return Err(StoreError::Full { capacity });
    }
    let deadline = ttl_ms.map(|ttl| now.saturating_add(ttl));
    let inserted = exec(
        conn,
        "INSERT INTO tasks (id, owner, tool, tool_version, status, status_message, \
                     created_at_ms, last_updated_at_ms, ttl_ms, poll_interval_ms, arguments, \
                     request_meta, input_requests, used_keys, answers, outcome, \
                     cancel_requested, deadline_ms, purge_at_ms) VALUES (?1, ?2, ?3, ?4, \
                     'working', ?5, ?6, ?6, ?7, ?8, ?9, ?10, '{}', ?12, ?13, NULL, 0, ?11, NULL) \
                     ON CONFLICT (id) DO NOTHING",
        params![
            &*task.id,
            &*task.owner,
            &*task.tool,
            &*task.tool_version,
            task.status_message.as_deref(),
            to_i64(now),
            ttl_ms.map(to_i64),
            poll_interval_ms.map(to_i64),
            to_json(&task.arguments)?,
            to_json(&task.request_meta)?,
            deadline.map(to_i64),
            to_json(&task.answers.keys().collect::<Vec<_>>())?,
            to_json(&task.answers)?,
        ],
    )
    .map_err(backend)?;
    if inserted == 0 {
        return Err(StoreError::DuplicateId);
    }
    tx.effects.push(Effect::Created {
        id: Arc::clone(&task.id),
        deadline,
    });
    Ok(new_task_snapshot(&task, now))
}

#[async_trait]
impl TaskStore for SqliteStore {
    async fn create(&self, mut task: NewTask) -> Result<TaskSnapshot, StoreError> {
        let capacity = self.capacity;
        let Some(key) = task.idempotency_key.take() else {
            return self
                .write_once(move |tx: &mut Tx<'_>| insert_task(tx, task, capacity))
                .await;
        };
        // Invariant 9. The one writer runs creates one after the other, so two retries that
        // race each other find each other here; the savepoint undoes the task's row when its
        // key cannot be written.
        self.write(move |tx: &mut Tx<'_>| {
            let first: Option<String> = tx
                .conn
                .prepare_cached(
                    "SELECT task_id FROM idempotency WHERE owner = ?1 AND tool = ?2 AND key = ?3",
                )
                .and_then(|mut select| {
                    select
                        .query_row(params![&*task.owner, &*task.tool, &*key], |r| r.get(0))
                        .optional()
                })
                .map_err(backend)?;
            if let Some(first) = first {
                // Expiry or purge that is due applies first: a purged task frees its key.
                if let (Some(row), _) = load_live(tx, &first)? {
                    let first = row.snapshot;
                    let within_ttl = first
                        .ttl_ms
                        .is_none_or(|ttl| tx.now < first.created_at_ms.saturating_add(ttl));
                    if within_ttl {
                        return Err(StoreError::Existing(Box::new(first)));
                    }
                }
            }
            let (owner, tool, id) = (
                Arc::clone(&task.owner),
                Arc::clone(&task.tool),
                Arc::clone(&task.id),
            );
            let snapshot = insert_task(tx, task, capacity)?;
            // Past the first task's TTL the key names the new call's task.
            exec(
                tx.conn,
                "INSERT OR REPLACE INTO idempotency (owner, tool, key, task_id) \
                     VALUES (?1, ?2, ?3, ?4)",
                params![&*owner, &*tool, &*key, &*id],
            )
            .map_err(backend)?;
            Ok(snapshot)
        })
        .await
    }

    async fn get(&self, id: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        let now = self.clock.now_ms();
        let key = id.to_owned();
        let row = self.read(move |conn| load(conn, &key)).await?;
        match row {
            Some(row) if due(&row, now) => {
                let id = id.to_owned();
                self.write(move |tx: &mut Tx<'_>| Ok(load_live(tx, &id)?.0.map(|r| r.snapshot)))
                    .await
            }
            row => Ok(row.map(|r| r.snapshot)),
        }
    }

    async fn set_status_message(
        &self,
        id: &str,
        message: Option<String>,
    ) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(move |tx: &mut Tx<'_>| {
            let (conn, now) = (tx.conn, tx.now);
            let row = live_row(tx, &id)?;
            if row.snapshot.status_message != message {
                exec(
                    conn,
                    concat!(
                        "UPDATE tasks SET status_message = ?3, ",
                        touch!(),
                        " WHERE id = ?1"
                    ),
                    params![id, to_i64(now), message],
                )
                .map_err(backend)?;
            }
            Ok(())
        })
        .await
    }

    async fn request_input(
        &self,
        id: &str,
        key: &str,
        request: InputRequest,
    ) -> Result<(), StoreError> {
        let (id, key) = (id.to_owned(), key.to_owned());
        self.write(move |tx: &mut Tx<'_>| {
            let (conn, now) = (tx.conn, tx.now);
            let mut row = live_row(tx, &id)?;
            if row.snapshot.input_requests.contains_key(&key) {
                return Ok(());
            }
            if row.used_keys.contains(&key) {
                return Err(StoreError::KeyReused(key));
            }
            row.used_keys.push(key.clone());
            row.snapshot.input_requests.insert(key, request);
            exec(
                conn,
                concat!(
                    "UPDATE tasks SET status = 'input_required', input_requests = ?3, \
                     used_keys = ?4, ",
                    touch!(),
                    " WHERE id = ?1"
                ),
                params![
                    id,
                    to_i64(now),
                    to_json(&row.snapshot.input_requests)?,
                    to_json(&row.used_keys)?
                ],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn deliver_input(
        &self,
        id: &str,
        responses: InputResponses,
    ) -> Result<InputResponses, StoreError> {
        let id = id.to_owned();
        self.write(move |tx: &mut Tx<'_>| {
            let (conn, now) = (tx.conn, tx.now);
            let mut accepted = InputResponses::new();
            let (row, _) = load_live(tx, &id)?;
            let mut row = row.ok_or(StoreError::NotFound)?;
            if row.snapshot.status.is_terminal() {
                return Ok(accepted);
            }
            for (key, value) in responses {
                if row.snapshot.input_requests.remove(&key).is_some() {
                    row.answers.insert(key.clone(), value.clone());
                    accepted.insert(key, value);
                }
            }
            if accepted.is_empty() {
                return Ok(accepted);
            }
            let status = if row.snapshot.input_requests.is_empty() {
                "working"
            } else {
                "input_required"
            };
            exec(
                conn,
                concat!(
                    "UPDATE tasks SET status = ?3, input_requests = ?4, answers = ?5, ",
                    touch!(),
                    " WHERE id = ?1"
                ),
                params![
                    id,
                    to_i64(now),
                    status,
                    to_json(&row.snapshot.input_requests)?,
                    to_json(&row.answers)?
                ],
            )
            .map_err(backend)?;
            Ok(accepted)
        })
        .await
    }

    async fn finish(&self, id: &str, outcome: Outcome) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(move |tx: &mut Tx<'_>| {
            let row = live_row(tx, &id)?;
            let purge_at = row.deadline_ms;
            let message = outcome.status_message();
            end(tx, &id, &outcome, message.as_deref(), purge_at)
        })
        .await
    }

    async fn request_cancel(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(move |tx: &mut Tx<'_>| {
            let (conn, now) = (tx.conn, tx.now);
            let row = load_live(tx, &id)?.0.ok_or(StoreError::NotFound)?;
            if !row.snapshot.cancel_requested && !row.snapshot.status.is_terminal() {
                exec(
                    conn,
                    concat!(
                        "UPDATE tasks SET cancel_requested = 1, ",
                        touch!(),
                        " WHERE id = ?1"
                    ),
                    params![id, to_i64(now)],
                )
                .map_err(backend)?;
            }
            Ok(())
        })
        .await
    }

    async fn save_step(&self, id: &str, step: Step) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(move |tx: &mut Tx<'_>| {
            let (conn, now) = (tx.conn, tx.now);
            live_row(tx, &id)?;
            exec(
                conn,
                "INSERT OR REPLACE INTO steps (task_id, seq, name, value) VALUES (?1, ?2, ?3, ?4)",
                params![id, to_i64(step.seq), step.name, to_json(&step.value)?],
            )
            .map_err(backend)?;
            exec(
                conn,
                concat!("UPDATE tasks SET ", touch!(), " WHERE id = ?1"),
                params![id, to_i64(now)],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn recoverable(&self) -> Result<Vec<Recovery>, StoreError> {
        self.read(|conn| {
            let mut statement = conn
                .prepare(
                    "SELECT id, owner, tool, tool_version, arguments, request_meta, answers \
                     FROM tasks WHERE id >= (SELECT value FROM meta WHERE name = 'live_from') \
                     AND purge_at_ms IS NULL",
                )
                .map_err(backend)?;
            let rows = statement
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, String>(5)?,
                        r.get::<_, String>(6)?,
                    ))
                })
                .map_err(backend)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(backend)?;
            let mut steps_of = conn
                .prepare("SELECT seq, name, value FROM steps WHERE task_id = ?1 ORDER BY seq")
                .map_err(backend)?;
            let mut found = Vec::with_capacity(rows.len());
            for (id, owner, tool, version, arguments, meta, answers) in rows {
                let steps = steps_of
                    .query_map(params![id], |r| {
                        Ok((
                            r.get::<_, i64>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                        ))
                    })
                    .map_err(backend)?
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(backend)?
                    .into_iter()
                    .map(|(seq, name, value)| Ok(Step::new(to_u64(seq), name, json(&value)?)))
                    .collect::<Result<Vec<_>, StoreError>>()?;
                found.push(Recovery {
                    id: Arc::from(id),
                    owner: Arc::from(owner),
                    tool: Arc::from(tool),
                    tool_version: Arc::from(version),
                    arguments: json::<JsonObject>(&arguments)?,
                    request_meta: json::<JsonObject>(&meta)?,
                    answers: json(&answers)?,
                    steps,
                });
            }
            Ok(found)
        })
        .await
    }

    async fn stored_answers(&self, id: &str) -> Result<InputResponses, StoreError> {
        let key = id.to_owned();
        match self.read(move |conn| load(conn, &key)).await? {
            Some(row) => Ok(row.answers),
            None => Err(StoreError::NotFound),
        }
    }

    async fn expire_due(&self) -> Result<Vec<Arc<str>>, StoreError> {
        self.write(|tx: &mut Tx<'_>| {
            let (conn, now) = (tx.conn, tx.now);
            // Live tasks are not indexed in the file: the writer holds their deadlines.
            let due = tx.live.due(now);
            let mut failed = Vec::with_capacity(due.len());
            for id in due {
                if load_live(tx, &id)?.1 {
                    failed.push(id);
                }
            }
            exec(
                conn,
                "DELETE FROM steps WHERE task_id IN (SELECT id FROM tasks WHERE purge_at_ms <= ?1)",
                params![to_i64(now)],
            )
            .map_err(backend)?;
            exec(
                conn,
                "DELETE FROM idempotency WHERE task_id IN \
                     (SELECT id FROM tasks WHERE purge_at_ms <= ?1)",
                params![to_i64(now)],
            )
            .map_err(backend)?;
            let purged = exec(
                conn,
                "DELETE FROM tasks WHERE purge_at_ms <= ?1",
                params![to_i64(now)],
            )
            .map_err(backend)?;
            tx.effects.push(Effect::Purged(purged));
            Ok(failed)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(journal_mode, synchronous)` of a connection; `synchronous` 2 is `FULL`.
    fn durability(conn: &Connection) -> (String, i64) {
        let mode = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        let sync = conn
            .pragma_query_value(None, "synchronous", |r| r.get(0))
            .unwrap();
        (mode, sync)
    }

    /// "On disk before acknowledged" (module docs) rests on these settings, which `kill -9`
    /// cannot tell apart from weaker ones: every connection that writes the file (the writer,
    /// which commits, and the checkpointer, which copies the log into the database) runs in
    /// WAL mode with `synchronous = FULL`; on a new file and on one reopened.
    #[tokio::test]
    async fn every_writing_connection_syncs() {
        let path =
            std::env::temp_dir().join(format!("mcp-tasks-unit-sync-{}.db", std::process::id()));
        let clean = || {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
        };
        clean();
        for _reopen in 0..2 {
            let store = SqliteStore::open(&path).unwrap();
            let writer = store
                .write(|tx: &mut Tx<'_>| Ok(durability(tx.conn)))
                .await
                .unwrap();
            assert_eq!(writer, ("wal".to_owned(), 2), "the writer's connection");
            let (reply, answer) = mpsc::channel();
            store
                .checkpointer
                .send(Nudge::Inspect(Box::new(move |conn| {
                    let _ = reply.send(durability(conn));
                })))
                .unwrap();
            let checkpointer = answer.recv_timeout(Duration::from_secs(10)).unwrap();
            assert_eq!(
                checkpointer,
                ("wal".to_owned(), 2),
                "the checkpointer's connection"
            );
            // A commit through the writer is visible to a reader right after (WAL readers).
            let reader = store.read(|conn| Ok(durability(conn))).await.unwrap();
            assert_eq!(reader.0, "wal");
        }
        clean();
    }
}
