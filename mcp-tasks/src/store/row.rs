//! The one shape of a stored task: every field a store keeps, in two parts that every backend
//! stores and every view reads.
//!
//! - [`TaskRow`]: what the state machine ([`record`](super::record)) reads and changes: the
//!   task's identity, its [`State`], its [`Pending`] input requests and replay data, and its
//!   outcome. The SQL stores decode it from a row and write it back ([`codec`](super::codec));
//!   the memory store keeps the same parts in its compact entry.
//! - [`TaskOrigin`]: what the task was created with, unchanged for its life (tool version,
//!   arguments, the creating request's `_meta`, its trace context). No transition reads it;
//!   a replay ([`Recovery`](super::Recovery)) and the operator's detail
//!   ([`TaskDetail`](super::admin::TaskDetail)) do. Each backend writes it from
//!   [`TaskOrigin::encode`] and reads it with [`TaskOrigin::decode`], column by column in
//!   [`origin_columns`]' order.
//!
//! A new stored field that a task is created with goes into [`TaskOrigin`] (the struct, its
//! column name, its encode and decode lines below), the stores' schemas and migrations, and
//! the views that show it; nothing else. One that transitions change, kept while the task
//! lives, goes into [`Pending`] the same way ([`pending_columns`]), and into the transitions
//! that change it. Completed steps and, in a cluster store, the lease
//! are kept beside the row (their own table and columns), read by the operations that need
//! them.

use std::sync::{Arc, LazyLock};

use rmcp::model::{
    DetailedTask, InputRequests, InputResponses, JsonObject, Task, TaskPayload, TaskStatus,
};

#[cfg(any(feature = "sqlite", feature = "postgres"))]
use super::StoreError;
use crate::{clock::rfc3339, trace::TraceContext};

/// What a task was created with, unchanged for its life: what a replay of its work needs, and
/// what the operator's detail shows. A task that completed keeps only the fields that are not
/// replay data (such as its trace context); a failed or cancelled one keeps all of it.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct TaskOrigin {
    /// The version of the tool that started the task; a replay needs the same version.
    pub tool_version: Arc<str>,
    /// The call's arguments.
    pub arguments: JsonObject,
    /// What the task keeps of the creating request's `_meta`: its protocol version and client
    /// capabilities, which a replay reads.
    pub request_meta: JsonObject,
    /// The W3C trace context of the creating call ([`crate::trace`]), continued by every run
    /// of the task's work.
    pub trace_context: Option<TraceContext>,
}

/// The columns of a [`TaskOrigin`], in [`TaskOrigin::encode`]'s order, for statements
/// written as constants (`concat!`). [`ORIGIN_COLUMNS`] lists the same names; a test holds
/// the two together.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
macro_rules! origin_columns {
    () => {
        "tool_version, arguments, request_meta, trace_context"
    };
}
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use origin_columns;

/// The columns of a [`TaskOrigin`], in [`TaskOrigin::encode`]'s order.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) const ORIGIN_COLUMNS: [&str; 4] =
    ["tool_version", "arguments", "request_meta", "trace_context"];

/// A [`TaskOrigin`] as its columns hold it: text, NULL where the field is absent.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) type EncodedOrigin = [Option<String>; ORIGIN_COLUMNS.len()];

/// The origin with nothing in it, made once: a task's end compares with it and shares its
/// empty tool version, so ending a task allocates nothing for its origin.
static EMPTY: LazyLock<TaskOrigin> = LazyLock::new(TaskOrigin::default);

impl TaskOrigin {
    /// What a task keeps of its origin once it completed: the arguments, the request's
    /// `_meta` and the tool version served only a replay, and go; the rest stays for the
    /// operator. A failed or cancelled task keeps all of it (`record::keeps_history`).
    #[must_use]
    pub(crate) fn ended(self) -> Self {
        Self {
            tool_version: Arc::clone(&EMPTY.tool_version),
            arguments: JsonObject::new(),
            request_meta: JsonObject::new(),
            ..self
        }
    }

    /// Whether it holds nothing (what an ended task without a trace context keeps).
    pub(crate) fn is_empty(&self) -> bool {
        *self == *EMPTY
    }

