//! The statements of [`PostgresStore`](super::PostgresStore) and the task row they read and
//! write, decoded.

use std::sync::Arc;

use rmcp::model::{InputRequests, InputResponses, JsonObject, TaskStatus};
use serde_json::Value;

use super::{Outcome, PgError, StoreError, TaskSnapshot};
use crate::errors;

/// The store's clock reading, in epoch milliseconds, on the database server: the one clock
/// all instances share, for lease deadlines.
macro_rules! db_now_ms {
    () => {
        "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
    };
}
pub(super) use db_now_ms;

/// The columns [`Row::decode`] reads, in its order.
macro_rules! row_columns {
    () => {
        "id, owner, tool, status, status_message, created_at_ms, last_updated_at_ms, ttl_ms, \
         poll_interval_ms, input_requests, used_keys, answers, answer_seq, outcome, \
         cancel_requested, deadline_ms, purge_at_ms, runner, epoch"
    };
}

/// One task, for a read.
pub(super) const SELECT: &str = concat!("SELECT ", row_columns!(), " FROM tasks WHERE id = $1");

/// Several tasks (`$1`: an array of ids), each row as [`SELECT`] reads it.
pub(super) const SELECT_ANY: &str =
    concat!("SELECT ", row_columns!(), " FROM tasks WHERE id = ANY($1)");

/// One task, locked for a change.
pub(super) const SELECT_FOR_UPDATE: &str = concat!(
    "SELECT ",
    row_columns!(),
    " FROM tasks WHERE id = $1 FOR UPDATE"
);

/// Writes back every field a change can touch.
pub(super) const WRITE_BACK: &str = "UPDATE tasks SET status = $2, status_message = $3, \
    last_updated_at_ms = $4, input_requests = $5, used_keys = $6, answers = $7, \
    answer_seq = $8, outcome = $9, cancel_requested = $10, purge_at_ms = $11 WHERE id = $1";

/// `purge_at_ms` of a finished task that is never purged (no TTL). NULL means "live".
pub(super) const NEVER: i64 = i64::MAX;

/// The `statusMessage` of an expired task.
pub(super) const EXPIRED_MESSAGE: &str = "task expired: its ttl elapsed before it finished";

/// A row of `tasks`, decoded.
#[derive(Debug)]
pub(super) struct Row {
    pub(super) snapshot: TaskSnapshot,
    pub(super) used_keys: Vec<String>,
    pub(super) answers: InputResponses,
    pub(super) answer_seq: i64,
    pub(super) deadline_ms: Option<u64>,
    pub(super) purge_at_ms: Option<u64>,
    pub(super) runner: Option<String>,
    pub(super) epoch: u64,
}

impl Row {
    /// Decodes a row selected with [`SELECT`] or [`SELECT_FOR_UPDATE`].
    pub(super) fn decode(row: &tokio_postgres::Row) -> Result<Self, StoreError> {
        let get_err = |e: tokio_postgres::Error| PgError::owned("an unreadable task row", e);
        let text = |i: usize| row.try_get::<_, String>(i).map_err(get_err);
        let opt_text = |i: usize| row.try_get::<_, Option<String>>(i).map_err(get_err);
        let int = |i: usize| row.try_get::<_, i64>(i).map_err(get_err);
        let opt_int = |i: usize| row.try_get::<_, Option<i64>>(i).map_err(get_err);
        let outcome = opt_text(13)?
            .map(|o| json::<Value>(&o).and_then(parse_outcome))
            .transpose()?;
        Ok(Self {
            snapshot: TaskSnapshot {
                id: Arc::from(text(0)?),
                owner: Arc::from(text(1)?),
                tool: Arc::from(text(2)?),
                status: parse_status(&text(3)?)?,
                status_message: opt_text(4)?,
                created_at_ms: to_u64(int(5)?),
                last_updated_at_ms: to_u64(int(6)?),
                ttl_ms: opt_int(7)?.map(to_u64),
                poll_interval_ms: opt_int(8)?.map(to_u64),
                input_requests: json::<InputRequests>(&text(9)?)?,
                outcome,
                cancel_requested: row.try_get::<_, bool>(14).map_err(get_err)?,
            },
            used_keys: json(&text(10)?)?,
            answers: json(&text(11)?)?,
            answer_seq: int(12)?,
            deadline_ms: opt_int(15)?.map(to_u64),
            purge_at_ms: opt_int(16)?.map(to_u64),
            runner: opt_text(17)?,
            epoch: to_u64(int(18)?),
        })
    }

