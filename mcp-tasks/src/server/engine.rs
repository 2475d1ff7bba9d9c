//! [`Engine`]: answers `tools/list`, `tools/call` and `tasks/*` for a toolkit (see the
//! [module docs](super) for the negotiation).

#![allow(
    deprecated,
    reason = "sampling and roots are deprecated by SEP-2577 yet still part of the 2026-07-28 wire"
)]

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, CancelTaskParams, CreateTaskResult, GetTaskParams,
        GetTaskResult, Implementation, InputRequiredResult, ListToolsResult, MetaObject,
        ServerCapabilities, ToolsCapability, UpdateTaskParams,
    },
    service::RequestContext,
};

use super::{
    negotiation::Incoming,
    owner::visible_task,
    request::{idempotency_key, validate_responses},
    request_state,
};
use crate::{
    EXTENSION_ID, errors,
    runtime::{
        Runtime, ShutdownReport, StartError,
        call::{Answer, Call, Notifier},
        recover::RecoveryReport,
    },
    store::{StoreError, TaskSnapshot, TaskStore},
    tool::Mode,
    toolkit::Toolkit,
};

/// Answers `tools/list`, `tools/call` and `tasks/*` for a [`Toolkit`], with a [`TaskStore`].
///
/// Built once by [`Engine::builder`] (or [`Engine::new`] for the defaults), then
/// [`started`](Engine::start) and, at the end, [`shut down`](Engine::shutdown):
///
/// - **start** spawns the background loops (see [`Engine::start`]). The serving functions
///   (`serve_http`, `http_router`, `serve_stdio`, `serve_io`) start the engine they serve
///   themselves; a handler of your own that routes to an engine starts it before serving.
///   Nothing starts from a request: an engine never started answers calls, but sweeps no
///   expiry and renews no lease.
/// - **shutdown** stops them: see [`Engine::shutdown`]. Dropping every clone of an engine
///   without a shutdown stops its loops and drops its running work at once.
///
/// Cheap to clone: clones share the toolkit, the store, the running tasks and the
/// lifecycle.
#[derive(Clone)]
pub struct Engine {
    pub(super) toolkit: Arc<Toolkit>,
    pub(super) state: Arc<crate::toolkit::StateMap>,
    pub(crate) runtime: Arc<Runtime>,
    pub(super) default_owner: Arc<str>,
    pub(super) request_state: Arc<request_state::Sealer>,
    /// `_meta` of every result the engine builds: `io.modelcontextprotocol/serverInfo`.
    // docs/protocol.md C9.
    pub(super) result_meta: Arc<MetaObject>,
    pub(super) server_info: Arc<Implementation>,
    /// The listen streams of `subscriptions/listen` with `taskIds` (`push/`).
    #[cfg(any(feature = "http", feature = "stdio"))]
    pub(super) push: Arc<super::push::Hub>,
    /// Stops the loops when the last clone is dropped.
    pub(super) _guard: Arc<tokio_util::sync::DropGuard>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("toolkit", &self.toolkit)
            .field("default_owner", &self.default_owner)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Starts the background loops, on the current tokio runtime: the expiry sweep and, over
    /// a store several instances share, lease renewals, wake-ups and (unless
    /// [`ClusterConfig::with_execution`](crate::ClusterConfig::with_execution) is off)
    /// claims of lapsed and queued tasks. Starting a started engine does nothing.
    ///
    /// # Errors
    /// [`StartError::Stopped`] once the engine was shut down; [`StartError::NoRuntime`]
    /// outside a tokio runtime.
    pub fn start(&self) -> Result<(), StartError> {
        self.runtime.start()?;
        #[cfg(any(feature = "http", feature = "stdio"))]
        self.push.start(&self.runtime);
        Ok(())
    }

    /// Whether the engine was started and no shutdown began.
    #[must_use]
    pub fn is_running(&self) -> bool {
        self.runtime.lifecycle.is_running()
    }

