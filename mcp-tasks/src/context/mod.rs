//! [`TaskContext`]: what a running tool sees of its call, and [`Failure`], how the calls it
//! offers fail.
//!
//! This module is the tool author's side only. Everything a context does to the task (store a
//! status, ask for input, keep a step, become a task) goes through [`Host`], which the runtime's
//! lifecycle implements (`runtime/call.rs`); so the author API depends on no runtime code and
//! the runtime is free to change how a call is driven.

#![allow(
    deprecated,
    reason = "sampling and roots are deprecated by SEP-2577 yet still part of the 2026-07-28 wire"
)]

use std::{
    any::{Any, TypeId},
    fmt,
    sync::Arc,
};

use futures::future::BoxFuture;
use rmcp::model::{
    ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ElicitationSchema, ErrorData, InputRequest, ListRootsResult, LoggingLevel,
    Request, RequestNoParam,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::errors;

mod state;

pub use state::State;

/// How a tool's work ends other than with a [`CallToolResult`](rmcp::model::CallToolResult),
/// and how the [`TaskContext`] calls that wait on the client fail.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Failure {
    /// The tool honoured a cancellation: the task ends `cancelled`.
    Cancelled,
    /// A JSON-RPC error during execution: the task ends `failed` with it (protocol R45).
    Error(ErrorData),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cancelled => f.write_str("cancelled"),
            Self::Error(e) => write!(f, "JSON-RPC error {}: {}", e.code.0, e.message),
        }
    }
}

impl std::error::Error for Failure {}

impl From<ErrorData> for Failure {
    fn from(error: ErrorData) -> Self {
        Self::Error(error)
    }
}

/// Which kind of input a request is, for the capability check of protocol C18 and the key
/// it is asked under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InputKind {
    Elicitation,
    Sampling,
    Roots,
}

impl InputKind {
    pub(crate) fn capability(self) -> &'static str {
        match self {
            Self::Elicitation => "elicitation",
            Self::Sampling => "sampling",
            Self::Roots => "roots",
        }
    }

    /// The prefix of the input-request keys of this kind (`elicit-1`, `sample-2`, ...).
    pub(crate) fn key_prefix(self) -> &'static str {
        match self {
            Self::Elicitation => "elicit",
            Self::Sampling => "sample",
            Self::Roots => "roots",
        }
    }

    /// Every prefix of generated keys, for the check that a chosen key is not one of them.
    const ALL: [Self; 3] = [Self::Elicitation, Self::Sampling, Self::Roots];

    fn declared(self, caps: &ClientCapabilities) -> bool {
        match self {
            Self::Elicitation => caps.elicitation.is_some(),
            Self::Sampling => caps.sampling.is_some(),
            Self::Roots => caps.roots.is_some(),
        }
    }
}

/// A step's place in a run: its number, and what a replay already has for it.
pub(crate) enum StepSlot {
    /// The step ran before a restart: its stored name and result.
    Stored {
        seq: u64,
        name: String,
        value: Value,
    },
    /// The step runs now, as number `seq`.
    Fresh { seq: u64 },
}

/// One progress report, as `notifications/progress` carries it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Progress {
    pub(crate) progress: f64,
    pub(crate) total: Option<f64>,
    pub(crate) message: Option<String>,
}

/// Why [`TaskContext::progress`] refused a report. Nothing was sent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProgressError {
    /// The progress did not increase: each report must be greater than the one before it
    /// (MCP progress: "the progress value MUST increase with each notification").
    #[error(
        "progress {given} does not increase on the last report ({last}): each report must be greater than the one before"
    )]
    NotIncreasing {
        /// The last progress accepted.
        last: f64,
        /// The progress refused.
        given: f64,
    },
    /// A progress or total that is NaN or infinite, which JSON cannot carry.
    #[error("progress values must be finite numbers, not {value}")]
    NotFinite {
        /// The value refused.
        value: f64,
    },
}

/// The longest input-request key a tool may choose, in bytes.
pub const MAX_INPUT_KEY_LEN: usize = 64;

