//! The `WHERE` clause of an admin list or count, for both SQL stores: the filter of
//! [`TaskFilter::matches`](super::TaskFilter::matches) as SQL over the `tasks` table.

use super::{LeaseState, Position, TaskDetail, TaskFilter, TaskQuery, status_word};
use crate::store::{
    Step,
    codec::{TaskRow, to_i64},
    record,
    row::TaskOrigin,
};

/// A parameter of the clause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Param {
    Text(String),
    Int(i64),
}

/// The SQL of one store.
pub(crate) struct Dialect {
    /// The placeholder of parameter `n` (1-based).
    pub(crate) mark: fn(usize) -> String,
    /// `id` as it compares bytewise (Postgres: `id COLLATE "C"`).
    pub(crate) id: &'static str,
    /// The column that holds the instance running a task, if the store has one.
    pub(crate) runner: Option<&'static str>,
}

/// `WHERE ...` (or nothing) and its parameters, numbered from 1.
fn conditions(
    dialect: &Dialect,
    filter: &TaskFilter,
    after: Option<&Position>,
    now_ms: u64,
) -> (String, Vec<Param>) {
    let mut parts = Vec::new();
    let mut params = Vec::new();
    // The placeholder of `param`, numbered in the order bound.
    let mut bind = |param: Param| {
        params.push(param);
        (dialect.mark)(params.len())
    };
    if !filter.statuses.is_empty() {
        let marks: Vec<String> = filter
            .statuses
            .iter()
            .map(|status| bind(Param::Text(status_word(*status).to_owned())))
            .collect();
        parts.push(format!("status IN ({})", marks.join(", ")));
    }
    if let Some(tool) = &filter.tool {
        parts.push(format!("tool = {}", bind(Param::Text(tool.clone()))));
    }
    if let Some(owner) = &filter.owner {
        parts.push(format!("owner = {}", bind(Param::Text(owner.clone()))));
    }
    if let Some(instance) = &filter.instance {
        match dialect.runner {
            Some(column) => {
                let instance = bind(Param::Text(instance.clone()));
                parts.push(format!("{column} = {instance}"));
            }
            // No task of a single-process store has an instance.
            None => parts.push("1 = 0".to_owned()),
        }
    }
    if let Some(after) = filter.created_after_ms {
        let after = bind(Param::Int(to_i64(after)));
        parts.push(format!("created_at_ms >= {after}"));
    }
    if let Some(before) = filter.created_before_ms {
        let before = bind(Param::Int(to_i64(before)));
        parts.push(format!("created_at_ms < {before}"));
    }
    if let Some(before) = filter.stalled_before_ms(now_ms) {
        // `purge_at_ms` is NULL exactly while a task is live, in both stores.
        let before = bind(Param::Int(to_i64(before)));
        parts.push(format!(
            "purge_at_ms IS NULL AND last_updated_at_ms < {before}"
        ));
    }
    if filter.parked {
        parts.push("purge_at_ms IS NULL AND parked_until_ms IS NOT NULL".to_owned());
    }
    if let Some(position) = after {
        let created = bind(Param::Int(to_i64(position.created_at_ms)));
        let id = bind(Param::Text(position.id.to_string()));
        parts.push(format!(
            "(created_at_ms < {created} OR (created_at_ms = {created} AND {} < {id}))",
            dialect.id
        ));
    }
    let clause = if parts.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", parts.join(" AND "))
    };
    (clause, params)
}

/// A page of an admin list: `columns` of the tasks that pass the query's filter, newest
/// first, one more than the page holds (so the store knows whether another page follows),
/// and the parameters.
pub(crate) fn list_query(
    dialect: &Dialect,
    columns: &str,
    query: &TaskQuery,
    now_ms: u64,
) -> (String, Vec<Param>) {
    let (clause, params) = conditions(dialect, &query.filter, query.after.as_ref(), now_ms);
    let sql = format!(
        "SELECT {columns} FROM tasks{clause} ORDER BY created_at_ms DESC, {} DESC LIMIT {}",
        dialect.id,
        query.limit + 1
    );
    (sql, params)
}

/// An admin count: how many tasks that pass `filter` have each status (rows of status and
/// count), and the parameters.
pub(crate) fn count_query(
    dialect: &Dialect,
    filter: &TaskFilter,
    now_ms: u64,
) -> (String, Vec<Param>) {
    let (clause, params) = conditions(dialect, filter, None, now_ms);
    let sql = format!("SELECT status, COUNT(*) FROM tasks{clause} GROUP BY status");
    (sql, params)
}

/// One task in detail from its stored row and origin, for both SQL stores: what it was
/// created with as [`TaskOrigin::ended`] keeps it once it ended, as the memory store does.
/// A task's end clears those columns; a row that ended under an earlier build still holds
/// them, which the view does not show either.
pub(crate) fn detail(
    task: TaskRow,
    origin: TaskOrigin,
    steps: Vec<Step>,
    lease: Option<LeaseState>,
) -> TaskDetail {
    let ended = task.state.status.is_terminal() && !record::keeps_history(task.state.status);
    TaskDetail {
        questions: task.pending.input_requests.clone(),
        answers: task.pending.answers.clone(),
        asked_at_step: task.pending.asked_at_step.clone(),
        origin: if ended { origin.ended() } else { origin },
        task: task.into_snapshot(),
        steps,
        lease,
    }
}
