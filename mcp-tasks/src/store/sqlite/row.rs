//! The task row of [`SqliteStore`](super::SqliteStore), decoded and written, and the
//! changes every operation shares (due expiry, the terminal write, the insert).

use std::sync::Arc;

use rmcp::model::{InputRequests, InputResponses, TaskStatus};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

use super::{
    NEVER, backend, backend_msg,
    writer::{Effect, Tx},
};
use crate::{
    errors,
    store::{NewTask, Outcome, StoreError, TaskSnapshot, new_task_millis, new_task_snapshot},
};

/// A row of `tasks`, decoded.
pub(super) struct Row {
    pub(super) snapshot: TaskSnapshot,
    pub(super) used_keys: Vec<String>,
    pub(super) answers: InputResponses,
    pub(super) deadline_ms: Option<u64>,
    pub(super) purge_at_ms: Option<u64>,
}

pub(super) const SELECT_TASK: &str = "SELECT id, owner, tool, status, status_message, created_at_ms, \
    last_updated_at_ms, ttl_ms, poll_interval_ms, input_requests, used_keys, answers, outcome, \
    cancel_requested, deadline_ms, purge_at_ms FROM tasks WHERE id = ?1";

pub(super) fn parse_status(text: &str) -> Result<TaskStatus, StoreError> {
    crate::store::status_from_name(text)
        .ok_or_else(|| backend_msg(format!("unknown task status `{text}` in the database")))
}

pub(super) fn json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(backend)
}

pub(super) fn to_json(value: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(backend)
}

pub(super) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(super) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

pub(super) fn outcome_json(outcome: &Outcome) -> Value {
    match outcome {
        Outcome::Completed(result) => serde_json::json!({ "completed": result }),
        Outcome::Failed(error) => serde_json::json!({ "failed": error }),
        Outcome::Cancelled => serde_json::json!("cancelled"),
    }
}

pub(super) fn parse_outcome(value: Value) -> Result<Outcome, StoreError> {
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

pub(super) fn load(conn: &Connection, id: &str) -> Result<Option<Row>, StoreError> {
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
pub(super) fn due(row: &Row, now: u64) -> bool {
    match row.purge_at_ms {
        Some(purge) => now >= purge,
        None => row.deadline_ms.is_some_and(|d| now >= d) && !row.snapshot.status.is_terminal(),
    }
}

/// Applies what is due to task `id` at the change's time; returns the row as it then is
/// (`None` when purged), and whether it just expired.
pub(super) fn load_live(tx: &mut Tx<'_>, id: &str) -> Result<(Option<Row>, bool), StoreError> {
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
pub(super) use touch;

/// Runs one statement through the connection's statement cache.
pub(super) fn exec(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// Writes a terminal state: outcome, its status message, purge time, and drops what only a
/// running task needs.
pub(super) fn end(
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

pub(super) fn live_row(tx: &mut Tx<'_>, id: &str) -> Result<Row, StoreError> {
    let row = load_live(tx, id)?.0.ok_or(StoreError::NotFound)?;
    if row.snapshot.status.is_terminal() {
        return Err(StoreError::Terminal(row.snapshot.status));
    }
    Ok(row)
}

/// Inserts a new task's row (store invariant 1): refused at capacity, or when the id is taken.
pub(super) fn insert_task(
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
