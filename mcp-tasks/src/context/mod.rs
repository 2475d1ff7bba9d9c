//! [`TaskContext`]: what a running tool sees of its call, and [`Failure`], how the calls it
//! offers fail.
//!
//! This module is the tool author's side only. Everything a context does to the task (store a
//! status, ask for input, keep a step, become a task) goes through [`Host`], which the runtime's
//! lifecycle implements (`runtime/call/`); so the author API depends on no runtime code and
//! the runtime is free to change how a call is driven.

#![allow(
    deprecated,
    reason = "sampling and roots are deprecated by SEP-2577 yet still part of the 2026-07-28 wire"
)]

use std::any::TypeId;

use rmcp::model::{
    ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ElicitationSchema, ListRootsResult, LoggingLevel,
};
use serde_json::Value;
use tracing::Instrument as _;

use crate::errors;

pub(crate) mod answer;
mod failure;
mod handle;
mod host;
mod input;
mod limited;
mod patch;
mod retry;
mod state;
mod timer;

pub use failure::{Failure, ProgressError, StepError};
pub use handle::TaskContext;
pub(crate) use host::{Ask, Host, InputKind, Progress};
pub use input::{Keyed, MAX_INPUT_KEY_LEN};
pub use retry::RetryPolicy;
pub use state::State;

use input::form;

impl TaskContext {
    /// The task id, once the call runs as a task; `None` for an inline call, and also at
    /// the very start of a call that becomes a task (the task is created once the work first
    /// waits, so that input can be asked before it exists). Inside a [step](Self::step), after
    /// any await, or in a replay it is set.
    #[must_use]
    pub fn task_id(&self) -> Option<&str> {
        self.host.task_id()
    }

    /// The owner of the call, the only principal that can see or change its task: the
    /// [`Owner`](crate::Owner) of the creating request, or the engine's default.
    #[must_use]
    pub fn owner(&self) -> &str {
        self.host.owner()
    }

    /// The capabilities the client declared on the request that started the call (for a
    /// task, the creating `tools/call`). Input of a kind the client did not declare fails
    /// with `-32021`: check here first to ask only what it can answer.
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
        let value = self.host.state(TypeId::of::<T>())?;
        value.downcast_ref::<T>().cloned()
    }

    /// Asks the client for input with an elicitation (`elicitation/create`). The task waits
    /// in `input_required` under a fresh key until `tasks/update` brings the answer.
    ///
    /// An accepted answer to a form has every field the form requires, each of the type,
    /// range, length, format (email, URI, date, date and time) or choices its schema gives.
    /// An answer that does not fit never reaches the tool: `tasks/update` refuses it with
    /// `-32602` naming the field and why, and the question stays open; a multi round-trip
    /// retry is asked the question again. Fields the form does not name are passed on as sent.
    ///
    /// # Errors
    /// - [`Failure::Cancelled`] if the task is cancelled while waiting;
    /// - `-32021` naming `elicitation` when the creating request did not declare it;
    /// - `-32021` naming the tasks extension for a call that cannot become a task and cannot
    ///   ask by multi round-trip either (a legacy `initialize` session).
    ///
    /// A call that is not a task and never will be (the client did not declare the extension)
    /// asks by multi round-trip request on the modern wire instead: the call answers
    /// `resultType: "input_required"`, and the client's retry runs the tool again with the
    /// answer, so code before the question may run more than once.
    pub async fn elicit(&self, params: ElicitRequestParams) -> Result<ElicitResult, Failure> {
        self.ask_elicit(params, false, None).await
    }

    /// Asks for input **before the task exists**, by multi round-trip request: while the call
    /// has no task yet, it answers `resultType: "input_required"`; the client retries the
    /// call with the answer, the tool runs again from the top, this call
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
    /// the result does not serialize or does not read back as a `T` (a replay could not use
    /// it: `f64::NAN`, for one, is stored as `null`), the store fails, the step's name has a
    /// NUL character, or, on a replay, its name or its result's type differs from what was
    /// stored for its position (the tool's code changed).
    ///
    /// [`RestartPolicy::Resume`]: crate::RestartPolicy::Resume
    pub async fn step<T, F, Fut>(&self, name: &str, work: F) -> Result<T, Failure>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        self.try_step(name, || async {
            Ok::<T, std::convert::Infallible>(work().await)
        })
        .await
        .map_err(|error| match error {
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
        let failed = |error: rmcp::model::ErrorData| StepError::Failure(Failure::Error(error));
        if name.contains('\0') {
            return Err(failed(errors::step_name_nul(name)));
        }
        let (seq, stored) = self.host.next_step();
        if let Some(stored) = stored {
            if stored.name != name {
                return Err(failed(errors::step_renamed(seq, &stored.name, name)));
            }
            return serde_json::from_value(stored.value)
                .map_err(|e| failed(errors::step_retyped(seq, name, &e)));
        }
        if self.host.is_inline() {
            return work().await.map_err(StepError::Work);
        }
        self.host.ensure_task().await.map_err(StepError::Failure)?;
        // The step's own span in the task's (trace.rs): its work, then its write.
        let span = tracing::info_span!("step", step = name, seq);
        async {
            let value = work().await.map_err(StepError::Work)?;
            let json = serde_json::to_value(&value)
                .map_err(|e| failed(errors::step_unserializable(name, &e)))?;
            // Not deeper than a reader takes back (checked first: reading it back recurses as
            // deep as it nests).
            if crate::limits::nests_deeper(&json, crate::Limits::MAX_VALUE_DEPTH) {
                let what = format!("step `{name}`");
                return Err(failed(errors::value_too_deep(self.host.tool(), &what)));
            }
            // What a replay will read must be a `T` again (a NaN is stored as `null`, a
            // hand-written `Serialize` may not match its `Deserialize`): found out now, not
            // after a restart, when the task could no longer go on.
            if let Err(error) = <T as serde::Deserialize>::deserialize(&json) {
                return Err(failed(errors::step_unreadable(name, &error)));
            }
            self.host
                .save_step(seq, name, json)
                .await
                .map_err(StepError::Failure)?;
            Ok(value)
        }
        .instrument(span)
        .await
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
    /// A key names one input request for the whole life of a task: a call that asks twice
    /// under one key fails the second time with a `-32603` error that names the key, never
    /// overwriting the first request. Accepted keys are 1 to
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
    /// extension has no progress for tasks: the report is checked
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
    /// task, the message only goes to the trace log (the Tasks extension has no log messages
    /// for tasks).
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
}
