//! [`Owner`]: whose a task is, and what of a task an owner sees ([`visible_task`]).

use std::sync::Arc;

use crate::{
    runtime::Runtime,
    store::{StoreError, TaskSnapshot},
};

/// The principal a task belongs to: only requests of the same principal can read or steer
/// the task.
///
/// Put one in the request's extensions (for Streamable HTTP: an axum/tower layer that inserts
/// it into the HTTP request's extensions after authenticating the caller). A task records the
/// owner of the request that created it; `tasks/*` requests from any other owner answer as
/// for an unknown id. Requests without one get the engine's default owner. A name with a NUL
/// character is refused a task (`-32603`): a Postgres store could not keep it.
// docs/protocol.md R49.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner(pub Arc<str>);

impl Owner {
    /// An owner named `name`.
    #[must_use]
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Self(name.into())
    }

    /// The user this process runs as: the one principal of a stdio server (over stdio there
    /// is one client, the process that started the server). `$USER`, else `$LOGNAME` or
    /// `$USERNAME`, else (on Unix) `uid:<n>` of `/proc/self`, else [`DEFAULT_OWNER`].
    #[must_use]
    pub fn process_user() -> Self {
        for variable in ["USER", "LOGNAME", "USERNAME"] {
            if let Ok(name) = std::env::var(variable)
                && !name.is_empty()
            {
                return Self::new(name);
            }
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if let Ok(metadata) = std::fs::metadata("/proc/self") {
                return Self::new(format!("uid:{}", metadata.uid()));
            }
        }
        Self::new(DEFAULT_OWNER)
    }
}

/// The default owner of requests that carry no [`Owner`].
pub const DEFAULT_OWNER: &str = "anonymous";

/// The tasks `ids` name as `tasks/get` of `owner` reads each ([`visible_task`]), in their
/// order, in one read of the store.
#[cfg(any(feature = "http", feature = "stdio"))]
pub(super) async fn visible_tasks(
    runtime: &Runtime,
    ids: &[Arc<str>],
    owner: &str,
) -> Result<Vec<Option<TaskSnapshot>>, StoreError> {
    Ok(runtime
        .read_many(ids)
        .await?
        .into_iter()
        .map(|snapshot| snapshot.filter(|snapshot| &*snapshot.owner == owner))
        .collect())
}

/// Task `id` as `tasks/get` of `owner` reads it: `None` when it is unknown, purged or
/// another owner's. `tasks/get` answers its [`TaskSnapshot::into_detailed`]; so does every
/// `notifications/tasks` (`push/`), from this same read.
pub(super) async fn visible_task(
    runtime: &Runtime,
    id: &str,
    owner: &str,
) -> Result<Option<TaskSnapshot>, StoreError> {
    Ok(runtime
        .read(id)
        .await?
        .filter(|snapshot| &*snapshot.owner == owner))
}
