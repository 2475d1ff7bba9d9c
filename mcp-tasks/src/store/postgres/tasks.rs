//! The task operations of [`PostgresStore`]: one change of one task per transaction
//! ([`PostgresStore::modify`]), its decision made by the state machine ([`record`]); creates
//! through the batch writers; the expiry sweep.

use std::{
    collections::HashMap,
    sync::{Arc, LazyLock},
    time::Duration,
};

use async_trait::async_trait;
use rmcp::model::InputResponses;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::types::ToSql;

use super::{
    PostgresStore, SWEEP_BATCH, batch, notice,
    pool::{Tx, read},
    row::{self, Row, text},
};
use crate::store::{
    ClusterStore, Created, Lease, NewTask, Notice, Recovery, Step, StoreError, TaskSnapshot,
    TaskStore, Transition,
    codec::{self, Columns, TaskRow, end_sql, recovery_columns, to_i64, to_json},
    record::{self, Change, Due, WakeupKind},
    trim,
};

impl PostgresStore {
    /// One change of one task, in one transaction: lock the row, apply what is due, check the
    /// lease (when fenced), run the transition, write back, store `step`, notify, commit. The
    /// expiry is committed even when the transition refuses.
    pub(super) async fn modify<R>(
        &self,
        id: &str,
        fence: Option<&Lease>,
        transition: impl FnOnce(&mut TaskRow, u64) -> Result<(R, Change, Option<Step>), StoreError>
        + Send,
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
        let parked = row.task.state.parked_until_ms;
        let mut change = Change::default();
        match record::apply_due(&mut row.task, now, self.retention_ms()) {
            Due::Purge => {
                let sql = "DELETE FROM tasks WHERE id = $1";
                tx.execute(sql, &[&id], "could not purge the task").await?;
                tx.commit().await?;
                return Err(StoreError::NotFound);
            }
            Due::Expiry => change = Change::ENDED,
            Due::Nothing => {}
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
            _ => transition(&mut row.task, now),
        };
        // An answer or a cancel that wakes a parked task: the claimers hear of it.
        let woke =
            parked.is_some_and(|until| until > 0) && row.task.state.parked_until_ms == Some(0);
        // A refusal keeps only the expiry (if any).
        let (result, step) = match result {
            Ok((value, done, step)) => {
                change.changed |= done.changed;
                change.ended |= done.ended;
                change.wake = done.wake;
                (Ok(value), step)
            }
            Err(error) => (Err(error), None),
        };
        let task_id = row.task.id.clone();
        let notify = match change.wake {
            Some(WakeupKind::Answers) => {
                row.answer_seq += 1;
                let seq = codec::to_u64(row.answer_seq);
                Some(Notice::Answers { task_id, seq })
            }
            Some(WakeupKind::Cancel) => Some(Notice::Cancel(task_id)),
            // Ended by anyone but its runner (an operator's fail, a read past its TTL).
            _ if change.ended && fence.is_none() => {
                Some(notice::ended_elsewhere(task_id, row.runner.is_some()))
            }
            // Listen streams on any instance read the task again (`server/push`); an answer
            // or a cancel wake-up tells them as much.
            _ if change.changed => Some(Notice::Changed(task_id)),
            _ => None,
        };
        if !change.changed && step.is_none() && notify.is_none() {
            tx.rollback().await;
            return result;
        }
        if change.changed {
            row.write_back(&tx).await?;
        }
        if change.ended && !record::keeps_history(row.task.state.status) {
            let sql = "DELETE FROM steps WHERE task_id = $1";
            let context = "could not drop the finished task's steps";
            tx.execute(sql, &[&id], context).await?;
        }
        if let Some(step) = &step {
            tx.execute(
                "INSERT INTO steps (task_id, seq, name, value) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (task_id, seq) DO UPDATE SET name = EXCLUDED.name, \
                 value = EXCLUDED.value",
                &[&id, &to_i64(step.seq), &step.name, &to_json(&step.value)?],
                "could not store the step",
            )
            .await?;
        }
        let queued = woke.then(|| Notice::Queued(row.task.id.clone()));
        let notices = notify.into_iter().chain(queued);
        let context = "could not notify the instance running the task";
        notice::announce(&tx, &self.channel, notices, context).await?;
        tx.commit().await?;
        result
    }

