//! The writer side of [`SqliteStore`](super::SqliteStore): the one write connection, its
//! thread (group commit), the set of live tasks it keeps, and the checkpointer thread.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, mpsc},
    time::{Duration, Instant},
};

use rusqlite::{Connection, params};
use tokio::sync::oneshot;

use super::{
    super::{StoreError, trim},
    exec, to_u64,
};

/// The most changes one transaction takes.
const MAX_BATCH: usize = 1024;

/// How long the writer waits for the callers of the last batch to come back before it
/// commits a smaller one.
const GATHER: Duration = Duration::from_micros(300);

/// Commits between two nudges of the checkpointer.
const CHECKPOINT_EVERY: u64 = 32;

/// Log frames (pages) past which the checkpointer makes the writer wait until the log can
/// start over, so that it does not grow without bound under constant load.
const RESTART_FRAMES: i64 = 4096;

/// Batches between two attempts to raise `meta.live_from`.
const RAISE_EVERY: u64 = 256;

/// A change for the writer thread.
pub(super) struct Job {
    /// Whether the change may write more than once, and so needs a savepoint to be undone
    /// alone. A change that makes at most one write needs none: SQLite undoes a failed
    /// statement by itself.
    pub(super) savepoint: bool,
    pub(super) change: Box<dyn Change>,
}

/// What a change sees while it runs in the writer's transaction.
pub(super) struct Tx<'a> {
    pub(super) conn: &'a Connection,
    /// The caller's clock reading (epoch milliseconds).
    pub(super) now: u64,
    /// How long an expired task stays readable, in milliseconds.
    pub(super) retention: u64,
    pub(super) live: &'a LiveSet,
    /// What the change did to the set of live tasks; applied if it succeeds.
    pub(super) effects: &'a mut Vec<Effect>,
}

/// What the writer does with a change: run it inside the batch's transaction, then, once
/// the batch's commit is known, answer its caller.
pub(super) trait Change: Send {
    /// Runs the change, noting its `effects` on the live set; `false` when it failed and
    /// what it wrote must be rolled back.
    fn run(&mut self, conn: &Connection, live: &LiveSet, effects: &mut Vec<Effect>) -> bool;
    /// Answers the caller: the change's own result if the batch committed, else the error.
    fn reply(self: Box<Self>, commit: Result<(), String>);
}

/// A caller's change, its clock reading, and where its answer goes.
pub(super) struct Pending<F, R> {
    pub(super) change: Option<F>,
    pub(super) now: u64,
    pub(super) retention: u64,
    pub(super) result: Option<Result<R, StoreError>>,
    pub(super) tx: oneshot::Sender<Result<R, StoreError>>,
}