    /// Every column, encoded, in [`ORIGIN_COLUMNS`]' order.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn encode(&self) -> Result<EncodedOrigin, StoreError> {
        use super::column::to_json;
        Ok([
            Some(self.tool_version.to_string()),
            Some(to_json(&self.arguments)?),
            Some(to_json(&self.request_meta)?),
            self.trace_context.as_ref().map(TraceContext::encode),
        ])
    }

    /// The columns a task's end clears, each with the SQL literal it keeps: what
    /// [`TaskOrigin::ended`] drops, found by ending an origin whose every field is set.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn ended_columns() -> Vec<(&'static str, String)> {
        let full = Self {
            tool_version: Arc::from("1"),
            arguments: JsonObject::from_iter([("a".to_owned(), 1.into())]),
            request_meta: JsonObject::from_iter([("m".to_owned(), 1.into())]),
            trace_context: TraceContext::parse(
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                None,
            ),
        };
        let (Ok(before), Ok(after)) = (full.encode(), full.clone().ended().encode()) else {
            return Vec::new();
        };
        ORIGIN_COLUMNS
            .iter()
            .zip(before.into_iter().zip(after))
            .filter(|(_, (before, after))| before != after)
            .map(|(name, (_, after))| {
                let literal = after.map_or("NULL".to_owned(), |v| {
                    format!("'{}'", v.replace('\'', "''"))
                });
                (*name, literal)
            })
            .collect()
    }

    /// Decodes the [`ORIGIN_COLUMNS`] of `row`, from column `first` on.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn decode(
        row: &impl super::column::Columns,
        first: usize,
    ) -> Result<Self, StoreError> {
        use super::column::json;
        Ok(Self {
            tool_version: Arc::from(row.text(first)?),
            arguments: json(&row.text(first + 1)?)?,
            request_meta: json(&row.text(first + 2)?)?,
            trace_context: TraceContext::decode(row.opt_text(first + 3)?.as_deref()),
        })
    }
}

/// The fields of a stored task that transitions read and change, whatever the store.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct State {
    pub(crate) status: TaskStatus,
    pub(crate) status_message: Option<String>,
    pub(crate) created_at_ms: u64,
    pub(crate) last_updated_at_ms: u64,
    pub(crate) ttl_ms: Option<u64>,
    pub(crate) cancel_requested: bool,
    /// When the terminal task is purged; `None` while it is live, and for a terminal task
    /// that has no TTL (never purged).
    pub(crate) purge_at_ms: Option<u64>,
    /// Set while the task is parked ([`Transition::Park`](super::Transition::Park)): its
    /// work runs nowhere until this instant, [`PARKED_FOR_ANSWER`] while it waits for an
    /// answer alone. An answer taken or a cancel intent makes it 0 (due now); a wake-up takes
    /// it back to `None`, and so does the task's end.
    pub(crate) parked_until_ms: Option<u64>,
}

/// [`TaskSnapshot::parked_until_ms`] of a task parked until an answer (or a cancel) wakes it.
pub const PARKED_FOR_ANSWER: u64 = i64::MAX as u64;

/// The timer's instant of a task woken from its park at `parked_until_ms`, when its timer
/// woke it: 0 is an answer's or a cancel's wake-up, [`PARKED_FOR_ANSWER`] no timer at all.
pub(crate) fn woken_by_timer(parked_until_ms: u64) -> Option<u64> {
    (parked_until_ms > 0 && parked_until_ms < PARKED_FOR_ANSWER).then_some(parked_until_ms)
}

impl State {
    /// `createdAt + ttlMs`, saturating; `None` without a TTL.
    pub(crate) fn deadline_ms(&self) -> Option<u64> {
        self.ttl_ms
            .map(|ttl| self.created_at_ms.saturating_add(ttl))
    }
}

/// What only a live task keeps for its input requests and their replay (invariants 4, 6).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Pending {
    /// The outstanding input requests, by key.
    pub(crate) input_requests: InputRequests,
    /// Every key used in this task: asked, or answered before the task existed.
    pub(crate) used_keys: Vec<Box<str>>,
    /// Every answer taken, by key.
    pub(crate) answers: InputResponses,
    /// When each question was asked, by key: how many steps the run had begun then. A key
    /// not here was asked before the first step, or answered before the task existed. A
    /// fork keeps the answers to the questions asked before its step ([`asked_before`]).
    pub(crate) asked_at_step: AskedAtStep,
}

/// The columns of a [`Pending`], in [`Pending::encode`]'s order, for statements written as
/// constants (`concat!`). [`PENDING_COLUMNS`] lists the same names; a test holds the two
/// together.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
macro_rules! pending_columns {
    () => {
        "input_requests, used_keys, answers, asked_at_step"
    };
}
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use pending_columns;

/// The columns of a [`Pending`], in [`Pending::encode`]'s order.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) const PENDING_COLUMNS: [&str; 4] =
    ["input_requests", "used_keys", "answers", "asked_at_step"];

