//! The life of one call, from `tools/call` to its one terminal state.
//!
//! A call is in one [`Phase`] at a time: **inline** (no task exists and none will),
//! **pending** (the work runs and a task may still be created around it), or **task** (a
//! task record exists). [`Call::inline`] and [`Call::task`] drive a call through them;
//! [`CallState`] is what the tool's [`TaskContext`] reaches through [`Host`].
//!
//! # Invariants
//!
//! 1. **The work starts once.** A call's work is started before any task exists and is never
//!    started twice: promotion wraps a task record around the running future.
//! 2. **Phases only move forward.** `inline` never changes; `pending → task` happens at most
//!    once; a replayed task (`runtime/recover.rs`) starts in `task`.
//! 3. **When a pending call becomes a task.** Once its work first waits on anything but a
//!    before-task question (a multi round-trip request, protocol R11), asks for input through
//!    the task, or starts a [step](TaskContext::step); or, with an inline budget, once the
//!    budget runs out. Work that ends within its inline budget is answered inline and no task
//!    ever exists; work that ends in its very first poll without a budget is a task born
//!    finished (the client asked for a task and gets one, R3).
//! 4. **Nothing reaches the store before the record.** A status set while pending is kept
//!    and written with the create (or right after it, if set during the create); input
//!    requests and steps wait until the record exists (`bound`).
//! 5. **One ending.** A task's work ends exactly once, as an [`Ended`], and that is stored as
//!    the task's one terminal state ([`Runtime::finish`]). When the store already holds a
//!    terminal state (expiry got there first) it keeps it.
//! 6. **The runtime forgets a task when its work ends**, never before: its cancellation
//!    token and input waiters live in [`Runtime`] from the create until the outcome is stored.
//! 7. **Multi round-trip input (protocol §5.4).** A call without a task that asks for input
//!    answers `input_required` with this round's questions and every earlier answer; its
//!    work is cancelled and dropped with the round, and the retry runs the tool again.
//! 8. **Cancellation** (`tasks/cancel`, expiry found by the reaper or by a read, a dropped
//!    inline request) cancels the work's token; the status changes only when the work ends.
//! 9. **Retries create nothing** (`_meta["mcp-tasks/idempotencyKey"]`, [`IDEMPOTENCY_KEY`]).
//!    A task call carrying the key of an earlier call of the same owner and tool, within
//!    that task's TTL, answers that task ([`Created::Existing`]); its own work is dropped
//!    before its first step or input request (they wait for the record, invariant 4), so no
//!    step runs twice. Calls answered inline create no task and are not deduplicated.
//! 10. **Request notifications only while the request is open.** `notifications/progress`
//!     and `notifications/message` of a call go to its `tools/call` request ([`Notifier`])
//!     while the call is inline or pending, never once it is a task: the request was then
//!     answered with the task, and tasks have neither (docs/protocol.md R42). Progress is
//!     refused unless it increases; a message is sent only at or above the request's
//!     `logLevel`, and never without one.
//! 11. **Chosen input keys are used once per call** (R28): a second request under a key the
//!     tool chose is refused, naming the key; generated keys (`elicit-N`, ...) have a
//!     reserved form a chosen key cannot take. A replay asks the same keys in the same order,
//!     and finds the ones answered before the restart in its [`Replay`].
//! 12. **Cluster mode** (`runtime/cluster.rs`): a call's task is created with this instance
//!     as its runner and its work runs under that lease; with queued calls the record is
//!     created first, with no runner, and no work starts here ([`Call::recorded`]).
//! 13. **No answer is lost to a replay.** A replay that asks a question its [`Replay`] has no
//!     answer for registers its waiter first, then reads the answers the store holds now:
//!     an answer stored before the waiter existed (after recovery read the replay data) is
//!     found by the read, every later one reaches the waiter.
//! 14. **A replay's questions get their own answers.** Generated keys are numbered by one
//!     sequence per run, whichever route a question takes (multi round-trip before the task,
//!     or through the task), so a replay, which asks every question through the task, gives
//!     each question the key it had in the original run, and no before-task question shares
//!     a key with a task-phase one. The answers a call took by multi round-trip are stored
//!     with its task when it is created ([`NewTask::answers`](crate::store::NewTask)): a
//!     replay finds them in its [`Replay`] and does not ask those questions again (R32).
//!
//! [`IDEMPOTENCY_KEY`]: crate::IDEMPOTENCY_KEY