    /// The task's epoch, for an error that explains why a lease operation did nothing.
    pub(super) async fn explain(&self, id: &str, held: Option<u64>) -> StoreError {
        let why = async {
            match self.get(id).await? {
                None => return Ok(StoreError::NotFound),
                Some(task) if task.status.is_terminal() => {
                    return Ok(StoreError::Terminal(task.status));
                }
                Some(_) => {}
            }
            let sql = "SELECT epoch FROM tasks WHERE id = $1";
            let rows = read(&self.pool, sql, &[&id], "could not read the task's epoch").await?;
            Ok::<_, StoreError>(match rows.first() {
                None => StoreError::NotFound,
                Some(r) => StoreError::Fenced {
                    held,
                    current: codec::to_u64(row::int(r, 0)?),
                },
            })
        };
        why.await.unwrap_or_else(|error| error)
    }

    /// Resolves a create the batch skipped: an idempotent retry (the existing task, within
    /// its TTL), a duplicate id, or a key whose task is past its TTL (released, then created
    /// anew: `None`).
    async fn create_conflicted(
        &self,
        mut task: NewTask,
        now: u64,
    ) -> Result<Option<TaskSnapshot>, StoreError> {
        for _ in 0..3 {
            let tx = Tx::begin(&self.pool).await?;
            if let Some(key) = &task.idempotency_key {
                let sql = "SELECT id FROM tasks WHERE owner = $1 AND tool = $2 \
                           AND idempotency_key = $3 FOR UPDATE";
                let context = "could not look up the idempotency key";
                let params: [&(dyn ToSql + Sync); 3] = [&&*task.owner, &&*task.tool, &&**key];
                if let Some(existing) = tx.query(sql, &params, context).await?.first() {
                    let existing = text(existing, 0)?;
                    let context = "could not read the existing task";
                    let found = tx.query(row::SELECT, &[&existing], context).await?;
                    match found.first().map(Row::decode).transpose()? {
                        Some(row) if record::is_retry_of(&row.task.state, now) => {
                            tx.rollback().await;
                            return Ok(Some(row.task.into_snapshot()));
                        }
                        _ => {
                            // Past its TTL: the key is free again.
                            let sql = "UPDATE tasks SET idempotency_key = NULL WHERE id = $1";
                            let context = "could not release the idempotency key";
                            tx.execute(sql, &[&existing], context).await?;
                        }
                    }
                }
            }
            let sql = "SELECT 1 FROM tasks WHERE id = $1";
            let context = "could not look up the task id";
            if !tx.query(sql, &[&&*task.id], context).await?.is_empty() {
                tx.rollback().await;
                return Err(StoreError::DuplicateId);
            }
            tx.commit().await?;
            // The conflicting row is gone (or its key released): queue the create again.
            match self.enqueue(task, now).await? {
                batch::Created::Inserted => return Ok(None),
                batch::Created::Conflict(again) => task = *again,
                batch::Created::OverQuota(task, quota) => return Err(over_quota(&task, quota)),
            }
        }
        Err(StoreError::backend(format!(
            "could not create task {}: its id or idempotency key kept conflicting with tasks \
             created at the same time",
            task.id
        )))
    }

    async fn enqueue(&self, task: NewTask, now: u64) -> Result<batch::Created, StoreError> {
        let job = |reply| batch::Job { task, now, reply };
        ask(&self.creates, job, "the Postgres create writers").await
    }

    /// Every live task's replay data, with its steps, from `rows` ([`recovery_columns`]) and
    /// `step_rows` (`task_id, seq, name, value`).
    pub(super) fn recoveries(
        rows: &[tokio_postgres::Row],
        step_rows: &[tokio_postgres::Row],
    ) -> Result<Vec<Recovery>, StoreError> {
        let mut steps: HashMap<String, Vec<Step>> = HashMap::new();
        for r in step_rows {
            steps
                .entry(text(r, 0)?)
                .or_default()
                .push(codec::step(&row::PgRow(r), 1)?);
        }
        rows.iter()
            .map(|r| {
                let id = text(r, 0)?;
                codec::recovery(&row::PgRow(r), steps.remove(&id).unwrap_or_default())
            })
            .collect()
    }
}

#[async_trait]
impl TaskStore for PostgresStore {
    async fn create(&self, task: NewTask) -> Result<Created, StoreError> {
        self.trim.note(&task);
        let now = self.clock.now_ms();
        let snapshot = codec::created_snapshot(&task, now);
        let conflicted = match self.enqueue(task, now).await? {
            batch::Created::Inserted => None,
            batch::Created::Conflict(task) => Some(task),
            // A retry whose first create went through answers that task, quota or not; the
            // conflict path finds it (and, when there is none, meets the quota again).
            batch::Created::OverQuota(task, _) if task.idempotency_key.is_some() => Some(task),
            batch::Created::OverQuota(task, quota) => return Err(over_quota(&task, quota)),
        };
        if let Some(task) = conflicted
            && let Some(existing) = self.create_conflicted(*task, now).await?
        {
            return Ok(Created::Existing(existing));
        }
        Ok(Created::New(snapshot))
    }

