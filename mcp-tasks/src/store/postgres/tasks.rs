//! The task operations of [`PostgresStore`]: one change of one task per transaction
//! ([`PostgresStore::modify`]), creates through the batch writers, the expiry sweep.

/// What a change did besides its row.
#[derive(Default)]
pub(super) struct Effects {
    /// The row changed: write it back.
    dirty: bool,
    /// The task ended: its steps go.
    ended: bool,
    /// A step to store.
    step: Option<Step>,
    /// A notification to send with the commit.
    notify: Option<String>,
}

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::{InputRequest, InputResponses, TaskStatus};
use tokio::sync::oneshot;

use super::{
    PgError, PostgresStore, SWEEP_BATCH, batch,
    pool::{Tx, read},
    row::{self, EXPIRED_MESSAGE, Row, json, object, outcome_json, to_i64, to_json, to_u64},
};
use crate::{
    errors,
    store::{
        ClusterStore, Lease, NewTask, Outcome, Recovery, Step, StoreError, TaskSnapshot, TaskStore,
        new_task_snapshot,
    },
};

impl PostgresStore {
    /// One change of one task, in one transaction: lock the row, apply due expiry, check the
    /// lease (when fenced), run `change`, write back, notify, commit. The expiry is committed
    /// even when `change` refuses.
    pub(super) async fn modify<R>(
        &self,
        id: &str,
        fence: Option<&Lease>,
        change: impl FnOnce(&mut Row, &mut Effects, u64) -> Result<R, StoreError> + Send,
    ) -> Result<R, StoreError> {
        let now = self.clock.now_ms();
        let tx = Tx::begin(&self.pool).await?;
        let rows = tx
            .query(row::SELECT_FOR_UPDATE, &[&id], "could not read the task")
            .await?;
        let Some(raw) = rows.first() else {
            tx.rollback().await;
            return Err(StoreError::NotFound);
        };
        let mut row = Row::decode(raw)?;
        if row.purge_due(now) {
            tx.execute(
                "DELETE FROM tasks WHERE id = $1",
                &[&id],
                "could not purge the task",
            )
            .await?;
            tx.commit().await?;
            return Err(StoreError::NotFound);
        }
        let mut effects = Effects::default();
        if row.expiry_due(now) {
            row.expire(now, self.retention_ms());
            effects.dirty = true;
            effects.ended = true;
        }
        let result = match fence {
            Some(lease)
                if lease.epoch != row.epoch || row.runner.as_deref() != Some(&*lease.instance) =>
            {
                Err(StoreError::Fenced {
                    held: Some(lease.epoch),
                    current: row.epoch,
                })
            }
            _ => change(&mut row, &mut effects, now),
        };
        if result.is_err() {
            // Only the expiry (if any) is kept.
            effects.step = None;
            effects.notify = None;
        }
        if !effects.dirty && effects.step.is_none() && effects.notify.is_none() {
            tx.rollback().await;
            return result;
        }
        if effects.dirty {
            row.write_back(&tx).await?;
        }
        if effects.ended {
            tx.execute(
                "DELETE FROM steps WHERE task_id = $1",
                &[&id],
                "could not drop the finished task's steps",
            )
            .await?;
        }
        if let Some(step) = &effects.step {
            tx.execute(
                "INSERT INTO steps (task_id, seq, name, value) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (task_id, seq) DO UPDATE SET name = EXCLUDED.name, \
                 value = EXCLUDED.value",
                &[&id, &to_i64(step.seq), &step.name, &to_json(&step.value)?],
                "could not store the step",
            )
            .await?;
        }
        if let Some(payload) = &effects.notify {
            tx.execute(
                "SELECT pg_notify($1, $2)",
                &[&&*self.channel, payload],
                "could not notify the instance running the task",
            )
            .await?;
        }
        tx.commit().await?;
        result
    }

    /// The task's epoch, for an error that explains why a lease operation did nothing.
    pub(super) async fn explain(&self, id: &str, held: Option<u64>) -> StoreError {
        match self.get(id).await {
            Ok(None) => StoreError::NotFound,
            Ok(Some(task)) if task.status.is_terminal() => StoreError::Terminal(task.status),
            Ok(Some(_)) => match read(
                &self.pool,
                "SELECT epoch FROM tasks WHERE id = $1",
                &[&id],
                "could not read the task's epoch",
            )
            .await
            {
                Ok(rows) => rows
                    .first()
                    .map_or(StoreError::NotFound, |r| StoreError::Fenced {
                        held,
                        current: to_u64(r.get(0)),
                    }),
                Err(error) => error,
            },
            Err(error) => error,
        }
    }