#![allow(
    deprecated,
    reason = "sampling and roots are deprecated by SEP-2577 yet still part of the 2026-07-28 wire"
)]

use std::{
    any::{Any, TypeId},
    collections::{HashMap, HashSet},
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use futures::{FutureExt, future::BoxFuture};
use rmcp::{
    Peer, RoleServer,
    model::{
        CallToolResult, ClientCapabilities, ErrorData, InputRequest, InputRequests, InputResponses,
        JsonObject, LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam,
        ProgressToken, Task,
    },
};
use serde_json::Value;
use tokio::sync::{Notify, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::Runtime;
use crate::{
    context::{Failure, Host, InputKind, Progress, ProgressError, StepSlot, TaskContext},
    errors,
    id::new_task_id,
    store::{Created, Lease, NewTask, Step, StoreError},
    tool::ToolFuture,
    toolkit::{Registered, StateMap},
};

/// How a call's work ended, panics included.
#[derive(Debug, Clone)]
pub(crate) enum Ended {
    /// With a result (`isError` or not): the task is `completed` (R46).
    Completed(CallToolResult),
    /// With a JSON-RPC error: the task is `failed` (R45).
    Failed(ErrorData),
    /// It honoured a cancellation: the task is `cancelled`.
    Cancelled,
    /// It panicked, with this message: the task is `failed` with `-32603`.
    Panicked(String),
}

impl From<Result<CallToolResult, Failure>> for Ended {
    fn from(result: Result<CallToolResult, Failure>) -> Self {
        match result {
            Ok(result) => Self::Completed(result),
            Err(Failure::Error(error)) => Self::Failed(error),
            Err(Failure::Cancelled) => Self::Cancelled,
        }
    }
}

/// Runs work, turning a panic into [`Ended::Panicked`].
pub(crate) async fn run_caught(work: ToolFuture) -> Ended {
    match std::panic::AssertUnwindSafe(work).catch_unwind().await {
        Ok(result) => result.into(),
        Err(panic) => Ended::Panicked(panic_message(&*panic)),
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
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
            taken: Mutex::default(),
            requested: Mutex::default(),
            asked: Notify::new(),
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

/// How severe a level is: `debug` 0 to `emergency` 7 (RFC 5424 order, as MCP has it).
fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
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
    /// `true` once the task record exists; input requests and steps wait for it.
    bound: watch::Sender<bool>,
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
            bound: watch::Sender::new(bound),
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

    fn phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.phase
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts turning a pending call into a task: the status message to create it with.
    fn begin_promotion(&self) -> Option<String> {
        match &mut *self.phase() {
            Phase::Pending { message, dirty, .. } => {
                *dirty = false;
                message.clone()
            }
            _ => None,
        }
    }

    /// Ends the promotion once the record exists: flushes a message set meanwhile and lets
    /// waiting input requests and steps go on.
    async fn finish_promotion(&self) {
        let late_message = match std::mem::replace(&mut *self.phase(), Phase::Task) {
            Phase::Pending {
                message,
                dirty: true,
                ..
            } => Some(message),
            _ => None,
        };
        if let Some(message) = late_message {
            self.write_status(message).await;
        }
        self.bound.send_replace(true);
    }

    async fn write_status(&self, message: Option<String>) {
        let message = message.map(|m| self.parts.runtime.limits.clip_status(m));
        match self.parts.runtime.set_status(&self.parts.id, message).await {
            Ok(())
            | Err(StoreError::Terminal(_) | StoreError::NotFound | StoreError::Fenced { .. }) => {}
            Err(error) => tracing::warn!(task_id = %self.parts.id, %error, "status not stored"),
        }
    }

    /// Resolves once the work asked for input by multi round-trip request.
    async fn round_trip_asked(&self) {
        match &self.parts.mrtr {
            Some(mrtr) => mrtr.asked.notified().await,
            None => std::future::pending().await,
        }
    }

    /// The answers this run took by multi round-trip request, to store with its task.
    fn round_trip_taken(&self) -> InputResponses {
        self.parts
            .mrtr
            .as_ref()
            .map(|mrtr| {
                mrtr.taken
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone()
            })
            .unwrap_or_default()
    }

    /// The requests of this round, and every answer gathered so far.
    fn round_trip_state(&self) -> (InputRequests, InputResponses) {
        match &self.parts.mrtr {
            Some(mrtr) => (
                std::mem::take(
                    &mut *mrtr
                        .requested
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner),
                ),
                mrtr.answers.clone(),
            ),
            None => Default::default(),
        }
    }

    /// Input by multi round-trip request: the answer if the client sent it, else the request
    /// is recorded for the `input_required` answer and this call waits until the work is
    /// dropped with the round.
    async fn round_trip(&self, request: InputRequest, key: String) -> Result<Value, Failure> {
        let Some(mrtr) = &self.parts.mrtr else {
            return Err(Failure::Cancelled);
        };
        if let Some(answer) = mrtr.answers.get(&key) {
            mrtr.taken
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(key, answer.clone());
            return Ok(answer.clone());
        }
        mrtr.requested
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, request);
        mrtr.asked.notify_one();
        self.parts.cancel.cancelled().await;
        Err(Failure::Cancelled)
    }

    /// Makes sure a task record exists: promotes a pending call, refuses an inline one.
    async fn become_task(&self) -> Result<(), Failure> {
        {
            let mut phase = self.phase();
            match &mut *phase {
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
        }
        let mut bound = self.bound.subscribe();
        tokio::select! {
            biased;
            () = self.parts.cancel.cancelled() => Err(Failure::Cancelled),
            result = bound.wait_for(|b| *b) => result.map(|_| ()).map_err(|_| Failure::Cancelled),
        }
    }

    async fn ask(
        &self,
        kind: InputKind,
        request: InputRequest,
        before_task: bool,
        key: Option<String>,
    ) -> Result<Value, Failure> {
        if let Some(key) = &key {
            let fresh = self
                .chosen_keys
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(key.clone());
            if !fresh {
                return Err(Failure::Error(errors::input_key_reused(key)));
            }
        }
        // One sequence numbers the generated keys of every route (invariant 14).
        let key = key.unwrap_or_else(|| {
            let n = self.input_seq.fetch_add(1, Ordering::Relaxed) + 1;
            format!("{}-{n}", kind.key_prefix())
        });
        let by_round_trip = match &*self.phase() {
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
        if self.parts.replay.is_some() {
            match runtime.store.stored_answers(&self.parts.id).await {
                Ok(mut stored) => {
                    if let Some(value) = stored.remove(&key) {
                        runtime.forget_input(&self.parts.id, &key);
                        return Ok(value);
                    }
                }
                Err(StoreError::NotFound) => return Err(Failure::Cancelled),
                Err(error) => return Err(Failure::Error(errors::store_failure(&error))),
            }
        }
        match runtime.request_input(&self.parts.id, &key, request).await {
            Ok(()) => {}
            // The task ended under the work (it expired), or another instance took it over:
            // stop the work.
            Err(StoreError::Terminal(_) | StoreError::NotFound | StoreError::Fenced { .. }) => {
                return Err(Failure::Cancelled);
            }
            Err(error) => return Err(Failure::Error(errors::store_failure(&error))),
        }
        tokio::select! {
            biased;
            () = self.parts.cancel.cancelled() => Err(Failure::Cancelled),
            value = answer => value.map_err(|_| Failure::Cancelled),
        }
    }
}

impl CallState {
    /// The open request's notifier: `Some` while the call is inline or pending (invariant 10).
    fn open_request(&self) -> Option<&Notifier> {
        match *self.phase() {
            Phase::Task => None,
            Phase::Inline | Phase::Pending { .. } => self.parts.notifier.as_ref(),
        }
    }

    async fn report_progress(&self, report: Progress) -> Result<(), ProgressError> {
        {
            let mut last = self
                .last_progress
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
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
                .is_some_and(|wanted| severity(level) >= severity(wanted))
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
        matches!(*self.phase(), Phase::Task).then_some(&*self.parts.id)
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
        {
            let mut phase = self.phase();
            match &mut *phase {
                Phase::Inline => {
                    tracing::debug!(tool = %self.parts.tool, status = %message, "status");
                    return Box::pin(std::future::ready(()));
                }
                Phase::Pending {
                    message: pending,
                    dirty,
                    ..
                } => {
                    *pending = Some(message);
                    *dirty = true;
                    return Box::pin(std::future::ready(()));
                }
                Phase::Task => {}
            }
        }
        Box::pin(self.write_status(Some(message)))
    }

    fn input(
        &self,
        kind: InputKind,
        request: InputRequest,
        before_task: bool,
        key: Option<String>,
    ) -> BoxFuture<'_, Result<Value, Failure>> {
        Box::pin(self.ask(kind, request, before_task, key))
    }

    fn progress(&self, progress: Progress) -> BoxFuture<'_, Result<(), ProgressError>> {
        Box::pin(self.report_progress(progress))
    }

    fn log(&self, level: LoggingLevel, logger: Option<String>, data: Value) -> BoxFuture<'_, ()> {
        Box::pin(self.send_log(level, logger, data))
    }

    fn next_step(&self) -> StepSlot {
        let seq = self.step_seq.fetch_add(1, Ordering::Relaxed) + 1;
        match self.parts.replay.as_ref().and_then(|r| r.steps.get(&seq)) {
            Some(stored) => StepSlot::Stored {
                seq,
                name: stored.name.clone(),
                value: stored.value.clone(),
            },
            None => StepSlot::Fresh { seq },
        }
    }

    fn is_inline(&self) -> bool {
        matches!(*self.phase(), Phase::Inline)
    }

    fn ensure_task(&self) -> BoxFuture<'_, Result<(), Failure>> {
        Box::pin(self.become_task())
    }

    fn save_step(&self, seq: u64, name: &str, value: Value) -> BoxFuture<'_, Result<(), Failure>> {
        let step = Step::new(seq, name, value);
        Box::pin(async move {
            match self.parts.runtime.save_step(&self.parts.id, step).await {
                Ok(()) => Ok(()),
                Err(StoreError::Terminal(_) | StoreError::NotFound | StoreError::Fenced { .. }) => {
                    Err(Failure::Cancelled)
                }
                Err(error) => Err(Failure::Error(errors::store_failure(&error))),
            }
        })
    }
}

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

