//! Wake-ups of [`PostgresStore`](super::PostgresStore): one `LISTEN` connection per store,
//! and a periodic re-read of the tasks whose leases were taken through the store (and of the
//! queue) that covers a notification lost while that connection was down.
//!
//! Notification payloads on the store's channel: `a:<answer_seq>:<id>` (answers stored),
//! `c:<id>` (cancel intent), `q:<id>` (a task queued for a worker).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use deadpool_postgres::Pool;
use futures::StreamExt;
use tokio::sync::{broadcast, mpsc};
use tokio_postgres::{AsyncMessage, NoTls};
use tokio_util::sync::CancellationToken;

use super::pool::read;
use crate::store::{Wakeup, WakeupKind};

/// What the store last saw of a task whose lease was taken through it.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    /// The task id.
    pub(super) id: Arc<str>,
    /// The epoch of that lease.
    pub(super) epoch: u64,
    /// Whether its cancel intent was reported.
    pub(super) cancel: bool,
    /// How many deliveries of answers were reported.
    pub(super) answer_seq: i64,
}

/// The tasks whose leases were taken through the store, by id.
pub(super) type Held = Arc<Mutex<HashMap<Arc<str>, Seen>>>;

/// Locks the held set (a panic elsewhere leaves it consistent: every change is one insert
/// or remove).
pub(super) fn lock(held: &Held) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Seen>> {
    held.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Everything the listener task needs.
pub(super) struct Listener {
    pub(super) config: tokio_postgres::Config,
    pub(super) pool: Pool,
    pub(super) channel: Arc<str>,
    pub(super) held: Held,
    pub(super) sender: broadcast::Sender<Wakeup>,
    pub(super) reread: Duration,
    pub(super) stop: CancellationToken,
}

/// How many queued tasks one re-read announces at most.
const QUEUED_PER_REREAD: i64 = 64;

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
        // Whatever changed while no connection was listening.
        self.reread().await;
        let mut ticks = tokio::time::interval(self.reread);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            tokio::select! {
                note = notifications.recv() => match note {
                    Some(payload) => self.dispatch(&payload),
                    None => break,
                },
                _ = ticks.tick() => self.reread().await,
            }
        }
        driver.abort();
    }

    /// A notification: answers and cancels for the tasks held here, every queued task.
    fn dispatch(&self, payload: &str) {
        let (kind, rest) = payload.split_once(':').unwrap_or(("", ""));
        let wakeup = match kind {
            "q" => Some(Wakeup {
                task_id: Arc::from(rest),
                kind: WakeupKind::Queued,
            }),
            "c" => self.note(rest, |seen| {
                let new = !seen.cancel;
                seen.cancel = true;
                new.then_some(WakeupKind::Cancel)
            }),
            "a" => {
                let (seq, id) = rest.split_once(':').unwrap_or(("0", rest));
                let seq = seq.parse::<i64>().unwrap_or(0);
                self.note(id, |seen| {
                    let new = seq > seen.answer_seq;
                    seen.answer_seq = seen.answer_seq.max(seq);
                    new.then_some(WakeupKind::Answers)
                })
            }
            _ => None,
        };
        if let Some(wakeup) = wakeup {
            let _ = self.sender.send(wakeup);
        }
    }

    /// Updates what was seen of a held task; the wake-up to send, if any.
    fn note(&self, id: &str, f: impl FnOnce(&mut Seen) -> Option<WakeupKind>) -> Option<Wakeup> {
        let mut held = lock(&self.held);
        let seen = held.get_mut(id)?;
        f(seen).map(|kind| Wakeup {
            task_id: Arc::clone(&seen.id),
            kind,
        })
    }

    /// The fallback: reads the held tasks and the queue, and reports what no notification
    /// reported.
    async fn reread(&self) {
        let ids: Vec<String> = lock(&self.held).keys().map(|id| id.to_string()).collect();
        if !ids.is_empty() {
            let rows = read(
                &self.pool,
                "SELECT id, cancel_requested, answer_seq, epoch, purge_at_ms IS NULL \
                 FROM tasks WHERE id = ANY($1)",
                &[&ids],
                "could not re-read the held tasks",
            )
            .await;
            if let Ok(rows) = rows {
                let mut wakeups = Vec::new();
                let mut held = lock(&self.held);
                let mut found = std::collections::HashSet::with_capacity(rows.len());
                for row in &rows {
                    let id: &str = row.get(0);
                    let (cancel, seq, epoch, live): (bool, i64, i64, bool) =
                        (row.get(1), row.get(2), row.get(3), row.get(4));
                    found.insert(id.to_owned());
                    let Some(seen) = held.get_mut(id) else {
                        continue;
                    };
                    if !live || u64::try_from(epoch).ok() != Some(seen.epoch) {
                        // Ended, or taken over: nothing more to wake here.
                        held.remove(id);
                        continue;
                    }
                    let key = &seen.id;
                    if cancel && !seen.cancel {
                        wakeups.push(Wakeup {
                            task_id: Arc::clone(key),
                            kind: WakeupKind::Cancel,
                        });
                    }
                    if seq > seen.answer_seq {
                        wakeups.push(Wakeup {
                            task_id: Arc::clone(key),
                            kind: WakeupKind::Answers,
                        });
                    }
                    seen.cancel |= cancel;
                    seen.answer_seq = seen.answer_seq.max(seq);
                }
                // Gone (purged) since: forget them; keep what was taken since the read began.
                let asked: std::collections::HashSet<&str> =
                    ids.iter().map(String::as_str).collect();
                held.retain(|id, _| found.contains(&**id) || !asked.contains(&**id));
                drop(held);
                for wakeup in wakeups {
                    let _ = self.sender.send(wakeup);
                }
            }
        }
        let queued = read(
            &self.pool,
            "SELECT id FROM tasks WHERE purge_at_ms IS NULL AND runner IS NULL \
             ORDER BY created_at_ms LIMIT $1",
            &[&QUEUED_PER_REREAD],
            "could not re-read the queue",
        )
        .await;
        if let Ok(rows) = queued {
            for row in rows {
                let _ = self.sender.send(Wakeup {
                    task_id: Arc::from(row.get::<_, &str>(0)),
                    kind: WakeupKind::Queued,
                });
            }
        }
    }
}
