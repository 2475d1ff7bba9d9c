//! The one codec of a stored task row, for both SQL stores (SQLite and Postgres): how each
//! field of a [`TaskRow`] is written to a column and read back. The stores bind the
//! encoded values to their own statements and read their rows through [`Columns`].

use std::sync::Arc;

use rmcp::model::{InputRequests, TaskStatus};

pub(crate) use super::row::TaskRow;
use super::{
    NewTask, Outcome, Recovery, Step, StoreError, TaskSnapshot, record,
    row::{self, EncodedOrigin, EncodedPending, Pending, State, TaskOrigin},
    status::status_word,
};
use crate::clock::millis;

pub(crate) use super::column::{Columns, json, to_i64, to_json, to_u64};

/// The columns of a task row that [`TaskRow::decode`] reads, in its order, its
/// [`Pending`]'s columns last; a store's own columns follow them.
macro_rules! task_columns {
    () => {
        concat!(
            "id, owner, tool, status, status_message, created_at_ms, last_updated_at_ms, \
             ttl_ms, poll_interval_ms, outcome, cancel_requested, purge_at_ms, \
             parked_until_ms, ",
            $crate::store::row::pending_columns!()
        )
    };
}
pub(crate) use task_columns;

/// Where [`task_columns`] lists the [`Pending`]'s columns.
const PENDING_FROM: usize = 13;

/// How many columns [`task_columns`] lists: a store's own columns start at this index.
#[cfg(any(test, feature = "postgres"))]
pub(crate) const TASK_COLUMNS: usize = PENDING_FROM + row::PENDING_COLUMNS.len();

/// The columns of a live task that [`recovery`] reads, in its order: the task's, then its
/// [`origin_columns`].
macro_rules! recovery_columns {
    () => {
        concat!(
            "id, owner, tool, answers, cancel_requested, ",
            $crate::store::row::origin_columns!()
        )
    };
}
pub(crate) use recovery_columns;

/// How many columns [`recovery_columns`] lists: a statement's own columns start at this index.
#[cfg(feature = "postgres")]
pub(crate) const RECOVERY_COLUMNS: usize = 5 + row::ORIGIN_COLUMNS.len();

/// `purge_at_ms` of a finished task that is never purged (no TTL). NULL means "live".
pub(crate) const NEVER: i64 = i64::MAX;

/// The changeable columns of a row, encoded, as every write-back binds them.
pub(crate) struct Encoded {
    pub(crate) status: &'static str,
    pub(crate) status_message: Option<String>,
    pub(crate) last_updated_at_ms: i64,
    pub(crate) outcome: Option<String>,
    pub(crate) cancel_requested: bool,
    /// NULL while live; [`NEVER`] for a finished task that is never purged.
    pub(crate) purge_at_ms: Option<i64>,
    /// NULL unless parked ([`State::parked_until_ms`]).
    pub(crate) parked_until_ms: Option<i64>,
    /// In [`row::PENDING_COLUMNS`]' order.
    pub(crate) pending: EncodedPending,
}

impl TaskRow {
    /// Decodes the [`task_columns`] of `row`.
    pub(crate) fn decode(row: &impl Columns) -> Result<Self, StoreError> {
        let outcome = row
            .opt_text(9)?
            .map(|text| json::<Outcome>(&text))
            .transpose()?;
        Ok(Self {
            id: Arc::from(row.text(0)?),
            owner: Arc::from(row.text(1)?),
            tool: Arc::from(row.text(2)?),
            state: State {
                status: parse_status(&row.text(3)?)?,
                status_message: row.opt_text(4)?,
                created_at_ms: to_u64(row.int(5)?),
                last_updated_at_ms: to_u64(row.int(6)?),
                ttl_ms: row.opt_int(7)?.map(to_u64),
                cancel_requested: row.flag(10)?,
                purge_at_ms: row.opt_int(11)?.map(to_u64),
                parked_until_ms: row.opt_int(12)?.map(to_u64),
            },
            poll_interval_ms: row.opt_int(8)?.map(to_u64),
            pending: Pending::decode(row, PENDING_FROM)?,
            outcome,
        })
    }

