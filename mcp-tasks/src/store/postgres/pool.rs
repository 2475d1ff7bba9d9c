//! Connections of [`PostgresStore`](super::PostgresStore): the pool, transactions that never
//! return a connection to the pool in an unknown state, transparent retry of what is safe to
//! retry, and the errors a user can act on.

use deadpool_postgres::{Object, Pool, PoolError};
use tokio_postgres::{Row, types::ToSql};

use super::{BackendError, StoreError};

/// Builds the [`StoreError::Backend`] of a Postgres failure, with what the store was doing
/// and what the server (or the socket) said, in one message (the driver's own error chain is
/// folded into it), the SQLSTATE as its code, and whether it is worth retrying.
pub(super) struct PgError;

impl PgError {
    /// A failed query.
    pub(super) fn query(context: impl Into<String>, error: &tokio_postgres::Error) -> StoreError {
        let context = context.into();
        StoreError::Backend(
            BackendError::new(format!("{context}{}", detail(error)))
                .with_code(code(error))
                .retryable(retryable(error)),
        )
    }

    /// A failure that is not a query's (not retryable).
    pub(super) fn msg(context: String) -> StoreError {
        StoreError::Backend(BackendError::new(context))
    }

    /// [`query`](Self::query), taking the error.
    pub(super) fn owned(context: impl Into<String>, error: tokio_postgres::Error) -> StoreError {
        Self::query(context, &error)
    }

    /// `error` again, with `note` added to its message: the same code and retryability, for
    /// each caller of a batch that failed.
    pub(super) fn again(error: &StoreError, note: &str) -> StoreError {
        match error {
            StoreError::Backend(backend) => StoreError::Backend(
                BackendError::new(format!("{}{note}", chain(backend)))
                    .with_code(backend.code().map(str::to_owned))
                    .retryable(backend.is_retryable()),
            ),
            other => Self::msg(format!("{}{note}", chain(other))),
        }
    }
}

/// Whether a failed statement may succeed if tried again: the connection is gone, or the
/// server refused it for a passing reason (serialization failure, deadlock, lock not
/// available, too many connections).
fn retryable(error: &tokio_postgres::Error) -> bool {
    connection_lost(error)
        || error
            .as_db_error()
            .is_some_and(|db| matches!(db.code().code(), "40001" | "40P01" | "55P03" | "53300"))
}

fn code(error: &tokio_postgres::Error) -> Option<String> {
    error.as_db_error().map(|db| db.code().code().to_owned())
}

/// What the server (or the socket) said, in one line.
fn detail(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return format!(
            ": {} ({} {})",
            db.message(),
            db.severity(),
            db.code().code()
        );
    }
    let mut text = format!(": {error}");
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// Whether the error means the connection is gone (closed socket, a terminated backend, a
/// server shutting down), so that a new connection may succeed.
pub(super) fn connection_lost(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.as_db_error() {
        // Class 08 (connection exception) and 57P01-57P03 (admin / crash shutdown, cannot
        // connect now): the backend is gone.
        Some(db) => {
            let code = db.code().code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
        }
        // No server message: the socket failed.
        None => std::error::Error::source(error)
            .is_some_and(|source| source.downcast_ref::<std::io::Error>().is_some()),
    }
}

/// A connection from the pool, as a [`StoreError`] when none can be had.
pub(super) async fn get(pool: &Pool) -> Result<Object, StoreError> {
    get_or(pool, "could not connect to the Postgres server").await
}

/// [`get`], saying `context` when no connection can be opened.
pub(super) async fn get_or(pool: &Pool, context: &str) -> Result<Object, StoreError> {
    pool.get().await.map_err(|error| match error {
        PoolError::Backend(e) => PgError::owned(context, e),
        other => StoreError::Backend(
            BackendError::new(format!(
                "could not get a Postgres connection from the pool: {other}"
            ))
            .retryable(matches!(other, PoolError::Timeout(_))),
        ),
    })
}

/// Runs one read-only statement, again on a fresh connection if the first one turned out to
/// be gone (a backend terminated while idle in the pool): a read is safe to repeat.
pub(super) async fn read(
    pool: &Pool,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
    context: &str,
) -> Result<Vec<Row>, StoreError> {
    let mut retried = false;
    loop {
        let client = get(pool).await?;
        let attempt = async {
            let statement = client.prepare_cached(sql).await?;
            client.query(&statement, params).await
        }
        .await;
        match attempt {
            Ok(rows) => return Ok(rows),
            Err(error) if !retried && connection_lost(&error) => {
                drop(Object::take(client));
                retried = true;
            }
            Err(error) => {
                if connection_lost(&error) {
                    drop(Object::take(client));
                }
                return Err(PgError::owned(context, error));
            }
        }
    }
}

