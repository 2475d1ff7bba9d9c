//! The task store: the durability contract every backend keeps.
//!
//! A [`TaskStore`] owns the state of every task: its status, message, timestamps, input
//! requests and answers, outcome and cancel intent. The runtime that executes tools holds no
//! task state a restart could lose; it drives the store through the operations below, and a
//! store shared by several processes (SQLite, Postgres) serves them all, because nothing in
//! this trait refers to a process (no join handles, no channels).
//!
//! # What every store keeps
//!
//! A task is created durably before it is visible; it goes `working ↔ input_required` and
//! then to exactly one terminal state (`completed`, `failed`, `cancelled`) that never
//! changes, and an operation that would leave it answers [`StoreError::Terminal`];
//! `lastUpdatedAt` only moves forward. An input key names one request for the whole life of
//! a task; answers are taken only for outstanding keys, and kept (with completed steps and
//! the answers a task was created with) so a restarted process can replay the work. A task
//! not terminal at `createdAt + ttlMs` becomes `failed` ("task expired"); a terminal one is
//! purged at that instant, an expired one after the store's retention, and then reads as
//! unknown. A retried create with the same owner, tool and idempotency key, within the first
//! task's TTL, answers [`Created::Existing`]. One state machine, shared by every store,
//! decides all of this.
//!
//! A store that several processes share (`PostgresStore`) also offers
//! [`TaskStore::cluster`]: leases with a fencing epoch, one claimer per lapsed lease, fenced
//! writes that an instance which lost its lease cannot make, and wake-ups that reach the
//! instance running a task.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::InputResponses;

pub mod admin;
mod cluster;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) mod codec;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) mod column;
mod error;
pub mod memory;
mod new;
pub(crate) mod record;
pub(crate) mod row;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub(crate) mod status;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) mod trim;
pub(crate) mod unreported;

pub use admin::AdminStore;
pub use cluster::{
    Claim, ClaimOrder, Claimed, ClusterStore, DEFAULT_CANCEL_GRACE, Lease, Notice, QueueDepth,
    ToolVersions,
};
pub use error::{BackendError, ConfigError, StoreError};
pub use memory::MemoryStore;
pub use new::NewTask;
pub use record::{Transition, Wait};
pub use row::{
    AskedAtStep, Created, Outcome, PARKED_FOR_ANSWER, Recovery, Step, TaskOrigin, TaskSnapshot,
};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;

