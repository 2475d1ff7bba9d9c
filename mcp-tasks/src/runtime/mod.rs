//! Running tools: inline, or as tasks under supervision.
//!
//! Each task's work is one tokio task. Its outcome (a result, a JSON-RPC error, a honoured
//! cancellation, or a panic) is written to the [`TaskStore`] as the task's one terminal
//! state. What only a running process needs (the cancellation token, the channels that carry
//! answers to waiting input requests) lives here, never in the store.

use std::{
    any::Any,
    collections::HashMap,
    panic::AssertUnwindSafe,
    sync::{Arc, Mutex, OnceLock, Weak},
    time::Duration,
};

use futures::FutureExt;
use rmcp::model::{CallToolResult, ErrorData, InputResponses, JsonObject};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::{
    errors,
    store::{Outcome, StoreError, TaskStore},
    tool::{Failure, ToolFuture},
};

pub(crate) use context::Mrtr;

mod context;
mod state;

pub use context::TaskContext;
pub(crate) use context::{ContextParts, Replay};
pub use state::State;

/// How often the reaper applies due expiry.
const REAP_INTERVAL: Duration = Duration::from_secs(1);

/// How a piece of work ended, panics included.
pub(crate) type Ended = Result<Result<CallToolResult, Failure>, String>;

#[derive(Default)]
struct LiveTask {
    cancel: CancellationToken,
    waiters: Mutex<HashMap<String, oneshot::Sender<Value>>>,
}

/// The process-local side of running tasks.
pub(crate) struct Runtime {
    pub(crate) store: Arc<dyn TaskStore>,
    live: Mutex<HashMap<Arc<str>, Arc<LiveTask>>>,
    reaper: OnceLock<()>,
}

impl Runtime {
    pub(crate) fn new(store: Arc<dyn TaskStore>) -> Arc<Self> {
        Arc::new(Self {
            store,
            live: Mutex::new(HashMap::new()),
            reaper: OnceLock::new(),
        })
    }

    fn live_map(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<LiveTask>>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Tracks a running task so `tasks/cancel` and `tasks/update` reach it.
    pub(crate) fn register(self: &Arc<Self>, id: Arc<str>, cancel: CancellationToken) {
        self.start_reaper();
        let live = Arc::new(LiveTask {
            cancel,
            waiters: Mutex::default(),
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
    pub(crate) fn await_input(&self, id: &str, key: &str) -> oneshot::Receiver<Value> {
        let (tx, rx) = oneshot::channel();
        if let Some(live) = self.get_live(id) {
            live.waiters
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(key.to_owned(), tx);
        }
        rx
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
            Ok(Ok(result)) => Outcome::Completed(result_object(&result)),
            Ok(Err(Failure::Cancelled)) => Outcome::Cancelled,
            Ok(Err(Failure::Error(error))) => Outcome::Failed(errors::to_object(&error)),
            Err(panic) => {
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
                let mut tick = tokio::time::interval(REAP_INTERVAL);
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

/// Runs work, turning a panic into its message.
pub(crate) async fn run_caught(work: ToolFuture) -> Ended {
    AssertUnwindSafe(work)
        .catch_unwind()
        .await
        .map_err(|panic| panic_message(&*panic))
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// The `CallToolResult` as the JSON object `result` of a completed task (R47).
pub(crate) fn result_object(result: &CallToolResult) -> JsonObject {
    match serde_json::to_value(result) {
        Ok(Value::Object(map)) => map,
        _ => errors::to_object(&ErrorData::internal_error(
            "the tool result could not be serialized",
            None,
        )),
    }
}