    async fn get(&self, id: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        let now = self.clock.now_ms();
        let job = |reply| batch::ReadJob {
            id: Arc::from(id),
            reply,
        };
        let Some(row) = ask(&self.reads, job, "the store's readers").await? else {
            return Ok(None);
        };
        if record::due(&row.task.state, now) == Due::Nothing {
            return Ok(Some(row.task.into_snapshot()));
        }
        let read =
            |task: &mut TaskRow, _| Ok((task.clone().into_snapshot(), Change::default(), None));
        StoreError::or_none(self.modify(id, None, read).await)
    }

    async fn get_many(&self, ids: &[Arc<str>]) -> Result<Vec<Option<TaskSnapshot>>, StoreError> {
        let now = self.clock.now_ms();
        // The rows of `ids` in one `SELECT`, by id (a task listen's read of the tasks it names).
        let keys: Vec<&str> = ids.iter().map(|id| &**id).collect();
        let context = "could not read the tasks";
        let raws = read(&self.pool, row::SELECT_ANY, &[&keys], context).await?;
        let rows = raws
            .iter()
            .map(|raw| Row::decode(raw).map(|row| (row.task.id.clone(), row.task)))
            .collect::<Result<HashMap<_, _>, _>>()?;
        let mut tasks = Vec::with_capacity(ids.len());
        for id in ids {
            tasks.push(match rows.get(id) {
                // Expiry or purge is due: the one-task read applies it (rare).
                Some(row) if record::due(&row.state, now) != Due::Nothing => self.get(id).await?,
                row => row.cloned().map(TaskRow::into_snapshot),
            });
        }
        Ok(tasks)
    }

    async fn apply(
        &self,
        id: &str,
        fence: Option<&Lease>,
        transition: Transition,
    ) -> Result<(), StoreError> {
        // A fenced finish goes through the finish writers ([`batch`]), one statement for
        // many tasks; one they did not apply (not live under this lease, past its TTL) takes
        // the general path, which finds out why and answers for it.
        if let (Some(lease), Transition::Finish(outcome)) = (fence, &transition) {
            let (lease, outcome, now) = (lease.clone(), outcome.clone(), self.clock.now_ms());
            let job = |reply| batch::FinishJob {
                lease,
                outcome,
                now,
                reply,
            };
            if ask(&self.finishes, job, "the store's finish writers").await? {
                return Ok(());
            }
        }
        let apply = |task: &mut TaskRow, now| {
            let (change, step) = record::apply(task, now, transition)?;
            Ok(((), change, step))
        };
        self.modify(id, fence, apply).await
    }

    async fn deliver_input(
        &self,
        id: &str,
        responses: InputResponses,
    ) -> Result<InputResponses, StoreError> {
        let answer = |task: &mut TaskRow, now| {
            let (taken, change) = record::deliver_input(task, now, responses);
            Ok((taken, change, None))
        };
        self.modify(id, None, answer).await
    }

    async fn request_cancel(&self, id: &str) -> Result<(), StoreError> {
        let cancel = |task: &mut TaskRow, now| Ok(((), record::request_cancel(task, now), None));
        self.modify(id, None, cancel).await
    }

    async fn recoverable(&self) -> Result<Vec<Recovery>, StoreError> {
        let sql = concat!(
            "SELECT ",
            recovery_columns!(),
            " FROM tasks WHERE purge_at_ms IS NULL AND parked_until_ms IS NULL ORDER BY id"
        );
        let rows = read(&self.pool, sql, &[], "could not list the live tasks").await?;
        let sql = "SELECT s.task_id, s.seq, s.name, s.value FROM steps s JOIN tasks t \
                   ON t.id = s.task_id WHERE t.purge_at_ms IS NULL AND t.parked_until_ms IS NULL \
                   ORDER BY s.task_id, s.seq";
        let step_rows = read(&self.pool, sql, &[], "could not list the live tasks' steps").await?;
        Self::recoveries(&rows, &step_rows)
    }