    /// Stops the engine, in three steps:
    ///
    /// 1. at once, it claims no task and sweeps no expiry any more, and refuses new calls
    ///    (`-32603`, saying the server is shutting down); `tasks/*` are still answered;
    /// 2. the work of the tasks running here has `grace` to end on its own: its leases are
    ///    still renewed, cancels and answers still reach it, and its outcome is written;
    /// 3. the work still running then is dropped (a step whose record is being written is
    ///    stored first) and its task is drained by its tool's restart policy: a `resume`
    ///    task's lease is released, so another instance claims it at once and replays it
    ///    (over a single-process durable store the next start [recovers](Engine::recover)
    ///    it); a `fail` task ends `failed` saying the server was shut down. Renewals and
    ///    wake-ups end.
    ///
    /// Dropping every clone of the engine without a shutdown stops everything at once and
    /// drains nothing: the tasks stay as stored, as after a crash.
    ///
    /// Returns once every loop and every task's work has ended (then
    /// [`Engine::is_stopped`] is true). A stopped engine does not start again. A second
    /// call waits for the first one's end.
    pub async fn shutdown(&self, grace: std::time::Duration) -> ShutdownReport {
        self.runtime.lifecycle.shutdown(grace).await
    }

    /// Whether nothing of the engine runs any more: shut down, and every loop and every
    /// task's work it spawned has ended.
    #[must_use]
    pub fn is_stopped(&self) -> bool {
        self.runtime.lifecycle.is_stopped()
    }

    /// This instance's id (see
    /// [`EngineBuilder::with_instance_id`](crate::EngineBuilder::with_instance_id)).
    #[must_use]
    pub fn instance_id(&self) -> &str {
        &self.runtime.id
    }

    /// How many tasks' work runs in this process now.
    #[must_use]
    pub fn running_tasks(&self) -> usize {
        self.runtime.live_count()
    }

    /// The limits the engine was built with
    /// ([`EngineBuilder::with_limits`](crate::EngineBuilder::with_limits)).
    #[must_use]
    pub fn limits(&self) -> &crate::Limits {
        &self.runtime.limits
    }

    /// The name and version in the `_meta` of the results
    /// ([`EngineBuilder::with_server_info`](crate::EngineBuilder::with_server_info)).
    #[must_use]
    pub fn server_info(&self) -> &Implementation {
        &self.server_info
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.runtime.store
    }

    /// The toolkit.
    #[must_use]
    pub fn toolkit(&self) -> &Toolkit {
        &self.toolkit
    }

    /// `capabilities` plus `tools` and, when any tool can run as a task,
    /// `extensions["io.modelcontextprotocol/tasks"] = {}` (exactly `{}`: the extension has no
    /// settings).
    // docs/protocol.md §3.6.
    #[must_use]
    pub fn capabilities(&self, mut capabilities: ServerCapabilities) -> ServerCapabilities {
        if !self.toolkit.is_empty() && capabilities.tools.is_none() {
            capabilities.tools = Some(ToolsCapability::default());
        }
        if self.toolkit.has_task_tools() {
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(EXTENSION_ID.to_owned(), rmcp::model::JsonObject::new());
        }
        capabilities
    }

    /// Every tool, in registration order.
    #[must_use]
    pub fn list_tools(&self) -> ListToolsResult {
        let tools = self.toolkit.definitions().map(|d| d.tool().clone());
        let mut result = ListToolsResult::with_all_items(tools.collect());
        result.meta = Some(self.meta());
        result
    }

    /// Whether `tools/call` of `name` is for this engine.
    #[must_use]
    pub fn handles(&self, name: &str) -> bool {
        self.toolkit.contains(name)
    }

    /// Answers `tools/call`: inline, with a task, or `-32021` (see the module docs).
    ///
    /// # Errors
    /// `-32602` for an unknown tool; `-32021` for a task-only tool called without the
    /// extension; the JSON-RPC error an inline call ended with; a store failure.
    pub async fn call_tool(
        &self,
        params: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.runtime.lifecycle.accepting() {
            return Err(errors::shutting_down());
        }
        // The call's state (the tool's future, the runtime's phases) lives on the heap: rmcp
        // spawns every request's handler future, and tokio moves a spawned future by value,
        // so a large one is copied on each spawn and poll stage.
        Box::pin(self.answer_call(params, context)).await
    }

