//! [`AdminStore`] for [`PostgresStore`]: lists and counts as single reads, purges in one
//! statement per batch, the lease columns shown as the task's instance and epoch.

use std::sync::Arc;

use async_trait::async_trait;
use tokio_postgres::types::ToSql;

use super::{
    PostgresStore, SWEEP_BATCH,
    pool::{read, write_one},
    row::{PgRow, Row},
};
use crate::store::{
    StoreError, TaskSnapshot, TaskStore,
    admin::{
        AdminStore, LeaseState, StatusCounts, TaskDetail, TaskFilter, TaskPage, TaskQuery,
        TaskSummary,
        sql::{self, Dialect, Param, count_query, list_query},
    },
    codec::{self, Columns, TASK_COLUMNS, task_columns, to_i64},
    row::TaskOrigin,
};

const DIALECT: Dialect = Dialect {
    mark: |n| format!("${n}"),
    id: "id COLLATE \"C\"",
    runner: Some("runner"),
};

/// The parameters, as `tokio_postgres` binds them.
fn refs(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|param| match param {
            Param::Text(text) => text as _,
            Param::Int(n) => n as _,
        })
        .collect()
}

/// The columns a list and a detail read: [`Row::decode`]'s, then the detail's own.
macro_rules! admin_columns {
    () => {
        concat!(
            task_columns!(),
            ", answer_seq, runner, epoch, lease_until_ms, ",
            crate::store::row::origin_columns!()
        )
    };
}

#[async_trait]
impl AdminStore for PostgresStore {
    async fn list(&self, query: &TaskQuery) -> Result<TaskPage, StoreError> {
        self.expire_due().await?;
        let (sql, params) = list_query(&DIALECT, admin_columns!(), query, self.clock.now_ms());
        let rows = read(&self.pool, &sql, &refs(&params), "could not list the tasks").await?;
        let mut found = Vec::with_capacity(rows.len());
        for raw in &rows {
            let row = Row::decode(raw)?;
            let instance = row.runner.map(Arc::from);
            found.push(TaskSummary::of(row.task.into_snapshot(), instance));
        }
        Ok(query.page(found))
    }

    async fn count(&self, filter: &TaskFilter) -> Result<StatusCounts, StoreError> {
        self.expire_due().await?;
        let (sql, params) = count_query(&DIALECT, filter, self.clock.now_ms());
        let context = "could not count the tasks";
        let rows = read(&self.pool, &sql, &refs(&params), context).await?;
        let mut counts = StatusCounts::default();
        for row in rows.iter().map(PgRow) {
            counts.add(
                codec::parse_status(&row.text(0)?)?,
                codec::to_u64(row.int(1)?),
            );
        }
        Ok(counts)
    }

    async fn detail(&self, id: &str) -> Result<Option<TaskDetail>, StoreError> {
        // Applies the expiry that is due, as a read does.
        if self.get(id).await?.is_none() {
            return Ok(None);
        }
        let sql = concat!("SELECT ", admin_columns!(), " FROM tasks WHERE id = $1");
        let rows = read(&self.pool, sql, &[&id], "could not read the task").await?;
        let Some(raw) = rows.first() else {
            return Ok(None);
        };
        let row = Row::decode(raw)?;
        let columns = PgRow(raw);
        let until_ms = columns.opt_int(TASK_COLUMNS + 3)?.map(codec::to_u64);
        let origin = TaskOrigin::decode(&columns, TASK_COLUMNS + 4)?;
        let sql = "SELECT seq, name, value FROM steps WHERE task_id = $1 ORDER BY seq";
        let steps_rows = read(&self.pool, sql, &[&id], "could not read the task's steps").await?;
        let steps = steps_rows
            .iter()
            .map(|raw| codec::step(&PgRow(raw), 0))
            .collect::<Result<Vec<_>, _>>()?;
        let lease = Some(LeaseState {
            instance: row.runner.map(Arc::from),
            epoch: row.epoch,
            until_ms: until_ms.filter(|_| !row.task.state.status.is_terminal()),
        });
        Ok(Some(sql::detail(row.task, origin, steps, lease)))
    }

    async fn set_tool_version(&self, id: &str, version: &str) -> Result<TaskSnapshot, StoreError> {
        crate::store::admin::live(self, id).await?;
        let sql = "UPDATE tasks SET tool_version = $2 WHERE id = $1 AND purge_at_ms IS NULL \
                   RETURNING id";
        let context = "could not change the task's tool version";
        let set = write_one(&self.pool, sql, &[&id, &version], context).await?;
        let after = self.get(id).await?.ok_or(StoreError::NotFound)?;
        match set.len() {
            0 => Err(StoreError::Terminal(after.status)),
            _ => Ok(after),
        }
    }

    async fn purge_finished(&self, before_ms: Option<u64>) -> Result<u64, StoreError> {
        self.expire_due().await?;
        let before = before_ms.map_or(i64::MAX, to_i64);
        // Steps go with their task (ON DELETE CASCADE); the idempotency key is a column.
        let sql = "WITH done AS (SELECT id FROM tasks WHERE purge_at_ms IS NOT NULL \
                   AND last_updated_at_ms < $1 LIMIT $2 FOR UPDATE SKIP LOCKED) \
                   DELETE FROM tasks t USING done WHERE t.id = done.id RETURNING t.id";
        let context = "could not purge the finished tasks";
        let mut purged = 0;
        loop {
            let rows = write_one(&self.pool, sql, &[&before, &SWEEP_BATCH], context).await?;
            purged += rows.len() as u64;
            if i64::try_from(rows.len()).unwrap_or(i64::MAX) < SWEEP_BATCH {
                return Ok(purged);
            }
        }
    }
}
