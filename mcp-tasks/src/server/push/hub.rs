//! The hub of one engine's listen streams: the open streams per owner, and the dispatcher
//! that reads each changed task once and offers it to every stream following it (module
//! docs of `server::push`, "One feed, one read per change").

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Weak},
};

use parking_lot::{Mutex, MutexGuard};

use rmcp::model::ErrorData;
use serde_json::Value;
use tokio::sync::{Notify, broadcast, mpsc, oneshot};

use crate::{
    errors,
    runtime::Runtime,
    server::engine::visible_task,
    store::{Wakeup, WakeupKind},
};

/// The listen streams of one engine and the dispatcher that feeds them.
#[derive(Default)]
pub(crate) struct Hub {
    state: Mutex<HubState>,
}

#[derive(Default)]
struct HubState {
    /// The dispatcher's registration queue, once it runs.
    dispatcher: Option<mpsc::UnboundedSender<Register>>,
    /// Open streams per owner.
    streams: HashMap<Arc<str>, usize>,
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, HubState> {
        self.state.lock()
    }
}

/// One owner's open stream, counted until dropped.
pub(super) struct StreamSlot {
    hub: Weak<Hub>,
    owner: Arc<str>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.upgrade() {
            let mut state = hub.lock();
            if let Some(count) = state.streams.get_mut(&self.owner) {
                *count -= 1;
                if *count == 0 {
                    state.streams.remove(&self.owner);
                }
            }
        }
    }
}

/// What the dispatcher is asked when a stream opens.
pub(super) struct Register {
    pub(super) owner: Arc<str>,
    pub(super) ids: Vec<Arc<str>>,
    pub(super) stream: Arc<Shared>,
    /// The agreed ids, in request order.
    pub(super) reply: oneshot::Sender<Result<Vec<Arc<str>>, ErrorData>>,
}

/// The state one stream shares with the dispatcher: the latest undelivered state per task.
#[derive(Default)]
pub(super) struct Shared {
    pending: Mutex<Pending>,
    pub(super) wake: Notify,
}

#[derive(Default)]
struct Pending {
    /// In the order the tasks first became pending; at most one entry per task.
    queue: Vec<(Arc<str>, Value)>,
    /// Tasks whose terminal state was offered: nothing more is taken for them.
    ended: HashSet<Arc<str>>,
}

impl Shared {
    /// Offers `state` of task `id`: replaces a pending older one, or queues it.
    fn offer(&self, id: &Arc<str>, state: &Value, terminal: bool) {
        let mut pending = self.pending.lock();
        if pending.ended.contains(id) {
            return;
        }
        match pending.queue.iter_mut().find(|(queued, _)| queued == id) {
            Some((_, queued)) => queued.clone_from(state),
            None => pending.queue.push((id.clone(), state.clone())),
        }
        if terminal {
            pending.ended.insert(id.clone());
        }
        drop(pending);
        self.wake.notify_one();
    }

    pub(super) fn take(&self) -> Option<(Arc<str>, Value)> {
        let mut pending = self.pending.lock();
        (!pending.queue.is_empty()).then(|| pending.queue.remove(0))
    }
}

/// Counts one more open stream of `owner`, or refuses it at the limit.
pub(super) fn reserve(
    hub: &Arc<Hub>,
    owner: &Arc<str>,
    limit: usize,
) -> Result<StreamSlot, ErrorData> {
    let mut state = hub.lock();
    let count = state.streams.entry(owner.clone()).or_insert(0);
    if *count >= limit {
        return Err(errors::too_many_listen_streams(owner, limit));
    }
    *count += 1;
    Ok(StreamSlot {
        hub: Arc::downgrade(hub),
        owner: owner.clone(),
    })
}

/// The dispatcher's registration queue, starting the dispatcher on first use.
pub(super) fn dispatcher(hub: &Hub, runtime: &Arc<Runtime>) -> mpsc::UnboundedSender<Register> {
    let mut state = hub.lock();
    if let Some(sender) = state.dispatcher.as_ref().filter(|s| !s.is_closed()) {
        return sender.clone();
    }
    let (sender, registrations) = mpsc::unbounded_channel();
    // Subscribed before the first registration is read: no change after it is missed.
    let feed = Feed::subscribe(runtime);
    tokio::spawn(dispatch(runtime.clone(), feed, registrations));
    state.dispatcher = Some(sender.clone());
    sender
}

/// Where the dispatcher learns which tasks changed.
enum Feed {
    /// One process (memory, SQLite): the runtime's in-process change feed
    /// ([`Runtime::changes`]), which only this process writes to.
    Local(broadcast::Receiver<Arc<str>>),
    /// A shared store (Postgres): the store's wake-ups, which every instance's writes
    /// announce, this one's included. The in-process feed is not subscribed then, so a change
    /// made here is read once, on its wake-up, not twice.
    Cluster(broadcast::Receiver<Wakeup>),
}

/// What the feed said.
enum Heard {
    /// This task may have changed.
    Task(Arc<str>),
    /// Changes may have been missed: every followed task is read again.
    All,
    /// The feed ended.
    Closed,
}

impl Feed {
    fn subscribe(runtime: &Runtime) -> Self {
        match runtime.store.cluster() {
            Some(cluster) => Self::Cluster(cluster.wakeups()),
            None => Self::Local(runtime.changes.subscribe()),
        }
    }