    async fn answer_call(
        &self,
        params: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(registered) = self.toolkit.get(&params.name) else {
            return Err(errors::unknown_tool(&params.name));
        };
        let definition = &registered.definition;
        let incoming = Incoming::of(context, &self.default_owner);
        let declared = incoming.negotiation.declares_tasks;
        let as_task = match definition.mode() {
            Mode::Required if !declared => return Err(errors::tasks_capability_required()),
            Mode::Required => true,
            Mode::Optional => declared,
            Mode::Inline => false,
        };
        let owner = incoming.owner;
        // A task of an owner no store could keep (a Postgres text column refuses a NUL) is
        // refused before anything else is read or runs.
        if as_task && owner.contains('\0') {
            return Err(errors::owner_nul(&owner));
        }
        let arguments = params.arguments.unwrap_or_default();
        let binding = request_state::Binding {
            owner: &owner,
            tool: definition.name(),
            arguments: &arguments,
        };
        let mrtr = incoming.negotiation.modern.then(|| {
            let state = params.request_state.as_deref();
            self.request_state
                .open(&binding, state, params.input_responses)
        });
        let mrtr = mrtr.transpose()?;
        let call = Call {
            runtime: &self.runtime,
            registered,
            state: &self.state,
            tool: registered.name.clone(),
            owner: owner.clone(),
            client_capabilities: incoming.capabilities.unwrap_or_default(),
            arguments: &arguments,
            request_meta: &context.meta.0.0,
            mrtr,
            idempotency_key: idempotency_key(&context.meta)?,
            notifier: Some(Notifier {
                peer: context.peer.clone(),
                progress_token: context.meta.get_progress_token(),
                log_level: context.meta.log_level(),
            }),
            trace: crate::trace::of_call(&context.meta.0.0),
        };
        let answer = if as_task && call.records_first() {
            call.recorded().await?
        } else if as_task {
            call.task(definition.inline_budget(), &context.ct).await?
        } else {
            call.inline(&context.ct).await?
        };
        Ok(match answer {
            Answer::Result(mut result) => {
                // The server's info joins what the tool put in `_meta` (usually nothing).
                self.join_info(&mut result.meta.get_or_insert_with(MetaObject::new).0);
                CallToolResponse::Complete(result)
            }
            Answer::Task(task) => {
                CallToolResponse::Task(CreateTaskResult::new(task).with_meta(self.meta()))
            }
            Answer::InputRequired { requests, answers } => {
                // This round's requests, and a sealed `requestState` with every answer so far
                // and the keys asked, so the retry needs only the new answers (C19, C20).
                let state = self.request_state.seal(&binding, requests.keys(), &answers);
                let result = InputRequiredResult::new(Some(requests), Some(state));
                CallToolResponse::InputRequired(result.with_meta(self.meta()))
            }
        })
    }

    /// Answers `tasks/get` with the task's `DetailedTask`: its status, and its result, error
    /// or outstanding input requests.
    ///
    /// # Errors
    /// `-32021` when the request does not declare the tasks extension; `-32602` for an id
    /// that is unknown, purged, or owned by another principal (the three look the same).
    // docs/protocol.md R14-R16, R17, R49.
    pub async fn get_task(
        &self,
        params: GetTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let snapshot = self
            .owned_task("tasks/get", &params.task_id, context)
            .await?;
        let mut result = GetTaskResult::new(snapshot.into_detailed());
        result.meta = Some(self.meta());
        Ok(result)
    }