/// Checks a key a tool chose for an input request: 1 to [`MAX_INPUT_KEY_LEN`] characters,
/// each an ASCII letter, digit, `_`, `-` or `.`, and not of the form of the keys the context
/// generates (`elicit-N`, `sample-N`, `roots-N`), so a chosen key never collides with one.
pub(crate) fn check_key(key: &str) -> Result<(), ErrorData> {
    let problem = if key.is_empty() {
        Some("it is empty".to_owned())
    } else if key.len() > MAX_INPUT_KEY_LEN {
        Some(format!(
            "it is {} bytes long, more than {MAX_INPUT_KEY_LEN}",
            key.len()
        ))
    } else if let Some(c) = key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        Some(format!(
            "it contains {c:?}; a key is ASCII letters, digits, `_`, `-` and `.`"
        ))
    } else if InputKind::ALL.iter().any(|kind| {
        key.strip_prefix(kind.key_prefix())
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }) {
        Some("it has the form of a generated key (`elicit-N`, `sample-N`, `roots-N`)".to_owned())
    } else {
        None
    };
    match problem {
        Some(problem) => Err(errors::bad_input_key(key, &problem)),
        None => Ok(()),
    }
}

/// The engine side of one call, as [`TaskContext`] drives it. The runtime's lifecycle
/// (`runtime/call.rs`) implements it; its module docs say what each method guarantees.
pub(crate) trait Host: Send + Sync + 'static {
    /// The task id: `Some` once a task record exists for the call.
    fn task_id(&self) -> Option<&str>;
    /// The owner of the call.
    fn owner(&self) -> &str;
    /// The tool's wire name.
    fn tool(&self) -> &str;
    /// Fires when the call is cancelled (tasks/cancel, expiry, a dropped inline request).
    fn cancel_token(&self) -> &CancellationToken;
    /// What the creating request declared.
    fn client_capabilities(&self) -> &ClientCapabilities;
    /// Registered application state of the given type.
    fn state(&self, type_id: TypeId) -> Option<&(dyn Any + Send + Sync)>;
    /// Sets the status message (kept until a task exists when the call is still pending).
    fn status(&self, message: String) -> BoxFuture<'_, ()>;
    /// Asks the client for input, by the route the call's phase allows, and waits: under
    /// `key` when the tool chose one (already checked by [`check_key`]), else under a
    /// generated key.
    fn input(
        &self,
        kind: InputKind,
        request: InputRequest,
        before_task: bool,
        key: Option<String>,
    ) -> BoxFuture<'_, Result<Value, Failure>>;
    /// Reports progress: refused unless it is finite and greater than the last value; sent as
    /// `notifications/progress` only while the creating request is open and has a
    /// `progressToken`.
    fn progress(&self, progress: Progress) -> BoxFuture<'_, Result<(), ProgressError>>;
    /// Sends a log message, only while the creating request is open and asked for this level
    /// (or a less severe one) in its `_meta`.
    fn log(&self, level: LoggingLevel, logger: Option<String>, data: Value) -> BoxFuture<'_, ()>;
    /// Numbers the next step and says whether a replay has it.
    fn next_step(&self) -> StepSlot;
    /// Whether the call is inline for good (no task, none to come): steps just run.
    fn is_inline(&self) -> bool;
    /// Makes sure a task record exists before a step's side effects.
    fn ensure_task(&self) -> BoxFuture<'_, Result<(), Failure>>;
    /// Stores a completed step durably.
    fn save_step(&self, seq: u64, name: &str, value: Value) -> BoxFuture<'_, Result<(), Failure>>;
}

/// The handle a tool receives: its task id, status messages, cancellation, input from the
/// client, durable steps, and the application state registered on the toolkit.
///
/// Cheap to clone; every clone refers to the same call.
#[derive(Clone)]
pub struct TaskContext {
    host: Arc<dyn Host>,
}

