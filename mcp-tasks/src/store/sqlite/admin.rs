//! [`AdminStore`] for [`SqliteStore`]: lists and counts on a reader connection, purges in
//! the writer's batch.

use async_trait::async_trait;
use rusqlite::{params, params_from_iter, types::Value as SqlValue};

use super::{
    SqliteStore, backend, exec,
    row::{all_rows, delete_tasks, first_row, load, steps},
    writer::{Effect, Tx},
};
use crate::store::{
    StoreError, TaskSnapshot, TaskStore,
    admin::{
        AdminStore, StatusCounts, TaskDetail, TaskFilter, TaskPage, TaskQuery, TaskSummary,
        sql::{self, Dialect, Param, count_query, list_query},
    },
    codec::{self, Columns, TaskRow, task_columns, to_i64},
    row::{TaskOrigin, origin_columns},
};

const DIALECT: Dialect = Dialect {
    mark: |n| format!("?{n}"),
    id: "id",
    runner: None,
};

fn values(params: Vec<Param>) -> Vec<SqlValue> {
    params
        .into_iter()
        .map(|param| match param {
            Param::Text(text) => SqlValue::Text(text),
            Param::Int(n) => SqlValue::Integer(n),
        })
        .collect()
}

#[async_trait]
impl AdminStore for SqliteStore {
    async fn list(&self, query: &TaskQuery) -> Result<TaskPage, StoreError> {
        self.unreported.keep(self.expire_due().await?);
        let (sql, params) = list_query(&DIALECT, task_columns!(), query, self.clock.now_ms());
        let found = self
            .read(move |conn| {
                let mut statement = conn.prepare(&sql).map_err(backend)?;
                all_rows(&mut statement, params_from_iter(values(params)), |row| {
                    Ok(TaskSummary::of(TaskRow::decode(row)?.into_snapshot(), None))
                })
            })
            .await?;
        Ok(query.page(found))
    }

    async fn count(&self, filter: &TaskFilter) -> Result<StatusCounts, StoreError> {
        self.unreported.keep(self.expire_due().await?);
        let (sql, params) = count_query(&DIALECT, filter, self.clock.now_ms());
        self.read(move |conn| {
            let mut statement = conn.prepare(&sql).map_err(backend)?;
            let found = all_rows(&mut statement, params_from_iter(values(params)), |row| {
                Ok((codec::parse_status(&row.text(0)?)?, row.int(1)?))
            })?;
            let mut counts = StatusCounts::default();
            for (status, n) in found {
                counts.add(status, codec::to_u64(n));
            }
            Ok(counts)
        })
        .await
    }

    async fn detail(&self, id: &str) -> Result<Option<TaskDetail>, StoreError> {
        // Applies the expiry that is due, as a read does.
        if self.get(id).await?.is_none() {
            return Ok(None);
        }
        let id = id.to_owned();
        self.read(move |conn| {
            let select = concat!("SELECT ", origin_columns!(), " FROM tasks WHERE id = ?1");
            let origin = first_row(conn, select, params![id], |row| TaskOrigin::decode(row, 0))?;
            let (Some(task), Some(origin)) = (load(conn, &id)?, origin) else {
                return Ok(None);
            };
            Ok(Some(sql::detail(task, origin, steps(conn, &id)?, None)))
        })
        .await
    }

    async fn set_tool_version(&self, id: &str, version: &str) -> Result<TaskSnapshot, StoreError> {
        let task = crate::store::admin::live(self, id).await?;
        let (id, version) = (id.to_owned(), version.to_owned());
        let sql = "UPDATE tasks SET tool_version = ?2 WHERE id = ?1 \
                   AND status IN ('working', 'input_required')";
        let set = move |tx: &mut Tx<'_>| exec(tx.conn, sql, params![id, version]).map_err(backend);
        let set = self.write(set).await?;
        let after = self.get(&task.id).await?.ok_or(StoreError::NotFound)?;
        match set {
            0 => Err(StoreError::Terminal(after.status)),
            _ => Ok(after),
        }
    }

    async fn purge_finished(&self, before_ms: Option<u64>) -> Result<u64, StoreError> {
        self.unreported.keep(self.expire_due().await?);
        let before = before_ms.map_or(i64::MAX, to_i64);
        self.write(move |tx: &mut Tx<'_>| {
            let purged = delete_tasks(
                tx.conn,
                "purge_at_ms IS NOT NULL AND last_updated_at_ms < ?1",
                params![before],
            )?;
            tx.effects.push(Effect::Purged(purged));
            Ok(purged as u64)
        })
        .await
    }
}
