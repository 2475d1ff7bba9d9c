//! Running tools: inline, or as tasks under supervision.
//!
//! Each task's work is one tokio task. Its outcome (a result, a JSON-RPC error, a honoured
//! cancellation, or a panic) is written to the [`TaskStore`] as the task's one terminal
//! state. What only a running process needs (the cancellation token, the channels that carry
//! answers to waiting input requests) lives here, never in the store.
//!
//! - `call.rs`: the life of one call (inline, promotion to a task, ending), with its
//!   invariants;
//! - `recover.rs`: what a starting process does with the tasks a previous one left running;
//! - this module: the process-local registry of running tasks and the expiry sweep.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock, Weak},
    time::Duration,
};

use rmcp::model::{CallToolResult, ErrorData, InputResponses, JsonObject};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::{
    Limits, errors,
    store::{Outcome, StoreError, TaskSnapshot, TaskStore},
};

pub(crate) mod call;
pub(crate) mod recover;

pub(crate) use call::Ended;

/// How often the reaper applies due expiry, unless the engine says otherwise.
pub(crate) const DEFAULT_REAP_INTERVAL: Duration = Duration::from_secs(1);

struct LiveTask {
    cancel: CancellationToken,
    waiters: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    /// The owner's quota slot, given back when the task's work ends.
    _slot: OwnerSlot,
}

/// How the engine set the runtime up.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) reap_interval: Duration,
    pub(crate) limits: Limits,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            reap_interval: DEFAULT_REAP_INTERVAL,
            limits: Limits::default(),
        }
    }
}

/// The process-local side of running tasks.
pub(crate) struct Runtime {
    pub(crate) store: Arc<dyn TaskStore>,
    live: Mutex<HashMap<Arc<str>, Arc<LiveTask>>>,
    reaper: OnceLock<()>,
    reap_interval: Duration,
    pub(crate) limits: Limits,
    /// Live tasks per owner, for [`Limits::max_live_tasks_per_owner`].
    owners: Arc<Mutex<HashMap<Arc<str>, usize>>>,
}

/// One live task of an owner, counted against the owner's quota until dropped.
pub(crate) struct OwnerSlot {
    owner: Arc<str>,
    owners: Arc<Mutex<HashMap<Arc<str>, usize>>>,
}

impl Drop for OwnerSlot {
    fn drop(&mut self) {
        let mut owners = self
            .owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = owners.get_mut(&self.owner) {
            *count -= 1;
            if *count == 0 {
                owners.remove(&self.owner);
            }
        }
    }
}

impl Runtime {
    pub(crate) fn new(store: Arc<dyn TaskStore>, settings: Settings) -> Arc<Self> {
        Arc::new(Self {
            store,
            live: Mutex::new(HashMap::new()),
            reaper: OnceLock::new(),
            reap_interval: settings.reap_interval,
            limits: settings.limits,
            owners: Arc::default(),
        })
    }

    /// Counts one more live task of `owner`, or refuses it at the owner's quota
    /// ([`Limits::max_live_tasks_per_owner`]). `enforce: false` counts without refusing (a
    /// task a restarted server takes back).
    pub(crate) fn reserve(&self, owner: &Arc<str>, enforce: bool) -> Result<OwnerSlot, ErrorData> {
        let quota = self.limits.max_live_tasks_per_owner();
        let mut owners = self
            .owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = owners.entry(owner.clone()).or_insert(0);
        if enforce && *count >= quota {
            return Err(errors::owner_quota(owner, quota));
        }
        *count += 1;
        Ok(OwnerSlot {
            owner: owner.clone(),
            owners: self.owners.clone(),
        })
    }

    /// How many tasks' work runs in this process.
    pub(crate) fn live_count(&self) -> usize {
        self.live_map().len()
    }

    /// A task as the store has it now. A read that finds a task terminal while its work
    /// still runs here (the read was the first to see it expire, before the reaper) stops
    /// the work, exactly as the reaper would.
    pub(crate) async fn read(&self, id: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        let snapshot = self.store.get(id).await?;
        if let Some(snapshot) = &snapshot
            && snapshot.status.is_terminal()
        {
            self.cancel(id);
        }
        Ok(snapshot)
    }

