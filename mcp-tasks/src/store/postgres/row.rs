//! The statements of [`PostgresStore`](super::PostgresStore) and the task row they read and
//! write: the shared codec ([`codec`](crate::store::codec)) plus the lease columns.

use super::{PgError, StoreError};
use crate::store::codec::{self, Columns, TASK_COLUMNS, TaskRow, task_columns};

/// The store's clock reading, in epoch milliseconds, on the database server: the one clock
/// all instances share, for lease deadlines.
macro_rules! db_now_ms {
    () => {
        "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
    };
}
pub(super) use db_now_ms;

/// The columns [`Row::decode`] reads, in its order: the codec's, then the lease's.
macro_rules! row_columns {
    () => {
        concat!(task_columns!(), ", answer_seq, runner, epoch")
    };
}

/// One task, for a read.
pub(super) const SELECT: &str = concat!("SELECT ", row_columns!(), " FROM tasks WHERE id = $1");

/// Several tasks (`$1`: an array of ids), each row as [`SELECT`] reads it.
pub(super) const SELECT_ANY: &str =
    concat!("SELECT ", row_columns!(), " FROM tasks WHERE id = ANY($1)");

/// One task, locked for a change.
pub(super) const SELECT_FOR_UPDATE: &str = concat!(
    "SELECT ",
    row_columns!(),
    " FROM tasks WHERE id = $1 FOR UPDATE"
);

/// Writes back every field a change can touch ([`codec::Encoded`]): its own as `$2..$9`,
/// then its pending's, in [`PENDING_COLUMNS`](crate::store::row::PENDING_COLUMNS)' order. A
/// parked task's lease deadline follows its park (`$9`): a park gives the lease up until
/// the task's timer (the epoch moves on, so the work that parked writes nothing more), and
/// a wake-up (0) lapses it, so the lapsed-lease claims take the task.
pub(super) static WRITE_BACK: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "UPDATE tasks SET status = $2, status_message = $3, last_updated_at_ms = $4, \
         answer_seq = $5, outcome = $6, cancel_requested = $7, purge_at_ms = $8, \
         parked_until_ms = $9, lease_until_ms = COALESCE($9, lease_until_ms), \
         epoch = epoch + CASE WHEN $9::bigint IS NOT NULL AND parked_until_ms IS NULL \
         THEN 1 ELSE 0 END, {}{} WHERE id = $1",
        codec::placeholders('$', 10, &crate::store::row::PENDING_COLUMNS, true),
        codec::clear_origin(&format!(
            "$8::bigint IS NOT NULL AND {}",
            codec::drops_history("$2")
        )),
    )
});

/// A Postgres result row, for the codec: every read is a `try_get`, a wrong type an error.
pub(super) struct PgRow<'a>(pub(super) &'a tokio_postgres::Row);

impl PgRow<'_> {
    fn get<'r, T: tokio_postgres::types::FromSql<'r>>(
        &'r self,
        index: usize,
    ) -> Result<T, StoreError> {
        self.0
            .try_get(index)
            .map_err(|e| PgError::query("an unreadable task row", e))
    }
}

impl Columns for PgRow<'_> {
    fn text(&self, index: usize) -> Result<String, StoreError> {
        self.get(index)
    }

    fn opt_text(&self, index: usize) -> Result<Option<String>, StoreError> {
        self.get(index)
    }

    fn int(&self, index: usize) -> Result<i64, StoreError> {
        self.get(index)
    }

    fn opt_int(&self, index: usize) -> Result<Option<i64>, StoreError> {
        self.get(index)
    }

    fn flag(&self, index: usize) -> Result<bool, StoreError> {
        self.get(index)
    }
}

/// Column `index` of `row` as text (an id), a wrong type an error.
pub(super) fn text(row: &tokio_postgres::Row, index: usize) -> Result<String, StoreError> {
    PgRow(row).text(index)
}

/// Column `index` of `row` as an integer, a wrong type an error.
pub(super) fn int(row: &tokio_postgres::Row, index: usize) -> Result<i64, StoreError> {
    PgRow(row).int(index)
}

/// A row of `tasks`, decoded: the task and its lease.
#[derive(Debug)]
pub(super) struct Row {
    pub(super) task: TaskRow,
    pub(super) answer_seq: i64,
    pub(super) runner: Option<String>,
    pub(super) epoch: u64,
}

impl Row {
    /// Decodes a row selected with [`SELECT`] or [`SELECT_FOR_UPDATE`].
    pub(super) fn decode(row: &tokio_postgres::Row) -> Result<Self, StoreError> {
        let row = PgRow(row);
        Ok(Self {
            task: TaskRow::decode(&row)?,
            answer_seq: row.int(TASK_COLUMNS)?,
            runner: row.opt_text(TASK_COLUMNS + 1)?,
            epoch: codec::to_u64(row.int(TASK_COLUMNS + 2)?),
        })
    }

    /// Writes the changeable fields back ([`WRITE_BACK`]).
    pub(super) async fn write_back(&self, tx: &super::pool::Tx) -> Result<(), StoreError> {
        let row = self.task.encode()?;
        let head: [&(dyn tokio_postgres::types::ToSql + Sync); 9] = [
            &&*self.task.id,
            &row.status,
            &row.status_message,
            &row.last_updated_at_ms,
            &self.answer_seq,
            &row.outcome,
            &row.cancel_requested,
            &row.purge_at_ms,
            &row.parked_until_ms,
        ];
        let pending = row.pending.iter().map(|column| column as _);
        let params: Vec<_> = head.into_iter().chain(pending).collect();
        tx.execute(&WRITE_BACK, &params, "could not update the task")
            .await
            .map(drop)
    }
}
