//! The task row of [`SqliteStore`](super::SqliteStore): read and written with the shared
//! codec ([`codec`](crate::store::codec)), changed only through the state machine
//! ([`record`](crate::store::record)).

use std::sync::{Arc, LazyLock};

use rusqlite::{Connection, ToSql, params};

use super::{
    backend, exec,
    writer::{Effect, Tx},
};
use crate::store::{
    NewTask, Step, StoreError, TaskSnapshot,
    codec::{self, Columns, NewRow, TaskRow, task_columns},
    record::{self, Change, Due},
    row::{ORIGIN_COLUMNS, PENDING_COLUMNS},
};

const SELECT_TASK: &str = concat!("SELECT ", task_columns!(), " FROM tasks WHERE id = ?1");

/// Writes back every field a change can touch ([`codec::Encoded`]): its own as `?2..?8`,
/// then its pending's, in [`PENDING_COLUMNS`]' order.
static WRITE_BACK: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE tasks SET status = ?2, status_message = ?3, last_updated_at_ms = ?4, \
         outcome = ?5, cancel_requested = ?6, purge_at_ms = ?7, parked_until_ms = ?8, \
         {}{} WHERE id = ?1",
        codec::placeholders('?', 9, &PENDING_COLUMNS, true),
        codec::clear_origin(&format!(
            "?7 IS NOT NULL AND {}",
            codec::drops_history("?2")
        )),
    )
});

/// A row of a SQLite result, for the codec.
pub(super) struct SqliteRow<'a, 'stmt>(pub(super) &'a rusqlite::Row<'stmt>);

impl Columns for SqliteRow<'_, '_> {
    fn text(&self, index: usize) -> Result<String, StoreError> {
        self.0.get(index).map_err(backend)
    }

    fn opt_text(&self, index: usize) -> Result<Option<String>, StoreError> {
        self.0.get(index).map_err(backend)
    }

    fn int(&self, index: usize) -> Result<i64, StoreError> {
        self.0.get(index).map_err(backend)
    }

    fn opt_int(&self, index: usize) -> Result<Option<i64>, StoreError> {
        self.0.get(index).map_err(backend)
    }

    fn flag(&self, index: usize) -> Result<bool, StoreError> {
        self.0.get(index).map_err(backend)
    }
}

/// Every row `statement` answers for `params`, each read by `read`.
pub(super) fn all_rows<T>(
    statement: &mut rusqlite::Statement<'_>,
    params: impl rusqlite::Params,
    read: impl Fn(&SqliteRow<'_, '_>) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut rows = statement.query(params).map_err(backend)?;
    let mut found = Vec::new();
    while let Some(row) = rows.next().map_err(backend)? {
        found.push(read(&SqliteRow(row))?);
    }
    Ok(found)
}

/// Several tasks (`?1`: a JSON array of ids), each row as [`SELECT_TASK`] reads it.
const SELECT_TASKS: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks WHERE id IN (SELECT value FROM json_each(?1))"
);

/// The tasks of `ids` as stored, in one query; an id with no task has no entry.
pub(super) fn load_many(
    conn: &Connection,
    ids: &[Arc<str>],
) -> Result<std::collections::HashMap<Arc<str>, TaskRow>, StoreError> {
    let ids = serde_json::Value::from(ids.iter().map(|id| &**id).collect::<Vec<_>>()).to_string();
    let mut statement = conn.prepare_cached(SELECT_TASKS).map_err(backend)?;
    let tasks = all_rows(&mut statement, params![ids], |row| TaskRow::decode(row))?;
    Ok(tasks
        .into_iter()
        .map(|task| (task.id.clone(), task))
        .collect())
}

/// The first row that `sql` (through the statement cache) answers for `params`, read by
/// `read`; `None` when there is none.
pub(super) fn first_row<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    read: impl FnOnce(&SqliteRow<'_, '_>) -> Result<T, StoreError>,
) -> Result<Option<T>, StoreError> {
    let mut statement = conn.prepare_cached(sql).map_err(backend)?;
    let mut rows = statement.query(params).map_err(backend)?;
    let row = rows.next().map_err(backend)?;
    row.map(|row| read(&SqliteRow(row))).transpose()
}

/// Task `id` as stored, `None` when there is none.
pub(super) fn load(conn: &Connection, id: &str) -> Result<Option<TaskRow>, StoreError> {
    first_row(conn, SELECT_TASK, params![id], |row| TaskRow::decode(row))
}

/// Removes the tasks `cond` picks (a condition on `tasks`, its parameters `params`) with their
/// steps and idempotency keys, those first; how many task rows went.
pub(super) fn delete_tasks(
    conn: &Connection,
    cond: &str,
    params: &[&dyn ToSql],
) -> Result<usize, StoreError> {
    for table in ["steps", "idempotency"] {
        let sql =
            format!("DELETE FROM {table} WHERE task_id IN (SELECT id FROM tasks WHERE {cond})");
        exec(conn, &sql, params).map_err(backend)?;
    }
    exec(conn, &format!("DELETE FROM tasks WHERE {cond}"), params).map_err(backend)
}

