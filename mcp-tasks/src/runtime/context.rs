//! [`TaskContext`]: what a running tool sees of its task.

#![allow(
    deprecated,
    reason = "sampling and roots are deprecated by SEP-2577 yet still part of the 2026-07-28 wire"
)]

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicU64, Ordering},
};

use rmcp::model::{
    ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ElicitationSchema, InputRequest, InputRequests, InputResponses, ListRootsResult,
    Request, RequestNoParam,
};
use serde_json::Value;
use tokio::sync::{Notify, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::Runtime;
use crate::{
    errors,
    store::{Step, StoreError},
    tool::Failure,
    toolkit::StateMap,
};

/// Where the call stands: answered inline, within an inline budget, or a task.
enum Phase {
    /// An ordinary call: no task exists and none will.
    Inline,
    /// Inside an inline budget: the work runs, and a task is created around it if it outlasts
    /// the budget or asks for input.
    Pending {
        message: Option<String>,
        dirty: bool,
        promote: Option<oneshot::Sender<()>>,
    },
    /// A task record exists.
    Task,
}

pub(crate) struct Inner {
    pub(crate) id: Arc<str>,
    pub(crate) tool: Arc<str>,
    pub(crate) owner: Arc<str>,
    pub(crate) cancel: CancellationToken,
    client_capabilities: ClientCapabilities,
    state: Arc<StateMap>,
    runtime: Arc<Runtime>,
    phase: Mutex<Phase>,
    bound: watch::Sender<bool>,
    input_seq: AtomicU64,
    /// Multi round-trip input for a call on the modern wire, while no task exists.
    mrtr: Option<Mrtr>,
    /// What a replay after a restart already has: answers and completed steps.
    replay: Option<Replay>,
    step_seq: AtomicU64,
}

/// The answers and completed steps of a task that is replayed after a restart.
pub(crate) struct Replay {
    pub(crate) answers: InputResponses,
    pub(crate) steps: std::collections::HashMap<u64, Step>,
}

/// What a call gathers by multi round-trip requests (WIRE.md §5.4) before any task exists:
/// the answers the client sent (this round's `inputResponses` plus earlier rounds', carried
/// in `requestState`) and the requests still unanswered.
pub(crate) struct Mrtr {
    answers: InputResponses,
    seq: AtomicU64,
    requested: Mutex<InputRequests>,
    asked: Notify,
}

impl Mrtr {
    pub(crate) fn new(answers: InputResponses) -> Self {
        Self {
            answers,
            seq: AtomicU64::new(0),
            requested: Mutex::default(),
            asked: Notify::new(),
        }
    }
}

/// The handle a tool receives: its task id, status messages, cancellation, input from the
/// client, and the application state registered on the toolkit.
///
/// Cheap to clone; every clone refers to the same call.
#[derive(Clone)]
pub struct TaskContext {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for TaskContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskContext")
            .field("task_id", &self.task_id())
            .field("tool", &self.inner.tool)
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// Which kind of input a request is, for the capability check of WIRE.md C18.
#[derive(Clone, Copy)]
enum InputKind {
    Elicitation,
    Sampling,
    Roots,
}

impl InputKind {
    fn capability(self) -> &'static str {
        match self {
            Self::Elicitation => "elicitation",
            Self::Sampling => "sampling",
            Self::Roots => "roots",
        }
    }

    fn key_prefix(self) -> &'static str {
        match self {
            Self::Elicitation => "elicit",
            Self::Sampling => "sample",
            Self::Roots => "roots",
        }
    }

    #[allow(
        deprecated,
        reason = "sampling and roots still work on the 2026-07-28 wire"
    )]
    fn declared(self, caps: &ClientCapabilities) -> bool {
        match self {
            Self::Elicitation => caps.elicitation.is_some(),
            Self::Sampling => caps.sampling.is_some(),
            Self::Roots => caps.roots.is_some(),
        }
    }
}

