//! Operator operations on a task store ([`AdminStore`]): list every task with filters, one
//! task in detail, cancel any task, purge finished ones.
//!
//! The wire has no `tasks/list`: one caller never enumerates another's tasks. These
//! operations are for the people who run the server, and ignore owners; the admin API
//! (feature `admin`) serves them behind a credential of its own.
//!
//! # What every store answers
//!
//! - **Order and pages.** Tasks are listed newest first (by `createdAt`, then by id), a page
//!   at a time. A page that is not the last carries a [`Cursor`]: opaque text that names
//!   where the next page starts and the filter it was made for. A cursor is accepted only
//!   with the same filter ([`TaskQuery::with_cursor`] refuses it otherwise), so a page never
//!   mixes two queries.
//! - **Expiry first.** Listing, counting and purging first apply the expiry that is due, so
//!   a task past its TTL is listed as `failed`, not as still running.
//! - **Stalled.** A task is stalled for `d` when it is not terminal and nothing about it
//!   changed (status, status message, input requests or answers, steps: any change moves
//!   `lastUpdatedAt`) for longer than `d`.
//! - **Instances.** Only a store shared by several instances (`PostgresStore`) records which
//!   instance runs a task (its lease); in the single-process stores no task has an instance,
//!   and a filter on one matches nothing.
//! - **Detail.** Steps done and the questions asked and answered are kept while the task
//!   runs (they are its replay data, dropped when it completes, kept when it fails or is
//!   cancelled, for a retry); the outcome from then on.
//! - **Cancel** ([`cancel`]) records the cancel intent through the state machine, for any
//!   owner's task; the work stops when it honours it, as for `tasks/cancel`.
//! - **Purge** removes finished tasks (completed, failed or cancelled) last changed before a
//!   given instant, with their idempotency keys; they then read as unknown.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use rmcp::model::{InputRequests, InputResponses, JsonObject, TaskStatus};

pub use super::status::{parse_status, status_word};
use super::{AskedAtStep, Outcome, Step, StoreError, TaskOrigin, TaskSnapshot};

mod cancel;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) mod sql;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use cancel::live;
pub use cancel::{cancel, fail};

/// Most tasks a page holds; a larger [`TaskQuery::with_limit`] is lowered to it.
pub const MAX_PAGE: usize = 500;
/// Tasks a page holds unless [`TaskQuery::with_limit`] says otherwise.
pub const DEFAULT_PAGE: usize = 50;

/// Which tasks to list or count. Every condition set must hold; an empty filter matches
/// every task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskFilter {
    /// Any of these statuses (empty: any status).
    pub statuses: Vec<TaskStatus>,
    /// This tool's wire name.
    pub tool: Option<String>,
    /// This owner.
    pub owner: Option<String>,
    /// Run by this instance (holding the task's lease).
    pub instance: Option<String>,
    /// Created at or after this instant, epoch milliseconds.
    pub created_after_ms: Option<u64>,
    /// Created before this instant, epoch milliseconds.
    pub created_before_ms: Option<u64>,
    /// Not terminal, and unchanged for longer than this.
    pub stalled_for: Option<Duration>,
    /// Only parked tasks (live, their work dropped while they wait for an answer or a timer).
    pub parked: bool,
}

impl TaskFilter {
    /// The filter that matches every task.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `status` to the statuses a task may have.
    #[must_use]
    pub fn with_status(mut self, status: TaskStatus) -> Self {
        if !self.statuses.contains(&status) {
            self.statuses.push(status);
        }
        self
    }

