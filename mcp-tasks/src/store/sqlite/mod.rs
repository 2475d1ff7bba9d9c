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
//!   kept below every live id; only finished tasks are indexed, by purge
//!   time. A batch of 64 creates writes about 6 pages (8 KiB each, the page size of a new
//!   file).
//! - **Checkpoints** (copying the log into the database) run on a thread of their own, not
//!   inside the writer's commits.
//! - **The writer's page cache** is 64 MiB, not SQLite's 2 MB
//!   ([`SqliteStore::with_writer_cache`]): the newest rows and each owner's newest and
//!   oldest finished tasks (the index the finished-task bound trims) are pages a busy writer
//!   reads again and again, and each one the cache dropped is read back from the file. The
//!   cache grows as pages are read, so a small file costs what it holds.
//! - **Reads** use their own connections (WAL readers never wait for the writer) and see
//!   only committed changes, so a task is readable as soon as its creation is acknowledged.
//! - **Schema** is created and migrated by the store itself, one step per version in one
//!   transaction each; the version is SQLite's `user_version`. A file written by a newer
//!   build is refused, not altered: the version is checked and the schema migrated before
//!   the file is switched to WAL, so a refused rollback-mode file keeps its bytes.
//! - **At most so many tasks**, live or finished (until purged), as for
//!   [`MemoryStore`](super::MemoryStore): [`SqliteStore::with_max_tasks`], the same
//!   [`StoreError::Full`] when reached. The writer counts the rows as it changes them.
//! - **One state machine.** Every change loads the row, applies what is due, runs the
//!   shared transition on it and writes the changed fields back with the shared codec, in
//!   the writer's transaction.
//! - Every field of a task is persisted: status, message, timestamps, TTL, poll interval,
//!   owner, tool name and version, arguments, the creating request's `_meta`, input requests
//!   and answers, steps, result or error, cancel intent, idempotency key (a table of its own,
//!   written only by the creates that carry a key). Deadlines are wall-clock epoch
//!   milliseconds, so expiry keeps working across restarts.

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
        mpsc,
    },
    time::Duration,
};

use parking_lot::Mutex;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::{
    StoreError,
    memory::{DEFAULT_EXPIRED_RETENTION, DEFAULT_MAX_TASKS},
};
use crate::clock::Clock;

mod admin;
mod row;
mod schema;
mod sql;
mod tasks;
mod writer;

pub use schema::SCHEMA_VERSION;

use super::codec::to_u64;
use schema::migrate;
use sql::{backend, exec};
use writer::{Job, LiveSet, Nudge, Pending, Tx};

const READERS: usize = 4;

/// The page size of a new database file, in bytes.
const PAGE_SIZE: i64 = 8192;

/// SQLite's `cache_size` for a cache of `bytes` (negative: KiB), at least one KiB.
fn cache_size(bytes: usize) -> i64 {
    -i64::try_from(bytes / 1024).unwrap_or(i64::MAX).max(1)
}

/// The durable task store on one SQLite file. See the [module docs](self).
pub struct SqliteStore {
    writer: mpsc::Sender<Job>,
    readers: Arc<[Mutex<Connection>]>,
    next_reader: AtomicUsize,
    clock: Clock,
    expired_retention_ms: u64,
    max_tasks: usize,
    path: PathBuf,
    /// Owners to trim at the next sweep ([`NewTask::max_finished_per_owner`](super::NewTask::max_finished_per_owner)).
    trim: Arc<super::trim::Owners>,
    /// Expiries an operator's read applied, for the next sweep to report.
    unreported: super::unreported::Unreported,
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

impl SqliteStore {
    /// The bytes of the file's pages the writer caches unless
    /// [`with_writer_cache`](Self::with_writer_cache) says otherwise: 64 MiB. SQLite's
    /// default, 2,000 KiB, which the readers keep, is smaller than the pages a busy writer
    /// keeps going back to once the file holds some ten thousand tasks. SQLite fills the
    /// cache as pages are read, so a small file costs only what it holds.
    pub const DEFAULT_WRITER_CACHE: usize = 64 << 20;

