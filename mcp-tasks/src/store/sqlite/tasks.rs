//! [`TaskStore`] for [`SqliteStore`]: each operation one change in the writer's batch, its
//! decision made by the state machine ([`record`]).

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::InputResponses;
use rusqlite::params;

use super::{
    SqliteStore, backend, exec,
    row::{
        all_rows, delete_tasks, first_row, insert_task, load, load_live, load_many, modify, steps,
    },
    writer::{Effect, Tx},
};
use crate::store::{
    Created, Lease, NewTask, Recovery, StoreError, TaskSnapshot, TaskStore, Transition,
    codec::{self, Columns, recovery_columns, to_i64},
    record::{self, Due},
    trim,
};

#[async_trait]
impl TaskStore for SqliteStore {
    async fn create(&self, mut task: NewTask) -> Result<Created, StoreError> {
        self.trim.note(&task);
        let max_tasks = self.max_tasks;
        let Some(key) = task.idempotency_key.take() else {
            let insert = move |tx: &mut Tx<'_>| insert_task(tx, &task, max_tasks).map(Created::New);
            return self.submit(false, insert).await;
        };
        // Invariant 9. The one writer runs creates one after the other, so two retries that
        // race each other find each other here; the savepoint undoes the task's row when its
        // key cannot be written.
        self.write(move |tx: &mut Tx<'_>| {
            let sql = "SELECT task_id FROM idempotency WHERE owner = ?1 AND tool = ?2 AND key = ?3";
            let keyed = params![&*task.owner, &*task.tool, &*key];
            let first = first_row(tx.conn, sql, keyed, |row| row.text(0))?;
            // Expiry or purge that is due applies first: a purged task frees its key.
            if let Some(first) = first
                && let (Some(first), _) = load_live(tx, &first)?
                && record::is_retry_of(&first.state, tx.now)
            {
                return Ok(Created::Existing(first.into_snapshot()));
            }
            let snapshot = insert_task(tx, &task, max_tasks)?;
            // Past the first task's TTL the key names the new call's task.
            exec(
                tx.conn,
                "INSERT OR REPLACE INTO idempotency (owner, tool, key, task_id) \
                     VALUES (?1, ?2, ?3, ?4)",
                params![&*task.owner, &*task.tool, &*key, &*task.id],
            )
            .map_err(backend)?;
            Ok(Created::New(snapshot))
        })
        .await
    }

    async fn get(&self, id: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        let now = self.clock.now_ms();
        let key = id.to_owned();
        match self.read(move |conn| load(conn, &key)).await? {
            Some(row) if record::due(&row.state, now) != Due::Nothing => {
                let id = id.to_owned();
                self.write(move |tx: &mut Tx<'_>| {
                    Ok(load_live(tx, &id)?.0.map(codec::TaskRow::into_snapshot))
                })
                .await
            }
            row => Ok(row.map(codec::TaskRow::into_snapshot)),
        }
    }

    async fn get_many(&self, ids: &[Arc<str>]) -> Result<Vec<Option<TaskSnapshot>>, StoreError> {
        let now = self.clock.now_ms();
        let keys = ids.to_vec();
        let rows = self.read(move |conn| load_many(conn, &keys)).await?;
        let mut tasks = Vec::with_capacity(ids.len());
        for id in ids {
            tasks.push(match rows.get(id) {
                // Expiry or purge is due: the one-task read applies it (rare).
                Some(row) if record::due(&row.state, now) != Due::Nothing => self.get(id).await?,
                row => row.cloned().map(codec::TaskRow::into_snapshot),
            });
        }
        Ok(tasks)
    }

    async fn apply(
        &self,
        id: &str,
        _fence: Option<&Lease>,
        transition: Transition,
    ) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(move |tx: &mut Tx<'_>| {
            let applied = modify(tx, &id, |task, now| {
                let (change, step) = record::apply(task, now, transition)?;
                Ok((step, change))
            })?;
            let Some(step) = applied else {
                return Ok(());
            };
            let sql =
                "INSERT OR REPLACE INTO steps (task_id, seq, name, value) VALUES (?1, ?2, ?3, ?4)";
            let (seq, value) = (to_i64(step.seq), codec::to_json(&step.value)?);
            exec(tx.conn, sql, params![id, seq, step.name, value]).map_err(backend)?;
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
            modify(tx, &id, |task, now| {
                Ok(record::deliver_input(task, now, responses))
            })
        })
        .await
    }

    async fn request_cancel(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(move |tx: &mut Tx<'_>| {
            modify(tx, &id, |task, now| {
                Ok(((), record::request_cancel(task, now)))
            })
        })
        .await
    }

    async fn recoverable(&self) -> Result<Vec<Recovery>, StoreError> {
        self.read(|conn| {
            let mut statement = conn
                .prepare(concat!(
                    "SELECT ",
                    recovery_columns!(),
                    " FROM tasks WHERE id >= (SELECT value FROM meta WHERE name = 'live_from') \
                     AND purge_at_ms IS NULL AND parked_until_ms IS NULL"
                ))
                .map_err(backend)?;
            let mut found = all_rows(&mut statement, [], |row| codec::recovery(row, Vec::new()))?;
            for task in &mut found {
                task.steps = steps(conn, &task.id)?;
            }
            Ok(found)
        })
        .await
    }

    fn parks(&self) -> bool {
        true
    }

    async fn recovery(&self, id: &str) -> Result<Option<Recovery>, StoreError> {
        // Read through `get`, which applies a due expiry first.
        match self.get(id).await? {
            Some(task) if !task.status.is_terminal() => {}
            _ => return Ok(None),
        }
        let key = id.to_owned();
        self.read(move |conn| recovery_of(conn, &key, false)).await
    }

    async fn wake(&self, only: Option<&str>, limit: usize) -> Result<Vec<Recovery>, StoreError> {
        let only = only.map(str::to_owned);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.write(move |tx: &mut Tx<'_>| {
            let sql = "SELECT id FROM tasks WHERE parked_until_ms <= ?1 \
                       AND (?2 IS NULL OR id = ?2) ORDER BY parked_until_ms LIMIT ?3";
            let mut select = tx.conn.prepare_cached(sql).map_err(backend)?;
            let due = all_rows(&mut select, params![to_i64(tx.now), only, limit], |r| {
                r.text(0)
            })?;
            let mut woken = Vec::with_capacity(due.len());
            for id in due {
                let taken = modify(tx, &id, |task, now| {
                    if !record::woken(&task.state, now) {
                        return Ok((None, record::Change::NONE));
                    }
                    let timer = record::unpark(&mut task.state);
                    Ok((Some(timer), record::Change::CHANGED))
                })?;
                if let Some(timer) = taken
                    && let Some(mut recovery) = recovery_of(tx.conn, &id, true)?
                {
                    recovery.woken_by_timer_ms = timer;
                    woken.push(recovery);
                }
            }
            Ok(woken)
        })
        .await
    }

    async fn next_wake(&self) -> Result<Option<u64>, StoreError> {
        self.read(|conn| {
            let sql = "SELECT min(parked_until_ms) FROM tasks WHERE parked_until_ms < ?1";
            let parked = params![to_i64(crate::store::row::PARKED_FOR_ANSWER)];
            let min = first_row(conn, sql, parked, |r| r.opt_int(0))?;
            Ok(min.flatten().map(codec::to_u64))
        })
        .await
    }

    async fn parked_count(&self) -> Result<Option<u64>, StoreError> {
        self.read(|conn| {
            let sql = "SELECT count(*) FROM tasks WHERE parked_until_ms IS NOT NULL";
            Ok(first_row(conn, sql, [], |r| r.int(0))?.map(codec::to_u64))
        })
        .await
    }

    async fn parked_owners(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(Arc<str>, Arc<str>)>, StoreError> {
        // Every id sorts after the empty string; `id > ?1` alone lets the primary key lead
        // (an `?1 IS NULL OR` would scan the table for every page).
        let after = after.unwrap_or_default().to_owned();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn| {
            let sql = "SELECT id, owner FROM tasks WHERE parked_until_ms IS NOT NULL \
                       AND id > ?1 ORDER BY id LIMIT ?2";
            let mut select = conn.prepare_cached(sql).map_err(backend)?;
            all_rows(&mut select, params![after, limit], |r| {
                Ok((Arc::from(r.text(0)?), Arc::from(r.text(1)?)))
            })
        })
        .await
    }

    async fn stored_answers(&self, id: &str) -> Result<InputResponses, StoreError> {
        let key = id.to_owned();
        let row = self.read(move |conn| load(conn, &key)).await?;
        Ok(row.ok_or(StoreError::NotFound)?.pending.answers)
    }

    fn admin(&self) -> Option<&dyn crate::store::AdminStore> {
        Some(self)
    }

    fn set_max_finished_per_owner(&self, tasks: usize) {
        self.trim.bound(tasks);
    }

    async fn expire_due(&self) -> Result<Vec<Arc<str>>, StoreError> {
        let mut reported = self.unreported.take();
        let swept = async {
            reported.extend(self.write(expire).await?);
            let mut owners = self.trim.take();
            let pass = self.trim.pass();
            if owners.is_empty() && pass.is_none() {
                return Ok(());
            }
            let at = pass.clone();
            let (next, again) = self
                .write(move |tx: &mut Tx<'_>| {
                    let mut next = None;
                    if let Some(pass) = &pass {
                        let (over, after) = pass.page(pass_page(tx.conn, pass)?);
                        owners.extend(over);
                        next = Some(after);
                    }
                    Ok((next, trim_owners(tx, owners)?))
                })
                .await?;
            for (owner, keep) in again {
                // It had more past its bound than one trim removes.
                self.trim.again(&owner, keep, usize::MAX);
            }
            if let (Some(at), Some(next)) = (at, next) {
                self.trim.passed(&at, next);
            }
            Ok::<_, StoreError>(())
        }
        .await;
        if let Err(error) = swept {
            // What it expired (or had to report) is reported by the next sweep instead.
            self.unreported.keep(reported);
            return Err(error);
        }
        Ok(reported)
    }
}