    /// Resolves a create the batch skipped: an idempotent retry (the existing task), a
    /// duplicate id, or a key whose task is past its TTL (released, then created anew).
    pub(super) async fn create_conflicted(
        &self,
        mut task: NewTask,
        now: u64,
    ) -> Result<(), StoreError> {
        for _ in 0..3 {
            let tx = Tx::begin(&self.pool).await?;
            if let Some(key) = &task.idempotency_key {
                let rows = tx
                    .query(
                        "SELECT id FROM tasks WHERE owner = $1 AND tool = $2 \
                         AND idempotency_key = $3 FOR UPDATE",
                        &[&&*task.owner, &&*task.tool, &&**key],
                        "could not look up the idempotency key",
                    )
                    .await?;
                if let Some(existing) = rows.first() {
                    let existing: String = existing.get(0);
                    let found = tx
                        .query(
                            row::SELECT,
                            &[&existing],
                            "could not read the existing task",
                        )
                        .await?;
                    let found = found.first().map(Row::decode).transpose()?;
                    match found {
                        Some(row)
                            if row
                                .snapshot
                                .ttl_ms
                                .is_none_or(|ttl| now < row.snapshot.created_at_ms + ttl) =>
                        {
                            tx.rollback().await;
                            return Err(StoreError::Existing(Box::new(row.snapshot)));
                        }
                        _ => {
                            // Past its TTL: the key is free again.
                            tx.execute(
                                "UPDATE tasks SET idempotency_key = NULL WHERE id = $1",
                                &[&existing],
                                "could not release the idempotency key",
                            )
                            .await?;
                        }
                    }
                }
            }
            let taken = tx
                .query(
                    "SELECT 1 FROM tasks WHERE id = $1",
                    &[&&*task.id],
                    "could not look up the task id",
                )
                .await?;
            if !taken.is_empty() {
                tx.rollback().await;
                return Err(StoreError::DuplicateId);
            }
            tx.commit().await?;
            // The conflicting row is gone (or its key released): queue the create again.
            match self.enqueue(task, now).await? {
                batch::Created::Inserted => return Ok(()),
                batch::Created::Conflict(again) => task = *again,
            }
        }
        Err(PgError::msg(format!(
            "could not create task {}: its id or idempotency key kept conflicting with tasks \
             created at the same time",
            task.id
        )))
    }

