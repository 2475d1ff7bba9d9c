//! The hub of one engine's listen streams: the open streams per owner, and the dispatcher
//! that reads each changed task once and offers it to every stream following it (module
//! docs of `server::push`, "One feed, one read per change").

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{Arc, Weak},
};

use parking_lot::Mutex;

use rmcp::model::ErrorData;
use serde_json::Value;
use tokio::sync::{Notify, broadcast, mpsc, oneshot};

use crate::{
    errors,
    runtime::{Runtime, unhold},
    server::owner::{visible_task, visible_tasks},
    store::{Notice, TaskSnapshot},
};

/// The listen streams of one engine and the dispatcher that feeds them.
pub(crate) struct Hub {
    /// Open streams per owner.
    streams: Mutex<HashMap<Arc<str>, usize>>,
    registrations: mpsc::UnboundedSender<Register>,
    /// The dispatcher's end of `registrations` until [`Hub::start`] hands it over.
    unstarted: Mutex<Option<mpsc::UnboundedReceiver<Register>>>,
}

impl Default for Hub {
    fn default() -> Self {
        let (registrations, unstarted) = mpsc::unbounded_channel();
        Self {
            streams: Mutex::default(),
            registrations,
            unstarted: Mutex::new(Some(unstarted)),
        }
    }
}

impl Hub {
    /// Starts the dispatcher on `runtime`'s loops, once (later calls do nothing). It ends
    /// when the runtime stops (`runtime/lifecycle.rs`, step 3, or the last handle dropped).
    pub(crate) fn start(&self, runtime: &Arc<Runtime>) {
        let Some(registrations) = self.unstarted.lock().take() else {
            return;
        };
        let dispatcher = dispatch(Arc::clone(runtime), registrations);
        runtime.lifecycle.loops.spawn(dispatcher);
    }

    /// Hands `register` to the dispatcher. `-32603` when the engine was not started (its
    /// dispatcher does not run) or was stopped.
    pub(super) fn register(&self, register: Register) -> Result<(), ErrorData> {
        if self.unstarted.lock().is_some() {
            return Err(ErrorData::internal_error(
                "task listens are served once the engine is started (Engine::start)",
                None,
            ));
        }
        self.registrations
            .send(register)
            .map_err(|_| errors::shutting_down())
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
            unhold(&hub.streams, &self.owner);
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
    queue: VecDeque<(Arc<str>, Value)>,
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
            None => pending.queue.push_back((id.clone(), state.clone())),
        }
        if terminal {
            pending.ended.insert(id.clone());
        }
        drop(pending);
        self.wake.notify_one();
    }

    pub(super) fn take(&self) -> Option<(Arc<str>, Value)> {
        self.pending.lock().queue.pop_front()
    }
}

/// Counts one more open stream of `owner`, or refuses it at the limit.
pub(super) fn reserve(
    hub: &Arc<Hub>,
    owner: &Arc<str>,
    limit: usize,
) -> Result<StreamSlot, ErrorData> {
    let mut streams = hub.streams.lock();
    let count = streams.entry(owner.clone()).or_insert(0);
    if *count >= limit {
        return Err(errors::too_many_listen_streams(owner, limit));
    }
    *count += 1;
    Ok(StreamSlot {
        hub: Arc::downgrade(hub),
        owner: owner.clone(),
    })
}