    /// The next change. Cancel-safe.
    async fn next(&mut self) -> Heard {
        use broadcast::error::RecvError;
        loop {
            let lagged = match self {
                Self::Local(changes) => match changes.recv().await {
                    Ok(id) => return Heard::Task(id),
                    Err(RecvError::Lagged(missed)) => missed,
                    Err(RecvError::Closed) => return Heard::Closed,
                },
                Self::Cluster(wakeups) => match wakeups.recv().await {
                    Ok(wakeup) => match wakeup.kind {
                        WakeupKind::Changed | WakeupKind::Answers | WakeupKind::Cancel => {
                            return Heard::Task(wakeup.task_id);
                        }
                        // The store's listener is back after a gap.
                        WakeupKind::Missed => return Heard::All,
                        WakeupKind::Queued => continue,
                    },
                    Err(RecvError::Lagged(missed)) => missed,
                    Err(RecvError::Closed) => return Heard::Closed,
                },
            };
            tracing::warn!(
                missed = lagged,
                "task listen dispatcher fell behind; reading every followed task"
            );
            return Heard::All;
        }
    }
}

/// The streams following one task.
struct Watch {
    owner: Arc<str>,
    /// The state last offered.
    last: Value,
    streams: Vec<Weak<Shared>>,
}

/// The dispatcher: registrations and change reads, one at a time, until the engine stops.
async fn dispatch(
    runtime: Arc<Runtime>,
    mut feed: Feed,
    mut registrations: mpsc::UnboundedReceiver<Register>,
) {
    let stop = runtime.lifecycle.stop_token().clone();
    let mut watches: HashMap<Arc<str>, Watch> = HashMap::new();
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => break,
            register = registrations.recv() => match register {
                Some(register) => registered(&runtime, &mut watches, register).await,
                None => break,
            },
            heard = feed.next() => match heard {
                Heard::Task(id) => refresh(&runtime, &mut watches, &id).await,
                Heard::All => {
                    let ids: Vec<Arc<str>> = watches.keys().cloned().collect();
                    for id in ids {
                        refresh(&runtime, &mut watches, &id).await;
                    }
                }
                Heard::Closed => break,
            },
        }
    }
}

/// The `DetailedTask` of `snapshot` as JSON, and whether it is terminal.
fn state_of(snapshot: crate::store::TaskSnapshot) -> (Value, bool) {
    let terminal = snapshot.status.is_terminal();
    let detailed = snapshot.into_detailed();
    let state = serde_json::to_value(&detailed).unwrap_or(Value::Null);
    (state, terminal)
}

async fn registered(runtime: &Runtime, watches: &mut HashMap<Arc<str>, Watch>, register: Register) {
    let Register {
        owner,
        ids,
        stream,
        reply,
    } = register;
    let mut agreed = Vec::new();
    for id in ids {
        let snapshot = match visible_task(runtime, &id, &owner).await {
            Ok(Some(snapshot)) => snapshot,
            Ok(None) => continue,
            Err(error) => {
                let _ = reply.send(Err(errors::store_failure(&error)));
                return;
            }
        };
        let (state, terminal) = state_of(snapshot);
        stream.offer(&id, &state, terminal);
        agreed.push(id.clone());
        if terminal {
            // Streams that follow it already get this end too, even when the change that
            // ended it is still on its way.
            if let Some(mut watch) = watches.remove(&id) {
                offer_all(&mut watch, &id, &state, true);
            }
            continue;
        }
        match watches.get_mut(&id) {
            Some(watch) => {
                // This read may be newer than what the other streams were offered.
                if watch.last != state {
                    offer_all(watch, &id, &state, false);
                    watch.last = state;
                }
                watch.streams.push(Arc::downgrade(&stream));
            }
            None => {
                watches.insert(
                    id,
                    Watch {
                        owner: owner.clone(),
                        last: state,
                        streams: vec![Arc::downgrade(&stream)],
                    },
                );
            }
        }
    }
    let _ = reply.send(Ok(agreed));
}

/// Offers `state` to every live stream of `watch`, forgetting the closed ones.
fn offer_all(watch: &mut Watch, id: &Arc<str>, state: &Value, terminal: bool) {
    watch.streams.retain(|stream| match stream.upgrade() {
        Some(stream) => {
            stream.offer(id, state, terminal);
            true
        }
        None => false,
    });
}

/// Task `id` changed: one read, offered to every stream following it.
async fn refresh(runtime: &Runtime, watches: &mut HashMap<Arc<str>, Watch>, id: &Arc<str>) {
    let Some(watch) = watches.get_mut(id) else {
        return;
    };
    watch.streams.retain(|stream| stream.strong_count() > 0);
    if watch.streams.is_empty() {
        watches.remove(id);
        return;
    }
    let owner = watch.owner.clone();
    match visible_task(runtime, id, &owner).await {
        Ok(Some(snapshot)) => {
            let (state, terminal) = state_of(snapshot);
            let Some(watch) = watches.get_mut(id) else {
                return;
            };
            if watch.last != state || terminal {
                offer_all(watch, id, &state, terminal);
                watch.last = state;
            }
            if terminal {
                watches.remove(id);
            }
        }
        // Purged: there is nothing more to say about it.
        Ok(None) => {
            watches.remove(id);
        }
        Err(error) => {
            tracing::warn!(task_id = %id, %error, "a followed task could not be read; the next change reads it again");
        }
    }
}