impl fmt::Debug for TaskContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskContext")
            .field("task_id", &self.task_id())
            .field("tool", &self.tool_name())
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl TaskContext {
    pub(crate) fn new(host: Arc<dyn Host>) -> Self {
        Self { host }
    }

    /// The task id, once the call runs as a task; `None` for an inline call, and also at
    /// the very start of a call that becomes a task (the task is created once the work first
    /// waits, so that input can be asked before it exists). Inside a [step](Self::step), after
    /// any await, or in a replay it is set.
    #[must_use]
    pub fn task_id(&self) -> Option<&str> {
        self.host.task_id()
    }

    /// The owner of the call (protocol R49): the [`Owner`](crate::Owner) of the creating
    /// request, or the engine's default.
    #[must_use]
    pub fn owner(&self) -> &str {
        self.host.owner()
    }

    /// The capabilities the client declared on the request that started the call (for a
    /// task, the creating `tools/call`). Input of a kind the client did not declare fails
    /// with `-32021` (docs/protocol.md C18): check here first to ask only what it can answer.
    #[must_use]
    pub fn client_capabilities(&self) -> &ClientCapabilities {
        self.host.client_capabilities()
    }

    /// The wire name of the tool being run.
    #[must_use]
    pub fn tool_name(&self) -> &str {
        self.host.tool()
    }

    /// Sets the task's `statusMessage`, which `tasks/get` shows. Inline calls have no task
    /// and the message only goes to the trace log.
    pub async fn status(&self, message: impl Into<String>) {
        self.host.status(message.into()).await;
    }

    /// Whether a cancellation was requested (`tasks/cancel`, expiry, or the client dropped an
    /// inline call).
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.host.cancel_token().is_cancelled()
    }

    /// Resolves once a cancellation is requested. To honour it, end the tool with
    /// [`ToolError::cancelled`](crate::ToolError::cancelled) (or `?` on a [`Failure`]); the
    /// task then ends `cancelled`. A tool that ignores it ends as it would have.
    pub async fn cancelled(&self) {
        self.host.cancel_token().cancelled().await;
    }

    /// Runs `work` until it ends or a cancellation is requested, whichever comes first.
    ///
    /// # Errors
    /// [`Failure::Cancelled`] when the cancellation came first.
    pub async fn until_cancelled<T>(&self, work: impl Future<Output = T>) -> Result<T, Failure> {
        tokio::select! {
            biased;
            () = self.host.cancel_token().cancelled() => Err(Failure::Cancelled),
            value = work => Ok(value),
        }
    }

    /// The application state of type `T` registered with
    /// [`Toolkit::with_state`](crate::Toolkit::with_state).
    #[must_use]
    pub fn state<T: Clone + Send + Sync + 'static>(&self) -> Option<T> {
        self.host
            .state(TypeId::of::<T>())
            .and_then(|value| value.downcast_ref::<T>())
            .cloned()
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
    /// answer (protocol §5.4), so code before the question may run more than once.
    pub async fn elicit(&self, params: ElicitRequestParams) -> Result<ElicitResult, Failure> {
        self.ask_elicit(params, false, None).await
    }

    /// Asks for input **before the task exists**, by multi round-trip request (protocol R11,
    /// §5.4): while the call has no task yet, it answers `resultType: "input_required"`; the
    /// client retries the call with the answer, the tool runs again from the top, this call
    /// returns the answer, and the task is created once the work goes on. Use it to confirm or
    /// gather parameters before committing to long work. Once a task exists (or on a legacy
    /// session) it asks like [`TaskContext::elicit`].
    ///
    /// Code before this call runs once per round: keep side effects after it. The answer is
    /// stored with the task when it is created, under its own key (generated keys count on
    /// from the rounds before the task into the task), so a replay after a restart gets it
    /// back without asking again.
    ///
    /// # Errors
    /// As [`TaskContext::elicit`].
    pub async fn elicit_before_task(
        &self,
        params: ElicitRequestParams,
    ) -> Result<ElicitResult, Failure> {
        self.ask_elicit(params, true, None).await
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
        self.elicit(form(message.into(), schema)).await
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
        self.elicit_before_task(form(message.into(), schema)).await
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
        let stepped = self
            .run_step(name, || async {
                Ok::<T, std::convert::Infallible>(work().await)
            })
            .await;
        stepped.map_err(|error| match error {
            StepError::Failure(failure) => failure,
            StepError::Work(never) => match never {},
        })
    }

    /// A fallible [step](Self::step): `work` returns a `Result`, and only an `Ok` is stored.
    /// An `Err` is not stored and comes back as [`StepError::Work`], so one `?` in a tool
    /// that returns `Result<_, ToolError>` handles both the work's error (as `isError: true`
    /// with its text) and the step's own failure. When the task is replayed, a step that
    /// stored an `Ok` returns it without running; one that failed runs again.
    ///
    /// ```
    /// use mcp_tasks::{TaskContext, ToolError, task_tool};
    ///
    /// /// Charges a card once, even across restarts.
    /// #[task_tool(restart = "resume")]
    /// async fn charge(ctx: TaskContext, cents: u64) -> Result<String, ToolError> {
    ///     let receipt: String = ctx
    ///         .try_step("charge", || async move {
    ///             if cents == 0 { Err("nothing to charge") } else { Ok(format!("r-{cents}")) }
    ///         })
    ///         .await?;
    ///     Ok(receipt)
    /// }
    /// # let _ = mcp_tasks::toolkit![charge];
    /// ```
    ///
    /// # Errors
    /// [`StepError::Work`] with the work's error; [`StepError::Failure`] as for
    /// [`step`](Self::step).
    pub async fn try_step<T, E, F, Fut>(&self, name: &str, work: F) -> Result<T, StepError<E>>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.run_step(name, work).await
    }

    /// The step machinery: the stored result on replay, else `work`, stored when `Ok`.
    async fn run_step<T, E, F, Fut>(&self, name: &str, work: F) -> Result<T, StepError<E>>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let seq = match self.host.next_step() {
            StepSlot::Stored {
                seq,
                name: stored,
                value,
            } => {
                if stored != name {
                    return Err(StepError::Failure(Failure::Error(errors::step_renamed(
                        seq, &stored, name,
                    ))));
                }
                return decode(value, "stored step result").map_err(StepError::Failure);
            }
            StepSlot::Fresh { seq } => seq,
        };
        if self.host.is_inline() {
            return work().await.map_err(StepError::Work);
        }
        self.host.ensure_task().await.map_err(StepError::Failure)?;
        let value = work().await.map_err(StepError::Work)?;
        let json = serde_json::to_value(&value).map_err(|e| {
            StepError::Failure(Failure::Error(errors::step_unserializable(name, &e)))
        })?;
        self.host
            .save_step(seq, name, json)
            .await
            .map_err(StepError::Failure)?;
        Ok(value)
    }

    /// Asks the client's model for a completion (`sampling/createMessage`).
    ///
    /// # Errors
    /// As [`TaskContext::elicit`], with `sampling` as the capability.
    pub async fn sample(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, Failure> {
        self.ask_sample(params, None).await
    }

    /// Asks the client for its roots (`roots/list`).
    ///
    /// # Errors
    /// As [`TaskContext::elicit`], with `roots` as the capability.
    pub async fn roots(&self) -> Result<ListRootsResult, Failure> {
        self.ask_roots(None).await
    }

    /// Input under a key the tool chooses instead of a generated one (`elicit-1`,
    /// `sample-2`, ...): `ctx.keyed("user_name").elicit_form(..)`. A client that expects a
    /// request under a known key (a multi round-trip client that answers ahead, a test) can
    /// then find it, and a tool keeps its keys stable when its questions change order.
    ///
    /// A key names one input request for the whole life of a task (docs/protocol.md R28): a
    /// call that asks twice under one key fails the second time with a `-32603` error that
    /// names the key, never overwriting the first request. Accepted keys are 1 to
    /// [`MAX_INPUT_KEY_LEN`] bytes of ASCII letters, digits, `_`, `-` and `.`; the forms
    /// `elicit-N`, `sample-N` and `roots-N` (N digits) are reserved for generated keys and
    /// refused, so a chosen key never collides with a generated one. A replay after a restart
    /// asks under the same keys and does not ask again what was answered before.
    ///
    /// ```
    /// use mcp_tasks::{TaskContext, ToolError, task_tool};
    /// use rmcp::model::ElicitationSchema;
    ///
    /// /// Greets the user by name.
    /// #[task_tool(mode = "inline")]
    /// async fn hello(ctx: TaskContext) -> Result<String, ToolError> {
    ///     let schema = ElicitationSchema::builder()
    ///         .required_string("name")
    ///         .build()
    ///         .map_err(|e| ToolError::new(e.to_string()))?;
    ///     let answer = ctx.keyed("user_name").elicit_form("Your name?", schema).await?;
    ///     let name = answer.content.and_then(|c| c["name"].as_str().map(str::to_owned));
    ///     Ok(format!("Hello, {}!", name.unwrap_or_default()))
    /// }
    /// # let _ = mcp_tasks::toolkit![hello];
    /// ```
    pub fn keyed(&self, key: impl Into<String>) -> Keyed<'_> {
        Keyed {
            ctx: self,
            key: key.into(),
        }
    }

    /// Reports progress: `progress` so far, out of `total` when known, with an optional
    /// message, as `notifications/progress` has them.
    ///
    /// While the call is answered inline (the `tools/call` request still open), and only if
    /// that request carried `_meta.progressToken`, this sends `notifications/progress` for
    /// that token on the request's response stream (over Streamable HTTP the answer then
    /// comes as SSE: the notifications, then the result). Without a token it sends nothing.
    /// Once the call is a task its request has been answered with the task, and the Tasks
    /// extension has no progress for tasks (docs/protocol.md R42): the report is checked
    /// and then dropped, and the task's `statusMessage` does not change; use
    /// [`status`](Self::status) for what `tasks/get` shows.
    ///
    /// ```
    /// use mcp_tasks::{TaskContext, ToolError, task_tool};
    ///
    /// /// Imports `rows` rows.
    /// #[task_tool(mode = "inline")]
    /// async fn import(ctx: TaskContext, rows: u32) -> Result<String, ToolError> {
    ///     for row in 1..=rows {
    ///         ctx.progress(f64::from(row), Some(f64::from(rows)), None).await?;
    ///     }
    ///     Ok(format!("{rows} rows"))
    /// }
    /// # let _ = mcp_tasks::toolkit![import];
    /// ```
    ///
    /// # Errors
    /// [`ProgressError`] (and nothing is sent) when `progress` is not greater than the last
    /// report of this call, or a value is NaN or infinite: MCP requires progress to increase
    /// with each notification. `?` in a tool makes it a `-32603` error.
    pub async fn progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), ProgressError> {
        for value in std::iter::once(progress).chain(total) {
            if !value.is_finite() {
                return Err(ProgressError::NotFinite { value });
            }
        }
        self.host
            .progress(Progress {
                progress,
                total,
                message: message.map(str::to_owned),
            })
            .await
    }

    /// Sends a log message (`notifications/message`) with `data` (any JSON: a string, an
    /// object) at `level`.
    ///
    /// Sent only if the creating request asked for logs with
    /// `_meta["io.modelcontextprotocol/logLevel"]` and `level` is that level or more severe
    /// (`debug` < `info` < `notice` < `warning` < `error` < `critical` < `alert` <
    /// `emergency`); without that key the server must not send any (MCP 2026-07-28). Like
    /// [`progress`](Self::progress), only while the call is answered inline: once it is a
    /// task, the message only goes to the trace log (docs/protocol.md R42).
    ///
    /// ```
    /// use mcp_tasks::{TaskContext, task_tool};
    /// use rmcp::model::LoggingLevel;
    ///
    /// /// Cleans the cache.
    /// #[task_tool(mode = "inline")]
    /// async fn clean(ctx: TaskContext) -> String {
    ///     ctx.log(LoggingLevel::Info, "cleaning").await;
    ///     ctx.log_as("cache", LoggingLevel::Warning, serde_json::json!({ "stale": 3 })).await;
    ///     "clean".to_owned()
    /// }
    /// # let _ = mcp_tasks::toolkit![clean];
    /// ```
    pub async fn log(&self, level: LoggingLevel, data: impl Into<Value>) {
        self.host.log(level, None, data.into()).await;
    }

    /// [`log`](Self::log) naming the logger (`"logger"` of `notifications/message`).
    pub async fn log_as(
        &self,
        logger: impl Into<String>,
        level: LoggingLevel,
        data: impl Into<Value>,
    ) {
        self.host.log(level, Some(logger.into()), data.into()).await;
    }

    async fn ask_elicit(
        &self,
        params: ElicitRequestParams,
        before_task: bool,
        key: Option<String>,
    ) -> Result<ElicitResult, Failure> {
        let request = InputRequest::Elicitation(Request::new(params));
        let value = self
            .input(InputKind::Elicitation, request, before_task, key)
            .await?;
        decode(value, "ElicitResult")
    }

    async fn ask_sample(
        &self,
        params: CreateMessageRequestParams,
        key: Option<String>,
    ) -> Result<CreateMessageResult, Failure> {
        let request = InputRequest::CreateMessage(Request::new(params));
        let value = self.input(InputKind::Sampling, request, false, key).await?;
        decode(value, "CreateMessageResult")
    }

    async fn ask_roots(&self, key: Option<String>) -> Result<ListRootsResult, Failure> {
        let request = InputRequest::ListRoots(RequestNoParam {
            method: Default::default(),
            extensions: Default::default(),
        });
        let value = self.input(InputKind::Roots, request, false, key).await?;
        decode(value, "ListRootsResult")
    }

    async fn input(
        &self,
        kind: InputKind,
        request: InputRequest,
        before_task: bool,
        key: Option<String>,
    ) -> Result<Value, Failure> {
        if let Some(key) = &key {
            check_key(key)?;
        }
        if !kind.declared(self.host.client_capabilities()) {
            return Err(Failure::Error(errors::client_capability_required(
                kind.capability(),
            )));
        }
        self.host.input(kind, request, before_task, key).await
    }
}