pub(crate) struct ContextParts {
    pub(crate) id: Arc<str>,
    pub(crate) tool: Arc<str>,
    pub(crate) owner: Arc<str>,
    pub(crate) cancel: CancellationToken,
    pub(crate) client_capabilities: ClientCapabilities,
    pub(crate) state: Arc<StateMap>,
    pub(crate) runtime: Arc<Runtime>,
    /// `Some` on the modern wire: input before a task is gathered by MRTR.
    pub(crate) mrtr: Option<Mrtr>,
    /// `Some` when the task is replayed after a restart.
    pub(crate) replay: Option<Replay>,
}

impl TaskContext {
    fn build(parts: ContextParts, phase: Phase, bound: bool) -> Self {
        Self {
            inner: Arc::new(Inner {
                id: parts.id,
                tool: parts.tool,
                owner: parts.owner,
                cancel: parts.cancel,
                client_capabilities: parts.client_capabilities,
                state: parts.state,
                runtime: parts.runtime,
                phase: Mutex::new(phase),
                bound: watch::Sender::new(bound),
                input_seq: AtomicU64::new(0),
                mrtr: parts.mrtr,
                replay: parts.replay,
                step_seq: AtomicU64::new(0),
            }),
        }
    }

    pub(crate) fn inline(parts: ContextParts) -> Self {
        Self::build(parts, Phase::Inline, false)
    }

    /// A context for a task whose record exists (a replay after a restart).
    pub(crate) fn task(parts: ContextParts) -> Self {
        Self::build(parts, Phase::Task, true)
    }

    /// A context for a call that becomes a task once its work first waits (or its inline
    /// budget runs out); the receiver fires when the work asks to become a task early (it
    /// needs input through the task).
    pub(crate) fn pending(parts: ContextParts) -> (Self, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let phase = Phase::Pending {
            message: None,
            dirty: false,
            promote: Some(tx),
        };
        (Self::build(parts, phase, false), rx)
    }

    fn phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.inner
            .phase
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts turning a pending call into a task: the status message to create it with.
    pub(crate) fn begin_promotion(&self) -> Option<String> {
        match &mut *self.phase() {
            Phase::Pending { message, dirty, .. } => {
                *dirty = false;
                message.clone()
            }
            _ => None,
        }
    }

    /// Ends the promotion once the record exists: flushes a message set meanwhile and lets
    /// waiting input requests go on.
    pub(crate) async fn finish_promotion(&self) {
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
        self.inner.bound.send_replace(true);
    }

    /// The task id, once the call runs as a task; `None` for an inline call, and also at
    /// the very start of a call that becomes a task (the task is created once the work first
    /// waits, so that input can be asked before it exists). Inside a [step](Self::step), after
    /// any await, or in a replay it is set.
    #[must_use]
    pub fn task_id(&self) -> Option<&str> {
        matches!(*self.phase(), Phase::Task).then_some(&*self.inner.id)
    }

    /// The owner of the call (WIRE.md R49): the [`Owner`](crate::Owner) of the creating
    /// request, or the engine's default.
    #[must_use]
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// The wire name of the tool being run.
    #[must_use]
    pub fn tool_name(&self) -> &str {
        &self.inner.tool
    }

    /// Sets the task's `statusMessage`, which `tasks/get` shows. Inline calls have no task
    /// and the message only goes to the trace log.
    pub async fn status(&self, message: impl Into<String>) {
        let message = message.into();
        {
            let mut phase = self.phase();
            match &mut *phase {
                Phase::Inline => {
                    tracing::debug!(tool = %self.inner.tool, status = %message, "status");
                    return;
                }
                Phase::Pending {
                    message: pending,
                    dirty,
                    ..
                } => {
                    *pending = Some(message);
                    *dirty = true;
                    return;
                }
                Phase::Task => {}
            }
        }
        self.write_status(Some(message)).await;
    }