    fn live_map(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<LiveTask>>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Tracks a running task so `tasks/cancel` and `tasks/update` reach it.
    pub(crate) fn register(
        self: &Arc<Self>,
        id: Arc<str>,
        cancel: CancellationToken,
        slot: OwnerSlot,
    ) {
        self.start_reaper();
        let live = Arc::new(LiveTask {
            cancel,
            waiters: Mutex::default(),
            _slot: slot,
        });
        self.live_map().insert(id, live);
    }

    fn get_live(&self, id: &str) -> Option<Arc<LiveTask>> {
        self.live_map().get(id).cloned()
    }

    /// Signals the work of a task to stop, if it runs in this process.
    pub(crate) fn cancel(&self, id: &str) {
        if let Some(live) = self.get_live(id) {
            live.cancel.cancel();
        }
    }

    /// A receiver for the answer to input request `key` of task `id`. Registered before the
    /// request is stored, so no answer can arrive unseen.
    ///
    /// # Errors
    /// `-32603` when the task already has [`Limits::max_input_requests`] outstanding.
    pub(crate) fn await_input(
        &self,
        id: &str,
        key: &str,
    ) -> Result<oneshot::Receiver<Value>, ErrorData> {
        let (tx, rx) = oneshot::channel();
        if let Some(live) = self.get_live(id) {
            let mut waiters = live
                .waiters
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let limit = self.limits.max_input_requests();
            if waiters.len() >= limit && !waiters.contains_key(key) {
                return Err(errors::too_many_input_requests(limit));
            }
            waiters.insert(key.to_owned(), tx);
        }
        Ok(rx)
    }

    /// Hands answers the store accepted to the work waiting for them.
    pub(crate) fn deliver(&self, id: &str, accepted: InputResponses) {
        let Some(live) = self.get_live(id) else {
            return;
        };
        let mut waiters = live
            .waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (key, value) in accepted {
            if let Some(tx) = waiters.remove(&key) {
                let _ = tx.send(value);
            }
        }
    }

    /// Runs a task's work to its end and stores the outcome.
    pub(crate) fn spawn(
        self: &Arc<Self>,
        id: Arc<str>,
        tool: Arc<str>,
        owner: &str,
        work: impl Future<Output = Ended> + Send + 'static,
    ) {
        let runtime = Arc::clone(self);
        let span = tracing::info_span!("task", task_id = %id, tool = %tool, owner);
        tokio::spawn(
            async move {
                let ended = work.await;
                runtime.finish(&id, &tool, ended).await;
            }
            .instrument(span),
        );
    }

    /// Stores how a task's work ended as its terminal state.
    pub(crate) async fn finish(&self, id: &Arc<str>, tool: &str, ended: Ended) {
        let outcome = match ended {
            Ended::Completed(result) => Outcome::Completed(result_object(&result)),
            Ended::Cancelled => Outcome::Cancelled,
            Ended::Failed(error) => Outcome::Failed(errors::to_object(&error)),
            Ended::Panicked(panic) => {
                tracing::error!(task_id = %id, tool, panic, "tool panicked");
                Outcome::Failed(errors::to_object(&errors::tool_panicked(tool, &panic)))
            }
        };
        let status = outcome.status();
        match self.store.finish(id, outcome).await {
            Ok(()) => tracing::debug!(task_id = %id, ?status, "task ended"),
            Err(StoreError::Terminal(was)) => {
                tracing::debug!(task_id = %id, ?was, "task had already ended (expired)");
            }
            Err(error) => tracing::error!(task_id = %id, %error, "task outcome not stored"),
        }
        self.live_map().remove(id);
    }

    /// Starts the background expiry sweep, once, holding only a weak reference.
    fn start_reaper(self: &Arc<Self>) {
        self.reaper.get_or_init(|| {
            let weak: Weak<Self> = Arc::downgrade(self);
            tokio::spawn(async move {
                let Some(interval) = weak.upgrade().map(|runtime| runtime.reap_interval) else {
                    return;
                };
                let mut tick = tokio::time::interval(interval);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let Some(runtime) = weak.upgrade() else { break };
                    match runtime.store.expire_due().await {
                        Ok(expired) => {
                            for id in expired {
                                tracing::info!(task_id = %id, "task expired");
                                runtime.cancel(&id);
                            }
                        }
                        Err(error) => tracing::warn!(%error, "expiry sweep failed"),
                    }
                }
            });
        });
    }
}

/// The `CallToolResult` as the JSON object `result` of a completed task (R47).
pub(crate) fn result_object(result: &CallToolResult) -> JsonObject {
    match serde_json::to_value(result) {
        Ok(Value::Object(map)) => map,
        _ => errors::to_object(&errors::unserializable_result()),
    }
}