/// Input under a key the tool chose: what [`TaskContext::keyed`] returns. Each method asks
/// as its [`TaskContext`] namesake does, under this key.
#[derive(Debug, Clone)]
#[must_use = "a key asks nothing until one of its methods is awaited"]
pub struct Keyed<'a> {
    ctx: &'a TaskContext,
    key: String,
}

impl Keyed<'_> {
    /// The key.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// [`TaskContext::elicit`] under this key.
    ///
    /// # Errors
    /// As [`TaskContext::elicit`], and a `-32603` error naming the key when it is not a valid
    /// key or this call asked under it before ([`TaskContext::keyed`]).
    pub async fn elicit(self, params: ElicitRequestParams) -> Result<ElicitResult, Failure> {
        self.ctx.ask_elicit(params, false, Some(self.key)).await
    }

    /// [`TaskContext::elicit_before_task`] under this key.
    ///
    /// # Errors
    /// As [`Keyed::elicit`].
    pub async fn elicit_before_task(
        self,
        params: ElicitRequestParams,
    ) -> Result<ElicitResult, Failure> {
        self.ctx.ask_elicit(params, true, Some(self.key)).await
    }

    /// [`TaskContext::elicit_form`] under this key.
    ///
    /// # Errors
    /// As [`Keyed::elicit`].
    pub async fn elicit_form(
        self,
        message: impl Into<String>,
        schema: ElicitationSchema,
    ) -> Result<ElicitResult, Failure> {
        self.elicit(form(message.into(), schema)).await
    }

    /// [`TaskContext::elicit_form_before_task`] under this key.
    ///
    /// # Errors
    /// As [`Keyed::elicit`].
    pub async fn elicit_form_before_task(
        self,
        message: impl Into<String>,
        schema: ElicitationSchema,
    ) -> Result<ElicitResult, Failure> {
        self.elicit_before_task(form(message.into(), schema)).await
    }

    /// [`TaskContext::sample`] under this key.
    ///
    /// # Errors
    /// As [`Keyed::elicit`], with `sampling` as the capability.
    pub async fn sample(
        self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, Failure> {
        self.ctx.ask_sample(params, Some(self.key)).await
    }

    /// [`TaskContext::roots`] under this key.
    ///
    /// # Errors
    /// As [`Keyed::elicit`], with `roots` as the capability.
    pub async fn roots(self) -> Result<ListRootsResult, Failure> {
        self.ctx.ask_roots(Some(self.key)).await
    }
}

fn form(message: String, schema: ElicitationSchema) -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    }
}

/// Why a [`TaskContext::try_step`] did not return a value.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StepError<E> {
    /// The work returned this error; nothing was stored.
    Work(E),
    /// The step itself failed or the task was cancelled, as for [`TaskContext::step`].
    Failure(Failure),
}

impl<E: fmt::Display> fmt::Display for StepError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Work(error) => error.fmt(f),
            Self::Failure(failure) => failure.fmt(f),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for StepError<E> {}

fn decode<T: serde::de::DeserializeOwned>(value: Value, what: &str) -> Result<T, Failure> {
    serde_json::from_value(value).map_err(|e| Failure::Error(errors::bad_client_answer(what, &e)))
}
