//! Wake-ups of [`PostgresStore`](super::PostgresStore): one `LISTEN` connection per store,
//! reconnected when it fails, that turns every notification on the store's channel into a
//! [`Wakeup`]. Which tasks run where is the runtime's knowledge, not the store's: every
//! answer and cancel of the task space is announced, and the runtime keeps the ones of the
//! tasks it runs (and re-reads those to cover a notification lost while this connection was
//! down). The listener itself sends no query but its `LISTEN`.
//!
//! Notification payloads on the store's channel: `a:<answer_seq>:<id>` (answers stored),
//! `c:<id>` (cancel intent), `q:<id>` (a task queued for a worker).

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use tokio::sync::{broadcast, mpsc};
use tokio_postgres::{AsyncMessage, NoTls};
use tokio_util::sync::CancellationToken;

use crate::store::{Wakeup, WakeupKind};

/// Everything the listener task needs.
pub(super) struct Listener {
    pub(super) config: tokio_postgres::Config,
    pub(super) channel: Arc<str>,
    pub(super) sender: broadcast::Sender<Wakeup>,
    pub(super) stop: CancellationToken,
}

/// Pause before reconnecting after the listening connection failed.
const RECONNECT: Duration = Duration::from_millis(500);

impl Listener {
    /// Listens until the store is dropped, reconnecting when the connection is lost.
    pub(super) async fn run(self) {
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = self.listen_once() => {}
            }
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep(RECONNECT) => {}
            }
        }
    }

    /// One listening connection, until it fails.
    async fn listen_once(&self) {
        let Ok((client, mut connection)) = self.config.connect(NoTls).await else {
            tracing::warn!("mcp-tasks: the Postgres LISTEN connection could not be opened");
            return;
        };
        let (notes, mut notifications) = mpsc::unbounded_channel();
        let driver = tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(AsyncMessage::Notification(n)) => {
                        if notes.send(n.payload().to_owned()).is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => return,
                }
            }
        });
        let listen = format!("LISTEN \"{}\"", self.channel);
        if client.batch_execute(&listen).await.is_err() {
            driver.abort();
            return;
        }
        while let Some(payload) = notifications.recv().await {
            if let Some(wakeup) = parse(&payload) {
                let _ = self.sender.send(wakeup);
            }
        }
        driver.abort();
    }
}

/// The wake-up a notification payload announces, if it is one.
fn parse(payload: &str) -> Option<Wakeup> {
    let (kind, rest) = payload.split_once(':')?;
    let (kind, id) = match kind {
        "q" => (WakeupKind::Queued, rest),
        "c" => (WakeupKind::Cancel, rest),
        // `a:<answer_seq>:<id>`: the sequence is for readers that keep what they saw.
        "a" => (WakeupKind::Answers, rest.split_once(':')?.1),
        _ => return None,
    };
    (!id.is_empty()).then(|| Wakeup {
        task_id: Arc::from(id),
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_parsed() {
        let wakeup = |id: &str, kind| {
            Some(Wakeup {
                task_id: Arc::from(id),
                kind,
            })
        };
        assert_eq!(parse("a:3:t-1"), wakeup("t-1", WakeupKind::Answers));
        assert_eq!(parse("c:t-1"), wakeup("t-1", WakeupKind::Cancel));
        assert_eq!(parse("q:t:2"), wakeup("t:2", WakeupKind::Queued));
        for bad in ["", "a:t", "x:t", "c:", "a:1:"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
