//! What one call's work reaches while it runs: its phase, its input requests, steps,
//! progress and log messages ([`CallState`], the [`Host`] of its [`TaskContext`]). The
//! invariants are in the [parent module's docs](super).

#![allow(
    deprecated,
    reason = "sampling and roots are deprecated by SEP-2577 yet still part of the 2026-07-28 wire"
)]

use std::{
    any::{Any, TypeId},
    collections::{HashMap, HashSet},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use parking_lot::Mutex;

use futures::future::BoxFuture;
use rmcp::{
    Peer, RoleServer,
    model::{
        CallToolResult, ClientCapabilities, InputRequest, InputRequests, InputResponses,
        LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
        Task,
    },
};
use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use crate::{
    context::{Ask, Failure, Host, Progress, ProgressError, TaskContext, answer},
    errors,
    runtime::Runtime,
    store::{Step, StoreError, Transition, Wait},
    toolkit::StateMap,
};

/// What answering a `tools/call` produced, before the server puts it on the wire.
pub(crate) enum Answer {
    /// The call's result, inline.
    Result(CallToolResult),
    /// A task was created.
    Task(Task),
    /// Input is needed before the call can go on (multi round-trip): this round's requests,
    /// and every answer so far, for the server to carry in `requestState` (C20).
    InputRequired {
        requests: InputRequests,
        answers: InputResponses,
    },
}

/// Where the call stands (see the module docs).
enum Phase {
    /// An ordinary call: no task exists and none will.
    Inline,
    /// The work runs; a task is created around it once it waits or outlasts its budget.
    Pending {
        message: Option<String>,
        dirty: bool,
        promote: Option<oneshot::Sender<()>>,
    },
    /// A task record exists.
    Task,
}

/// The answers and completed steps of a task that is replayed after a restart.
pub(crate) struct Replay {
    pub(crate) answers: InputResponses,
    pub(crate) steps: HashMap<u64, Step>,
}

/// What a call gathers by multi round-trip requests (protocol §5.4) before any task exists:
/// the answers the client sent (this round's `inputResponses` plus earlier rounds', carried
/// in `requestState`), the ones this run took (stored with its task, invariant 14) and the
/// requests still unanswered.
#[derive(Default)]
pub(crate) struct Mrtr {
    answers: InputResponses,
    taken: Mutex<InputResponses>,
    requested: Mutex<InputRequests>,
    asked: Notify,
}

impl Mrtr {
    pub(crate) fn new(answers: InputResponses) -> Self {
        Self {
            answers,
            ..Self::default()
        }
    }
}

/// Where the notifications of a call go while its `tools/call` request is open
/// (invariant 10): the request's peer, its `progressToken` and its `logLevel`.
#[derive(Clone)]
pub(crate) struct Notifier {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) progress_token: Option<ProgressToken>,
    pub(crate) log_level: Option<LoggingLevel>,
}

/// Who is calling what: the parts of a call that do not change while it runs.
pub(crate) struct CallParts {
    pub(crate) id: Arc<str>,
    pub(crate) tool: Arc<str>,
    pub(crate) owner: Arc<str>,
    pub(crate) cancel: CancellationToken,
    pub(crate) client_capabilities: ClientCapabilities,
    pub(crate) state: Arc<StateMap>,
    pub(crate) runtime: Arc<Runtime>,
    /// `Some` on the modern wire: input before a task is gathered by multi round-trip.
    pub(crate) mrtr: Option<Mrtr>,
    /// `Some` when the task is replayed after a restart.
    pub(crate) replay: Option<Replay>,
    /// `Some` while a `tools/call` request waits for this call's answer.
    pub(crate) notifier: Option<Notifier>,
}

