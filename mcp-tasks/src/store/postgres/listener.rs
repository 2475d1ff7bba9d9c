//! Wake-ups of [`PostgresStore`](super::PostgresStore): one `LISTEN` connection per store,
//! reconnected when it fails, that turns every notification on the store's channel into a
//! [`Notice`] (`notice.rs` decodes them), and sends no query but its `LISTEN`. Which of them
//! matter is the runtime's knowledge (module docs of [`postgres`](super), "Wake-ups").

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use tokio::sync::{broadcast, mpsc};
use tokio_postgres::AsyncMessage;
use tokio_util::sync::CancellationToken;

use crate::{RetryPolicy, store::Notice};

/// Everything the listener task needs.
pub(super) struct Listener {
    /// The store's connection settings and TLS connector.
    pub(super) config: super::tls::Connect,
    pub(super) channel: Arc<str>,
    pub(super) sender: broadcast::Sender<Notice>,
    pub(super) stop: CancellationToken,
}

/// The first pause before reconnecting after the listening connection failed; each failure
/// in a row doubles it, up to [`RECONNECT_MAX`], and a connection that listened resets it.
const RECONNECT_FIRST: Duration = Duration::from_millis(250);
/// The longest pause between two reconnection attempts.
const RECONNECT_MAX: Duration = Duration::from_secs(30);

/// The pause after `failures` failed attempts in a row (at least 1): doubling from
/// [`RECONNECT_FIRST`] up to [`RECONNECT_MAX`], then scaled by `jitter` in [0.5, 1.0] so that
/// instances which lost the database together do not reconnect in lockstep.
fn reconnect_delay(failures: u32, jitter: f64) -> Duration {
    let backoff = RetryPolicy::default().with_backoff(RECONNECT_FIRST, 2.0, RECONNECT_MAX);
    backoff
        .delay_after(failures)
        .mul_f64(jitter.clamp(0.5, 1.0))
}

/// A jitter factor in [0.5, 1.0] from the operating system's random source (1.0 if it is
/// unavailable: no jitter rather than no reconnection).
fn jitter() -> f64 {
    getrandom::u32().map_or(1.0, |n| 0.5 + f64::from(n) / f64::from(u32::MAX) / 2.0)
}

impl Listener {
    /// Listens until the store is dropped, reconnecting when the connection is lost, with
    /// exponential backoff and jitter between failed attempts.
    pub(super) async fn run(self) {
        let mut failures = 0u32;
        let mut listened_before = false;
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return,
                listened = self.listen_once(listened_before) => {
                    listened_before |= listened;
                    failures = if listened { 1 } else { failures.saturating_add(1) };
                }
            }
            let pause = reconnect_delay(failures, jitter());
            tracing::debug!(
                ?pause,
                failures,
                "mcp-tasks: reconnecting the Postgres LISTEN connection"
            );
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// One listening connection, until it fails. `true` when it got as far as listening.
    /// After an earlier connection listened (`again`), a [`Notice::Missed`] follows the
    /// `LISTEN`: what was announced while no connection listened is read back by the
    /// runtime, and everything later arrives here.
    async fn listen_once(&self, again: bool) -> bool {
        let Ok((client, mut messages)) = self.config.connect().await else {
            tracing::warn!("mcp-tasks: the Postgres LISTEN connection could not be opened");
            return false;
        };
        let (notes, mut notifications) = mpsc::unbounded_channel();
        let driver = tokio::spawn(async move {
            while let Some(Ok(message)) = messages.next().await {
                if let AsyncMessage::Notification(n) = message
                    && notes.send(n.payload().to_owned()).is_err()
                {
                    return;
                }
            }
        });
        let listen = format!("LISTEN \"{}\"", self.channel);
        if client.batch_execute(&listen).await.is_err() {
            driver.abort();
            return false;
        }
        if again {
            tracing::info!("mcp-tasks: the Postgres LISTEN connection is back");
            let _ = self.sender.send(Notice::Missed);
        }
        while let Some(payload) = notifications.recv().await {
            if let Some(notice) = super::notice::decode(&payload) {
                let _ = self.sender.send(notice);
            }
        }
        driver.abort();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnects_back_off_exponentially_with_jitter_up_to_a_cap() {
        let full = |failures| reconnect_delay(failures, 1.0);
        assert_eq!(full(1), Duration::from_millis(250));
        assert_eq!(full(2), Duration::from_millis(500));
        assert_eq!(full(3), Duration::from_secs(1));
        assert_eq!(full(8), Duration::from_secs(30), "capped");
        assert_eq!(full(u32::MAX), Duration::from_secs(30), "no overflow");
        assert_eq!(reconnect_delay(0, 1.0), Duration::from_millis(250));
        assert_eq!(reconnect_delay(3, 0.5), Duration::from_millis(500));
        assert_eq!(
            reconnect_delay(3, 0.0),
            Duration::from_millis(500),
            "jitter clamped"
        );
        for _ in 0..100 {
            let j = jitter();
            assert!((0.5..=1.0).contains(&j), "{j}");
        }
    }
}