/// One `tools/call` being answered.
pub(crate) struct Call<'a> {
    pub(crate) runtime: &'a Arc<Runtime>,
    pub(crate) registered: &'a Registered,
    pub(crate) state: &'a Arc<StateMap>,
    pub(crate) tool: Arc<str>,
    pub(crate) owner: Arc<str>,
    pub(crate) client_capabilities: ClientCapabilities,
    pub(crate) arguments: &'a JsonObject,
    pub(crate) request_meta: JsonObject,
    /// `Some` on the modern wire, with the answers the client sent.
    pub(crate) mrtr: Option<InputResponses>,
    /// The client's idempotency key (`_meta["mcp-tasks/idempotencyKey"]`).
    pub(crate) idempotency_key: Option<Arc<str>>,
    /// Where the call's notifications go while the request is open.
    pub(crate) notifier: Option<Notifier>,
}

impl Call<'_> {
    fn parts(&mut self, id: Arc<str>, cancel: CancellationToken) -> CallParts {
        CallParts {
            mrtr: self.mrtr.take().map(Mrtr::new),
            replay: None,
            notifier: self.notifier.take(),
            id,
            tool: self.tool.clone(),
            owner: self.owner.clone(),
            cancel,
            client_capabilities: self.client_capabilities.clone(),
            state: self.state.clone(),
            runtime: self.runtime.clone(),
        }
    }

    /// The record of the task; in cluster mode run by this instance (`runs`) or queued.
    fn new_task(&self, id: Arc<str>, message: Option<String>, runs: bool) -> NewTask {
        let definition = &self.registered.definition;
        let mut task = NewTask::new(id, self.owner.clone(), self.tool.clone())
            .with_status_message(message.map(|m| self.runtime.limits.clip_status(m)))
            .with_ttl(definition.ttl().duration())
            .with_poll_interval(definition.poll_interval())
            .with_arguments(self.arguments.clone())
            .with_tool_version(Arc::from(definition.version()))
            .with_request_meta(self.request_meta.clone());
        if let Some((_, instance)) = self.runtime.cluster()
            && runs
        {
            task = task.with_runner(instance.id.clone(), instance.config.lease);
        }
        if let Some(key) = &self.idempotency_key {
            task = task.with_idempotency_key(key.clone());
        }
        task
    }

    /// Whether the task record is created before any work starts, and none starts here:
    /// calls are queued for other instances and workers
    /// ([`ClusterConfig::with_queued_calls`](super::ClusterConfig)).
    pub(crate) fn records_first(&self) -> bool {
        self.queues()
    }

    fn queues(&self) -> bool {
        self.runtime
            .cluster()
            .is_some_and(|(_, instance)| instance.config.queued_calls)
    }

    /// A call whose task is recorded before any work starts (see [`Call::records_first`]):
    /// a retry with the same idempotency key answers the existing task; a queued call
    /// starts nothing here (an instance or worker claims it, and runs it as a task from its
    /// first poll, so input it asks before the task is asked through the task).
    pub(crate) async fn recorded(mut self) -> Result<Answer, ErrorData> {
        let id: Arc<str> = Arc::from(new_task_id());
        let runs = !self.queues();
        // Work that runs here counts against the owner's quota, checked before the record.
        let slot = if runs {
            Some(self.runtime.reserve(&self.owner, true)?)
        } else {
            None
        };
        let record = self.new_task(id.clone(), None, runs);
        let lease = Lease::first(&record);
        let snapshot = match self.runtime.store.create(record).await {
            Ok(Created::New(snapshot)) => snapshot,
            Ok(Created::Existing(existing)) => {
                tracing::debug!(task_id = %existing.id, tool = %self.tool, "idempotent retry");
                return Ok(Answer::Task(existing.to_task()));
            }
            Err(StoreError::Full { max_tasks }) => return Err(errors::store_full(max_tasks)),
            Err(other) => return Err(errors::store_failure(&other)),
        };
        if !runs {
            return Ok(Answer::Task(snapshot.to_task()));
        }
        let cancel = CancellationToken::new();
        let mut parts = self.parts(id.clone(), cancel.clone());
        parts.mrtr = None;
        // The request is answered with the task before the work runs (invariant 10).
        parts.notifier = None;
        let call = CallState::task(parts);
        let runtime = self.runtime;
        let slot = match slot {
            Some(slot) => slot,
            None => runtime.reserve(&self.owner, false)?,
        };
        runtime.register(id.clone(), cancel, lease, slot);
        match self
            .registered
            .tool
            .call(call.context(), self.arguments.clone())
        {
            Ok(work) => runtime.spawn(id, self.tool.clone(), &self.owner, run_caught(work)),
            Err(error) => {
                let ended = Ended::Completed(error.into_result(&self.tool));
                runtime.finish(&id, &self.tool, ended).await;
            }
        }
        Ok(Answer::Task(snapshot.to_task()))
    }

    /// An ordinary call: the work runs here and its result is the answer. Input it asks for
    /// goes by multi round-trip request (modern wire). Dropping the request cancels the work.
    pub(crate) async fn inline(mut self, request: &CancellationToken) -> Result<Answer, ErrorData> {
        let cancel = request.child_token();
        let call = CallState::inline(self.parts(Arc::from(""), cancel.clone()));
        let work = match self
            .registered
            .tool
            .call(call.context(), self.arguments.clone())
        {
            Ok(work) => work,
            Err(error) => return Ok(Answer::Result(error.into_result(&self.tool))),
        };
        let mut work = std::pin::pin!(run_caught(work));
        tokio::select! {
            biased;
            ended = &mut work => inline_answer(&self.tool, ended),
            () = call.round_trip_asked() => {
                cancel.cancel();
                Ok(input_required(&call))
            }
        }
    }

    /// A call that runs as a task (see the module docs for when the task is created).
    pub(crate) async fn task(
        mut self,
        budget: Option<Duration>,
        request: &CancellationToken,
    ) -> Result<Answer, ErrorData> {
        // The owner's quota is checked before any work starts (invariant 1: it never starts
        // twice, so it must not start for a task that cannot be created).
        let slot = self.runtime.reserve(&self.owner, true)?;
        let id: Arc<str> = Arc::from(new_task_id());
        let cancel = CancellationToken::new();
        let (call, mut promote) = CallState::pending(self.parts(id.clone(), cancel.clone()));
        let work = match self
            .registered
            .tool
            .call(call.context(), self.arguments.clone())
        {
            Ok(work) => work,
            Err(error) => return Ok(Answer::Result(error.into_result(&self.tool))),
        };
        let span =
            tracing::info_span!("task", task_id = %id, tool = %self.tool, owner = %self.owner);
        let mut work: Pin<Box<dyn Future<Output = Ended> + Send>> =
            Box::pin(run_caught(work).instrument(span));
        let ended = tokio::select! {
            biased;
            () = request.cancelled() => {
                cancel.cancel();
                return Err(errors::request_cancelled());
            }
            ended = &mut work => Some(ended),
            () = call.round_trip_asked() => {
                cancel.cancel();
                return Ok(input_required(&call));
            }
            _ = &mut promote => None,
            () = after(budget) => None,
        };
        if let (Some(ended), Some(_)) = (&ended, budget) {
            return inline_answer(&self.tool, ended.clone());
        }
        let message = call.begin_promotion();
        let record = self
            .new_task(id.clone(), message, true)
            .with_answers(call.round_trip_taken());
        let lease = Lease::first(&record);
        let created = self.runtime.store.create(record).await;
        let snapshot = match created {
            Ok(Created::New(snapshot)) => snapshot,
            // A retry of a call that created its task already (same owner, tool and
            // idempotency key): that task answers, and this run of the work stops before
            // its first step or input request (both wait for a record of their own).
            Ok(Created::Existing(existing)) => {
                cancel.cancel();
                tracing::debug!(task_id = %existing.id, tool = %self.tool, "idempotent retry");
                return Ok(Answer::Task(existing.to_task()));
            }
            Err(error) => {
                cancel.cancel();
                return Err(match error {
                    StoreError::Full { max_tasks } => errors::store_full(max_tasks),
                    other => errors::store_failure(&other),
                });
            }
        };
        let runtime = self.runtime;
        runtime.register(id.clone(), cancel, lease, slot);
        call.finish_promotion().await;
        match ended {
            // The work ended before it ever waited: the task is born finished.
            Some(ended) => runtime.finish(&id, &self.tool, ended).await,
            None => runtime.spawn(id, self.tool.clone(), &self.owner, work),
        }
        Ok(Answer::Task(snapshot.to_task()))
    }
}

/// The `input_required` answer of a round (invariant 7).
fn input_required(call: &CallState) -> Answer {
    let (requests, answers) = call.round_trip_state();
    Answer::InputRequired { requests, answers }
}

/// Resolves after `budget`, or, without one, once the work it races has been polled and
/// waits (the second poll of a `yield_now`).
async fn after(budget: Option<Duration>) {
    match budget {
        Some(budget) => tokio::time::sleep(budget).await,
        None => tokio::task::yield_now().await,
    }
}

/// The answer to an inline call from how its work ended.
fn inline_answer(tool: &str, ended: Ended) -> Result<Answer, ErrorData> {
    match ended {
        Ended::Completed(result) => Ok(Answer::Result(result)),
        Ended::Failed(error) => Err(error),
        Ended::Cancelled => Err(errors::request_cancelled()),
        Ended::Panicked(panic) => {
            tracing::error!(tool, panic, "tool panicked");
            Err(errors::tool_panicked(tool, &panic))
        }
    }
}