/// A [`Pending`] as its columns hold it: JSON text.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) type EncodedPending = [String; PENDING_COLUMNS.len()];

impl Pending {
    /// What a task's end leaves: a task that keeps its history
    /// ([`record::keeps_history`](super::record::keeps_history)) keeps all but its
    /// outstanding requests; any other drops everything.
    pub(crate) fn end(&mut self, keeps_history: bool) {
        if keeps_history {
            self.input_requests = InputRequests::default();
        } else {
            *self = Self::default();
        }
    }

    /// Every column, encoded, in [`PENDING_COLUMNS`]' order.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn encode(&self) -> Result<EncodedPending, StoreError> {
        use super::column::to_json;
        Ok([
            to_json(&self.input_requests)?,
            to_json(&self.used_keys)?,
            to_json(&self.answers)?,
            to_json(&self.asked_at_step)?,
        ])
    }

    /// Decodes the [`PENDING_COLUMNS`] of `row`, from column `first` on.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn decode(
        row: &impl super::column::Columns,
        first: usize,
    ) -> Result<Self, StoreError> {
        use super::column::json;
        let used_keys: Vec<String> = json(&row.text(first + 1)?)?;
        Ok(Self {
            input_requests: json(&row.text(first)?)?,
            used_keys: used_keys.into_iter().map(String::into_boxed_str).collect(),
            answers: json(&row.text(first + 2)?)?,
            asked_at_step: json(&row.text(first + 3)?)?,
        })
    }

    /// The columns a task's end sets, each with the SQL literal it writes and whether every
    /// end writes it (`true`) or only one that drops the task's history: what
    /// [`Pending::end`] does to a `Pending` whose every field is set. For a store that ends
    /// many tasks in one statement (Postgres: `codec::end_sql`).
    #[cfg(any(feature = "postgres", all(test, feature = "sqlite")))]
    pub(crate) fn ended_columns() -> Vec<(&'static str, String, bool)> {
        let request = serde_json::json!({ "k": { "method": "roots/list" } });
        let Ok(input_requests) = serde_json::from_value(request) else {
            return Vec::new();
        };
        let full = Self {
            input_requests,
            used_keys: vec!["k".into()],
            answers: InputResponses::from_iter([("k".to_owned(), serde_json::json!(1))]),
            asked_at_step: AskedAtStep::from_iter([("k".to_owned(), 1)]),
        };
        let ended = |keeps| {
            let mut pending = full.clone();
            pending.end(keeps);
            pending.encode()
        };
        let (Ok(before), Ok(kept), Ok(dropped)) = (full.encode(), ended(true), ended(false)) else {
            return Vec::new();
        };
        PENDING_COLUMNS
            .iter()
            .zip(before.into_iter().zip(kept.into_iter().zip(dropped)))
            .filter(|(_, (before, (_, dropped)))| before != dropped)
            .map(|(name, (before, (kept, dropped)))| {
                (
                    *name,
                    format!("'{}'", dropped.replace('\'', "''")),
                    kept != before,
                )
            })
            .collect()
    }
}

/// When each question of a task was asked, by key: how many steps its run had begun then.
/// Only questions asked after the first step began are listed.
pub type AskedAtStep = std::collections::BTreeMap<String, u64>;

/// Whether question `key` was asked while the run had begun fewer than `steps` steps: a fork
/// that keeps `steps` steps keeps its answer, as the run replays the code that asked it,
/// while the code after the kept steps runs, and asks, again. A key that `asked` does not
/// list was asked before the first step.
#[cfg(any(test, feature = "admin"))]
pub(crate) fn asked_before(asked: &AskedAtStep, key: &str, steps: u64) -> bool {
    asked.get(key).copied().unwrap_or(0) < steps
}

/// How a task ended. Its serde form is how the SQL stores keep it: `{"completed": result}`,
/// `{"failed": error}` or `"cancelled"`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Outcome {
    /// `completed` with this `CallToolResult`, whether its `isError` is set or not.
    // docs/protocol.md R46.
    Completed(JsonObject),
    /// `failed` with this JSON-RPC error object.
    // docs/protocol.md R45.
    Failed(JsonObject),
    /// `cancelled`.
    Cancelled,
}

impl Outcome {
    /// The `statusMessage` a task gets when it ends with this outcome: a `failed` task's
    /// says why, as its error's message does; a `completed` or `cancelled` task keeps no
    /// progress text.
    #[must_use]
    pub fn status_message(&self) -> Option<String> {
        match self {
            Self::Failed(error) => Some(
                error
                    .get("message")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("the task failed")
                    .to_owned(),
            ),
            Self::Completed(_) | Self::Cancelled => None,
        }
    }