/// The engine side of one call: its phase and everything [`TaskContext`] reaches.
pub(crate) struct CallState {
    parts: CallParts,
    phase: Mutex<Phase>,
    /// `true` once the task record exists; input requests and steps wait for it
    /// ([`bound_changed`](Self::bound_changed) wakes them). No channel: an inline call, which
    /// never binds, allocates nothing for it.
    bound: AtomicBool,
    bound_changed: Notify,
    input_seq: AtomicU64,
    step_seq: AtomicU64,
    /// The keys the tool chose for its input requests so far (invariant 11).
    chosen_keys: Mutex<HashSet<String>>,
    /// The last progress accepted (invariant 10).
    last_progress: Mutex<Option<f64>>,
}

impl CallState {
    fn build(parts: CallParts, phase: Phase, bound: bool) -> Arc<Self> {
        Arc::new(Self {
            parts,
            phase: Mutex::new(phase),
            bound: AtomicBool::new(bound),
            bound_changed: Notify::new(),
            input_seq: AtomicU64::new(0),
            step_seq: AtomicU64::new(0),
            chosen_keys: Mutex::default(),
            last_progress: Mutex::default(),
        })
    }

    /// A call answered inline.
    pub(crate) fn inline(parts: CallParts) -> Arc<Self> {
        Self::build(parts, Phase::Inline, false)
    }

    /// A task whose record exists (a replay after a restart, a claimed task).
    pub(crate) fn task(parts: CallParts) -> Arc<Self> {
        Self::build(parts, Phase::Task, true)
    }

    /// A call that becomes a task once its work first waits (or its inline budget runs
    /// out); the receiver fires when the work asks to become a task early (it needs input
    /// through the task, or starts a step).
    pub(crate) fn pending(parts: CallParts) -> (Arc<Self>, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let phase = Phase::Pending {
            message: None,
            dirty: false,
            promote: Some(tx),
        };
        (Self::build(parts, phase, false), rx)
    }

    /// The tool's view of this call.
    pub(crate) fn context(self: &Arc<Self>) -> TaskContext {
        TaskContext::new(self.clone())
    }

    /// Starts turning a pending call into a task: the status message to create it with.
    pub(super) fn begin_promotion(&self) -> Option<String> {
        match &mut *self.phase.lock() {
            Phase::Pending { message, dirty, .. } => {
                *dirty = false;
                message.clone()
            }
            _ => None,
        }
    }

    /// Ends the promotion once the record exists: flushes a message set meanwhile and lets
    /// waiting input requests and steps go on.
    pub(super) async fn finish_promotion(&self) {
        let phase = std::mem::replace(&mut *self.phase.lock(), Phase::Task);
        if let Phase::Pending {
            message,
            dirty: true,
            ..
        } = phase
        {
            self.write_status(message).await;
        }
        self.bound.store(true, Ordering::Release);
        self.bound_changed.notify_waiters();
    }

    async fn write_status(&self, message: Option<String>) {
        let message = message.map(|m| self.parts.runtime.limits.clip_status(m));
        match self.parts.runtime.set_status(&self.parts.id, message).await {
            Ok(()) => {}
            Err(error) if error.stops_work() => {}
            Err(error) => tracing::warn!(task_id = %self.parts.id, %error, "status not stored"),
        }
    }

    /// Resolves once the work asked for input by multi round-trip request.
    pub(super) async fn round_trip_asked(&self) {
        match &self.parts.mrtr {
            Some(mrtr) => mrtr.asked.notified().await,
            None => std::future::pending().await,
        }
    }

    /// The answers this run took by multi round-trip request, to store with its task.
    pub(super) fn round_trip_taken(&self) -> InputResponses {
        let mrtr = self.parts.mrtr.as_ref();
        mrtr.map(|mrtr| mrtr.taken.lock().clone())
            .unwrap_or_default()
    }

    /// The `input_required` answer of a round (invariant 7): its requests, and every answer
    /// gathered so far.
    pub(super) fn input_required(&self) -> Answer {
        let (requests, answers) = match &self.parts.mrtr {
            Some(mrtr) => (
                std::mem::take(&mut *mrtr.requested.lock()),
                mrtr.answers.clone(),
            ),
            None => Default::default(),
        };
        Answer::InputRequired { requests, answers }
    }

