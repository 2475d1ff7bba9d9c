//! What a store operation answers when it fails: [`StoreError`], with the configuration
//! ([`ConfigError`]) and backend ([`BackendError`]) failures a caller can act on.

use rmcp::model::TaskStatus;

/// A store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No task has this id (never created, or purged).
    #[error("task not found: it was never created in this store, or it ended and was purged")]
    NotFound,
    /// The store holds as many tasks as it may (a hard limit: nothing is evicted).
    #[error(
        "the task store is full ({max_tasks} tasks): retry once tasks finish and expire, or raise its limit"
    )]
    Full {
        /// The most tasks the store holds.
        max_tasks: usize,
    },
    /// The owner has as many live tasks in the task space as it may
    /// ([`Limits::max_live_tasks_per_owner`](crate::Limits::max_live_tasks_per_owner),
    /// counted by a cluster store across every instance); nothing was created.
    #[error(
        "owner `{owner}` has {quota} live tasks in the task space, the most one owner may have: \
         retry once some finish, are cancelled or expire"
    )]
    OwnerQuota {
        /// The owner.
        owner: String,
        /// The most live tasks the owner may have.
        quota: usize,
    },
    /// The task is terminal; it does not change any more.
    #[error("the task has already ended ({}) and does not change any more", super::status::status_word(*.0))]
    Terminal(TaskStatus),
    /// The id exists already.
    #[error("a task with this id exists already: create it under a new id")]
    DuplicateId,
    /// The input-request key was used before in this task.
    #[error(
        "input request key `{0}` was already used in this task: give each input request a key of its own"
    )]
    KeyReused(String),
    /// A park ([`Transition::Park`](super::Transition::Park)) was refused: what the task
    /// waits for has come (its answer was taken, or a cancel recorded). Nothing changed; the
    /// work goes on where it runs.
    #[error("the task was not parked: the answer it waits for or a cancel has come")]
    Woken,
    /// The store cannot be used as configured (a bad URL or schema name, a database written
    /// by a newer build, a store that lacks what the caller needs). Retrying does not help;
    /// the configuration has to change.
    #[error("the task store is not configured correctly: {0}")]
    Config(ConfigError),
    /// The backend failed: see [`BackendError::is_retryable`] and [`BackendError::code`]
    /// (or [`StoreError::is_retryable`] and [`StoreError::code`]). Its message, which can
    /// name the database's own words, is the source, so that a caller decides what to show.
    #[error("the task store's backend failed (its cause says how, and whether to retry)")]
    Backend(#[source] BackendError),
    /// The lease is not (or no longer) the task's: another instance holds the task at a
    /// newer epoch, or holds a lease that has not lapsed. Nothing changed.
    #[error(
        "the task's lease is held elsewhere (the task is at epoch {current}); nothing changed: \
         this instance no longer runs the task"
    )]
    Fenced {
        /// The epoch of the lease that was refused (`None` for an acquire).
        held: Option<u64>,
        /// The task's epoch in the store.
        current: u64,
    },
}

impl StoreError {
    /// Whether the same operation may succeed if tried again (a lost connection, a busy
    /// database, a serialization conflict). Only backend errors can be.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Backend(error) if error.is_retryable())
    }

    /// The backend's own code for the failure, when it gave one: the SQLSTATE for Postgres
    /// (e.g. `57P01`), the extended result code for SQLite (e.g. `5` for `SQLITE_BUSY`).
    #[must_use]
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Backend(error) => error.code(),
            _ => None,
        }
    }

    /// Whether the work on the task is to stop: it ended, was purged, or lost its lease.
    pub(crate) fn stops_work(&self) -> bool {
        matches!(
            self,
            Self::Terminal(_) | Self::NotFound | Self::Fenced { .. }
        )
    }

    /// A [`Backend`](Self::Backend) failure that is not retryable and has no backend code.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn backend(message: impl Into<String>) -> Self {
        Self::Backend(BackendError::new(message))
    }

    /// `result` with [`NotFound`](Self::NotFound) as `None`: a read of a task that may not
    /// exist.
    pub(crate) fn or_none<T>(result: Result<T, Self>) -> Result<Option<T>, Self> {
        match result {
            Ok(value) => Ok(Some(value)),
            Err(Self::NotFound) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// A configuration the store cannot work with, said in plain words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    message: String,
}

impl ConfigError {
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// A failure of a store's backend (its database, the connection to it, the data it holds),
/// with what the store was doing and what the backend said, in one message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct BackendError {
    message: String,
    code: Option<String>,
    retryable: bool,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

#[cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(dead_code, reason = "only the durable stores make backend errors")
)]
impl BackendError {
    /// A failure that is not retryable and has no backend code.
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: None,
            retryable: false,
            source: None,
        }
    }

    /// With the backend's code.
    pub(crate) fn with_code(mut self, code: Option<String>) -> Self {
        self.code = code;
        self
    }

    /// Retryable or not.
    pub(crate) fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// With the error that caused it.
    #[cfg(feature = "sqlite")]
    pub(crate) fn with_source(
        mut self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Whether the same operation may succeed if tried again: the connection was lost, the
    /// database was busy or locked, the transaction conflicted with another one. A write
    /// whose commit answer was lost may or may not have been stored; read the task again
    /// before repeating it.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// The backend's code for the failure, when it gave one: the SQLSTATE for Postgres, the
    /// extended result code for SQLite.
    #[must_use]
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_status_is_named_as_the_protocol_spells_it() {
        assert_eq!(
            StoreError::Terminal(TaskStatus::Completed).to_string(),
            "the task has already ended (completed) and does not change any more"
        );
    }
}