/// Applies every expiry that is due: the live tasks past their TTL fail (their ids are
/// returned), the finished ones past their purge time go.
fn expire(tx: &mut Tx<'_>) -> Result<Vec<Arc<str>>, StoreError> {
    // Live tasks are not indexed in the file: the writer holds their deadlines.
    let due = tx.live.due(tx.now);
    let mut failed = Vec::with_capacity(due.len());
    for id in due {
        if load_live(tx, &id)?.1 {
            failed.push(id);
        }
    }
    let purged = delete_tasks(tx.conn, "purge_at_ms <= ?1", params![to_i64(tx.now)])?;
    tx.effects.push(Effect::Purged(purged));
    Ok(failed)
}

/// Removes, for each `(owner, keep)`, the owner's finished tasks past its `keep` newest (by
/// creation), oldest first and at most [`trim::TRIM_ROWS`] of them, with their steps and
/// keys: one index range per owner (`tasks_owner_finished`). Returns the owners that may
/// have more past their bound (as many went as could), for the next sweep.
fn trim_owners(tx: &mut Tx<'_>, owners: trim::ToTrim) -> Result<trim::ToTrim, StoreError> {
    let (mut removed, mut again) = (0, Vec::new());
    for (owner, keep) in owners {
        let gone = delete_tasks(
            tx.conn,
            "id IN (SELECT id FROM (SELECT id, created_at_ms FROM tasks \
             WHERE owner = ?1 AND purge_at_ms IS NOT NULL \
             ORDER BY created_at_ms DESC, id DESC LIMIT -1 OFFSET ?2) \
             ORDER BY created_at_ms, id LIMIT ?3)",
            params![&*owner, to_i64(keep as u64), to_i64(trim::TRIM_ROWS)],
        )?;
        removed += gone;
        if gone as u64 >= trim::TRIM_ROWS {
            again.push((owner, keep));
        }
    }
    tx.effects.push(Effect::Purged(removed));
    Ok(again)
}

