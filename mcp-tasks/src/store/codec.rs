//! The one codec of a stored task row, for both SQL stores (SQLite and Postgres): how each
//! field of a [`StoredTask`] is written to a column and read back. The stores bind the
//! encoded values to their own statements and read their rows through [`Columns`].

use std::sync::Arc;

use rmcp::model::{InputRequests, JsonObject, TaskStatus};
use serde_json::Value;

pub(crate) use super::record::StoredTask;
use super::{
    BackendError, NewTask, Outcome, Recovery, Step, StoreError, TaskSnapshot,
    record::{self, Pending, State},
};
use crate::{clock::millis, trace::TraceContext};

/// The columns of a task row that [`StoredTask::decode`] reads, in its order; a store's
/// own columns follow them.
macro_rules! task_columns {
    () => {
        "id, owner, tool, status, status_message, created_at_ms, last_updated_at_ms, ttl_ms, \
         poll_interval_ms, input_requests, used_keys, answers, outcome, cancel_requested, \
         purge_at_ms"
    };
}
pub(crate) use task_columns;

/// How many columns [`task_columns`] lists: a store's own columns start at this index.
#[cfg(feature = "postgres")]
pub(crate) const TASK_COLUMNS: usize = 15;

/// The columns of a live task that [`recovery`] reads, in its order.
macro_rules! recovery_columns {
    () => {
        "id, owner, tool, tool_version, arguments, request_meta, answers, trace_context"
    };
}
pub(crate) use recovery_columns;

/// `purge_at_ms` of a finished task that is never purged (no TTL). NULL means "live".
pub(crate) const NEVER: i64 = i64::MAX;

/// A row as a store's driver reads it, column by column (by index).
pub(crate) trait Columns {
    /// A text column.
    fn text(&self, index: usize) -> Result<String, StoreError>;
    /// A nullable text column.
    fn opt_text(&self, index: usize) -> Result<Option<String>, StoreError>;
    /// An integer column.
    fn int(&self, index: usize) -> Result<i64, StoreError>;
    /// A nullable integer column.
    fn opt_int(&self, index: usize) -> Result<Option<i64>, StoreError>;
    /// A boolean column (however the database stores it).
    fn flag(&self, index: usize) -> Result<bool, StoreError>;
}

/// The changeable columns of a row, encoded, as every write-back binds them.
pub(crate) struct Encoded {
    pub(crate) status: &'static str,
    pub(crate) status_message: Option<String>,
    pub(crate) last_updated_at_ms: i64,
    pub(crate) input_requests: String,
    pub(crate) used_keys: String,
    pub(crate) answers: String,
    pub(crate) outcome: Option<String>,
    pub(crate) cancel_requested: bool,
    /// NULL while live; [`NEVER`] for a finished task that is never purged.
    pub(crate) purge_at_ms: Option<i64>,
}

impl StoredTask {
    /// Decodes the [`task_columns`] of `row`.
    pub(crate) fn decode(row: &impl Columns) -> Result<Self, StoreError> {
        let outcome = row
            .opt_text(12)?
            .map(|text| json::<Value>(&text).and_then(parse_outcome))
            .transpose()?;
        let used_keys: Vec<String> = json(&row.text(10)?)?;
        Ok(Self {
            id: Arc::from(row.text(0)?),
            owner: Arc::from(row.text(1)?),
            tool: Arc::from(row.text(2)?),
            state: State {
                status: parse_status(&row.text(3)?)?,
                status_message: row.opt_text(4)?,
                created_at_ms: to_u64(row.int(5)?),
                last_updated_at_ms: to_u64(row.int(6)?),
                ttl_ms: row.opt_int(7)?.map(to_u64),
                cancel_requested: row.flag(13)?,
                purge_at_ms: row.opt_int(14)?.map(to_u64),
            },
            poll_interval_ms: row.opt_int(8)?.map(to_u64),
            pending: Pending {
                input_requests: json::<InputRequests>(&row.text(9)?)?,
                used_keys: used_keys.into_iter().map(String::into_boxed_str).collect(),
                answers: json(&row.text(11)?)?,
            },
            outcome,
        })
    }

    /// The changeable columns, encoded.
    pub(crate) fn encode(&self) -> Result<Encoded, StoreError> {
        let state = &self.state;
        Ok(Encoded {
            status: status_name(state.status)?,
            status_message: state.status_message.clone(),
            last_updated_at_ms: to_i64(state.last_updated_at_ms),
            input_requests: to_json(&self.pending.input_requests)?,
            used_keys: to_json(&self.pending.used_keys)?,
            answers: to_json(&self.pending.answers)?,
            outcome: self.outcome.as_ref().map(encode_outcome).transpose()?,
            cancel_requested: state.cancel_requested,
            purge_at_ms: state
                .status
                .is_terminal()
                .then(|| state.purge_at_ms.map_or(NEVER, to_i64)),
        })
    }

    /// The task as a snapshot.
    pub(crate) fn into_snapshot(self) -> TaskSnapshot {
        TaskSnapshot {
            id: self.id,
            owner: self.owner,
            tool: self.tool,
            status: self.state.status,
            status_message: self.state.status_message,
            created_at_ms: self.state.created_at_ms,
            last_updated_at_ms: self.state.last_updated_at_ms,
            ttl_ms: self.state.ttl_ms,
            poll_interval_ms: self.poll_interval_ms,
            input_requests: self.pending.input_requests,
            outcome: self.outcome,
            cancel_requested: self.state.cancel_requested,
        }
    }
}

