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
    DEFAULT_OWNER,
    negotiation::Incoming,
    request::{idempotency_key, meta_object, validate_responses},
    request_state::{self, DEFAULT_REQUEST_STATE_TTL, RequestStateKey},
};
use crate::{
    EXTENSION_ID, errors,
    runtime::{
        ClusterConfig, Runtime, Settings,
        call::{Answer, Call, Notifier},
        cluster::{self, Tools, random_instance_id},
        recover::{RecoveryReport, recover},
    },
    store::{MemoryStore, StoreError, TaskSnapshot, TaskStore},
    tool::Mode,
    toolkit::Toolkit,
};

/// Answers `tools/list`, `tools/call` and `tasks/*` for a [`Toolkit`], with a [`TaskStore`].
///
/// Cheap to clone: clones share the toolkit, the store and the running tasks.
#[derive(Clone)]
pub struct Engine {
    pub(super) toolkit: Arc<Toolkit>,
    pub(super) state: Arc<crate::toolkit::StateMap>,
    pub(super) runtime: Arc<Runtime>,
    pub(super) default_owner: Arc<str>,
    pub(super) tool_names: Arc<std::collections::HashMap<String, Arc<str>>>,
    pub(super) request_state: Arc<request_state::Sealer>,
    pub(super) settings: Settings,
    /// `_meta` of every result the engine builds: `io.modelcontextprotocol/serverInfo` (C9).
    pub(super) result_meta: Arc<MetaObject>,
    /// This instance's id in a cluster (random by default).
    pub(super) instance: Arc<str>,
    pub(super) cluster: ClusterConfig,
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
    /// An engine over `toolkit` with a [`MemoryStore`].
    #[must_use]
    pub fn new(toolkit: Toolkit) -> Self {
        let state = Arc::new(toolkit.state().clone());
        let tool_names = toolkit
            .definitions()
            .map(|d| (d.name().to_owned(), Arc::from(d.name())))
            .collect();
        Self {
            toolkit: Arc::new(toolkit),
            state,
            runtime: Runtime::new(
                Arc::new(MemoryStore::new()),
                Settings::default(),
                Arc::from(""),
                ClusterConfig::default(),
            ),
            default_owner: Arc::from(DEFAULT_OWNER),
            tool_names: Arc::new(tool_names),
            request_state: Arc::new(request_state::Sealer::new(
                RequestStateKey::generate(),
                DEFAULT_REQUEST_STATE_TTL,
            )),
            settings: Settings::default(),
            result_meta: Arc::new(server_info_meta(&default_server_info())),
            instance: random_instance_id(),
            cluster: ClusterConfig::default(),
        }
    }

    fn rebuild(mut self, store: Arc<dyn TaskStore>) -> Self {
        self.runtime = Runtime::new(
            store,
            self.settings.clone(),
            self.instance.clone(),
            self.cluster.clone(),
        );
        self
    }

    /// Sets this instance's id, which the leases of the tasks it runs carry, when the store
    /// is shared by several instances (`PostgresStore`). Default: `instance-` and 64
    /// random bits, new for every engine. Two live instances must never share an id.
    #[must_use]
    pub fn with_instance_id(mut self, id: impl Into<Arc<str>>) -> Self {
        self.instance = id.into();
        let store = self.runtime.store.clone();
        self.rebuild(store)
    }

    /// Sets how this instance shares its store with other instances: lease length, renewal
    /// and claim intervals, and whether calls run here or are queued for workers (see
    /// [`ClusterConfig`] for the defaults). Ignored with a single-process store.
    #[must_use]
    pub fn with_cluster(mut self, config: ClusterConfig) -> Self {
        self.cluster = config;
        let store = self.runtime.store.clone();
        self.rebuild(store)
    }

    /// This instance's id (see [`Engine::with_instance_id`]).
    #[must_use]
    pub fn instance_id(&self) -> &str {
        &self.instance
    }

    /// Starts the cluster loops once (leases, wake-ups, takeover), in cluster mode.
    fn start_cluster(&self) {
        if self.runtime.instance.is_some() {
            cluster::start(
                &self.runtime,
                &Tools {
                    toolkit: self.toolkit.clone(),
                    state: self.state.clone(),
                },
            );
        }
    }

    /// Uses `store` for tasks.
    #[must_use]
    pub fn with_store(self, store: impl TaskStore) -> Self {
        self.with_shared_store(Arc::new(store))
    }