    /// Input by multi round-trip request: the answer if the client sent one that answers the
    /// request, else the request is recorded for the `input_required` answer (asked again,
    /// when the answer did not fit) and this call waits until the work is dropped with the
    /// round.
    // docs/protocol.md C21.
    async fn round_trip(&self, request: InputRequest, key: String) -> Result<Value, Failure> {
        let Some(mrtr) = &self.parts.mrtr else {
            return Err(Failure::Cancelled);
        };
        if let Some(answer) = mrtr.answers.get(&key) {
            match answer::problem(&request, answer) {
                None => {
                    mrtr.taken.lock().insert(key, answer.clone());
                    return Ok(answer.clone());
                }
                Some((_, problem)) => tracing::debug!(key, problem, "asking again"),
            }
        }
        mrtr.requested.lock().insert(key, request);
        mrtr.asked.notify_one();
        self.parts.cancel.cancelled().await;
        Err(Failure::Cancelled)
    }

    /// Makes sure a task record exists: promotes a pending call, refuses an inline one.
    async fn become_task(&self) -> Result<(), Failure> {
        match &mut *self.phase.lock() {
            // Work that lost its lease starts no new step or input request: the instance
            // that takes the task over runs them (`runtime/cluster.rs`, self-fencing).
            Phase::Task if self.parts.runtime.winding_down(&self.parts.id) => {
                return Err(Failure::Cancelled);
            }
            Phase::Task => return Ok(()),
            Phase::Inline => {
                return Err(Failure::Error(errors::input_needs_task(&self.parts.tool)));
            }
            Phase::Pending { promote, .. } => {
                if let Some(promote) = promote.take() {
                    let _ = promote.send(());
                }
            }
        }
        let bound = async {
            loop {
                // Registered before the flag is read: a bind between the two still wakes it.
                let changed = self.bound_changed.notified();
                if self.bound.load(Ordering::Acquire) {
                    return;
                }
                changed.await;
            }
        };
        tokio::select! {
            biased;
            () = self.parts.cancel.cancelled() => Err(Failure::Cancelled),
            () = bound => Ok(()),
        }
    }

    async fn ask(&self, ask: Ask) -> Result<Value, Failure> {
        let Ask {
            kind,
            request,
            before_task,
            key,
        } = ask;
        if let Some(key) = &key
            && !self.chosen_keys.lock().insert(key.clone())
        {
            return Err(Failure::Error(errors::input_key_reused(key)));
        }
        // One sequence numbers the generated keys of every route (invariant 14).
        let key = key.unwrap_or_else(|| {
            let n = self.input_seq.fetch_add(1, Ordering::Relaxed) + 1;
            format!("{}-{n}", kind.key_prefix())
        });
        let by_round_trip = match &*self.phase.lock() {
            Phase::Task => false,
            Phase::Inline => self.parts.mrtr.is_some(),
            Phase::Pending { .. } => before_task && self.parts.mrtr.is_some(),
        };
        if by_round_trip {
            return self.round_trip(request, key).await;
        }
        self.become_task().await?;
        // A replay never asks again what was answered before the restart.
        if let Some(answer) = self.parts.replay.as_ref().and_then(|r| r.answers.get(&key)) {
            return Ok(answer.clone());
        }
        let runtime = &self.parts.runtime;
        let answer = runtime
            .await_input(&self.parts.id, &key)
            .map_err(Failure::Error)?;
        // A replay asks again the questions that were open when its data was read; an answer
        // the store took since, before the waiter above existed, reached no one: read it now
        // that the waiter catches every later one (invariant 13).
        if self.parts.replay.is_some()
            && let Some(value) = self.stored_answer(&key).await?
        {
            return Ok(value);
        }
        let ask = Transition::RequestInput {
            key: key.clone(),
            request,
            at_step: self.step_seq.load(Ordering::Relaxed),
        };
        match runtime.write(&self.parts.id, ask).await {
            Ok(()) => {}
            // A replay asks again a question that was open when it read the store; an answer
            // taken between that read and this request used the key up. The store keeps the
            // answer (invariant 13): it is this question's.
            Err(crate::runtime::WriteError::Store(StoreError::KeyReused(_)))
                if self.parts.replay.is_some() =>
            {
                let stored = self.stored_answer(&key).await?;
                return stored.ok_or_else(|| Failure::Error(errors::input_key_reused(&key)));
            }
            // The task ended under the work (it expired), or another instance took it over:
            // the work stops.
            Err(error) => return Err(error.to_failure()),
        }
        tokio::select! {
            biased;
            () = self.parts.cancel.cancelled() => Err(Failure::Cancelled),
            value = answer => value.map_err(|_| Failure::Cancelled),
            () = self.wait_then_park(Wait::answer(key)) => Err(Failure::Cancelled),
        }
    }