/// The columns of a new task's row, encoded, as both stores' inserts bind them.
pub(crate) struct NewRow {
    pub(crate) status: &'static str,
    pub(crate) created_at_ms: i64,
    pub(crate) ttl_ms: Option<i64>,
    pub(crate) poll_interval_ms: Option<i64>,
    pub(crate) deadline_ms: Option<i64>,
    pub(crate) arguments: String,
    pub(crate) request_meta: String,
    pub(crate) used_keys: String,
    pub(crate) answers: String,
    /// The creating call's trace context ([`TraceContext::encode`]), validated and bounded
    /// by its type; NULL without one.
    pub(crate) trace_context: Option<String>,
}

impl NewRow {
    /// `task` created at `now` ([`record::create`]), encoded.
    pub(crate) fn encode(task: &NewTask, now: u64) -> Result<Self, StoreError> {
        let state = record::create(task.status_message.clone(), task.ttl, now);
        Ok(Self {
            status: status_name(state.status)?,
            created_at_ms: to_i64(state.created_at_ms),
            ttl_ms: state.ttl_ms.map(to_i64),
            poll_interval_ms: task.poll_interval.map(|p| to_i64(millis(p))),
            deadline_ms: state.deadline_ms().map(to_i64),
            arguments: to_json(&task.arguments)?,
            request_meta: to_json(&task.request_meta)?,
            used_keys: to_json(&record::created_keys(&task.answers).collect::<Vec<_>>())?,
            answers: to_json(&task.answers)?,
            trace_context: task.trace_context.as_ref().map(TraceContext::encode),
        })
    }
}

/// The snapshot of `task` as a store creates it at `now` ([`record::create`]).
pub(crate) fn created_snapshot(task: &NewTask, now: u64) -> TaskSnapshot {
    let state = record::create(task.status_message.clone(), task.ttl, now);
    TaskSnapshot {
        id: Arc::clone(&task.id),
        owner: Arc::clone(&task.owner),
        tool: Arc::clone(&task.tool),
        status: state.status,
        status_message: state.status_message,
        created_at_ms: state.created_at_ms,
        last_updated_at_ms: state.last_updated_at_ms,
        ttl_ms: state.ttl_ms,
        poll_interval_ms: task.poll_interval.map(millis),
        input_requests: InputRequests::new(),
        outcome: None,
        cancel_requested: false,
    }
}

/// A live task's replay data from its [`recovery_columns`], with its `steps`.
pub(crate) fn recovery(row: &impl Columns, steps: Vec<Step>) -> Result<Recovery, StoreError> {
    Ok(Recovery {
        id: Arc::from(row.text(0)?),
        owner: Arc::from(row.text(1)?),
        tool: Arc::from(row.text(2)?),
        tool_version: Arc::from(row.text(3)?),
        arguments: json::<JsonObject>(&row.text(4)?)?,
        request_meta: json::<JsonObject>(&row.text(5)?)?,
        answers: json(&row.text(6)?)?,
        steps,
        trace_context: TraceContext::decode(row.opt_text(7)?.as_deref()),
    })
}

/// A step from its `seq`, `name` and `value` columns, read from `first` on.
pub(crate) fn step(row: &impl Columns, first: usize) -> Result<Step, StoreError> {
    Ok(Step::new(
        to_u64(row.int(first)?),
        row.text(first + 1)?,
        json(&row.text(first + 2)?)?,
    ))
}

/// A status as the stores write it (its wire name).
pub(crate) fn status_name(status: TaskStatus) -> Result<&'static str, StoreError> {
    Ok(match status {
        TaskStatus::Working => "working",
        TaskStatus::InputRequired => "input_required",
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
        #[allow(unreachable_patterns)]
        other => {
            return Err(corrupt(format!(
                "the task status {other:?} has no stored form in this build"
            )));
        }
    })
}

/// The status a store wrote as `name`; any other name is an error, never a guess.
pub(crate) fn parse_status(name: &str) -> Result<TaskStatus, StoreError> {
    Ok(match name {
        "working" => TaskStatus::Working,
        "input_required" => TaskStatus::InputRequired,
        "completed" => TaskStatus::Completed,
        "failed" => TaskStatus::Failed,
        "cancelled" => TaskStatus::Cancelled,
        _ => {
            return Err(corrupt(format!(
                "unknown task status `{name}` in the database"
            )));
        }
    })
}

/// The outcome as stored.
pub(crate) fn encode_outcome(outcome: &Outcome) -> Result<String, StoreError> {
    to_json(&match outcome {
        Outcome::Completed(result) => serde_json::json!({ "completed": result }),
        Outcome::Failed(error) => serde_json::json!({ "failed": error }),
        Outcome::Cancelled => serde_json::json!("cancelled"),
    })
}

fn parse_outcome(value: Value) -> Result<Outcome, StoreError> {
    let unreadable = || corrupt("an unreadable task outcome in the database".into());
    match value {
        Value::String(s) if s == "cancelled" => Ok(Outcome::Cancelled),
        Value::Object(mut map) => match (map.remove("completed"), map.remove("failed")) {
            (Some(Value::Object(result)), _) => Ok(Outcome::Completed(result)),
            (_, Some(Value::Object(error))) => Ok(Outcome::Failed(error)),
            _ => Err(unreadable()),
        },
        _ => Err(unreadable()),
    }
}

/// A JSON column.
pub(crate) fn json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| corrupt(format!("unreadable JSON in a task row: {e}")))
}

/// A value as a JSON column.
pub(crate) fn to_json(value: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| corrupt(format!("a task field could not be written as JSON: {e}")))
}

/// Milliseconds as a column (saturating).
pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A column as milliseconds (a negative one as 0).
pub(crate) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// Data the store holds but cannot read (or write): not retryable.
fn corrupt(message: String) -> StoreError {
    StoreError::Backend(BackendError::new(message))
}
