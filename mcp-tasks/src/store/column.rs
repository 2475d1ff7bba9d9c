//! A task row's columns as the SQL stores' drivers read and write them: by index, JSON as
//! text, milliseconds as signed integers. The leaf the row ([`row`](super::row)) and the
//! codec ([`codec`](super::codec)) both stand on.

use super::StoreError;

/// A row as a store's driver reads it, column by column (by index).
pub(crate) trait Columns {
    /// A text column.
    fn text(&self, index: usize) -> Result<String, StoreError>;
    /// A nullable text column.
    fn opt_text(&self, index: usize) -> Result<Option<String>, StoreError>;
    /// An integer column.
    fn int(&self, index: usize) -> Result<i64, StoreError>;
    /// A nullable integer column.
    fn opt_int(&self, index: usize) -> Result<Option<i64>, StoreError>;
    /// A boolean column (however the database stores it).
    fn flag(&self, index: usize) -> Result<bool, StoreError>;
}

/// A JSON column.
pub(crate) fn json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::backend(format!("unreadable JSON in a task row: {e}")))
}

/// A value as a JSON column.
pub(crate) fn to_json(value: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::backend(format!("a task field could not be written as JSON: {e}")))
}

/// Milliseconds as a column (saturating).
pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A column as milliseconds (a negative one as 0).
pub(crate) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}
