//! [`Owner`]: whose a task is.

use std::sync::Arc;

/// The principal a task belongs to: only requests of the same principal can read or steer
/// the task.
///
/// Put one in the request's extensions (for Streamable HTTP: an axum/tower layer that inserts
/// it into the HTTP request's extensions after authenticating the caller). A task records the
/// owner of the request that created it; `tasks/*` requests from any other owner answer as
/// for an unknown id. Requests without one get the engine's default owner.
// docs/protocol.md R49.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner(pub Arc<str>);

impl Owner {
    /// An owner named `name`.
    #[must_use]
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Self(name.into())
    }
}

/// The default owner of requests that carry no [`Owner`].
pub const DEFAULT_OWNER: &str = "anonymous";