/// The dispatcher's subscription to the runtime's change feed ([`Runtime::subscribe`]), held
/// only while it follows a task: with no listen stream, publishing a change stays free.
struct Feed(Option<broadcast::Receiver<Notice>>);

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
    /// The next change (never, while not subscribed). Cancel-safe.
    async fn next(&mut self) -> Heard {
        use broadcast::error::RecvError;
        let Some(feed) = &mut self.0 else {
            return std::future::pending().await;
        };
        loop {
            let missed = match feed.recv().await {
                Ok(
                    Notice::Changed(id) | Notice::Cancel(id) | Notice::Answers { task_id: id, .. },
                ) => return Heard::Task(id),
                // For workers' claims.
                Ok(Notice::Queued(_)) => continue,
                // The store's listener is back after a gap.
                Ok(Notice::Missed) => return Heard::All,
                Err(RecvError::Lagged(missed)) => missed,
                Err(RecvError::Closed) => return Heard::Closed,
            };
            crate::metrics::push_changes_missed(missed);
            tracing::warn!(
                missed,
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
async fn dispatch(runtime: Arc<Runtime>, mut registrations: mpsc::UnboundedReceiver<Register>) {
    let mut feed = Feed(None);
    let stop = runtime.lifecycle.stop.clone();
    let mut watches: HashMap<Arc<str>, Watch> = HashMap::new();
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => break,
            register = registrations.recv() => match register {
                Some(register) => {
                    // Subscribed before its tasks are read: no change after the read is missed.
                    feed.0.get_or_insert_with(|| runtime.subscribe());
                    registered(&runtime, &mut watches, register).await;
                }
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
        if watches.is_empty() {
            feed.0 = None;
        }
    }
}

/// The `DetailedTask` of `snapshot` as JSON, and whether it is terminal.
fn state_of(snapshot: TaskSnapshot) -> (Value, bool) {
    let terminal = snapshot.status.is_terminal();
    let state = serde_json::to_value(snapshot.into_detailed()).unwrap_or(Value::Null);
    (state, terminal)
}

async fn registered(runtime: &Runtime, watches: &mut HashMap<Arc<str>, Watch>, register: Register) {
    // Every task it names in one read: a listen of many ids delays no other owner's push.
    let snapshots = match visible_tasks(runtime, &register.ids, &register.owner).await {
        Ok(snapshots) => snapshots,
        Err(error) => {
            let _ = register.reply.send(Err(errors::store_failure(&error)));
            return;
        }
    };
    let mut agreed = Vec::new();
    for (id, snapshot) in register.ids.into_iter().zip(snapshots) {
        let Some(snapshot) = snapshot else {
            continue;
        };
        let (state, terminal) = state_of(snapshot);
        register.stream.offer(&id, &state, terminal);
        agreed.push(id.clone());
        if terminal {
            // Streams that follow it already get this end too, even when the change that
            // ended it is still on its way.
            if let Some(mut watch) = watches.remove(&id) {
                offer_all(&mut watch, &id, &state, true);
            }
            continue;
        }
        let watch = watches.entry(id.clone()).or_insert_with(|| Watch {
            owner: register.owner.clone(),
            last: Value::Null,
            streams: Vec::new(),
        });
        // This read may be newer than what the other streams were offered (none, when new).
        if watch.last != state {
            offer_all(watch, &id, &state, false);
            watch.last = state;
        }
        watch.streams.push(Arc::downgrade(&register.stream));
    }
    let _ = register.reply.send(Ok(agreed));
}

/// Offers `state` to every live stream of `watch`, forgetting the closed ones.
fn offer_all(watch: &mut Watch, id: &Arc<str>, state: &Value, terminal: bool) {
    watch.streams.retain(|stream| {
        stream
            .upgrade()
            .inspect(|live| live.offer(id, state, terminal))
            .is_some()
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
    // `watches` is the dispatcher's alone: nothing changes it while the read runs.
    match visible_task(runtime, id, &watch.owner).await {
        Ok(Some(snapshot)) => {
            let (state, terminal) = state_of(snapshot);
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{
        Engine, Toolkit,
        store::{NewTask, Outcome, StoreError, TaskSnapshot, Transition},
    };

    type Agreed = oneshot::Receiver<Result<Vec<Arc<str>>, ErrorData>>;

    fn follow(id: &str) -> (Register, Agreed, Arc<Shared>) {
        let (reply, agreed) = oneshot::channel();
        let stream = Arc::new(Shared::default());
        let register = Register {
            owner: Arc::from("owner"),
            ids: vec![Arc::from(id)],
            stream: Arc::clone(&stream),
            reply,
        };
        (register, agreed, stream)
    }

    async fn agreed(agreed: Agreed) -> Vec<Arc<str>> {
        let agreed = tokio::time::timeout(Duration::from_secs(5), agreed).await;
        agreed.unwrap().unwrap().unwrap()
    }

    /// A store that counts its reads.
    #[derive(Default)]
    struct Counting {
        store: crate::MemoryStore,
        gets: std::sync::atomic::AtomicUsize,
        batched: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl crate::TaskStore for Counting {
        async fn create(&self, task: NewTask) -> Result<crate::store::Created, StoreError> {
            self.store.create(task).await
        }
        async fn get(&self, id: &str) -> Result<Option<TaskSnapshot>, StoreError> {
            self.gets.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.store.get(id).await
        }
        async fn get_many(
            &self,
            ids: &[Arc<str>],
        ) -> Result<Vec<Option<TaskSnapshot>>, StoreError> {
            self.batched
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.store.get_many(ids).await
        }
        async fn apply(
            &self,
            id: &str,
            fence: Option<&crate::store::Lease>,
            transition: Transition,
        ) -> Result<(), StoreError> {
            self.store.apply(id, fence, transition).await
        }
        async fn deliver_input(
            &self,
            id: &str,
            responses: rmcp::model::InputResponses,
        ) -> Result<rmcp::model::InputResponses, StoreError> {
            self.store.deliver_input(id, responses).await
        }
        async fn request_cancel(&self, id: &str) -> Result<(), StoreError> {
            self.store.request_cancel(id).await
        }
        async fn recoverable(&self) -> Result<Vec<crate::store::Recovery>, StoreError> {
            self.store.recoverable().await
        }
        async fn expire_due(&self) -> Result<Vec<Arc<str>>, StoreError> {
            self.store.expire_due().await
        }
    }

    /// A listen naming 256 tasks costs the dispatcher one read of the store, not 256, and
    /// still follows only the listener's own tasks: another owner's and unknown ids are
    /// left out, in request order.
    #[tokio::test]
    async fn a_listen_of_256_ids_is_one_read_and_sees_only_its_owners_tasks() {
        use std::sync::atomic::Ordering::SeqCst;

        let store = Arc::new(Counting::default());
        let engine = Engine::builder(Toolkit::new())
            .with_shared_store(store.clone())
            .build();
        engine.start().unwrap();
        let mut mine = Vec::new();
        for i in 0..256 {
            let id: Arc<str> = Arc::from(format!("t{i:03}"));
            let owner = match i % 4 {
                0 => "someone else",
                1 => continue, // unknown: never created
                _ => "owner",
            };
            let task = NewTask::new(id.clone(), Arc::from(owner), Arc::from("tool"));
            crate::TaskStore::create(&store.store, task).await.unwrap();
            if owner == "owner" {
                mine.push(id);
            }
        }
        let ids: Vec<Arc<str>> = (0..256).map(|i| Arc::from(format!("t{i:03}"))).collect();
        let (reply, answer) = oneshot::channel();
        let stream = Arc::new(Shared::default());
        let register = Register {
            owner: Arc::from("owner"),
            ids,
            stream: Arc::clone(&stream),
            reply,
        };
        let (gets, batched) = (store.gets.load(SeqCst), store.batched.load(SeqCst));
        engine.push.register(register).unwrap();
        assert_eq!(
            agreed(answer).await,
            mine,
            "the owner's tasks, in request order"
        );
        assert_eq!(
            (
                store.gets.load(SeqCst) - gets,
                store.batched.load(SeqCst) - batched
            ),
            (0, 1),
            "one read of the store for the whole listen"
        );
        let offered: Vec<Arc<str>> = std::iter::from_fn(|| stream.take())
            .map(|(id, _)| id)
            .collect();
        assert_eq!(offered, mine, "only the owner's tasks are offered");
        engine.shutdown(Duration::ZERO).await;
    }

    /// The dispatcher starts with the engine, never from a listen, subscribes to the change
    /// feed only while it follows a task, and nothing of it runs once the engine is shut down.
    #[tokio::test]
    async fn the_dispatcher_starts_and_stops_with_the_engine() {
        let engine = Engine::builder(Toolkit::new()).build();
        let hub = Arc::clone(&engine.push);
        assert!(hub.register(follow("t").0).is_err(), "not started: refused");
        engine.runtime.start().unwrap();
        let loops = &engine.runtime.lifecycle.loops;
        let before = loops.len();
        engine.start().unwrap();
        assert_eq!(loops.len(), before + 1, "the dispatcher is a loop");

        let subscribers = || engine.runtime.changes.receiver_count();
        tokio::task::yield_now().await;
        assert_eq!(subscribers(), 0, "following nothing, it does not subscribe");
        let (unknown, answer, _) = follow("unknown");
        hub.register(unknown).unwrap();
        assert!(agreed(answer).await.is_empty());
        tokio::task::yield_now().await;
        assert_eq!(subscribers(), 0, "still following nothing");

        let store = &engine.runtime.store;
        let task = NewTask::new(Arc::from("t"), Arc::from("owner"), Arc::from("tool"));
        store.create(task).await.unwrap();
        let (known, answer, stream) = follow("t");
        hub.register(known).unwrap();
        assert_eq!(agreed(answer).await, [Arc::from("t")]);
        assert_eq!(subscribers(), 1, "following a task");
        store
            .apply("t", None, Transition::Finish(Outcome::Cancelled))
            .await
            .unwrap();
        engine.runtime.changed("t");
        let unsubscribed = async {
            while subscribers() > 0 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), unsubscribed)
            .await
            .expect("the task ended: nothing is followed, the dispatcher unsubscribes");
        let ended = std::iter::from_fn(|| stream.take()).last().unwrap().1;
        assert_eq!(ended["status"], "cancelled");

        let shutdown = engine.shutdown(Duration::ZERO);
        tokio::time::timeout(Duration::from_secs(5), shutdown)
            .await
            .expect("the dispatcher stops at the shutdown");
        assert!(engine.is_stopped());
        assert!(hub.registrations.is_closed(), "the dispatcher ended");
        assert!(hub.register(follow("t").0).is_err(), "stopped: refused");
    }
}