    /// The changeable columns, encoded.
    pub(crate) fn encode(&self) -> Result<Encoded, StoreError> {
        let state = &self.state;
        Ok(Encoded {
            status: status_name(state.status)?,
            status_message: state.status_message.clone(),
            last_updated_at_ms: to_i64(state.last_updated_at_ms),
            outcome: self.outcome.as_ref().map(to_json).transpose()?,
            cancel_requested: state.cancel_requested,
            purge_at_ms: state
                .status
                .is_terminal()
                .then(|| state.purge_at_ms.map_or(NEVER, to_i64)),
            parked_until_ms: state.parked_until_ms.map(to_i64),
            pending: self.pending.encode()?,
        })
    }
}

/// A new task's row, every column encoded ([`record::create`]), as both stores' inserts
/// bind it: SQLite leaves out the cluster's columns (`runner`, `lease_ms`) and keeps
/// idempotency keys in a table of its own.
pub(crate) struct NewRow<'a> {
    pub(crate) id: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) tool: &'a str,
    pub(crate) status: &'static str,
    pub(crate) status_message: Option<std::borrow::Cow<'a, str>>,
    pub(crate) created_at_ms: i64,
    pub(crate) ttl_ms: Option<i64>,
    pub(crate) poll_interval_ms: Option<i64>,
    pub(crate) deadline_ms: Option<i64>,
    /// Its [`Pending`] ([`record::create_pending`]: the answers it was created with, their
    /// keys as used), in [`row::PENDING_COLUMNS`]' order.
    pub(crate) pending: EncodedPending,
    /// What the task was created with ([`TaskOrigin::encode`]), in
    /// [`row::ORIGIN_COLUMNS`]' order.
    pub(crate) origin: EncodedOrigin,
    #[cfg(feature = "postgres")]
    pub(crate) idempotency_key: Option<&'a str>,
    /// The instance that runs the work, and its first lease's length; NULL: queued.
    #[cfg(feature = "postgres")]
    pub(crate) runner: Option<&'a str>,
    #[cfg(feature = "postgres")]
    pub(crate) lease_ms: Option<i64>,
    /// The priority while queued ([`NewTask::priority`]).
    #[cfg(feature = "postgres")]
    pub(crate) priority: i16,
    /// The per-key concurrency limit's key ([`NewTask::limit_key`]).
    #[cfg(feature = "postgres")]
    pub(crate) limit_key: Option<&'a str>,
}

impl<'a> NewRow<'a> {
    /// `task` created at `now` ([`record::create`]), encoded.
    pub(crate) fn encode(task: &'a NewTask, now: u64) -> Result<Self, StoreError> {
        // The message is bound from the task, as the state machine keeps it.
        let state = record::create(None, task.ttl, now);
        Ok(Self {
            id: &task.id,
            owner: &task.owner,
            tool: &task.tool,
            status: status_name(state.status)?,
            status_message: task.status_message.as_deref().map(record::storable_text),
            created_at_ms: to_i64(state.created_at_ms),
            ttl_ms: state.ttl_ms.map(to_i64),
            poll_interval_ms: task.poll_interval.map(|p| to_i64(millis(p))),
            deadline_ms: state.deadline_ms().map(to_i64),
            pending: record::create_pending(task.answers.clone(), task.asked_at_step.clone())
                .encode()?,
            origin: task.origin.encode()?,
            #[cfg(feature = "postgres")]
            idempotency_key: task.idempotency_key.as_deref(),
            #[cfg(feature = "postgres")]
            runner: task.runner.as_ref().map(|r| &*r.instance),
            #[cfg(feature = "postgres")]
            lease_ms: task.runner.as_ref().map(|r| to_i64(millis(r.lease))),
            #[cfg(feature = "postgres")]
            priority: task.priority,
            #[cfg(feature = "postgres")]
            limit_key: task.limit_key.as_deref(),
        })
    }
}

/// The snapshot of `task` as a store creates it at `now` ([`record::create`]).
pub(crate) fn created_snapshot(task: &NewTask, now: u64) -> TaskSnapshot {
    let state = record::create(task.status_message.clone(), task.ttl, now);
    row::snapshot(
        (task.id.clone(), task.owner.clone(), task.tool.clone()),
        state,
        task.poll_interval.map(millis),
        InputRequests::new(),
        None,
    )
}