    /// Only tasks of this tool.
    #[must_use]
    pub fn with_tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = Some(tool.into());
        self
    }

    /// Only tasks of this owner.
    #[must_use]
    pub fn with_owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Only tasks this instance runs.
    #[must_use]
    pub fn with_instance(mut self, instance: impl Into<String>) -> Self {
        self.instance = Some(instance.into());
        self
    }

    /// Only tasks created at or after `ms` (epoch milliseconds).
    #[must_use]
    pub fn with_created_after_ms(mut self, ms: u64) -> Self {
        self.created_after_ms = Some(ms);
        self
    }

    /// Only tasks created before `ms` (epoch milliseconds).
    #[must_use]
    pub fn with_created_before_ms(mut self, ms: u64) -> Self {
        self.created_before_ms = Some(ms);
        self
    }

    /// Only tasks stalled for longer than `duration` (see the [module docs](self)).
    #[must_use]
    pub fn with_stalled_for(mut self, duration: Duration) -> Self {
        self.stalled_for = Some(duration);
        self
    }

    /// Only parked tasks.
    #[must_use]
    pub fn parked_only(mut self) -> Self {
        self.parked = true;
        self
    }

    /// The instant before which a task's last change makes it stalled, if the filter asks.
    #[must_use]
    pub fn stalled_before_ms(&self, now_ms: u64) -> Option<u64> {
        self.stalled_for
            .map(|d| now_ms.saturating_sub(crate::clock::millis(d)))
    }

    /// Whether a task with these fields passes the filter at `now_ms`.
    #[must_use]
    pub fn matches(&self, summary: &TaskSummary, now_ms: u64) -> bool {
        let task = &summary.task;
        (self.statuses.is_empty() || self.statuses.contains(&task.status))
            && self.tool.as_deref().is_none_or(|tool| *task.tool == *tool)
            && self
                .owner
                .as_deref()
                .is_none_or(|owner| *task.owner == *owner)
            && self
                .instance
                .as_deref()
                .is_none_or(|instance| summary.instance.as_deref() == Some(instance))
            && self
                .created_after_ms
                .is_none_or(|after| task.created_at_ms >= after)
            && self
                .created_before_ms
                .is_none_or(|before| task.created_at_ms < before)
            && self
                .stalled_before_ms(now_ms)
                .is_none_or(|before| !task.status.is_terminal() && task.last_updated_at_ms < before)
            && (!self.parked || (!task.status.is_terminal() && task.parked_until_ms.is_some()))
    }

    /// A digest of the filter, which a cursor carries: the same filter, the same digest.
    fn fingerprint(&self) -> u64 {
        use std::hash::Hasher;
        let mut statuses: Vec<&str> = self.statuses.iter().map(|s| status_word(*s)).collect();
        statuses.sort_unstable();
        statuses.dedup();
        let text = serde_json::json!([
            statuses,
            self.tool,
            self.owner,
            self.instance,
            self.created_after_ms,
            self.created_before_ms,
            self.stalled_for.map(crate::clock::millis),
            self.parked,
        ])
        .to_string();
        let mut hasher = fnv::FnvHasher::default();
        hasher.write(text.as_bytes());
        hasher.finish()
    }
}

/// Where a page starts: after the task created at `created_at_ms` with id `id`, in the
/// list's order (newest first).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Position {
    /// `createdAt` of the last task of the previous page.
    pub created_at_ms: u64,
    /// Its id.
    pub id: Arc<str>,
}

impl Position {
    /// Whether a task created at `created_at_ms` with id `id` comes after this position in
    /// the list's order.
    #[must_use]
    pub fn is_before(&self, created_at_ms: u64, id: &str) -> bool {
        (created_at_ms, id.as_bytes()) < (self.created_at_ms, self.id.as_bytes())
    }
}

/// Where the next page of a list starts, for the same filter: opaque text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor(String);

impl Cursor {
    /// The cursor of the page after the one that ends with `last`.
    fn new(filter: &TaskFilter, last: &TaskSnapshot) -> Self {
        let plain = format!(
            "{:016x}:{}:{}",
            filter.fingerprint(),
            last.created_at_ms,
            last.id
        );
        Self(plain.bytes().map(|b| format!("{b:02x}")).collect())
    }

