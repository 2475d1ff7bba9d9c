//! [`EngineBuilder`]: an [`Engine`]'s configuration, kept in one place until
//! [`EngineBuilder::build`] makes the engine (once: nothing is rebuilt).

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use rmcp::model::{Implementation, MetaObject};

use super::{DEFAULT_OWNER, DEFAULT_REQUEST_STATE_TTL, Engine, RequestStateKey, request_state};
use crate::{
    Limits,
    runtime::{ClusterConfig, Runtime, Settings, Tools, Worker, cluster::random_instance_id},
    store::{MemoryStore, TaskStore},
    toolkit::Toolkit,
};

/// How an [`Engine`] is set up: [`Engine::builder`], the `with_*` setters, then
/// [`build`](Self::build). Every setting has a default, so `Engine::builder(toolkit).build()`
/// is an engine over a [`MemoryStore`].
///
/// ```
/// # async fn run(toolkit: mcp_tasks::Toolkit) -> Result<(), mcp_tasks::StartError> {
/// use std::time::Duration;
/// let engine = mcp_tasks::Engine::builder(toolkit)
///     .with_store(mcp_tasks::MemoryStore::new())
///     .with_expiry_sweep(Duration::from_millis(500))
///     .build();
/// engine.start()?;
/// // ... serve ...
/// engine.shutdown(Duration::from_secs(5)).await;
/// # Ok(())
/// # }
/// ```
#[must_use]
pub struct EngineBuilder {
    toolkit: Toolkit,
    store: Option<Arc<dyn TaskStore>>,
    settings: Settings,
    instance: Option<Arc<str>>,
    cluster: ClusterConfig,
    default_owner: Arc<str>,
    request_state_key: Option<RequestStateKey>,
    request_state_ttl: Duration,
    server_info: Implementation,
}

impl std::fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("toolkit", &self.toolkit)
            .field("settings", &self.settings)
            .field("instance", &self.instance)
            .field("cluster", &self.cluster)
            .field("default_owner", &self.default_owner)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine over `toolkit` with every default (a [`MemoryStore`](crate::MemoryStore)),
    /// not started: `Engine::builder(toolkit).build()`.
    #[must_use]
    pub fn new(toolkit: Toolkit) -> Self {
        Self::builder(toolkit).build()
    }

    /// The configuration of an engine over `toolkit`; see [`EngineBuilder`].
    pub fn builder(toolkit: Toolkit) -> EngineBuilder {
        EngineBuilder {
            toolkit,
            store: None,
            settings: Settings::default(),
            instance: None,
            cluster: ClusterConfig::default(),
            default_owner: Arc::from(DEFAULT_OWNER),
            request_state_key: None,
            request_state_ttl: DEFAULT_REQUEST_STATE_TTL,
            server_info: Implementation::new("mcp-tasks", env!("CARGO_PKG_VERSION")),
        }
    }
}

impl EngineBuilder {
    /// Uses `store` for tasks (default: a new [`MemoryStore`]).
    pub fn with_store(self, store: impl TaskStore) -> Self {
        self.with_shared_store(Arc::new(store))
    }

    /// Uses a store shared with other code.
    pub fn with_shared_store(mut self, store: Arc<dyn TaskStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Sets this instance's id, which the leases of the tasks it runs carry, when the store
    /// is shared by several instances (`PostgresStore`). Default: `instance-` and 64
    /// random bits, new for every engine. Two live instances must never share an id.
    pub fn with_instance_id(mut self, id: impl Into<Arc<str>>) -> Self {
        self.instance = Some(id.into());
        self
    }

    /// Sets how this instance shares its store with other instances: lease length, renewal,
    /// claim and re-read intervals, and whether calls run here or are queued for workers
    /// (see [`ClusterConfig`] for the defaults). Ignored with a single-process store.
    pub fn with_cluster(mut self, config: ClusterConfig) -> Self {
        self.cluster = config;
        self
    }

    /// Sets how often the engine sweeps the store for tasks past their TTL (default 1 s),
    /// once started. Expiry is also applied by any read that comes first, so the sweep
    /// bounds how long an expired task's work may go on when nobody reads it. At least 1 ms.
    pub fn with_expiry_sweep(mut self, every: Duration) -> Self {
        self.settings.reap_interval = every.max(Duration::from_millis(1));
        self
    }

    /// Sets the [`Limits`]: the task-level ones (outstanding input requests per task,
    /// `statusMessage` length, live tasks per owner) apply in the engine, the request-size
    /// ones in the transports that serve it (they read them from the engine: the one place
    /// limits are set).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.settings.limits = limits;
        self
    }

