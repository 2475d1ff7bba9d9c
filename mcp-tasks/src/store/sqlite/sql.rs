//! What every file of [`SqliteStore`](super::SqliteStore) shares below the task row: one
//! statement through the statement cache ([`exec`]), and a SQLite failure as a
//! [`StoreError`].

use rusqlite::Connection;

use crate::store::{BackendError, StoreError};

/// A backend error; a SQLite one keeps its extended result code, and is retryable when the
/// database was busy or locked.
pub(super) fn backend(error: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(error);
    let (code, retryable) = match boxed.downcast_ref::<rusqlite::Error>() {
        Some(rusqlite::Error::SqliteFailure(failure, _)) => (
            Some(failure.extended_code.to_string()),
            matches!(
                failure.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ),
        ),
        _ => (None, false),
    };
    StoreError::Backend(
        BackendError::new("the SQLite task store failed")
            .with_code(code)
            .retryable(retryable)
            .with_source(boxed),
    )
}

/// Runs one statement through the connection's statement cache.
pub(super) fn exec(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}