    async fn expire_due(&self) -> Result<Vec<Arc<str>>, StoreError> {
        // The expiry transition (record::apply_due) as one statement for many tasks
        // ([`EXPIRE`]): the status, message and outcome come from the state machine.
        let now = to_i64(self.clock.now_ms());
        let retention = to_i64(self.retention_ms());
        let outcome = record::expired_outcome();
        let status = codec::status_name(outcome.status())?;
        let error = to_json(&outcome)?;
        let message = record::EXPIRED_MESSAGE;
        let bound: [&(dyn ToSql + Sync); 6] =
            [&now, &message, &error, &retention, &SWEEP_BATCH, &status];
        let mut failed = Vec::new();
        loop {
            let tx = Tx::begin(&self.pool).await?;
            let context = "could not expire the tasks past their TTL";
            let rows = tx.query(&EXPIRE, &bound, context).await?;
            let ids = rows
                .iter()
                .map(|r| Ok((Arc::<str>::from(text(r, 0)?), row::PgRow(r).flag(1)?)))
                .collect::<Result<Vec<_>, StoreError>>()?;
            // An expired task is `failed`: it keeps its steps (`record::keeps_history`).
            let ended = ids
                .iter()
                .map(|(id, running)| notice::ended_elsewhere(id.clone(), *running));
            let context = "could not announce the expired tasks";
            notice::announce(&tx, &self.channel, ended, context).await?;
            tx.commit().await?;
            let full = i64::try_from(ids.len()).unwrap_or(i64::MAX) >= SWEEP_BATCH;
            failed.extend(ids.into_iter().map(|(id, _)| id));
            if !full {
                break;
            }
        }
        loop {
            let tx = Tx::begin(&self.pool).await?;
            let sql = "DELETE FROM tasks WHERE id IN (SELECT id FROM tasks WHERE purge_at_ms <= $1 \
                       LIMIT $2 FOR UPDATE SKIP LOCKED)";
            let context = "could not purge the tasks past their retention";
            let purged = tx.execute(sql, &[&now, &SWEEP_BATCH], context).await?;
            tx.commit().await?;
            if purged < u64::try_from(SWEEP_BATCH).unwrap_or(u64::MAX) {
                break;
            }
        }
        // The owners this instance created for since the last sweep, and those of the next
        // page of the pass over every owner since a runtime started here, or the time for
        // the next pass came (the owners any instance left past the bound): each one's
        // finished tasks past its bound, counted in the store (every instance's), by the
        // index of the owner's finished tasks, at most `TRIM_ROWS` of them, oldest first. An
        // owner whose live and kept tasks are still more than its bound (it created past it
        // while they ran, or had more past it) is noted again, as that many tasks past it
        // (`trim.rs`).
        let mut pass = self.trim.pass();
        if let Some(first) = &pass
            && first.after.is_none()
            && let Some(every) = first.repeat
            && !self.turn_to_pass(now, every).await?
        {
            self.trim.passed(first, None);
            pass = None;
        }
        let (mut owners, mut next) = (Vec::new(), None);
        if let Some(pass) = &pass {
            let (over, after) = pass.page(self.pass_page(pass).await?);
            (owners, next) = (over, Some(after));
        }
        owners.extend(self.trim.take());
        let sql = "WITH gone AS (DELETE FROM tasks WHERE id IN (SELECT id FROM (SELECT id, \
                   created_at_ms FROM tasks WHERE owner = $1 AND purge_at_ms IS NOT NULL \
                   ORDER BY created_at_ms DESC, id DESC OFFSET $2) past \
                   ORDER BY created_at_ms, id LIMIT $3) RETURNING 1) \
                   SELECT (SELECT count(*) FROM tasks WHERE owner = $1 AND purge_at_ms IS NULL \
                   AND status IN ('working', 'input_required')) \
                   + (SELECT count(*) FROM tasks WHERE owner = $1 AND purge_at_ms IS NOT NULL) \
                   - (SELECT count(*) FROM gone)";
        let limit = to_i64(trim::TRIM_ROWS);
        let context = "could not remove an owner's oldest finished tasks";
        for (owner, keep) in owners {
            let bound = i64::try_from(keep).unwrap_or(i64::MAX);
            let params: [&(dyn ToSql + Sync); 3] = [&&*owner, &bound, &limit];
            let rows = super::pool::write_one(&self.pool, sql, &params, context).await?;
            let held: i64 = rows.first().map_or(0, |row| row.get(0));
            if held > bound {
                let excess = usize::try_from(held - bound).unwrap_or(usize::MAX);
                self.trim.again(&owner, keep, excess);
            }
        }
        if let (Some(pass), Some(next)) = (pass, next) {
            self.trim.passed(&pass, next);
        }
        Ok(failed)
    }

    fn set_max_finished_per_owner(&self, tasks: usize) {
        self.trim.bound(tasks);
    }

    async fn stored_answers(&self, id: &str) -> Result<InputResponses, StoreError> {
        ClusterStore::answers(self, id).await
    }