    /// The terminal status this outcome gives.
    #[must_use]
    pub const fn status(&self) -> TaskStatus {
        match self {
            Self::Completed(_) => TaskStatus::Completed,
            Self::Failed(_) => TaskStatus::Failed,
            Self::Cancelled => TaskStatus::Cancelled,
        }
    }
}

/// A completed unit of work of a running task, with its serialized result.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Step {
    /// The position of the step in the task's run: 1, 2, ...
    pub seq: u64,
    /// The step's name, as the tool gave it.
    pub name: String,
    /// The step's result, as JSON.
    pub value: serde_json::Value,
}

impl Step {
    /// Step number `seq`, named `name`, that returned `value`.
    #[must_use]
    pub fn new(seq: u64, name: impl Into<String>, value: serde_json::Value) -> Self {
        Self {
            seq,
            name: name.into(),
            value,
        }
    }
}

/// What a restarted process needs to decide about, and replay, a task that a previous
/// process left running.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Recovery {
    /// The id.
    pub id: Arc<str>,
    /// The owner.
    pub owner: Arc<str>,
    /// The tool's wire name.
    pub tool: Arc<str>,
    /// What the task was created with: tool version, arguments, the request's `_meta`,
    /// trace context.
    pub origin: TaskOrigin,
    /// Every answer delivered to an input request, by key.
    pub answers: InputResponses,
    /// The completed steps, in order.
    pub steps: Vec<Step>,
    /// A cancel intent was recorded: the replay starts cancelled.
    pub cancel_requested: bool,
    /// It was parked, and is woken (an answer, its timer, a cancel): its work goes on, by
    /// replay; not a restart.
    pub woken: bool,
    /// When its timer woke it (a durable sleep's deadline, or a retry's next attempt): that
    /// instant, epoch milliseconds, from which its lateness is measured.
    pub woken_by_timer_ms: Option<u64>,
}

/// A task as the store holds it at one instant.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskSnapshot {
    /// The id.
    pub id: Arc<str>,
    /// The owner: the only principal that may read and steer the task.
    // docs/protocol.md R49.
    pub owner: Arc<str>,
    /// The tool's wire name.
    pub tool: Arc<str>,
    /// The status.
    pub status: TaskStatus,
    /// The `statusMessage`.
    pub status_message: Option<String>,
    /// `createdAt`, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// `lastUpdatedAt`, milliseconds since the Unix epoch.
    pub last_updated_at_ms: u64,
    /// `ttlMs`.
    pub ttl_ms: Option<u64>,
    /// `pollIntervalMs`.
    pub poll_interval_ms: Option<u64>,
    /// The outstanding input requests (non-empty exactly when `input_required`).
    pub input_requests: InputRequests,
    /// The outcome, once terminal.
    pub outcome: Option<Outcome>,
    /// Whether a `tasks/cancel` was received.
    pub cancel_requested: bool,
    /// Set while the task is parked: its work runs nowhere until it is woken, at this instant
    /// (milliseconds since the Unix epoch); [`PARKED_FOR_ANSWER`] while only an answer or a
    /// cancel wakes it, 0 once woken and not running yet. The wire does not show it.
    pub parked_until_ms: Option<u64>,
}

impl TaskSnapshot {
    /// What a parked task waits for ([`TaskSnapshot::parked_until_ms`]): `"answer"`,
    /// `"timer"` or `"wake-up"` (woken, about to run); `None` when it is not parked.
    #[must_use]
    pub fn waits_for(&self) -> Option<&'static str> {
        match self.parked_until_ms? {
            PARKED_FOR_ANSWER => Some("answer"),
            0 => Some("wake-up"),
            _ => Some("timer"),
        }
    }

    /// The base `Task` fields, as `CreateTaskResult` carries them.
    #[must_use]
    pub fn to_task(&self) -> Task {
        let mut task = Task::new(
            self.id.as_ref(),
            self.status,
            rfc3339(self.created_at_ms),
            rfc3339(self.last_updated_at_ms),
        );
        task.status_message = self.status_message.clone();
        task.ttl_ms = self.ttl_ms;
        task.poll_interval_ms = self.poll_interval_ms;
        task
    }

    /// The `DetailedTask`, as `tasks/get` answers it, moving the payload out.
    // docs/protocol.md R14.
    #[must_use]
    pub fn into_detailed(self) -> DetailedTask {
        let task = self.to_task();
        let payload = match (self.outcome, self.status) {
            (Some(Outcome::Completed(result)), _) => TaskPayload::Completed { result },
            (Some(Outcome::Failed(error)), _) => TaskPayload::Failed { error },
            (Some(Outcome::Cancelled), _) => TaskPayload::Cancelled,
            (None, TaskStatus::InputRequired) => TaskPayload::InputRequired {
                input_requests: self.input_requests,
            },
            (None, _) => TaskPayload::Working,
        };
        DetailedTask::new(task, payload)
    }
}