    /// The answer the store holds for question `key` of this replayed task, if any; its
    /// waiter here is then forgotten (invariant 13).
    async fn stored_answer(&self, key: &str) -> Result<Option<Value>, Failure> {
        let runtime = &self.parts.runtime;
        match runtime.store.stored_answers(&self.parts.id).await {
            Ok(mut stored) => Ok(stored
                .remove(key)
                .inspect(|_| runtime.forget_input(&self.parts.id, key))),
            Err(StoreError::NotFound) => Err(Failure::Cancelled),
            Err(error) => Err(Failure::Error(errors::store_failure(&error))),
        }
    }

    /// Waits the tool's park time, then parks the task (`runtime/park.rs`); never resolves.
    async fn wait_then_park(&self, wait: Wait) {
        let runtime = &self.parts.runtime;
        let task = matches!(*self.phase.lock(), Phase::Task);
        if let Some(after) = runtime.park_after(&self.parts.tool).filter(|_| task) {
            let now = crate::clock::system_now_ms();
            // A timer due within the park time is waited for here.
            let worth = wait
                .until_ms
                .is_none_or(|until| until.saturating_sub(now) > crate::clock::millis(after));
            if worth {
                tokio::time::sleep(after).await;
                if let Err(error) = runtime.park(&self.parts.id, wait).await {
                    tracing::warn!(task_id = %self.parts.id, %error,
                        "the task was not parked; its work waits here");
                }
            }
        }
        std::future::pending::<()>().await;
    }

    /// The open request's notifier: `Some` while the call is inline or pending (invariant 10).
    fn open_request(&self) -> Option<&Notifier> {
        match *self.phase.lock() {
            Phase::Task => None,
            Phase::Inline | Phase::Pending { .. } => self.parts.notifier.as_ref(),
        }
    }

    async fn report_progress(&self, report: Progress) -> Result<(), ProgressError> {
        {
            let mut last = self.last_progress.lock();
            if let Some(last) = *last
                && report.progress <= last
            {
                return Err(ProgressError::NotIncreasing {
                    last,
                    given: report.progress,
                });
            }
            *last = Some(report.progress);
        }
        let Some((notifier, token)) = self
            .open_request()
            .and_then(|n| n.progress_token.clone().map(|token| (n.clone(), token)))
        else {
            tracing::trace!(tool = %self.parts.tool, progress = report.progress, "progress not sent");
            return Ok(());
        };
        let mut param = ProgressNotificationParam::new(token, report.progress);
        param.total = report.total;
        param.message = report.message;
        if let Err(error) = notifier.peer.notify_progress(param).await {
            // The request went away (the client dropped it): nothing is waiting for it.
            tracing::debug!(tool = %self.parts.tool, %error, "progress not delivered");
        }
        Ok(())
    }