/// The steps of task `id`, in order.
pub(super) fn steps(conn: &Connection, id: &str) -> Result<Vec<Step>, StoreError> {
    let sql = "SELECT seq, name, value FROM steps WHERE task_id = ?1 ORDER BY seq";
    let mut select = conn.prepare_cached(sql).map_err(backend)?;
    all_rows(&mut select, params![id], |row| codec::step(row, 0))
}

/// Applies what is due to task `id` at the change's time; returns the row as it then is
/// (`None` when purged), and whether it just expired.
pub(super) fn load_live(tx: &mut Tx<'_>, id: &str) -> Result<(Option<TaskRow>, bool), StoreError> {
    let Some(mut task) = load(tx.conn, id)? else {
        return Ok((None, false));
    };
    match record::apply_due(&mut task, tx.now, tx.retention) {
        Due::Nothing => Ok((Some(task), false)),
        Due::Purge => {
            let purged = delete_tasks(tx.conn, "id = ?1", params![id])?;
            tx.effects.push(Effect::Purged(purged));
            Ok((None, false))
        }
        Due::Expiry => {
            persist(tx, &task, Change::ENDED)?;
            Ok((Some(task), true))
        }
    }
}

/// One change of task `id`: load it (applying what is due), run the transition, write back
/// what it changed. A refusal still keeps the expiry it found due.
pub(super) fn modify<R>(
    tx: &mut Tx<'_>,
    id: &str,
    transition: impl FnOnce(&mut TaskRow, u64) -> Result<(R, Change), StoreError>,
) -> Result<R, StoreError> {
    let mut task = load_live(tx, id)?.0.ok_or(StoreError::NotFound)?;
    let (result, change) = transition(&mut task, tx.now)?;
    persist(tx, &task, change)?;
    Ok(result)
}

/// Writes what `change` says changed: the row's changeable fields; for a task that ended,
/// drops its steps and takes it out of the live set.
fn persist(tx: &mut Tx<'_>, task: &TaskRow, change: Change) -> Result<(), StoreError> {
    if !change.changed {
        return Ok(());
    }
    let row = task.encode()?;
    let head = params![
        &*task.id,
        row.status,
        row.status_message,
        row.last_updated_at_ms,
        row.outcome,
        row.cancel_requested,
        row.purge_at_ms,
        row.parked_until_ms,
    ];
    let pending = row.pending.iter().map(|column| column as &dyn ToSql);
    let values: Vec<&dyn ToSql> = head.iter().copied().chain(pending).collect();
    exec(tx.conn, &WRITE_BACK, &*values).map_err(backend)?;
    if change.ended {
        if !record::keeps_history(task.state.status) {
            let sql = "DELETE FROM steps WHERE task_id = ?1";
            exec(tx.conn, sql, params![&*task.id]).map_err(backend)?;
        }
        tx.effects.push(Effect::Ended {
            id: Arc::clone(&task.id),
            owner: Arc::clone(&task.owner),
        });
    }
    Ok(())
}

/// The insert of a new row: its own columns as `?1..?9`, then its pending's and its
/// origin's, in [`PENDING_COLUMNS`]' and [`ORIGIN_COLUMNS`]' order.
static INSERT: LazyLock<String> = LazyLock::new(|| {
    let (pending, origin) = (10, 10 + PENDING_COLUMNS.len());
    format!(
        "INSERT INTO tasks (id, owner, tool, status, status_message, created_at_ms, \
         last_updated_at_ms, ttl_ms, poll_interval_ms, deadline_ms, outcome, \
         cancel_requested, purge_at_ms, {}, {}) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8, ?9, NULL, 0, NULL, {}, {}) \
         ON CONFLICT (id) DO NOTHING",
        PENDING_COLUMNS.join(", "),
        ORIGIN_COLUMNS.join(", "),
        codec::placeholders('?', pending, &PENDING_COLUMNS, false),
        codec::placeholders('?', origin, &ORIGIN_COLUMNS, false),
    )
});

/// Inserts a new task's row (store invariant 1): refused at the store's limit, or when the id
/// is taken.
pub(super) fn insert_task(
    tx: &mut Tx<'_>,
    task: &NewTask,
    max_tasks: usize,
) -> Result<TaskSnapshot, StoreError> {
    if tx.live.rows >= max_tasks {
        return Err(StoreError::Full { max_tasks });
    }
    let row = NewRow::encode(task, tx.now)?;
    let head = params![
        row.id,
        row.owner,
        row.tool,
        row.status,
        row.status_message,
        row.created_at_ms,
        row.ttl_ms,
        row.poll_interval_ms,
        row.deadline_ms,
    ];
    let pending = row.pending.iter().map(|column| column as &dyn ToSql);
    let origin = row.origin.iter().map(|column| column as &dyn ToSql);
    let values: Vec<&dyn ToSql> = head.iter().copied().chain(pending).chain(origin).collect();
    if exec(tx.conn, &INSERT, &*values).map_err(backend)? == 0 {
        return Err(StoreError::DuplicateId);
    }
    tx.effects.push(Effect::Created {
        id: Arc::clone(&task.id),
        deadline: row.deadline_ms.map(codec::to_u64),
    });
    Ok(codec::created_snapshot(task, tx.now))
}
