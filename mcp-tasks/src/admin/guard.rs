//! Who may use the admin router: the credential check with its throttle, and the audit
//! events of what it lets through, as [the module](super) describes them. Beyond that: the
//! throttle's window counts from an address's first wrong credential, and a right one before
//! the limit clears the count; a request without any credential is not a failure (its `401`
//! makes a browser ask for one); the counts of at most 10,000 addresses are kept, beyond
//! which the others share one.

use std::{
    collections::HashMap,
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::credential::AdminCredential;

/// The `tracing` target of the admin router's audit events (see [`router`](super::router)).
pub const AUDIT_TARGET: &str = "mcp_tasks::audit";

/// How many addresses the throttle counts apart; the others share one count.
const MAX_ADDRESSES: usize = 10_000;

/// The client's address, when the server provides it (`ConnectInfo<SocketAddr>`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Client(pub(crate) Option<SocketAddr>);

impl Client {
    pub(crate) fn of(extensions: &axum::http::Extensions) -> Self {
        Self(
            extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(addr)| *addr),
        )
    }

    pub(crate) fn describe(self) -> String {
        self.0
            .map_or_else(|| "unknown".to_owned(), |addr| addr.to_string())
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Client {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::of(&parts.extensions))
    }
}

/// The failed-credential counts, per client address.
#[derive(Default)]
pub(crate) struct Throttle {
    counts: Mutex<HashMap<Option<IpAddr>, Count>>,
}

#[derive(Clone, Copy)]
struct Count {
    since: Instant,
    failures: u32,
}

/// What the credential check decided.
pub(crate) enum Checked {
    Accepted,
    /// No credential (not counted), or a wrong one (counted).
    Refused,
    /// Too many wrong ones from this address: wait this long.
    Throttled(Duration),
}

impl Throttle {
    /// Checks `presented` against `credential` for a request from `client` to `path`, with
    /// the credential's throttle.
    pub(crate) fn check(
        &self,
        credential: &AdminCredential,
        presented: Option<&str>,
        client: Client,
        path: &str,
    ) -> Checked {
        let now = Instant::now();
        let key = client.0.map(|addr| addr.ip());
        let mut counts = self.counts.lock();
        let known = counts.contains_key(&key);
        if !known && counts.len() >= MAX_ADDRESSES {
            counts.retain(|_, count| now < count.since + credential.failure_window);
        }
        // A new address beyond MAX_ADDRESSES shares the count of `None`.
        let key = key.filter(|_| known || counts.len() < MAX_ADDRESSES);
        if let Some(count) = counts.get(&key).copied() {
            let until = count.since + credential.failure_window;
            if now >= until {
                counts.remove(&key);
            } else if count.failures >= credential.max_failures {
                return Checked::Throttled(until - now);
            }
        }
        let Some(presented) = presented else {
            return Checked::Refused;
        };
        if credential.accepts(presented) {
            counts.remove(&key);
            return Checked::Accepted;
        }
        let count = counts.entry(key).or_insert(Count {
            since: now,
            failures: 0,
        });
        count.failures += 1;
        let failures = count.failures;
        drop(counts);
        tracing::warn!(
            target: AUDIT_TARGET,
            event = "login_failed",
            who = "unknown",
            client = %client.describe(),
            path,
            failures,
            "a wrong admin credential"
        );
        Checked::Refused
    }
}

/// Whole seconds to wait, rounded up (what `Retry-After` says).
pub(crate) fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}