    /// Sets the grace period of the shutdown that
    /// `serve_http_with_shutdown` makes when its signal
    /// comes (default 10 s): how long the work running here has to end on its own before
    /// it is drained (see [`Engine::shutdown`]). Keep it below the time your orchestrator
    /// waits between SIGTERM and SIGKILL.
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.settings.shutdown_grace = grace;
        self
    }

    /// Lets at most `max` tasks' work run on this instance at once (default: no limit; at
    /// least 1). A task call over the limit is refused before its task is created, with
    /// `-32603`, a message saying the instance runs its limit and to retry later or on
    /// another instance, and `data: {"retryable": true}`; calls that answer inline are not
    /// counted. Over a shared store, the claims of queued and lapsed tasks take only free
    /// slots: to queue calls rather than refuse them, record them
    /// ([`ClusterConfig::with_queued_calls`]) and let instances or
    /// [`Worker`](crate::Worker)s with a `max_running` of their own claim them.
    pub fn with_max_running(mut self, max: usize) -> Self {
        self.settings.max_running = Some(max.max(1));
        self
    }

    /// Derives each task's priority from the call that creates it (default: 0 for every
    /// task). Over a shared store whose claims read priorities
    /// ([`ClusterConfig::with_priorities`]), queued tasks of a higher priority are claimed
    /// first, and a task waiting long enough gains levels, so none starves. A task that the
    /// receiving instance runs at once does not wait in the queue, so its priority changes
    /// nothing; single-process stores keep no priority.
    ///
    /// ```
    /// use mcp_tasks::{Engine, PriorityInput, TaskContext, ToolError, task_tool, toolkit};
    ///
    /// #[task_tool(mode = "required")]
    /// async fn report(ctx: TaskContext) -> Result<String, ToolError> {
    ///     Ok("done".to_owned())
    /// }
    ///
    /// // The interactive app's calls before the nightly batch's.
    /// let engine = Engine::builder(toolkit![report]?)
    ///     .with_priority(|call: &PriorityInput<'_>| if call.owner == "web-app" { 10 } else { 0 })
    ///     .build();
    /// # drop(engine);
    /// # Ok::<(), mcp_tasks::ToolkitError>(())
    /// ```
    pub fn with_priority(
        mut self,
        priority: impl Fn(&crate::PriorityInput<'_>) -> i16 + Send + Sync + 'static,
    ) -> Self {
        self.settings.priority = Some(crate::runtime::Priority(Arc::new(priority)));
        self
    }

    /// Sets the name and version put in `_meta["io.modelcontextprotocol/serverInfo"]` of
    /// every result the engine builds, and reported by a [`TaskServer`](super::TaskServer)
    /// over it. Default: `mcp-tasks` and this crate's version.
    ///
    /// rmcp builds the acknowledgements of `tasks/update` and `tasks/cancel` (a handler
    /// returns `()` for them): [`serve_http`](super::serve_http),
    /// [`http_router`](super::http_router) and [`serve_io`](super::serve_io) put the info in
    /// those too; an rmcp transport of your own leaves them without it.
    pub fn with_server_info(mut self, info: Implementation) -> Self {
        self.server_info = info;
        self
    }

    /// Sets the owner of requests that carry no [`Owner`](super::Owner).
    pub fn with_default_owner(mut self, owner: impl Into<Arc<str>>) -> Self {
        self.default_owner = owner.into();
        self
    }

    /// Seals multi round-trip `requestState` with `key` (see [`RequestStateKey`]). Without
    /// one the engine generates a random key when it is built: then states do not survive a
    /// restart and other instances refuse them (an engine on a shared, cluster store logs a
    /// warning when it is built without one).
    pub fn with_request_state_key(mut self, key: RequestStateKey) -> Self {
        self.request_state_key = Some(key);
        self
    }

    /// How long a sealed `requestState` is accepted after it is issued (default
    /// [`DEFAULT_REQUEST_STATE_TTL`], 15 minutes).
    pub fn with_request_state_ttl(mut self, ttl: Duration) -> Self {
        self.request_state_ttl = ttl;
        self
    }

    /// A [`Worker`] with these settings (the store, instance id, cluster settings, expiry
    /// sweep, shutdown grace, `max_running` and limits; the rest serve requests, which a
    /// worker does not), not started.
    pub fn build_worker(mut self) -> Worker {
        let (tools, store, instance) = self.parts();
        Worker {
            store,
            tools,
            settings: self.settings,
            instance,
            config: self.cluster,
        }
    }

    /// The tools, the store (a new [`MemoryStore`] by default) and the instance id.
    fn parts(&mut self) -> (Tools, Arc<dyn TaskStore>, Arc<str>) {
        crate::metrics::register(&self.toolkit);
        let toolkit = std::mem::take(&mut self.toolkit);
        let tools = Tools {
            state: Arc::new(toolkit.state().clone()),
            toolkit: Arc::new(toolkit),
        };
        let store = self.store.take();
        let store = store.unwrap_or_else(|| Arc::new(MemoryStore::new()));
        let instance = self.instance.take().unwrap_or_else(random_instance_id);
        (tools, store, instance)
    }

    /// The engine, not started: [`Engine::start`] starts its background loops (the serving
    /// functions do it for you).
    #[must_use]
    pub fn build(mut self) -> Engine {
        let (tools, store, instance) = self.parts();
        let runtime = Runtime::new(store, tools.clone(), self.settings, instance, self.cluster);
        built_again(&tools.toolkit);
        if self.request_state_key.is_none() && runtime.placement.shared().is_some() {
            tracing::warn!(
                "an instance on a shared store without a request-state key: each instance seals \
                 multi round-trip state with a random key of its own, so a round answered by \
                 another instance is refused; give every instance the same \
                 EngineBuilder::with_request_state_key (docs/guide/05-several-instances.md)"
            );
        }
        let key = self
            .request_state_key
            .unwrap_or_else(RequestStateKey::generate);
        // The `_meta` of every result: `io.modelcontextprotocol/serverInfo` (docs/protocol.md C9).
        let mut result_meta = MetaObject::new();
        if let Ok(value) = serde_json::to_value(&self.server_info) {
            result_meta
                .0
                .insert("io.modelcontextprotocol/serverInfo".into(), value);
        }
        Engine {
            _guard: runtime.lifecycle.drop_guard(),
            toolkit: tools.toolkit,
            state: tools.state,
            runtime,
            default_owner: self.default_owner,
            request_state: Arc::new(request_state::Sealer::new(key, self.request_state_ttl)),
            result_meta: Arc::new(result_meta),
            server_info: Arc::new(self.server_info),
            #[cfg(any(feature = "http", feature = "stdio"))]
            push: Arc::default(),
        }
    }
}

/// How many engines this process built, by their tools' names.
static BUILT: parking_lot::Mutex<BTreeMap<String, u64>> = parking_lot::Mutex::new(BTreeMap::new());

/// The build-per-request trap (guide 01, "The trap: build the engine once"): engines with
/// the same tools built again and again in one process are most likely built inside rmcp's
/// per-request service factory, where every request gets an empty store (and its engine is
/// dropped with the request). A process that serves builds its engine once. Warns at the 3rd
/// build of the same tools, then at every 100th.
fn built_again(toolkit: &Toolkit) {
    let tools: Vec<&str> = toolkit.definitions().map(|d| d.name()).collect();
    let tools = tools.join(",");
    let mut built = BUILT.lock();
    let count = built.entry(tools.clone()).or_default();
    *count += 1;
    let count = *count;
    if count == 3 || count.is_multiple_of(100) {
        tracing::warn!(
            tools = %tools,
            "an engine with these tools was built {count} times in this process: an engine \
             built per request (inside rmcp's service factory) gives each request an empty \
             task store, and the next request answers \"task not found\"; build the engine \
             once and clone it (docs/guide/01-rmcp-server.md, \"The trap: build the engine \
             once\"; docs/guide/08-troubleshooting.md)"
        );
    }
}