    /// The cursor as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Reads `text` as a cursor made for `filter`.
    fn position(text: &str, filter: &TaskFilter) -> Result<Position, CursorError> {
        let decoded = || {
            let bytes = (0..text.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
                .collect::<Option<Vec<u8>>>()?;
            let plain = String::from_utf8(bytes).ok()?;
            let mut parts = plain.splitn(3, ':');
            let fingerprint = u64::from_str_radix(parts.next()?, 16).ok()?;
            let created_at_ms = parts.next()?.parse().ok()?;
            Some((fingerprint, created_at_ms, Arc::from(parts.next()?)))
        };
        let (fingerprint, created_at_ms, id) = decoded().ok_or(CursorError::Malformed)?;
        if fingerprint != filter.fingerprint() {
            return Err(CursorError::OtherQuery);
        }
        Ok(Position { created_at_ms, id })
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A cursor that cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CursorError {
    /// The text is not a cursor this store made.
    #[error(
        "the cursor is not one a list of tasks gave: pass the `next_cursor` of a page as it is"
    )]
    Malformed,
    /// The cursor was made for another filter.
    #[error(
        "the cursor belongs to a list with other filters: repeat that list's filters with it, \
         or start again without a cursor"
    )]
    OtherQuery,
}

/// One page of a list: a filter, where to start, how many.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskQuery {
    /// Which tasks.
    pub filter: TaskFilter,
    /// Where the page starts (`None`: with the newest task).
    pub after: Option<Position>,
    /// Most tasks on the page, 1 to [`MAX_PAGE`].
    pub limit: usize,
}

impl TaskQuery {
    /// The first page of tasks that pass `filter`, [`DEFAULT_PAGE`] of them.
    #[must_use]
    pub fn new(filter: TaskFilter) -> Self {
        Self {
            filter,
            after: None,
            limit: DEFAULT_PAGE,
        }
    }

    /// At most `limit` tasks on the page (1 to [`MAX_PAGE`]; outside, the nearest bound).
    #[must_use]
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit.clamp(1, MAX_PAGE);
        self
    }

    /// The page after the one that gave `cursor`.
    ///
    /// # Errors
    /// The cursor is malformed, or was made for another filter than this query's.
    pub fn with_cursor(mut self, cursor: &str) -> Result<Self, CursorError> {
        self.after = Some(Cursor::position(cursor, &self.filter)?);
        Ok(self)
    }

    /// Cuts `sorted` (matching tasks in the list's order, after [`TaskQuery::after`], at most
    /// `limit + 1` of them) to one page, with the cursor of the next one when there is more.
    #[must_use]
    pub fn page(&self, mut sorted: Vec<TaskSummary>) -> TaskPage {
        let more = sorted.len() > self.limit;
        sorted.truncate(self.limit);
        let next_cursor = match sorted.last() {
            Some(last) if more => Some(Cursor::new(&self.filter, &last.task)),
            _ => None,
        };
        TaskPage {
            tasks: sorted,
            next_cursor,
        }
    }
}

/// A task as a list shows it: as `tasks/get` reads it, and who runs it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskSummary {
    /// The task, with its owner and cancel intent.
    pub task: TaskSnapshot,
    /// The instance holding the task's lease (cluster stores only).
    pub instance: Option<Arc<str>>,
}

impl TaskSummary {
    /// The summary of `task`, run by `instance`.
    #[must_use]
    pub fn of(task: TaskSnapshot, instance: Option<Arc<str>>) -> Self {
        Self { task, instance }
    }
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskPage {
    /// The tasks, newest first.
    pub tasks: Vec<TaskSummary>,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<Cursor>,
}

/// How many tasks have each status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatusCounts {
    /// `working`.
    pub working: u64,
    /// `input_required`.
    pub input_required: u64,
    /// `completed`.
    pub completed: u64,
    /// `failed`.
    pub failed: u64,
    /// `cancelled`.
    pub cancelled: u64,
}

impl StatusCounts {
    /// The counter of `status`; `None` for a status of a newer protocol revision (no store
    /// of this crate holds one).
    fn slot(&mut self, status: TaskStatus) -> Option<&mut u64> {
        Some(match status {
            TaskStatus::Working => &mut self.working,
            TaskStatus::InputRequired => &mut self.input_required,
            TaskStatus::Completed => &mut self.completed,
            TaskStatus::Failed => &mut self.failed,
            TaskStatus::Cancelled => &mut self.cancelled,
            _ => return None,
        })
    }