/// A live task's replay data from its [`recovery_columns`], with its `steps`.
pub(crate) fn recovery(row: &impl Columns, steps: Vec<Step>) -> Result<Recovery, StoreError> {
    Ok(Recovery {
        id: Arc::from(row.text(0)?),
        owner: Arc::from(row.text(1)?),
        tool: Arc::from(row.text(2)?),
        answers: json(&row.text(3)?)?,
        cancel_requested: row.flag(4)?,
        origin: TaskOrigin::decode(row, 5)?,
        steps,
        woken: false,
        woken_by_timer_ms: None,
    })
}

/// Numbered placeholders from `first` on, one per column of `columns`, as a list
/// (`?3, ?4`, with `mark` `?`) or, with `assign`, as assignments (`a = $3, b = $4`).
pub(crate) fn placeholders(mark: char, first: usize, columns: &[&str], assign: bool) -> String {
    let each = columns.iter().zip(first..).map(|(column, n)| match assign {
        true => format!("{column} = {mark}{n}"),
        false => format!("{mark}{n}"),
    });
    each.collect::<Vec<_>>().join(", ")
}

/// The origin columns a task's end clears ([`TaskOrigin::ended`]), as `, col = ..`
/// assignments, applied where `ended` (an SQL condition) holds: the replay data goes with
/// the task's end, as the memory store drops it.
pub(crate) fn clear_origin(ended: &str) -> String {
    TaskOrigin::ended_columns()
        .into_iter()
        .map(|(column, kept)| {
            format!(", {column} = CASE WHEN {ended} THEN {kept} ELSE {column} END")
        })
        .collect()
}

/// Whether a task whose status is the SQL expression `status` drops its history as it ends
/// (steps, answers, origin): not when it keeps it ([`record::keeps_history`]).
pub(crate) fn drops_history(status: &str) -> String {
    let kept = [TaskStatus::Failed, TaskStatus::Cancelled].map(status_word);
    format!("{status} NOT IN ('{}')", kept.join("', '"))
}

/// The end of live tasks in one statement, for a store that ends many at once (Postgres's
/// batched finish and expiry sweep): the guard and the SET list of [`record::finish`] and
/// [`record::apply_due`] in SQL over a task row `t`, made from the state machine's
/// constants. `now` (and the other arguments) are SQL expressions. The tests below hold
/// both against the transitions.
#[cfg(any(test, feature = "postgres"))]
pub(crate) mod end_sql {
    use super::{Pending, clear_origin, record};

    /// `t` is live at `now` and not past its TTL: what a finish needs, and an expiry
    /// refuses (record: `check_live`, `due`).
    pub(crate) fn live(now: &str) -> String {
        format!(
            "{} AND (t.deadline_ms IS NULL OR t.deadline_ms > {now})",
            is_live()
        )
    }

    /// `t` is live and past its TTL at `now`: it expires (`Due::Expiry`).
    pub(crate) fn expired(now: &str) -> String {
        format!("{} AND t.deadline_ms <= {now}", is_live())
    }

    fn is_live() -> String {
        let names = record::LIVE.map(super::status_word);
        format!(
            "t.purge_at_ms IS NULL AND t.status IN ('{}')",
            names.join("', '")
        )
    }

    /// What `record::end` writes: the terminal `status`, `outcome` and `message`, the
    /// purge time, `lastUpdatedAt` moved forward to `now`, the live data dropped.
    pub(crate) fn set(
        status: &str,
        outcome: &str,
        message: &str,
        now: &str,
        purge: &str,
    ) -> String {
        let drops = super::drops_history(status);
        let pending: String = Pending::ended_columns()
            .into_iter()
            .map(|(column, value, always)| match always {
                true => format!(", {column} = {value}"),
                false => format!(", {column} = CASE WHEN {drops} THEN {value} ELSE t.{column} END"),
            })
            .collect();
        format!(
            "status = {status}, outcome = {outcome}, status_message = {message}, \
             purge_at_ms = {purge}, parked_until_ms = NULL, \
             last_updated_at_ms = CASE WHEN {now} > t.last_updated_at_ms THEN {now} \
             ELSE t.last_updated_at_ms + 1 END{pending}{}",
            clear_origin(&drops),
        )
    }