    async fn send_log(&self, level: LoggingLevel, logger: Option<String>, data: Value) {
        let notifier = self.open_request().and_then(|n| {
            n.log_level
                // Declared from `debug` to `emergency`: RFC 5424 order, least severe first.
                .is_some_and(|wanted| level as u8 >= wanted as u8)
                .then(|| n.clone())
        });
        let Some(notifier) = notifier else {
            tracing::trace!(tool = %self.parts.tool, ?level, %data, "log not sent");
            return;
        };
        let mut param = LoggingMessageNotificationParam::new(level, data);
        param.logger = logger;
        if let Err(error) = notifier.peer.notify_logging_message(param).await {
            tracing::debug!(tool = %self.parts.tool, %error, "log not delivered");
        }
    }
}

impl Host for CallState {
    fn task_id(&self) -> Option<&str> {
        matches!(*self.phase.lock(), Phase::Task).then_some(&*self.parts.id)
    }

    fn owner(&self) -> &str {
        &self.parts.owner
    }

    fn tool(&self) -> &str {
        &self.parts.tool
    }

    fn cancel_token(&self) -> &CancellationToken {
        &self.parts.cancel
    }

    fn client_capabilities(&self) -> &ClientCapabilities {
        &self.parts.client_capabilities
    }

    fn state(&self, type_id: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        self.parts.state.get_any(type_id)
    }

    fn status(&self, message: String) -> BoxFuture<'_, ()> {
        match &mut *self.phase.lock() {
            Phase::Inline => tracing::debug!(tool = %self.parts.tool, status = %message, "status"),
            Phase::Pending {
                message: pending,
                dirty,
                ..
            } => {
                *pending = Some(message);
                *dirty = true;
            }
            Phase::Task => return Box::pin(self.write_status(Some(message))),
        }
        Box::pin(std::future::ready(()))
    }

    fn input(&self, ask: Ask) -> BoxFuture<'_, Result<Value, Failure>> {
        Box::pin(self.ask(ask))
    }

    fn progress(&self, progress: Progress) -> BoxFuture<'_, Result<(), ProgressError>> {
        Box::pin(self.report_progress(progress))
    }

    fn log(&self, level: LoggingLevel, logger: Option<String>, data: Value) -> BoxFuture<'_, ()> {
        Box::pin(self.send_log(level, logger, data))
    }

    fn next_step(&self) -> (u64, Option<Step>) {
        let seq = self.step_seq.fetch_add(1, Ordering::Relaxed) + 1;
        let stored = self.parts.replay.as_ref().and_then(|r| r.steps.get(&seq));
        (seq, stored.cloned())
    }

    fn peek_step(&self) -> Option<String> {
        let seq = self.step_seq.load(Ordering::Relaxed) + 1;
        let replay = self.parts.replay.as_ref()?;
        replay.steps.get(&seq).map(|stored| stored.name.clone())
    }

    fn is_inline(&self) -> bool {
        matches!(*self.phase.lock(), Phase::Inline)
    }

    fn ensure_task(&self) -> BoxFuture<'_, Result<(), Failure>> {
        Box::pin(self.become_task())
    }

    fn park(&self, wait: Wait) -> BoxFuture<'_, ()> {
        Box::pin(self.wait_then_park(wait))
    }

    fn take_rate<'a>(
        &'a self,
        limiter: &'a crate::rate::Limiter,
    ) -> BoxFuture<'a, Result<Option<std::time::Duration>, Failure>> {
        Box::pin(async move {
            self.parts
                .runtime
                .take_rate(limiter)
                .await
                .map_err(|error| Failure::Error(crate::errors::store_failure(&error)))
        })
    }

    fn save_step(&self, seq: u64, name: &str, value: Value) -> BoxFuture<'_, Result<(), Failure>> {
        let step = Step::new(seq, name, value);
        Box::pin(async move {
            self.parts
                .runtime
                .save_step(&self.parts.id, step)
                .await
                .map_err(|error| error.to_failure())
        })
    }
}