/// Runs one writing statement as its own transaction (autocommit: it is committed when its
/// answer arrives). Retried once on a fresh connection only when the first one turned out to
/// be gone before the statement was sent (while preparing it); a statement that was sent is
/// never repeated: if its answer is lost, whether it committed is unknown, and the error says
/// so.
pub(super) async fn write_one(
    pool: &Pool,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
    context: &str,
) -> Result<Vec<Row>, StoreError> {
    let mut retried = false;
    loop {
        let client = get(pool).await?;
        let statement = match client.prepare_cached(sql).await {
            Ok(statement) => statement,
            Err(error) if !retried && connection_lost(&error) => {
                drop(Object::take(client));
                retried = true;
                continue;
            }
            Err(error) => {
                drop(Object::take(client));
                return Err(PgError::owned(context, error));
            }
        };
        return match client.query(&statement, params).await {
            Ok(rows) => Ok(rows),
            Err(error) => {
                let lost = connection_lost(&error);
                drop(Object::take(client));
                Err(PgError::owned(
                    if lost {
                        format!(
                            "{context} (the connection was lost: whether the change was \
                             stored is unknown, read the task again)"
                        )
                    } else {
                        context.to_owned()
                    },
                    error,
                ))
            }
        };
    }
}

/// An open transaction on a pooled connection. Committed or rolled back, the connection goes
/// back to the pool; dropped in any other state (an error, or the caller's future dropped
/// mid-way), the connection is closed instead, and the server rolls the transaction back.
pub(super) struct Tx {
    client: Option<Object>,
}

impl Tx {
    /// `BEGIN` on a pooled connection; on a second one if the first turned out to be gone
    /// (nothing was done yet, so this is safe to repeat).
    pub(super) async fn begin(pool: &Pool) -> Result<Self, StoreError> {
        let mut retried = false;
        loop {
            let client = get(pool).await?;
            match client.batch_execute("BEGIN").await {
                Ok(()) => {
                    return Ok(Self {
                        client: Some(client),
                    });
                }
                Err(error) if !retried && connection_lost(&error) => {
                    drop(Object::take(client));
                    retried = true;
                }
                Err(error) => {
                    drop(Object::take(client));
                    return Err(PgError::owned("could not begin a transaction", error));
                }
            }
        }
    }

    /// The connection. Only `commit` and `rollback` take it, and they consume `self`, so
    /// this answers an error only if that ever changed.
    fn client(&self) -> Result<&Object, StoreError> {
        self.client.as_ref().ok_or_else(ended)
    }

    /// Runs one statement (prepared once per connection) and returns its rows.
    pub(super) async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        context: &str,
    ) -> Result<Vec<Row>, StoreError> {
        let client = self.client()?;
        let statement = client
            .prepare_cached(sql)
            .await
            .map_err(|e| PgError::owned(context, e))?;
        client
            .query(&statement, params)
            .await
            .map_err(|e| PgError::owned(context, e))
    }

    /// Runs one statement and returns the number of rows it changed.
    pub(super) async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        context: &str,
    ) -> Result<u64, StoreError> {
        let client = self.client()?;
        let statement = client
            .prepare_cached(sql)
            .await
            .map_err(|e| PgError::owned(context, e))?;
        client
            .execute(&statement, params)
            .await
            .map_err(|e| PgError::owned(context, e))
    }

    /// `COMMIT`. An error means the outcome is unknown to this process: the connection is
    /// closed, never reused.
    pub(super) async fn commit(mut self) -> Result<(), StoreError> {
        let client = self.client.take().ok_or_else(ended)?;
        match client.batch_execute("COMMIT").await {
            Ok(()) => Ok(()),
            Err(error) => {
                drop(Object::take(client));
                Err(PgError::owned(
                    "the commit failed (whether the change was stored is unknown: read the \
                     task again)",
                    error,
                ))
            }
        }
    }

    /// `ROLLBACK`; a connection that cannot roll back is closed instead.
    pub(super) async fn rollback(mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        if client.batch_execute("ROLLBACK").await.is_err() {
            drop(Object::take(client));
        }
    }
}

/// The error of a transaction used after it ended.
fn ended() -> StoreError {
    PgError::msg("the transaction has ended already".into())
}

impl Drop for Tx {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            drop(Object::take(client));
        }
    }
}

/// An error with its sources, in one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}