    /// Whether, at `now`, the task is due to be purged.
    pub(super) fn purge_due(&self, now: u64) -> bool {
        self.purge_at_ms.is_some_and(|purge| now >= purge)
    }

    /// Whether, at `now`, the live task is past its TTL.
    pub(super) fn expiry_due(&self, now: u64) -> bool {
        self.purge_at_ms.is_none()
            && !self.snapshot.status.is_terminal()
            && self.deadline_ms.is_some_and(|deadline| now >= deadline)
    }

    /// Moves `lastUpdatedAt` to `now`, and always forwards (R57).
    pub(super) fn touch(&mut self, now: u64) {
        self.snapshot.last_updated_at_ms = now.max(self.snapshot.last_updated_at_ms + 1);
    }

    /// The terminal state: outcome, purge time; drops what only a running task needs.
    pub(super) fn end(&mut self, outcome: Outcome, now: u64, purge_at: Option<u64>) {
        self.snapshot.status = outcome.status();
        self.snapshot.outcome = Some(outcome);
        self.snapshot.input_requests = InputRequests::new();
        self.used_keys.clear();
        self.answers = InputResponses::new();
        self.purge_at_ms = Some(purge_at.map_or(to_u64(NEVER), |p| p.min(to_u64(NEVER))));
        self.touch(now);
    }

    /// Expires the live task (R20): `failed` with "task expired", purged after `retention`.
    pub(super) fn expire(&mut self, now: u64, retention: u64) {
        let deadline = self.deadline_ms.unwrap_or(now);
        self.snapshot.status_message = Some(EXPIRED_MESSAGE.into());
        self.end(
            Outcome::Failed(errors::to_object(&errors::task_expired())),
            now,
            Some(deadline.saturating_add(retention)),
        );
    }

    /// Writes the changeable fields back ([`WRITE_BACK`]).
    pub(super) async fn write_back(&self, tx: &super::pool::Tx) -> Result<(), StoreError> {
        let s = &self.snapshot;
        let outcome = s
            .outcome
            .as_ref()
            .map(|o| to_json(&outcome_json(o)))
            .transpose()?;
        tx.execute(
            WRITE_BACK,
            &[
                &&*s.id,
                &crate::store::status_name(s.status),
                &s.status_message,
                &to_i64(s.last_updated_at_ms),
                &to_json(&s.input_requests)?,
                &to_json(&self.used_keys)?,
                &to_json(&self.answers)?,
                &self.answer_seq,
                &outcome,
                &s.cancel_requested,
                &self.purge_at_ms.map(to_i64),
            ],
            "could not update the task",
        )
        .await
        .map(drop)
    }
}

fn parse_status(text: &str) -> Result<TaskStatus, StoreError> {
    crate::store::status_from_name(text)
        .ok_or_else(|| PgError::msg(format!("unknown task status `{text}` in the database")))
}

pub(super) fn json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text)
        .map_err(|e| PgError::msg(format!("unreadable JSON in a task row: {e}")))
}

pub(super) fn to_json(value: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| PgError::msg(format!("a task field could not be written as JSON: {e}")))
}

pub(super) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(super) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// The outcome as stored (the SQLite store's encoding).
pub(super) fn outcome_json(outcome: &Outcome) -> Value {
    match outcome {
        Outcome::Completed(result) => serde_json::json!({ "completed": result }),
        Outcome::Failed(error) => serde_json::json!({ "failed": error }),
        Outcome::Cancelled => serde_json::json!("cancelled"),
    }
}

fn parse_outcome(value: Value) -> Result<Outcome, StoreError> {
    let unreadable = || PgError::msg("an unreadable task outcome in the database".into());
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

/// The JSON object stored as text in a column.
pub(super) fn object(text: &str) -> Result<JsonObject, StoreError> {
    json(text)
}