    /// Uses a store shared with other code.
    #[must_use]
    pub fn with_shared_store(self, store: Arc<dyn TaskStore>) -> Self {
        self.rebuild(store)
    }

    /// Sets how often the engine sweeps the store for tasks past their TTL (default 1 s).
    /// Expiry is also applied by any read that comes first, so the sweep bounds how long an
    /// expired task's work may go on when nobody reads it.
    #[must_use]
    pub fn with_expiry_sweep(mut self, every: std::time::Duration) -> Self {
        self.settings.reap_interval = every.max(std::time::Duration::from_millis(1));
        let store = self.runtime.store.clone();
        self.rebuild(store)
    }

    /// Sets the task-level [`Limits`](crate::Limits): outstanding input requests per task,
    /// `statusMessage` length, live tasks per owner (the request-size limits are the
    /// transport's: [`TaskServer::with_limits`](super::TaskServer::with_limits) sets both).
    #[must_use]
    pub fn with_limits(mut self, limits: crate::Limits) -> Self {
        self.settings.limits = limits;
        let store = self.runtime.store.clone();
        self.rebuild(store)
    }

    /// Sets the name and version put in `_meta["io.modelcontextprotocol/serverInfo"]` of
    /// every result the engine builds (C9); [`TaskServer::with_server_info`](super::TaskServer::with_server_info) sets it too.
    /// Default: `mcp-tasks` and this crate's version.
    #[must_use]
    pub fn with_server_info(mut self, info: Implementation) -> Self {
        self.result_meta = Arc::new(server_info_meta(&info));
        self
    }

    /// How many tasks' work runs in this process now.
    #[must_use]
    pub fn running_tasks(&self) -> usize {
        self.runtime.live_count()
    }

    /// Sets the owner of requests that carry no [`Owner`](super::Owner).
    #[must_use]
    pub fn with_default_owner(mut self, owner: impl Into<Arc<str>>) -> Self {
        self.default_owner = owner.into();
        self
    }

    /// Seals multi round-trip `requestState` with `key` (see [`RequestStateKey`]). Without
    /// one the engine generates a random key at start: then states do not survive a restart
    /// and other instances refuse them.
    #[must_use]
    pub fn with_request_state_key(mut self, key: RequestStateKey) -> Self {
        self.request_state = Arc::new((*self.request_state).clone().with_key(key));
        self
    }