    /// Answers `tasks/update`: answers for outstanding keys go to the waiting work, other
    /// keys are ignored, a subset is fine.
    ///
    /// # Errors
    /// `-32021` without the extension; `-32602` for an unknown or foreign id, or for an
    /// answer that is not the result type its request asked for.
    // docs/protocol.md R23-R27.
    pub async fn update_task(
        &self,
        params: UpdateTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let snapshot = self
            .owned_task("tasks/update", &params.task_id, context)
            .await?;
        validate_responses(&snapshot, &params.input_responses)?;
        let delivered = self
            .runtime
            .store
            .deliver_input(&params.task_id, params.input_responses);
        let accepted = delivered.await.map_err(refusal("tasks/update"))?;
        let woke = !accepted.is_empty();
        self.runtime.deliver(&params.task_id, accepted);
        if woke {
            // A parked task runs again (over a single-process store, here).
            self.runtime.wake_soon(&params.task_id);
        }
        // Answers may have moved the task back to `working`.
        self.runtime.changed(&params.task_id);
        Ok(())
    }

    /// Answers `tasks/cancel`: records the intent and signals the work; the status changes
    /// when the work honours it.
    ///
    /// # Errors
    /// `-32021` without the extension; `-32602` for an unknown or foreign id.
    // docs/protocol.md R35, R37.
    pub async fn cancel_task(
        &self,
        params: CancelTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.owned_task("tasks/cancel", &params.task_id, context)
            .await?;
        let cancelled = self.runtime.store.request_cancel(&params.task_id).await;
        cancelled.map_err(refusal("tasks/cancel"))?;
        self.signal_cancel(&params.task_id);
        Ok(())
    }

    /// Signals the work of task `id` to stop, if it runs in this process, once its cancel
    /// intent is stored (another instance hears of it from the store): a task held back by
    /// its tool's limit or waiting for its tool's version ends at once, a parked one wakes.
    pub(crate) fn signal_cancel(&self, id: &str) {
        self.runtime.cancel(id);
        self.runtime.cancel_unrun(id);
        self.runtime.wake_soon(id);
    }

    /// Deals with the tasks a previous process left unfinished in a durable store; call it
    /// once at start-up, before serving. Per tool ([`RestartPolicy`](crate::RestartPolicy)): `Fail` ends them
    /// `failed` (`-32603`, with a `statusMessage` saying the server restarted); `Resume`
    /// replays them. A task whose tool is gone, or whose tool version changed since it
    /// started, is never replayed: it fails with a message that says so.
    ///
    /// # Errors
    /// A failure of the store; tasks dealt with before it keep their new state.
    ///
    /// In cluster mode (a store several instances share) a starting instance does not
    /// replay the tasks other instances are running: it claims at once the tasks whose lease
    /// lapsed (an instance that died) and, unless
    /// [`ClusterConfig::with_execution`](crate::ClusterConfig::with_execution) is off,
    /// queued ones; the report counts those. A started engine claims those anyway (its
    /// first claim runs at start); the leases of what `recover` claims are renewed once the
    /// engine is started.
    pub async fn recover(&self) -> Result<RecoveryReport, StoreError> {
        self.runtime.recover().await
    }

    /// The task, if the request may see it.
    async fn owned_task(
        &self,
        method: &str,
        id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<TaskSnapshot, ErrorData> {
        let incoming = Incoming::of(context, &self.default_owner);
        if !incoming.negotiation.declares_tasks {
            return Err(errors::tasks_capability_required());
        }
        match visible_task(&self.runtime, id, &incoming.owner).await {
            Ok(Some(snapshot)) => Ok(snapshot),
            Ok(None) => Err(errors::task_not_found(method)),
            Err(error) => Err(errors::store_failure(&error)),
        }
    }

    /// The `_meta` of a result: the server's info.
    // docs/protocol.md C9.
    fn meta(&self) -> MetaObject {
        (*self.result_meta).clone()
    }

    /// Puts the server's info into `meta` where it lacks it (a tool's result, or an
    /// acknowledgement rmcp built).
    // docs/protocol.md C9.
    pub(super) fn join_info(&self, meta: &mut rmcp::model::JsonObject) {
        for (key, value) in &self.result_meta.0 {
            meta.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
}

/// What a store's refusal of `method` answers: `-32602` for a task it no longer has.
fn refusal(method: &str) -> impl Fn(StoreError) -> ErrorData + '_ {
    move |error| match error {
        StoreError::NotFound => errors::task_not_found(method),
        error => errors::store_failure(&error),
    }
}