    /// Counts `n` more tasks of `status`.
    pub fn add(&mut self, status: TaskStatus, n: u64) {
        if let Some(slot) = self.slot(status) {
            *slot += n;
        }
    }

    /// The count of `status`.
    #[must_use]
    pub fn get(&self, status: TaskStatus) -> u64 {
        let mut counts = *self;
        counts.slot(status).map_or(0, |n| *n)
    }

    /// Every task counted.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.working + self.input_required + self.completed + self.failed + self.cancelled
    }
}

/// The lease of a task in a cluster store.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseState {
    /// The instance holding it; `None` for a task queued for a worker.
    pub instance: Option<Arc<str>>,
    /// The fencing epoch.
    pub epoch: u64,
    /// Until when the lease holds, on the store's clock (epoch milliseconds).
    pub until_ms: Option<u64>,
}

/// One task in detail.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskDetail {
    /// The task as `tasks/get` reads it, with its owner, outcome and cancel intent.
    pub task: TaskSnapshot,
    /// What it was created with: the tool version, the arguments and the request's `_meta`
    /// while it runs, or once it failed or was cancelled (a task that completed keeps only
    /// the rest, such as its trace context).
    pub origin: TaskOrigin,
    /// The steps done, in order, while it runs, or once it failed or was cancelled.
    pub steps: Vec<Step>,
    /// The questions still open, by key.
    pub questions: InputRequests,
    /// The answers given, by key, while it runs, or once it failed or was cancelled.
    pub answers: InputResponses,
    /// When each question was asked, by key: how many steps the run had begun then (a key
    /// not listed: before the first step). A fork keeps the answers asked before its step.
    pub asked_at_step: AskedAtStep,
    /// The lease (cluster stores only).
    pub lease: Option<LeaseState>,
}

impl TaskDetail {
    /// The JSON-RPC error of a `failed` task.
    #[must_use]
    pub fn error(&self) -> Option<&JsonObject> {
        match &self.task.outcome {
            Some(Outcome::Failed(error)) => Some(error),
            _ => None,
        }
    }
}

/// What an operator's cancel did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Cancelled {
    /// The intent is recorded; the task is as it then was (the work stops when it honours
    /// it).
    Requested(TaskSnapshot),
    /// The task had already ended; it keeps its state.
    AlreadyEnded(TaskSnapshot),
}

impl Cancelled {
    /// The task.
    #[must_use]
    pub fn task(&self) -> &TaskSnapshot {
        match self {
            Self::Requested(task) | Self::AlreadyEnded(task) => task,
        }
    }

    /// The outcome's word, as the admin API and its audit events say it:
    /// `cancel_requested` or `already_ended`.
    #[must_use]
    pub fn outcome(&self) -> &'static str {
        match self {
            Self::Requested(_) => "cancel_requested",
            Self::AlreadyEnded(_) => "already_ended",
        }
    }
}

/// The operator operations of a store; see the [module docs](self).
#[async_trait]
pub trait AdminStore: Send + Sync {
    /// One page of the tasks that pass `query`'s filter, newest first.
    async fn list(&self, query: &TaskQuery) -> Result<TaskPage, StoreError>;

    /// How many tasks that pass `filter` have each status (the filter's own statuses, if
    /// any, still apply).
    async fn count(&self, filter: &TaskFilter) -> Result<StatusCounts, StoreError>;

    /// Task `id` in detail; `None` when unknown or purged.
    async fn detail(&self, id: &str) -> Result<Option<TaskDetail>, StoreError>;

    /// Removes every finished task last changed before `before_ms` (epoch milliseconds;
    /// `None`: every finished task); answers how many.
    async fn purge_finished(&self, before_ms: Option<u64>) -> Result<u64, StoreError>;

    /// Moves the live task `id` to `version` of its tool: from then on it is replayed (and,
    /// in a cluster, claimed) as a task that version recorded. Its stored steps and answers
    /// stay; its state does not change. Answers the task.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] for an unknown or purged id, [`StoreError::Terminal`] for a
    /// task that ended; a failure of the store.
    async fn set_tool_version(&self, id: &str, version: &str) -> Result<TaskSnapshot, StoreError>;
}