    /// How long a sealed `requestState` is accepted after it is issued (default
    /// [`DEFAULT_REQUEST_STATE_TTL`], 15 minutes).
    #[must_use]
    pub fn with_request_state_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.request_state = Arc::new((*self.request_state).clone().with_ttl(ttl));
        self
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
    /// `extensions["io.modelcontextprotocol/tasks"] = {}` (exactly `{}`, docs/protocol.md §3.6).
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
        let mut result = ListToolsResult::with_all_items(
            self.toolkit
                .definitions()
                .map(|d| d.tool().clone())
                .collect(),
        );
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
        self.start_cluster();
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
        let arguments = params.arguments.unwrap_or_default();
        let owner = incoming.owner;
        let binding = request_state::Binding {
            owner: &owner,
            tool: definition.name(),
            arguments: &arguments,
        };
        let mrtr = if incoming.negotiation.modern {
            Some(self.request_state.open(
                &binding,
                params.request_state.as_deref(),
                params.input_responses,
            )?)
        } else {
            None
        };
        let tool = self.tool_name(definition.name());
        let call = Call {
            runtime: &self.runtime,
            registered,
            state: &self.state,
            tool: tool.clone(),
            owner: owner.clone(),
            client_capabilities: incoming.capabilities.unwrap_or_default(),
            arguments: &arguments,
            request_meta: meta_object(&context.meta),
            mrtr,
            idempotency_key: idempotency_key(&context.meta)?,
            notifier: Some(Notifier {
                peer: context.peer.clone(),
                progress_token: context.meta.get_progress_token(),
                log_level: context.meta.log_level(),
            }),
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
                self.add_meta(&mut result.meta);
                CallToolResponse::Complete(result)
            }
            Answer::Task(task) => {
                let mut created = CreateTaskResult::new(task);
                created.meta = Some(self.meta());
                CallToolResponse::Task(created)
            }
            Answer::InputRequired { requests, answers } => {
                // This round's requests, and a sealed `requestState` with every answer so far
                // and the keys asked, so the retry needs only the new answers (C19, C20).
                let state = self.request_state.seal(&binding, requests.keys(), &answers);
                let mut result = InputRequiredResult::new(Some(requests), Some(state));
                result.meta = Some(self.meta());
                CallToolResponse::InputRequired(result)
            }
        })
    }

    /// Answers `tasks/get` with the task's `DetailedTask` (R14-R16).
    ///
    /// # Errors
    /// `-32021` without the extension; `-32602` for an unknown or foreign id (R17, R49).
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
    /// keys are ignored, a subset is fine (R23-R27).
    ///
    /// # Errors
    /// `-32021` without the extension; `-32602` for an unknown or foreign id, or for an
    /// answer that is not the result type its request asked for.
    pub async fn update_task(
        &self,
        params: UpdateTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let snapshot = self
            .owned_task("tasks/update", &params.task_id, context)
            .await?;
        validate_responses(&snapshot, &params.input_responses)?;
        let accepted = match self
            .runtime
            .store
            .deliver_input(&params.task_id, params.input_responses)
            .await
        {
            Ok(accepted) => accepted,
            Err(StoreError::NotFound) => return Err(errors::task_not_found("tasks/update")),
            Err(error) => return Err(errors::store_failure(&error)),
        };
        self.runtime.deliver(&params.task_id, accepted);
        Ok(())
    }

    /// Answers `tasks/cancel`: records the intent and signals the work; the status changes
    /// when the work honours it (R35, R37).
    ///
    /// # Errors
    /// `-32021` without the extension; `-32602` for an unknown or foreign id.
    pub async fn cancel_task(
        &self,
        params: CancelTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.owned_task("tasks/cancel", &params.task_id, context)
            .await?;
        match self.runtime.store.request_cancel(&params.task_id).await {
            Ok(()) => {}
            Err(StoreError::NotFound) => return Err(errors::task_not_found("tasks/cancel")),
            Err(error) => return Err(errors::store_failure(&error)),
        }
        self.runtime.cancel(&params.task_id);
        Ok(())
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
    /// replay the tasks other instances are running: it starts its lease renewals, wake-ups
    /// and takeover loop, and claims at once the tasks whose lease lapsed (an instance
    /// that died) and, unless [`ClusterConfig::with_execution`] is off, queued ones; the
    /// report counts those.
    pub async fn recover(&self) -> Result<RecoveryReport, StoreError> {
        if self.runtime.instance.is_some() {
            self.start_cluster();
            if !self.cluster.execution {
                return Ok(RecoveryReport::default());
            }
            let tools = Tools {
                toolkit: self.toolkit.clone(),
                state: self.state.clone(),
            };
            return cluster::claim(&self.runtime, &tools).await;
        }
        recover(&self.runtime, &self.toolkit, &self.state).await
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
        self.start_cluster();
        let owner = incoming.owner;
        match self.runtime.read(id).await {
            Ok(Some(snapshot)) if snapshot.owner == owner => Ok(snapshot),
            Ok(_) => Err(errors::task_not_found(method)),
            Err(error) => Err(errors::store_failure(&error)),
        }
    }

    /// The `_meta` of a result: the server's info (C9).
    fn meta(&self) -> MetaObject {
        (*self.result_meta).clone()
    }

    /// Adds the server's info to a result's `_meta`, keeping what the tool put there.
    fn add_meta(&self, meta: &mut Option<MetaObject>) {
        let meta = meta.get_or_insert_with(MetaObject::new);
        for (key, value) in &self.result_meta.0 {
            meta.0.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }

    fn tool_name(&self, name: &str) -> Arc<str> {
        self.tool_names
            .get(name)
            .cloned()
            .unwrap_or_else(|| Arc::from(name))
    }
}

/// This crate as the default `serverInfo`.
pub(super) fn default_server_info() -> Implementation {
    Implementation::new("mcp-tasks", env!("CARGO_PKG_VERSION"))
}

/// `{"io.modelcontextprotocol/serverInfo": info}` (C9).
pub(super) fn server_info_meta(info: &Implementation) -> MetaObject {
    let mut meta = MetaObject::new();
    if let Ok(value) = serde_json::to_value(info) {
        meta.0
            .insert("io.modelcontextprotocol/serverInfo".to_owned(), value);
    }
    meta
}