    async fn write_status(&self, message: Option<String>) {
        match self
            .inner
            .runtime
            .store
            .set_status_message(&self.inner.id, message)
            .await
        {
            Ok(()) | Err(StoreError::Terminal(_) | StoreError::NotFound) => {}
            Err(error) => tracing::warn!(task_id = %self.inner.id, %error, "status not stored"),
        }
    }

    /// Whether a cancellation was requested (`tasks/cancel`, or the client dropped an inline
    /// call).
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Resolves once a cancellation is requested. To honour it, end the tool with
    /// [`ToolError::cancelled`](crate::ToolError::cancelled) (or `?` on a [`Failure`]); the
    /// task then ends `cancelled`. A tool that ignores it ends as it would have.
    pub async fn cancelled(&self) {
        self.inner.cancel.cancelled().await;
    }

    /// Runs `work` until it ends or a cancellation is requested, whichever comes first.
    ///
    /// # Errors
    /// [`Failure::Cancelled`] when the cancellation came first.
    pub async fn until_cancelled<T>(&self, work: impl Future<Output = T>) -> Result<T, Failure> {
        tokio::select! {
            biased;
            () = self.inner.cancel.cancelled() => Err(Failure::Cancelled),
            value = work => Ok(value),
        }
    }

    /// The application state of type `T` registered with
    /// [`Toolkit::with_state`](crate::Toolkit::with_state).
    #[must_use]
    pub fn state<T: Clone + Send + Sync + 'static>(&self) -> Option<T> {
        self.inner.state.get::<T>()
    }

    /// Asks the client for input with an elicitation (`elicitation/create`). The task waits
    /// in `input_required` under a fresh key until `tasks/update` brings the answer.
    ///
    /// # Errors
    /// - [`Failure::Cancelled`] if the task is cancelled while waiting;
    /// - `-32021` naming `elicitation` when the creating request did not declare it (C18);
    /// - `-32021` naming the tasks extension for a call that cannot become a task and cannot
    ///   ask by multi round-trip either (a legacy `initialize` session).
    ///
    /// A call that is not a task and never will be (the client did not declare the extension)
    /// asks by multi round-trip request on the modern wire instead: the call answers
    /// `resultType: "input_required"`, and the client's retry runs the tool again with the
    /// answer (WIRE.md §5.4), so code before the question may run more than once.
    pub async fn elicit(&self, params: ElicitRequestParams) -> Result<ElicitResult, Failure> {
        let request = InputRequest::Elicitation(Request::new(params));
        let value = self.input(InputKind::Elicitation, request, false).await?;
        decode(value, "ElicitResult")
    }

    /// Asks for input **before the task exists**, by multi round-trip request (WIRE.md R11,
    /// §5.4): while the call has no task yet, it answers `resultType: "input_required"`; the
    /// client retries the call with the answer, the tool runs again from the top, this call
    /// returns the answer, and the task is created once the work goes on. Use it to confirm or
    /// gather parameters before committing to long work. Once a task exists (or on a legacy
    /// session) it asks like [`TaskContext::elicit`].
    ///
    /// Code before this call runs once per round: keep side effects after it.
    ///
    /// # Errors
    /// As [`TaskContext::elicit`].
    pub async fn elicit_before_task(
        &self,
        params: ElicitRequestParams,
    ) -> Result<ElicitResult, Failure> {
        let request = InputRequest::Elicitation(Request::new(params));
        let value = self.input(InputKind::Elicitation, request, true).await?;
        decode(value, "ElicitResult")
    }

    /// [`TaskContext::elicit`] with a form: a message and the schema of the fields wanted.
    ///
    /// # Errors
    /// As [`TaskContext::elicit`].
    pub async fn elicit_form(
        &self,
        message: impl Into<String>,
        schema: ElicitationSchema,
    ) -> Result<ElicitResult, Failure> {
        self.elicit(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.into(),
            requested_schema: schema,
        })
        .await
    }

    /// [`TaskContext::elicit_before_task`] with a form.
    ///
    /// # Errors
    /// As [`TaskContext::elicit`].
    pub async fn elicit_form_before_task(
        &self,
        message: impl Into<String>,
        schema: ElicitationSchema,
    ) -> Result<ElicitResult, Failure> {
        self.elicit_before_task(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.into(),
            requested_schema: schema,
        })
        .await
    }

    /// Runs `work` as a durable step: its result is stored (serialized) before `step`
    /// returns. When the task is replayed after a restart ([`RestartPolicy::Resume`]), the tool
    /// runs again from the top and every step that completed before returns its stored result
    /// without running, so side effects belong in steps. Steps are numbered in the order they
    /// run; `name` must match on replay.
    ///
    /// A step makes a pending call a task; an inline call (no task) just runs `work`.
    ///
    /// # Errors
    /// [`Failure::Cancelled`] if the task ended meanwhile (it expired); a `-32603` error when
    /// the result does not serialize, the store fails, or the step's name differs from the
    /// one stored for its position (the tool's code changed).
    ///
    /// [`RestartPolicy::Resume`]: crate::RestartPolicy::Resume
    pub async fn step<T, F, Fut>(&self, name: &str, work: F) -> Result<T, Failure>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let seq = self.inner.step_seq.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(stored) = self.inner.replay.as_ref().and_then(|r| r.steps.get(&seq)) {
            if stored.name != name {
                return Err(Failure::Error(rmcp::model::ErrorData::internal_error(
                    format!(
                        "step {seq} was `{}` when the task started and is `{name}` now: the \
                         tool's code changed, so the task cannot be replayed",
                        stored.name
                    ),
                    None,
                )));
            }
            return decode(stored.value.clone(), "stored step result");
        }
        if matches!(*self.phase(), Phase::Inline) {
            return Ok(work().await);
        }
        self.become_task().await?;
        let value = work().await;
        let json = serde_json::to_value(&value).map_err(|e| {
            Failure::Error(rmcp::model::ErrorData::internal_error(
                format!("the result of step `{name}` does not serialize: {e}"),
                None,
            ))
        })?;
        match self
            .inner
            .runtime
            .store
            .save_step(&self.inner.id, Step::new(seq, name, json))
            .await
        {
            Ok(()) => Ok(value),
            Err(StoreError::Terminal(_) | StoreError::NotFound) => Err(Failure::Cancelled),
            Err(error) => Err(Failure::Error(errors::store_failure(&error))),
        }
    }

    /// Asks the client's model for a completion (`sampling/createMessage`).
    ///
    /// # Errors
    /// As [`TaskContext::elicit`], with `sampling` as the capability.
    #[allow(deprecated, reason = "sampling still works on the 2026-07-28 wire")]
    pub async fn sample(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, Failure> {
        let request = InputRequest::CreateMessage(Request::new(params));
        let value = self.input(InputKind::Sampling, request, false).await?;
        decode(value, "CreateMessageResult")
    }

    /// Asks the client for its roots (`roots/list`).
    ///
    /// # Errors
    /// As [`TaskContext::elicit`], with `roots` as the capability.
    #[allow(deprecated, reason = "roots still work on the 2026-07-28 wire")]
    pub async fn roots(&self) -> Result<ListRootsResult, Failure> {
        let request = InputRequest::ListRoots(RequestNoParam {
            method: Default::default(),
            extensions: Default::default(),
        });
        let value = self.input(InputKind::Roots, request, false).await?;
        decode(value, "ListRootsResult")
    }

    async fn input(
        &self,
        kind: InputKind,
        request: InputRequest,
        before_task: bool,
    ) -> Result<Value, Failure> {
        if !kind.declared(&self.inner.client_capabilities) {
            return Err(Failure::Error(errors::client_capability_required(
                kind.capability(),
            )));
        }
        let by_round_trip = match &*self.phase() {
            Phase::Task => false,
            Phase::Inline => self.inner.mrtr.is_some(),
            Phase::Pending { .. } => before_task && self.inner.mrtr.is_some(),
        };
        if by_round_trip {
            return self.round_trip(kind, request).await;
        }
        self.become_task().await?;
        let n = self.inner.input_seq.fetch_add(1, Ordering::Relaxed) + 1;
        let key = format!("{}-{n}", kind.key_prefix());
        // A replay never asks again what was answered before the restart.
        if let Some(answer) = self.inner.replay.as_ref().and_then(|r| r.answers.get(&key)) {
            return Ok(answer.clone());
        }
        let runtime = &self.inner.runtime;
        let answer = runtime.await_input(&self.inner.id, &key);
        match runtime
            .store
            .request_input(&self.inner.id, &key, request)
            .await
        {
            Ok(()) => {}
            // The task ended under the work (it expired): stop the work.
            Err(StoreError::Terminal(_) | StoreError::NotFound) => return Err(Failure::Cancelled),
            Err(error) => return Err(Failure::Error(errors::store_failure(&error))),
        }
        tokio::select! {
            biased;
            () = self.inner.cancel.cancelled() => Err(Failure::Cancelled),
            value = answer => value.map_err(|_| Failure::Cancelled),
        }
    }

    /// Input by multi round-trip request: the answer if the client sent it, else the request
    /// is recorded for the `input_required` answer and this call waits until the work is
    /// dropped with the round.
    async fn round_trip(&self, kind: InputKind, request: InputRequest) -> Result<Value, Failure> {
        let Some(mrtr) = &self.inner.mrtr else {
            return Err(Failure::Cancelled);
        };
        let n = mrtr.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let key = format!("{}-{n}", kind.key_prefix());
        if let Some(answer) = mrtr.answers.get(&key) {
            return Ok(answer.clone());
        }
        mrtr.requested
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, request);
        mrtr.asked.notify_one();
        self.inner.cancel.cancelled().await;
        Err(Failure::Cancelled)
    }

    /// Resolves once the work asked for input by multi round-trip request.
    pub(crate) async fn round_trip_asked(&self) {
        match &self.inner.mrtr {
            Some(mrtr) => mrtr.asked.notified().await,
            None => std::future::pending().await,
        }
    }

    /// The requests of this round, and every answer gathered so far.
    pub(crate) fn round_trip_state(&self) -> (InputRequests, InputResponses) {
        match &self.inner.mrtr {
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

    /// Makes sure a task record exists: promotes a pending call, refuses an inline one.
    async fn become_task(&self) -> Result<(), Failure> {
        {
            let mut phase = self.phase();
            match &mut *phase {
                Phase::Task => return Ok(()),
                Phase::Inline => {
                    let mut error = errors::tasks_capability_required();
                    error.message = format!(
                        "tool `{}` needs input from the client, which it can only ask for as a \
                         task: declare the io.modelcontextprotocol/tasks extension on tools/call",
                        self.inner.tool
                    )
                    .into();
                    return Err(Failure::Error(error));
                }
                Phase::Pending { promote, .. } => {
                    if let Some(promote) = promote.take() {
                        let _ = promote.send(());
                    }
                }
            }
        }
        let mut bound = self.inner.bound.subscribe();
        tokio::select! {
            biased;
            () = self.inner.cancel.cancelled() => Err(Failure::Cancelled),
            result = bound.wait_for(|b| *b) => result.map(|_| ()).map_err(|_| Failure::Cancelled),
        }
    }
}

fn decode<T: serde::de::DeserializeOwned>(value: Value, what: &str) -> Result<T, Failure> {
    serde_json::from_value(value).map_err(|e| {
        Failure::Error(rmcp::model::ErrorData::invalid_params(
            format!("the client's answer is not a valid {what}: {e}"),
            None,
        ))
    })
}