    fn admin(&self) -> Option<&dyn crate::store::AdminStore> {
        Some(self)
    }

    fn cluster(&self) -> Option<&dyn ClusterStore> {
        Some(self)
    }

    /// Parked tasks wake through the claims of lapsed leases (a parked task's lease deadline
    /// is its wake-up time), not [`TaskStore::wake`].
    fn parks(&self) -> bool {
        true
    }

    async fn parked_count(&self) -> Result<Option<u64>, StoreError> {
        let sql = "SELECT count(*) FROM tasks WHERE parked_until_ms IS NOT NULL";
        let rows = read(&self.pool, sql, &[], "could not count the parked tasks").await?;
        let count = rows.first().map(|row| row::int(row, 0)).transpose()?;
        Ok(Some(codec::to_u64(count.unwrap_or(0))))
    }
}

impl PostgresStore {
    /// Whether this instance makes the pass over every owner that came due `every` after
    /// its last one ([`trim::Pass::repeat`]): instances take turns, by the time the next is
    /// due that the `meta` table holds. The first to ask once it has come moves it on by
    /// `every`; the others end theirs unmade.
    async fn turn_to_pass(&self, now: i64, every: Duration) -> Result<bool, StoreError> {
        let due = now.saturating_add(i64::try_from(every.as_millis()).unwrap_or(i64::MAX));
        let sql = "INSERT INTO meta (name, value) VALUES ('trim_pass_due_ms', $2) \
                   ON CONFLICT (name) DO UPDATE SET value = $2 WHERE meta.value <= $1 RETURNING 1";
        let context = "could not take a turn at the pass over every owner's finished tasks";
        let rows = super::pool::write_one(&self.pool, sql, &[&now, &due], context).await?;
        Ok(!rows.is_empty())
    }

    /// One page of the pass over every owner ([`trim::Pass`]): the owners of the next
    /// [`trim::PASS_ROWS`] finished tasks after the pass's last owner, in owner order, each
    /// with how many of them are its, read from the owner index (`tasks_owner_finished`).
    async fn pass_page(&self, pass: &trim::Pass) -> Result<Vec<(Arc<str>, u64)>, StoreError> {
        let rows = to_i64(trim::PASS_ROWS);
        let context = "could not read the owners of the finished tasks";
        // An owner may be the empty string: the first page names no owner to start after.
        let last = pass.after.as_deref();
        let (after, params): (&str, &[&(dyn ToSql + Sync)]) = match &last {
            Some(owner) => (" AND owner > $2", &[&rows, owner]),
            None => ("", &[&rows]),
        };
        let sql = format!(
            "SELECT owner, count(*) FROM (SELECT owner FROM tasks \
             WHERE purge_at_ms IS NOT NULL{after} ORDER BY owner LIMIT $1) page \
             GROUP BY owner ORDER BY owner"
        );
        let found = read(&self.pool, &sql, params, context).await?;
        found
            .iter()
            .map(|r| Ok((Arc::from(text(r, 0)?), codec::to_u64(row::int(r, 1)?))))
            .collect()
    }
}

/// The expiry of up to `$5` live tasks past their TTL at `$1` (record::apply_due, from the
/// state machine's SQL, `codec::end_sql`): `failed` with status `$6`, message `$2` and
/// outcome `$3`, purged `$4` after the deadline. Returns their ids, and whether each has a
/// runner (its work may be running on some instance).
static EXPIRE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH due AS (SELECT id FROM tasks t WHERE {due} ORDER BY deadline_ms LIMIT $5 \
         FOR UPDATE SKIP LOCKED) \
         UPDATE tasks t SET {set} FROM due WHERE t.id = due.id \
         RETURNING t.id, t.runner IS NOT NULL",
        due = end_sql::expired("$1"),
        set = end_sql::set("$6", "$3", "$2", "$1", &end_sql::expiry_purge("$4")),
    )
});

/// Sends `job` (made with its reply channel) to `workers` and awaits their answer; `who`
/// names them in the error when they have stopped.
async fn ask<J, T>(
    workers: &mpsc::UnboundedSender<J>,
    job: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> J,
    who: &str,
) -> Result<T, StoreError> {
    let (reply, answer) = oneshot::channel();
    let stopped = || StoreError::backend(format!("{who} have stopped"));
    workers.send(job(reply)).map_err(|_| stopped())?;
    answer.await.map_err(|_| stopped())?
}

/// The refusal of a create past its owner's quota.
fn over_quota(task: &NewTask, quota: usize) -> StoreError {
    StoreError::OwnerQuota {
        owner: task.owner.to_string(),
        quota,
    }
}