impl<F, R> Change for Pending<F, R>
where
    F: FnOnce(&mut Tx<'_>) -> Result<R, StoreError> + Send,
    R: Send,
{
    fn run(&mut self, conn: &Connection, live: &LiveSet, effects: &mut Vec<Effect>) -> bool {
        let Some(change) = self.change.take() else {
            return true;
        };
        let result = change(&mut Tx {
            conn,
            now: self.now,
            retention: self.retention,
            live,
            effects,
        });
        let ok = !matches!(result, Err(StoreError::Backend(_)));
        self.result = Some(result);
        ok
    }

    fn reply(self: Box<Self>, commit: Result<(), String>) {
        let answer = match (commit, self.result) {
            (Ok(()), Some(result)) => result,
            (Ok(()), None) => Err(StoreError::backend("the change was never run")),
            (Err(message), _) => Err(StoreError::backend(message)),
        };
        let _ = self.tx.send(answer);
    }
}

/// A change to the set of live tasks.
pub(super) enum Effect {
    /// A task was created, expiring at `deadline` (epoch milliseconds) if it has one.
    Created { id: Arc<str>, deadline: Option<u64> },
    /// A task of `owner` finished (completed, failed, cancelled or expired).
    Ended { id: Arc<str>, owner: Arc<str> },
    /// This many finished tasks were purged (their rows deleted).
    Purged(usize),
}

/// The live (unfinished) tasks, held by the writer thread: the file does not index them
/// ([`SqliteStore`](super::SqliteStore) says why), so expiry finds the due ones here. The
/// writer keeps `meta.live_from` below every live id in the same transactions that change
/// the live set: a create below it lowers it; now and then it is raised to the oldest one.
#[derive(Default)]
pub(super) struct LiveSet {
    deadlines: BTreeSet<(u64, Arc<str>)>,
    tasks: BTreeMap<Arc<str>, Option<u64>>,
    /// `meta.live_from` as stored.
    live_from: String,
    /// The newest id created since the file was opened.
    newest: Option<Arc<str>>,
    /// How many tasks the file holds, live or finished (not yet purged): what the store's
    /// capacity limits.
    pub(super) rows: usize,
}

impl LiveSet {
    /// Reads the live tasks of the file.
    pub(super) fn load(conn: &Connection) -> rusqlite::Result<Self> {
        let sql = "SELECT value FROM meta WHERE name = 'live_from'";
        let live_from: String = conn.query_row(sql, [], |r| r.get(0))?;
        let rows: i64 = conn.query_row("SELECT COUNT(*) FROM tasks", [], |r| r.get(0))?;
        let mut live = Self {
            live_from,
            rows: usize::try_from(rows).unwrap_or(usize::MAX),
            ..Self::default()
        };
        let mut statement = conn
            .prepare("SELECT id, deadline_ms FROM tasks WHERE id >= ?1 AND purge_at_ms IS NULL")?;
        let rows = statement.query_map(params![live.live_from], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Option<i64>>(1)?))
        })?;
        for row in rows {
            let (id, deadline) = row?;
            live.insert(Arc::from(id), deadline.map(to_u64));
        }
        Ok(live)
    }

    fn insert(&mut self, id: Arc<str>, deadline: Option<u64>) {
        if let Some(deadline) = deadline {
            self.deadlines.insert((deadline, Arc::clone(&id)));
        }
        self.tasks.insert(id, deadline);
    }

    /// Live tasks whose deadline is at or before `now`.
    pub(super) fn due(&self, now: u64) -> Vec<Arc<str>> {
        self.deadlines
            .iter()
            .take_while(|(deadline, _)| *deadline <= now)
            .map(|(_, id)| Arc::clone(id))
            .collect()
    }

    /// Applies a succeeded change's effect; lowers `live_from` (in the open transaction)
    /// when a task is created below it.
    fn apply(&mut self, conn: &Connection, effect: Effect) -> rusqlite::Result<()> {
        match effect {
            Effect::Created { id, deadline } => {
                if *id < *self.live_from {
                    self.store_live_from(conn, &id)?;
                }
                if self.newest.as_ref().is_none_or(|newest| id > *newest) {
                    self.newest = Some(Arc::clone(&id));
                }
                self.insert(id, deadline);
                self.rows = self.rows.saturating_add(1);
            }
            Effect::Ended { id, .. } => {
                if let Some(Some(deadline)) = self.tasks.remove(&id) {
                    self.deadlines.remove(&(deadline, id));
                }
            }
            Effect::Purged(count) => self.rows = self.rows.saturating_sub(count),
        }
        Ok(())
    }

    /// Raises `live_from` (in the open transaction) to the oldest live task, or, when none
    /// is live, to the newest task created.
    fn raise(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        let bound = self.tasks.keys().next().or(self.newest.as_ref()).cloned();
        match bound {
            Some(bound) if *bound > *self.live_from => self.store_live_from(conn, &bound),
            _ => Ok(()),
        }
    }

    fn store_live_from(&mut self, conn: &Connection, id: &str) -> rusqlite::Result<()> {
        let sql = "UPDATE meta SET value = ?1 WHERE name = 'live_from'";
        exec(conn, sql, params![id])?;
        id.clone_into(&mut self.live_from);
        Ok(())
    }
}