    /// A finished task's purge time (`record::finish`): its deadline, or never.
    pub(crate) fn finish_purge() -> String {
        format!("COALESCE(t.deadline_ms, {})", super::NEVER)
    }

    /// An expired task's purge time (`record::apply_due`): `retention` after its
    /// deadline, saturating without computing a sum that overflows.
    pub(crate) fn expiry_purge(retention: &str) -> String {
        let never = super::NEVER;
        format!(
            "CASE WHEN t.deadline_ms > {never} - {retention} THEN {never} \
             ELSE t.deadline_ms + {retention} END"
        )
    }
}

/// A step from its `seq`, `name` and `value` columns, read from `first` on.
pub(crate) fn step(row: &impl Columns, first: usize) -> Result<Step, StoreError> {
    Ok(Step::new(
        to_u64(row.int(first)?),
        row.text(first + 1)?,
        json(&row.text(first + 2)?)?,
    ))
}

/// A status as the stores write it (its wire name).
pub(crate) fn status_name(status: TaskStatus) -> Result<&'static str, StoreError> {
    super::status::known_word(status).ok_or_else(|| {
        StoreError::backend(format!(
            "the task status {status:?} has no stored form in this build"
        ))
    })
}

/// The status a store wrote as `name`; any other name is an error, never a guess.
pub(crate) fn parse_status(name: &str) -> Result<TaskStatus, StoreError> {
    super::status::parse_status(name)
        .ok_or_else(|| StoreError::backend(format!("unknown task status `{name}` in the database")))
}

#[cfg(test)]
#[cfg(feature = "sqlite")]
mod tests {
    //! [`end_sql`] held against the state machine: from every start state, each end run by
    //! its transition in Rust and by its SQL (on SQLite, whose dialect the fragments keep
    //! to) leaves the same row; where the transition does not apply, the SQL changes nothing.

    use std::time::Duration;

    use rmcp::model::InputRequest;
    use rusqlite::{Connection, params};
    use serde_json::json;

    use super::*;
    use crate::store::record::Due;

    const T0: u64 = 1_000_000;

    struct Sql<'a, 'r>(&'a rusqlite::Row<'r>);

    impl Columns for Sql<'_, '_> {
        fn text(&self, index: usize) -> Result<String, StoreError> {
            Ok(self.0.get(index).expect("a text column"))
        }
        fn opt_text(&self, index: usize) -> Result<Option<String>, StoreError> {
            Ok(self.0.get(index).expect("a text column"))
        }
        fn int(&self, index: usize) -> Result<i64, StoreError> {
            Ok(self.0.get(index).expect("an integer column"))
        }
        fn opt_int(&self, index: usize) -> Result<Option<i64>, StoreError> {
            Ok(self.0.get(index).expect("an integer column"))
        }
        fn flag(&self, index: usize) -> Result<bool, StoreError> {
            Ok(self.0.get(index).expect("a flag column"))
        }
    }

    /// An origin whose every field is set (what an end clears shows).
    fn origin() -> TaskOrigin {
        TaskOrigin {
            tool_version: Arc::from("2.1"),
            arguments: json!({ "n": 3 }).as_object().cloned().unwrap(),
            request_meta: json!({ "m": 1 }).as_object().cloned().unwrap(),
            trace_context: crate::trace::TraceContext::parse(
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                None,
            ),
        }
    }