/// The durability contract; see the [module docs](self).
#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Creates a `working` task. Returns only once a [`TaskStore::get`] of the id succeeds.
    /// A retry of a create with an idempotency key, within the first task's TTL, creates
    /// nothing and answers that task ([`Created::Existing`]).
    async fn create(&self, task: NewTask) -> Result<Created, StoreError>;

    /// The task, or `None` when unknown or purged. Applies expiry that is due.
    async fn get(&self, id: &str) -> Result<Option<TaskSnapshot>, StoreError>;

    /// The tasks `ids` name, in their order, each `None` when unknown or purged: what
    /// [`TaskStore::get`] answers for each, expiry that is due applied, in one read of the
    /// store (one query on SQLite and Postgres) instead of one per task. A task listen reads
    /// the tasks it names with it.
    ///
    /// The default reads them one after the other with [`TaskStore::get`]; stores override
    /// it.
    async fn get_many(&self, ids: &[Arc<str>]) -> Result<Vec<Option<TaskSnapshot>>, StoreError> {
        let mut tasks = Vec::with_capacity(ids.len());
        for id in ids {
            tasks.push(self.get(id).await?);
        }
        Ok(tasks)
    }

    /// Applies a write of the task's running work ([`Transition`]). Under `fence`, a
    /// [`ClusterStore`] refuses it with [`StoreError::Fenced`], changing nothing, once the
    /// task's epoch is no longer the lease's (module docs of the state machine, invariant
    /// 12); a single-process store has one runner, so every fence holds there. A refused
    /// transition answers [`StoreError::Terminal`] or [`StoreError::KeyReused`].
    async fn apply(
        &self,
        id: &str,
        fence: Option<&Lease>,
        transition: Transition,
    ) -> Result<(), StoreError>;

    /// Takes the answers whose keys are outstanding, ignores the rest, keeps them for replay,
    /// and returns what it took. When no request stays outstanding the task is `working`
    /// again.
    async fn deliver_input(
        &self,
        id: &str,
        responses: InputResponses,
    ) -> Result<InputResponses, StoreError>;

    /// Records a cancel intent. Succeeds on terminal tasks too: `tasks/cancel` acknowledges
    /// every task the caller owns, and a task that already ended keeps its state.
    // docs/protocol.md R35, R37.
    async fn request_cancel(&self, id: &str) -> Result<(), StoreError>;

    /// Every task that is not terminal and not parked, with what a replay needs. A process
    /// calls it once, at start-up, before serving.
    async fn recoverable(&self) -> Result<Vec<Recovery>, StoreError>;

    /// Live task `id` with what a run of it needs (its arguments, stored steps and answers);
    /// `None` once it ended (or expired), or for an unknown id. A single-process runtime
    /// reads it to start a task that a tool's limit held back
    /// ([`ToolDefinition::with_concurrency`](crate::ToolDefinition::with_concurrency) and
    /// the others): while held, the task is its row. The default scans
    /// [`TaskStore::recoverable`]; the stores of this crate read the one task.
    async fn recovery(&self, id: &str) -> Result<Option<Recovery>, StoreError> {
        let recoverable = self.recoverable().await?;
        Ok(recoverable.into_iter().find(|task| &*task.id == id))
    }

    /// Every answer stored for task `id`'s input requests, by key (the replay data); empty for a
    /// task that ended (its replay data is gone). A replay reads it when it asks again a
    /// question that was open when it started, so an answer stored after the replay data was
    /// read still reaches it. [`StoreError::NotFound`] for an unknown or purged id.
    ///
    /// The default scans [`TaskStore::recoverable`] for the task; stores override it with a
    /// direct read (a [`ClusterStore`] with its [`ClusterStore::answers`]).
    async fn stored_answers(&self, id: &str) -> Result<InputResponses, StoreError> {
        let recoverable = self.recoverable().await?;
        if let Some(task) = recoverable.into_iter().find(|task| &*task.id == id) {
            return Ok(task.answers);
        }
        match self.get(id).await? {
            Some(_) => Ok(InputResponses::new()),
            None => Err(StoreError::NotFound),
        }
    }

    /// Whether the store keeps parked tasks ([`Transition::Park`]) and wakes them
    /// ([`TaskStore::wake`], or a [`ClusterStore`]'s claims). The runtime parks no task over
    /// a store that does not (the default): their waits stay in memory.
    fn parks(&self) -> bool {
        false
    }

    /// Takes up to `limit` parked tasks that are woken now (an answer taken, a cancel
    /// recorded, a timer due; `only`: that task alone, if it is): each leaves its park and
    /// comes with what its replay needs ([`Recovery::woken`]). A task is taken by one call
    /// only. What a single-process runtime runs after a wake-up; a [`ClusterStore`] wakes
    /// through its claims instead. The default (a store that does not park) takes none.
    async fn wake(&self, only: Option<&str>, limit: usize) -> Result<Vec<Recovery>, StoreError> {
        let _ = (only, limit);
        Ok(Vec::new())
    }

    /// The earliest instant (milliseconds since the Unix epoch) a parked task is due to be
    /// woken, `None` when no live task is parked with a timer (or woken already). The default (a store that does not park)
    /// answers `None`.
    async fn next_wake(&self) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }

    /// How many live tasks are parked now (what the `mcp_tasks_parked_tasks` gauge shows);
    /// `None` (the default, a store that does not park) when the store does not count them.
    /// A read only: unlike the operator's counts, it applies no expiry.
    async fn parked_count(&self) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }

    /// Up to `limit` parked tasks, by id, after `after` (`None`: from the first): each one's
    /// id and owner. A single-process runtime reads them at start-up, so that a task parked
    /// by an earlier process still counts against its owner's quota. A store that parks
    /// answers every one; the default (a store that does not park) none.
    async fn parked_owners(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(Arc<str>, Arc<str>)>, StoreError> {
        let _ = (after, limit);
        Ok(Vec::new())
    }

    /// Applies every expiry that is due: non-terminal tasks past their TTL become `failed`
    /// (their ids are returned, so their work can be stopped); purgeable ones are removed.
    /// The stores of this crate also remove, for each owner that created a task with
    /// [`NewTask::max_finished_per_owner`] since the last sweep (or that held more tasks
    /// than the bound then and has finished some since), that owner's oldest finished tasks
    /// past the bound (SQLite and Postgres wait, for a bound of 32 or more, until the owner
    /// created a sixteenth of it since its last trim, or 30 s); and, after
    /// [`TaskStore::set_max_finished_per_owner`], the owners of the next page of their pass
    /// over every owner.
    async fn expire_due(&self) -> Result<Vec<Arc<str>>, StoreError>;

    /// The bound on each owner's finished tasks
    /// ([`Limits::max_finished_tasks_per_owner`](crate::Limits::max_finished_tasks_per_owner)),
    /// which a runtime tells its store once, when it starts. The stores that keep tasks
    /// across a restart (SQLite, Postgres) then make a pass over every owner's finished
    /// tasks, a page of at most 10,000 of them at each [`TaskStore::expire_due`] (so one
    /// sweep's work stays bounded), and trim each owner that holds more than `tasks`: an
    /// owner left past its bound by a process that stopped before its sweep (on Postgres,
    /// any instance), or by a bound lowered at the restart, is trimmed without creating
    /// again. Postgres passes again an hour after each pass ends
    /// (`PostgresBuilder::with_trim_pass_every`), for an instance that stops while the
    /// others run on. Until a create carries a bound, it is the one the sweeps trim to. The
    /// default does nothing: a store that forgets its tasks at a restart has none left over.
    fn set_max_finished_per_owner(&self, tasks: usize) {
        let _ = tasks;
    }

    /// The cluster operations of a store that several instances share; `None` (the default)
    /// for a single-process store.
    fn cluster(&self) -> Option<&dyn ClusterStore> {
        None
    }

    /// The operator operations of the store ([`admin`]): list, detail, purge. `None` (the
    /// default) for a store that does not offer them; every store of this crate does.
    fn admin(&self) -> Option<&dyn AdminStore> {
        None
    }
}