/// The writer thread: group commit. It opens a transaction for the first change queued,
/// runs each change as it arrives (so the callers' work overlaps its own), and commits once
/// the callers answered by the last commit are back (or [`GATHER`] has passed, or nothing
/// more is queued after a batch of one): under load one fsync covers a batch, while a lone
/// caller never waits.
pub(super) fn write_loop(
    conn: &Connection,
    jobs: &mpsc::Receiver<Job>,
    wal_grew: &mpsc::Sender<Nudge>,
    mut live: LiveSet,
    trim: &trim::Owners,
) {
    let mut last_batch = 1;
    let mut commits = 0u64;
    while let Ok(first) = jobs.recv() {
        if let Err(error) = exec(conn, "BEGIN IMMEDIATE", []) {
            first
                .change
                .reply(Err(format!("could not begin a transaction: {error}")));
            continue;
        }
        let mut ran = Vec::with_capacity(last_batch);
        let raise = commits.is_multiple_of(RAISE_EVERY);
        let raise_error = raise.then(|| live.raise(conn)).and_then(Result::err);
        let mut aborted =
            raise_error.map(|error| format!("could not record the oldest live task: {error}"));
        if aborted.is_none() {
            aborted = run_job(conn, first, &mut ran, &mut live, trim);
        } else {
            ran.push(first.change);
        }
        let deadline = Instant::now() + GATHER;
        while aborted.is_none() && ran.len() < MAX_BATCH {
            let next = match jobs.try_recv() {
                Ok(job) => job,
                Err(mpsc::TryRecvError::Empty) if ran.len() < last_batch => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match jobs.recv_timeout(left) {
                        Ok(job) => job,
                        Err(_) => break,
                    }
                }
                Err(_) => break,
            };
            aborted = run_job(conn, next, &mut ran, &mut live, trim);
        }
        last_batch = ran.len();
        let committed = match aborted {
            Some(error) => {
                if !conn.is_autocommit() {
                    let _ = exec(conn, "ROLLBACK", []);
                }
                Err(format!("the transaction was rolled back: {error}"))
            }
            None => exec(conn, "COMMIT", []).map(drop).map_err(|error| {
                let _ = exec(conn, "ROLLBACK", []);
                format!("the commit failed: {error}")
            }),
        };
        if committed.is_err() {
            // The live set took this batch's effects as they ran; read it back from the
            // file as it is.
            match LiveSet::load(conn) {
                Ok(reloaded) => live = reloaded,
                Err(error) => {
                    let message = format!(
                        "the SQLite writer lost track of the live tasks ({error}); it stops"
                    );
                    for change in ran {
                        change.reply(Err(message.clone()));
                    }
                    return;
                }
            }
        }
        for change in ran {
            change.reply(committed.clone());
        }
        commits += 1;
        if commits.is_multiple_of(CHECKPOINT_EVERY) {
            let _ = wal_grew.send(Nudge::Grew);
        }
    }
}

/// Runs one change inside the open transaction and keeps it for the commit's answer.
/// Returns why, when the batch cannot commit: SQLite ended the transaction, or the live
/// set's bound could not be written.
fn run_job(
    conn: &Connection,
    job: Job,
    ran: &mut Vec<Box<dyn Change>>,
    live: &mut LiveSet,
    trim: &trim::Owners,
) -> Option<String> {
    let mut change = job.change;
    let mut effects = Vec::new();
    let savepoint = job.savepoint.then(|| exec(conn, "SAVEPOINT job", []));
    let ok = change.run(conn, live, &mut effects);
    if matches!(savepoint, Some(Ok(_))) && !conn.is_autocommit() {
        if !ok {
            let _ = exec(conn, "ROLLBACK TO job", []);
        }
        let _ = exec(conn, "RELEASE job", []);
    }
    ran.push(change);
    if conn.is_autocommit() {
        // SQLite rolled the whole transaction back (disk full, I/O error).
        return Some("SQLite ended the transaction".to_owned());
    }
    if ok {
        for effect in effects {
            // An owner that created past its bound while its tasks ran is trimmed as they end.
            if let Effect::Ended { owner, .. } = &effect {
                trim.ended(owner);
            }
            if let Err(error) = live.apply(conn, effect) {
                return Some(format!("could not record the oldest live task: {error}"));
            }
        }
    }
    None
}

/// What the checkpointer thread is told.
pub(super) enum Nudge {
    /// The log grew: time for a checkpoint.
    Grew,
    /// Runs on the checkpointer's connection (tests read its settings).
    #[cfg(test)]
    Inspect(Box<dyn FnOnce(&Connection) + Send>),
}

/// The checkpointer thread: copies the log into the database while the writer goes on
/// committing (SQLite's `PASSIVE` checkpoint; it syncs the log before copying and the
/// database after). A passive checkpoint never lets the log start over while commits keep
/// coming, so once the log passes [`RESTART_FRAMES`] it runs a `RESTART` checkpoint, which
/// holds new commits back for the little the passive one left. It ends with the writer.
pub(super) fn checkpoint_loop(conn: &Connection, nudges: &mpsc::Receiver<Nudge>) {
    while let Ok(first) = nudges.recv() {
        let mut grew = false;
        for nudge in std::iter::once(first).chain(nudges.try_iter()) {
            match nudge {
                Nudge::Grew => grew = true,
                #[cfg(test)]
                Nudge::Inspect(inspect) => inspect(conn),
            }
        }
        if !grew {
            continue;
        }
        let frames = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            row.get::<_, i64>(1)
        });
        if matches!(frames, Ok(frames) if frames >= RESTART_FRAMES) {
            let _ = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(()));
        }
    }
}