    /// A fenced finish through the finish writers ([`batch`]): `true` when it ended the task,
    /// `false` when it changed nothing (not live under this lease, or past its TTL).
    pub(super) async fn finish_batched(
        &self,
        lease: &Lease,
        outcome: &Outcome,
    ) -> Result<bool, StoreError> {
        let (reply, answer) = oneshot::channel();
        let stopped = || PgError::msg("the store's finish writers have stopped".into());
        self.finishes
            .send(batch::FinishJob {
                lease: lease.clone(),
                outcome: outcome.clone(),
                now: self.clock.now_ms(),
                reply,
            })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    pub(super) async fn enqueue(
        &self,
        task: NewTask,
        now: u64,
    ) -> Result<batch::Created, StoreError> {
        let (reply, answer) = oneshot::channel();
        let stopped = || PgError::msg("the Postgres create writers have stopped".into());
        self.creates
            .send(batch::Job { task, now, reply })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

fn live(row: &Row) -> Result<(), StoreError> {
    if row.snapshot.status.is_terminal() {
        Err(StoreError::Terminal(row.snapshot.status))
    } else {
        Ok(())
    }
}

pub(super) fn set_message(
    row: &mut Row,
    fx: &mut Effects,
    now: u64,
    message: Option<String>,
) -> Result<(), StoreError> {
    live(row)?;
    if row.snapshot.status_message != message {
        row.snapshot.status_message = message;
        row.touch(now);
        fx.dirty = true;
    }
    Ok(())
}

pub(super) fn ask(
    row: &mut Row,
    fx: &mut Effects,
    now: u64,
    key: &str,
    request: InputRequest,
) -> Result<(), StoreError> {
    live(row)?;
    if row.snapshot.input_requests.contains_key(key) {
        return Ok(());
    }
    if row.used_keys.iter().any(|k| k == key) {
        return Err(StoreError::KeyReused(key.to_owned()));
    }
    row.used_keys.push(key.to_owned());
    row.snapshot.input_requests.insert(key.to_owned(), request);
    row.snapshot.status = TaskStatus::InputRequired;
    row.touch(now);
    fx.dirty = true;
    Ok(())
}

pub(super) fn step(
    row: &mut Row,
    fx: &mut Effects,
    now: u64,
    step: Step,
) -> Result<(), StoreError> {
    live(row)?;
    row.touch(now);
    fx.dirty = true;
    fx.step = Some(step);
    Ok(())
}

pub(super) fn end(
    row: &mut Row,
    fx: &mut Effects,
    now: u64,
    outcome: Outcome,
) -> Result<(), StoreError> {
    live(row)?;
    // A finished task is purged when its TTL runs out (R20).
    let purge_at = row.deadline_ms;
    row.snapshot.status_message = outcome.status_message();
    row.end(outcome, now, purge_at);
    fx.dirty = true;
    fx.ended = true;
    Ok(())
}

#[async_trait]
impl TaskStore for PostgresStore {
    async fn create(&self, task: NewTask) -> Result<TaskSnapshot, StoreError> {
        let now = self.clock.now_ms();
        let snapshot = new_task_snapshot(&task, now);
        match self.enqueue(task, now).await? {
            batch::Created::Inserted => {}
            batch::Created::Conflict(task) => self.create_conflicted(*task, now).await?,
        }
        Ok(snapshot)
    }

    async fn get(&self, id: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        let now = self.clock.now_ms();
        let (reply, answer) = oneshot::channel();
        self.reads
            .send(batch::ReadJob {
                id: Arc::from(id),
                reply,
            })
            .map_err(|_| PgError::msg("the store's readers have stopped".into()))?;
        let row = answer
            .await
            .map_err(|_| PgError::msg("the store's readers have stopped".into()))??;
        let Some(row) = row else {
            return Ok(None);
        };
        if !row.purge_due(now) && !row.expiry_due(now) {
            return Ok(Some(row.snapshot));
        }
        match self
            .modify(id, None, |row, _, _| Ok(row.snapshot.clone()))
            .await
        {
            Ok(snapshot) => Ok(Some(snapshot)),
            Err(StoreError::NotFound) => Ok(None),
            Err(error) => Err(error),
        }
    }

    async fn set_status_message(
        &self,
        id: &str,
        message: Option<String>,
    ) -> Result<(), StoreError> {
        self.modify(id, None, |row, fx, now| set_message(row, fx, now, message))
            .await
    }

    async fn request_input(
        &self,
        id: &str,
        key: &str,
        request: InputRequest,
    ) -> Result<(), StoreError> {
        self.modify(id, None, |row, fx, now| ask(row, fx, now, key, request))
            .await
    }

    async fn deliver_input(
        &self,
        id: &str,
        responses: InputResponses,
    ) -> Result<InputResponses, StoreError> {
        self.modify(id, None, |row, fx, now| {
            let mut accepted = InputResponses::new();
            if row.snapshot.status.is_terminal() {
                return Ok(accepted);
            }
            for (key, value) in responses {
                if row.snapshot.input_requests.remove(&key).is_some() {
                    row.answers.insert(key.clone(), value.clone());
                    accepted.insert(key, value);
                }
            }
            if !accepted.is_empty() {
                if row.snapshot.input_requests.is_empty() {
                    row.snapshot.status = TaskStatus::Working;
                }
                row.answer_seq += 1;
                row.touch(now);
                fx.dirty = true;
                fx.notify = Some(format!("a:{}:{}", row.answer_seq, row.snapshot.id));
            }
            Ok(accepted)
        })
        .await
    }

    async fn finish(&self, id: &str, outcome: Outcome) -> Result<(), StoreError> {
        self.modify(id, None, |row, fx, now| end(row, fx, now, outcome))
            .await
    }

    async fn request_cancel(&self, id: &str) -> Result<(), StoreError> {
        self.modify(id, None, |row, fx, now| {
            if !row.snapshot.cancel_requested && !row.snapshot.status.is_terminal() {
                row.snapshot.cancel_requested = true;
                row.touch(now);
                fx.dirty = true;
                fx.notify = Some(format!("c:{}", row.snapshot.id));
            }
            Ok(())
        })
        .await
    }

    async fn save_step(&self, id: &str, s: Step) -> Result<(), StoreError> {
        self.modify(id, None, |row, fx, now| step(row, fx, now, s))
            .await
    }

    async fn recoverable(&self) -> Result<Vec<Recovery>, StoreError> {
        let rows = read(
            &self.pool,
            "SELECT id, owner, tool, tool_version, arguments, request_meta, answers \
             FROM tasks WHERE purge_at_ms IS NULL ORDER BY id",
            &[],
            "could not list the live tasks",
        )
        .await?;
        let step_rows = read(
            &self.pool,
            "SELECT s.task_id, s.seq, s.name, s.value FROM steps s JOIN tasks t \
             ON t.id = s.task_id WHERE t.purge_at_ms IS NULL ORDER BY s.task_id, s.seq",
            &[],
            "could not list the live tasks' steps",
        )
        .await?;
        let mut steps: std::collections::HashMap<String, Vec<Step>> =
            std::collections::HashMap::new();
        for r in &step_rows {
            steps.entry(r.get(0)).or_default().push(Step::new(
                to_u64(r.get(1)),
                r.get::<_, String>(2),
                json(r.get::<_, &str>(3))?,
            ));
        }
        rows.iter()
            .map(|r| {
                let id: String = r.get(0);
                Ok(Recovery {
                    steps: steps.remove(&id).unwrap_or_default(),
                    id: Arc::from(id),
                    owner: Arc::from(r.get::<_, &str>(1)),
                    tool: Arc::from(r.get::<_, &str>(2)),
                    tool_version: Arc::from(r.get::<_, &str>(3)),
                    arguments: object(r.get(4))?,
                    request_meta: object(r.get(5))?,
                    answers: json(r.get(6))?,
                })
            })
            .collect()
    }

    async fn expire_due(&self) -> Result<Vec<Arc<str>>, StoreError> {
        let now = to_i64(self.clock.now_ms());
        let retention = to_i64(self.retention_ms());
        let error = to_json(&outcome_json(&Outcome::Failed(errors::to_object(
            &errors::task_expired(),
        ))))?;
        let mut failed = Vec::new();
        loop {
            let tx = Tx::begin(&self.pool).await?;
            let rows = tx
                .query(
                    "WITH due AS (SELECT id FROM tasks WHERE purge_at_ms IS NULL \
                     AND deadline_ms <= $1 ORDER BY deadline_ms LIMIT $5 \
                     FOR UPDATE SKIP LOCKED) \
                     UPDATE tasks t SET status = 'failed', status_message = $2, outcome = $3, \
                     purge_at_ms = LEAST(t.deadline_ms + $4, 9223372036854775807), \
                     input_requests = '{}', used_keys = '[]', answers = '{}', \
                     last_updated_at_ms = GREATEST($1, t.last_updated_at_ms + 1) \
                     FROM due WHERE t.id = due.id RETURNING t.id",
                    &[&now, &EXPIRED_MESSAGE, &error, &retention, &SWEEP_BATCH],
                    "could not expire the tasks past their TTL",
                )
                .await?;
            let ids: Vec<String> = rows.iter().map(|r| r.get::<_, String>(0)).collect();
            if !ids.is_empty() {
                tx.execute(
                    "DELETE FROM steps WHERE task_id = ANY($1)",
                    &[&ids],
                    "could not drop the expired tasks' steps",
                )
                .await?;
            }
            tx.commit().await?;
            let full = i64::try_from(ids.len()).unwrap_or(i64::MAX) >= SWEEP_BATCH;
            failed.extend(ids.into_iter().map(Arc::from));
            if !full {
                break;
            }
        }
        loop {
            let tx = Tx::begin(&self.pool).await?;
            let purged = tx
                .execute(
                    "DELETE FROM tasks WHERE id IN (SELECT id FROM tasks WHERE purge_at_ms <= $1 \
                     LIMIT $2 FOR UPDATE SKIP LOCKED)",
                    &[&now, &SWEEP_BATCH],
                    "could not purge the tasks past their retention",
                )
                .await?;
            tx.commit().await?;
            if purged < u64::try_from(SWEEP_BATCH).unwrap_or(u64::MAX) {
                break;
            }
        }
        Ok(failed)
    }

    fn cluster(&self) -> Option<&dyn ClusterStore> {
        Some(self)
    }
}
