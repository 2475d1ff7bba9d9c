//! [`TaskStore`] for [`SqliteStore`]: each operation one change in the writer's batch.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::{InputRequest, InputResponses, JsonObject};
use rusqlite::{OptionalExtension, params};

use super::{
    SqliteStore, backend,
    row::{
        due, end, exec, insert_task, json, live_row, load, load_live, to_i64, to_json, to_u64,
        touch,
    },
    writer::{Effect, Tx},
};
use crate::store::{NewTask, Outcome, Recovery, Step, StoreError, TaskSnapshot, TaskStore};

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