    /// Opens (creating if needed) the store at `path`, migrating its schema to this build's.
    ///
    /// # Errors
    /// The file cannot be opened or written, or was written by a newer build.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_owned();
        let writer = connect(&path).map_err(backend)?;
        writer
            .pragma_update(None, "cache_size", cache_size(Self::DEFAULT_WRITER_CACHE))
            .map_err(backend)?;
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
        let trim = Arc::<super::trim::Owners>::default();
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("mcp-tasks-sqlite-writer".into())
            .spawn({
                let trim = Arc::clone(&trim);
                move || writer::write_loop(&writer, &rx, &wal_grew, live, &trim)
            })
            .map_err(backend)?;
        Ok(Self {
            writer: tx,
            readers,
            next_reader: AtomicUsize::new(0),
            clock: Clock::new(),
            expired_retention_ms: crate::clock::millis(DEFAULT_EXPIRED_RETENTION),
            max_tasks: DEFAULT_MAX_TASKS,
            path,
            trim,
            unreported: super::unreported::Unreported::default(),
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
    /// until it is purged): a hard limit, not a hint. The default is [`DEFAULT_MAX_TASKS`],
    /// as for [`MemoryStore`](super::MemoryStore). At the limit, creating a task fails with
    /// [`StoreError::Full`]; no task is ever evicted to make room.
    #[must_use]
    pub fn with_max_tasks(mut self, max_tasks: usize) -> Self {
        self.max_tasks = max_tasks;
        self
    }

    /// Sets how many bytes of the file's pages the writer caches (SQLite's `cache_size`).
    /// The default is [`DEFAULT_WRITER_CACHE`](Self::DEFAULT_WRITER_CACHE): less saves
    /// memory on a large file, at the cost of the writer reading pages back from the file;
    /// under 1 KiB asks for the smallest cache SQLite keeps. It applies from the writer's
    /// next change on.
    #[must_use]
    pub fn with_writer_cache(self, bytes: usize) -> Self {
        let kib = cache_size(bytes);
        // Queued before any change that follows; a writer that stopped fails those too.
        let _ = self.enqueue(false, move |tx: &mut Tx<'_>| {
            tx.conn
                .pragma_update(None, "cache_size", kib)
                .map_err(backend)
        });
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

    /// [`write`](Self::write), under a savepoint of its own only when `savepoint`: a change
    /// that makes at most one write (one statement) needs none.
    async fn submit<R: Send + 'static>(
        &self,
        savepoint: bool,
        change: impl FnOnce(&mut Tx<'_>) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        let stopped = || StoreError::backend("the SQLite writer thread has stopped");
        let answer = self.enqueue(savepoint, change).map_err(|()| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Queues `change` for the writer; its answer comes on the receiver. `Err` when the
    /// writer thread has stopped.
    fn enqueue<R: Send + 'static>(
        &self,
        savepoint: bool,
        change: impl FnOnce(&mut Tx<'_>) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<oneshot::Receiver<Result<R, StoreError>>, ()> {
        let (tx, rx) = oneshot::channel();
        let job = Job {
            savepoint,
            change: Box::new(Pending {
                change: Some(change),
                now: self.clock.now_ms(),
                retention: self.expired_retention_ms,
                result: None,
                tx,
            }),
        };
        self.writer.send(job).map_err(|_| ())?;
        Ok(rx)
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
            if let Some(conn) = self.readers[(start + i) % READERS].try_lock() {
                return query(&conn);
            }
        }
        let index = start % READERS;
        let readers = Arc::clone(&self.readers);
        tokio::task::spawn_blocking(move || query(&readers[index].lock()))
            .await
            .map_err(backend)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SQLite failure keeps SQLite's extended result code, and says whether to retry:
    /// a busy or locked database yes, a constraint no; other failures have no code.
    #[test]
    fn sqlite_errors_keep_their_code_and_say_when_to_retry() {
        let failure = |code| rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None);
        let busy = backend(failure(rusqlite::ffi::SQLITE_BUSY));
        assert_eq!(busy.code(), Some("5"));
        assert!(busy.is_retryable());
        let locked = backend(failure(rusqlite::ffi::SQLITE_LOCKED));
        assert!(locked.is_retryable());
        let unique = backend(failure(rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE));
        assert_eq!(unique.code(), Some("2067"));
        assert!(!unique.is_retryable());
        let io = backend(std::io::Error::other("no space left"));
        assert_eq!(io.code(), None);
        assert!(!io.is_retryable());
        assert!(std::error::Error::source(&io).is_some_and(|source| {
            source
                .source()
                .is_some_and(|inner| inner.to_string() == "no space left")
        }));
    }

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
        let clean = || remove_db(&path);
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

    /// The writer caches [`SqliteStore::DEFAULT_WRITER_CACHE`] of pages (a negative
    /// `cache_size` is KiB) or what [`SqliteStore::with_writer_cache`] set; the readers keep
    /// SQLite's default.
    #[tokio::test]
    async fn the_writer_has_the_larger_page_cache() {
        fn cached(conn: &Connection) -> i64 {
            conn.pragma_query_value(None, "cache_size", |r| r.get(0))
                .unwrap()
        }
        let path =
            std::env::temp_dir().join(format!("mcp-tasks-unit-cache-{}.db", std::process::id()));
        let store = SqliteStore::open(&path).unwrap();
        let writer = store.write(|tx: &mut Tx<'_>| Ok(cached(tx.conn)));
        assert_eq!(writer.await.unwrap(), -64 * 1024, "64 MiB");
        let reader = store.read(|conn| Ok(cached(conn))).await.unwrap();
        assert_eq!(reader, -2000, "SQLite's default");
        let store = store.with_writer_cache(8 << 20);
        let writer = store.write(|tx: &mut Tx<'_>| Ok(cached(tx.conn)));
        assert_eq!(writer.await.unwrap(), -8192, "set: 8 MiB");
        let store = store.with_writer_cache(0);
        let writer = store.write(|tx: &mut Tx<'_>| Ok(cached(tx.conn)));
        assert_eq!(writer.await.unwrap(), -1, "at least some");
        drop(store);
        remove_db(&path);
    }

    /// Removes the database file at `path` with its log and shared-memory files.
    fn remove_db(path: &Path) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