/// One page of the pass over every owner ([`trim::Pass`]): the owners of the next
/// [`trim::PASS_ROWS`] finished tasks after the pass's last owner, in owner order, each with
/// how many of them are its, read from the owner index (`tasks_owner_finished`).
fn pass_page(
    conn: &rusqlite::Connection,
    pass: &trim::Pass,
) -> Result<Vec<(Arc<str>, u64)>, StoreError> {
    let rows = to_i64(trim::PASS_ROWS);
    // An owner may be the empty string: the first page names no owner to start after.
    let (after, params): (&str, &[&dyn rusqlite::ToSql]) = match &pass.after {
        Some(owner) => (" AND owner > ?2", &[&rows, owner]),
        None => ("", &[&rows]),
    };
    let sql = format!(
        "SELECT owner, count(*) FROM (SELECT owner FROM tasks \
         WHERE purge_at_ms IS NOT NULL{after} ORDER BY owner LIMIT ?1) \
         GROUP BY owner ORDER BY owner"
    );
    let mut select = conn.prepare_cached(&sql).map_err(backend)?;
    all_rows(&mut select, params, |r| {
        Ok((Arc::from(r.text(0)?), codec::to_u64(r.int(1)?)))
    })
}

/// What a replay of live task `id` needs, with its steps, marked `woken` or not.
fn recovery_of(
    conn: &rusqlite::Connection,
    id: &str,
    woken: bool,
) -> Result<Option<Recovery>, StoreError> {
    let sql = concat!("SELECT ", recovery_columns!(), " FROM tasks WHERE id = ?1");
    let found = first_row(conn, sql, params![id], |row| {
        codec::recovery(row, steps(conn, id)?)
    })?;
    Ok(found.map(|recovery| Recovery { woken, ..recovery }))
}