/// What [`TaskStore::create`](super::TaskStore::create) did: created the task, or found the one an earlier call with
/// the same idempotency key created (a retry is a success, not an error).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Created {
    /// The task was created.
    New(TaskSnapshot),
    /// A task with the same owner, tool and idempotency key exists already, within its TTL:
    /// this is that task; nothing was created.
    Existing(TaskSnapshot),
}

impl Created {
    /// The task, new or existing.
    #[must_use]
    pub fn snapshot(&self) -> &TaskSnapshot {
        match self {
            Self::New(task) | Self::Existing(task) => task,
        }
    }

    /// The task, new or existing, moved out.
    #[must_use]
    pub fn into_snapshot(self) -> TaskSnapshot {
        match self {
            Self::New(task) | Self::Existing(task) => task,
        }
    }

    /// Whether the task was created by this call.
    #[must_use]
    pub fn is_new(&self) -> bool {
        matches!(self, Self::New(_))
    }
}

/// A stored task as the state machine sees it; see the [module docs](self).
#[derive(Debug, Clone, PartialEq)]
#[cfg(any(test, feature = "sqlite", feature = "postgres"))]
pub(crate) struct TaskRow {
    pub(crate) id: Arc<str>,
    pub(crate) owner: Arc<str>,
    pub(crate) tool: Arc<str>,
    pub(crate) poll_interval_ms: Option<u64>,
    pub(crate) state: State,
    pub(crate) pending: Pending,
    pub(crate) outcome: Option<Outcome>,
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl TaskRow {
    /// The task as a snapshot.
    pub(crate) fn into_snapshot(self) -> TaskSnapshot {
        snapshot(
            (self.id, self.owner, self.tool),
            self.state,
            self.poll_interval_ms,
            self.pending.input_requests,
            self.outcome,
        )
    }
}

/// The snapshot of a task from its parts, as every store's view builds it.
pub(crate) fn snapshot(
    (id, owner, tool): (Arc<str>, Arc<str>, Arc<str>),
    state: State,
    poll_interval_ms: Option<u64>,
    input_requests: InputRequests,
    outcome: Option<Outcome>,
) -> TaskSnapshot {
    TaskSnapshot {
        id,
        owner,
        tool,
        status: state.status,
        status_message: state.status_message,
        created_at_ms: state.created_at_ms,
        last_updated_at_ms: state.last_updated_at_ms,
        ttl_ms: state.ttl_ms,
        poll_interval_ms,
        input_requests,
        outcome,
        cancel_requested: state.cancel_requested,
        parked_until_ms: state.parked_until_ms,
    }
}

#[cfg(test)]
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod tests {
    use super::{ORIGIN_COLUMNS, PENDING_COLUMNS};

    #[test]
    fn an_end_clears_the_replay_data_and_keeps_the_rest() {
        let cleared: Vec<_> = super::TaskOrigin::ended_columns();
        assert_eq!(
            cleared,
            [
                ("tool_version", "''".to_owned()),
                ("arguments", "'{}'".to_owned()),
                ("request_meta", "'{}'".to_owned()),
            ]
        );
    }

    /// Every end drops the outstanding requests; only an end that drops the history drops
    /// the rest.
    #[test]
    fn an_end_drops_the_pending_requests_and_what_the_history_keeps() {
        let set = super::Pending::ended_columns();
        assert_eq!(
            set,
            [
                ("input_requests", "'{}'".to_owned(), true),
                ("used_keys", "'[]'".to_owned(), false),
                ("answers", "'{}'".to_owned(), false),
                ("asked_at_step", "'{}'".to_owned(), false),
            ]
        );
    }

    #[test]
    fn the_column_macro_and_the_column_list_name_the_same_columns() {
        assert_eq!(origin_columns!(), ORIGIN_COLUMNS.join(", "));
        assert_eq!(pending_columns!(), PENDING_COLUMNS.join(", "));
    }
}