    /// A database holding `task` with `origin` alone, written by the codec.
    fn db(task: &TaskRow, origin: &TaskOrigin) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!(
            "CREATE TABLE tasks (id TEXT, owner TEXT, tool TEXT, status TEXT, \
             status_message TEXT, created_at_ms INTEGER, last_updated_at_ms INTEGER, \
             ttl_ms INTEGER, poll_interval_ms INTEGER, outcome TEXT, \
             cancel_requested INTEGER, purge_at_ms INTEGER, parked_until_ms INTEGER, \
             deadline_ms INTEGER, {} TEXT, {} TEXT)",
            row::PENDING_COLUMNS.join(" TEXT, "),
            row::ORIGIN_COLUMNS.join(" TEXT, "),
        ))
        .unwrap();
        let (row, state) = (task.encode().unwrap(), &task.state);
        let head = params![
            &*task.id,
            &*task.owner,
            &*task.tool,
            row.status,
            row.status_message,
            to_i64(state.created_at_ms),
            row.last_updated_at_ms,
            state.ttl_ms.map(to_i64),
            task.poll_interval_ms.map(to_i64),
            row.outcome,
            row.cancel_requested,
            row.purge_at_ms,
            row.parked_until_ms,
            state.deadline_ms().map(to_i64),
        ];
        let origin = origin.encode().unwrap();
        let values: Vec<&dyn rusqlite::ToSql> = head
            .iter()
            .copied()
            .chain(row.pending.iter().map(|c| c as &dyn rusqlite::ToSql))
            .chain(origin.iter().map(|c| c as &dyn rusqlite::ToSql))
            .collect();
        let marks = vec!["?"; values.len()].join(", ");
        conn.execute(&format!("INSERT INTO tasks VALUES ({marks})"), &*values)
            .unwrap();
        conn
    }

    /// The row as stored, decoded, with its origin (a task written and read back, so that
    /// two compare as the store holds them).
    fn stored(conn: &Connection) -> (TaskRow, TaskOrigin) {
        let sql = concat!(
            "SELECT ",
            task_columns!(),
            ", ",
            crate::store::row::origin_columns!(),
            " FROM tasks"
        );
        conn.query_row(sql, [], |row| {
            let row = Sql(row);
            Ok((
                TaskRow::decode(&row).unwrap(),
                TaskOrigin::decode(&row, TASK_COLUMNS).unwrap(),
            ))
        })
        .unwrap()
    }

    /// The statement changed one row exactly when the transition applies (`want`), and
    /// the row is then `want` with its origin ended (unless it keeps its history), else
    /// `start` as it was.
    fn assert_ended_as(
        conn: &Connection,
        changed: usize,
        want: Option<TaskRow>,
        start: &TaskRow,
        context: &str,
    ) {
        assert_eq!(changed == 1, want.is_some(), "{context}");
        let want = match want {
            Some(want) if record::keeps_history(want.state.status) => db(&want, &origin()),
            Some(want) => db(&want, &origin().ended()),
            None => db(start, &origin()),
        };
        assert_eq!(stored(conn), stored(&want), "{context}");
    }

    #[allow(deprecated, reason = "roots/list is the simplest input request")]
    fn roots() -> InputRequest {
        InputRequest::ListRoots(rmcp::model::ListRootsRequest {
            method: Default::default(),
            extensions: Default::default(),
        })
    }

    /// Live tasks (working, asking, answered, cancel requested, touched after the ends'
    /// clock readings; with a TTL, none, one past due) and ended ones.
    fn starts() -> Vec<TaskRow> {
        let mut starts = Vec::new();
        for ttl in [None, Some(100), Some(5_000), Some(u64::MAX / 2)] {
            let new = NewTask::new(Arc::from("t"), Arc::from("alice"), Arc::from("tool"))
                .with_ttl(ttl.map(Duration::from_millis))
                .with_status_message(Some("starting".into()))
                .with_answers([("early".to_owned(), json!(1))].into_iter().collect());
            let task = TaskRow {
                id: Arc::clone(&new.id),
                owner: Arc::clone(&new.owner),
                tool: Arc::clone(&new.tool),
                poll_interval_ms: Some(500),
                state: record::create(new.status_message, new.ttl, T0),
                pending: record::create_pending(new.answers, new.asked_at_step),
                outcome: None,
            };
            let mut asking = task.clone();
            record::request_input(&mut asking, T0 + 1, "a", roots(), 0).unwrap();
            record::request_input(&mut asking, T0 + 1, "b", roots(), 3).unwrap();
            let mut answered = asking.clone();
            let answer = [("a".to_owned(), json!("yes"))].into_iter().collect();
            let _ = record::deliver_input(&mut answered, T0 + 2, answer);
            let mut cancelled = task.clone();
            let _ = record::request_cancel(&mut cancelled, T0 + 3);
            let mut ahead = task.clone();
            record::set_status_message(&mut ahead, T0 + 9_000, Some("later".into())).unwrap();
            let mut ended = asking.clone();
            record::finish(&mut ended, T0 + 4, Outcome::Cancelled).unwrap();
            starts.extend([task, asking, answered, cancelled, ahead, ended]);
        }
        starts
    }

    const NOW: [u64; 3] = [T0 + 50, T0 + 500, T0 + 8_000];

    /// The batched finish: for every start state, outcome and clock reading, the SQL ends
    /// the task exactly as `record::finish` does when the task is live and not due, and
    /// leaves it as it is otherwise.
    #[test]
    fn the_finish_sql_is_the_finish_transition() {
        let sql = format!(
            "UPDATE tasks AS t SET {} WHERE {}",
            end_sql::set("?1", "?2", "?3", "?4", &end_sql::finish_purge()),
            end_sql::live("?4"),
        );
        let failed = Outcome::Failed(
            json!({ "code": -1, "message": "no" })
                .as_object()
                .cloned()
                .unwrap(),
        );
        let done = Outcome::Completed(json!({ "content": [] }).as_object().cloned().unwrap());
        for start in starts() {
            for outcome in [done.clone(), failed.clone(), Outcome::Cancelled] {
                for now in NOW {
                    let mut want = start.clone();
                    let applies = record::due(&want.state, now) == Due::Nothing
                        && record::finish(&mut want, now, outcome.clone()).is_ok();
                    let conn = db(&start, &origin());
                    let (status, message) = record::finished(&outcome);
                    let status = status_name(status).unwrap();
                    let encoded = to_json(&outcome).unwrap();
                    let changed = conn
                        .execute(&sql, params![status, encoded, message, to_i64(now)])
                        .unwrap();
                    let context = format!("{start:?} finished with {outcome:?} at {now}");
                    assert_ended_as(&conn, changed, applies.then_some(want), &start, &context);
                }
            }
        }
    }

    /// The expiry sweep: for every start state, clock reading and retention, the SQL
    /// expires the task exactly as `record::apply_due` does, and leaves it as it is when
    /// nothing expires.
    #[test]
    fn the_expiry_sql_is_the_expiry_transition() {
        let sql = format!(
            "UPDATE tasks AS t SET {} WHERE {}",
            end_sql::set("?1", "?2", "?3", "?4", &end_sql::expiry_purge("?5")),
            end_sql::expired("?4"),
        );
        let outcome = record::expired_outcome();
        let status = status_name(outcome.status()).unwrap();
        let encoded = to_json(&outcome).unwrap();
        for start in starts() {
            for now in NOW {
                for retention in [0, 50, u64::MAX] {
                    let mut want = start.clone();
                    let applies = record::apply_due(&mut want, now, retention) == Due::Expiry;
                    let conn = db(&start, &origin());
                    let changed = conn
                        .execute(
                            &sql,
                            params![
                                status,
                                encoded,
                                record::EXPIRED_MESSAGE,
                                to_i64(now),
                                to_i64(retention)
                            ],
                        )
                        .unwrap();
                    let context = format!("{start:?} expired at {now}, retention {retention}");
                    assert_ended_as(&conn, changed, applies.then_some(want), &start, &context);
                }
            }
        }
    }

    #[test]
    fn an_outcome_is_stored_as_earlier_builds_wrote_it() {
        // Rows written by earlier builds hold these texts: they must read back, and an
        // outcome must be written the same way.
        for stored in [
            r#"{"completed":{"content":[],"isError":false}}"#,
            r#"{"failed":{"code":-32603,"message":"task expired"}}"#,
            r#""cancelled""#,
        ] {
            let outcome: Outcome = json(stored).unwrap();
            assert_eq!(to_json(&outcome).unwrap(), stored);
        }
        assert!(json::<Outcome>(r#""completed""#).is_err());
    }
}
