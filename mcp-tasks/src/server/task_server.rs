//! [`TaskServer`]: a ready rmcp [`ServerHandler`] over an [`Engine`].

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult,
        Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
        UpdateTaskParams,
    },
    service::RequestContext,
};

use super::{Engine, RequestStateKey, engine::default_server_info};
use crate::{
    runtime::recover::RecoveryReport,
    store::{StoreError, TaskStore},
    toolkit::Toolkit,
};

/// A ready [`ServerHandler`]: tools from a [`Toolkit`], tasks in a [`TaskStore`].
///
/// ```no_run
/// # #[cfg(feature = "http")]
/// # async fn run(toolkit: mcp_tasks::Toolkit) -> std::io::Result<()> {
/// let server = mcp_tasks::TaskServer::new(toolkit);
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// mcp_tasks::serve_http(listener, server, mcp_tasks::HttpOptions::new()).await
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct TaskServer {
    pub(super) engine: Engine,
    /// What `get_info` answers; built once, since rmcp asks for it on many requests.
    pub(super) config: Arc<ServerConfig>,
    /// What one request may carry (see [`crate::limits`]).
    pub(super) limits: crate::Limits,
}

impl TaskServer {
    /// A server over `toolkit` with a [`MemoryStore`](crate::MemoryStore).
    #[must_use]
    pub fn new(toolkit: Toolkit) -> Self {
        Self::from_engine(Engine::new(toolkit))
    }

    /// A server over an engine configured elsewhere.
    #[must_use]
    pub fn from_engine(engine: Engine) -> Self {
        let config = ServerConfig::new(engine.capabilities(ServerCapabilities::default()))
            .with_server_info(default_server_info());
        Self {
            engine,
            config: Arc::new(config),
            limits: crate::Limits::default(),
        }
    }

    /// Sets what one request may carry; [`Limits::default()`](crate::Limits) otherwise.
    #[must_use]
    pub fn with_limits(mut self, limits: crate::Limits) -> Self {
        self.engine = self.engine.with_limits(limits.clone());
        self.limits = limits;
        self
    }

    /// What one request may carry.
    #[must_use]
    pub fn limits(&self) -> &crate::Limits {
        &self.limits
    }

    /// Uses `store` for tasks.
    #[must_use]
    pub fn with_store(mut self, store: impl TaskStore) -> Self {
        self.engine = self.engine.with_store(store);
        self
    }

    /// Seals multi round-trip `requestState` with `key`; see
    /// [`Engine::with_request_state_key`].
    #[must_use]
    pub fn with_request_state_key(mut self, key: RequestStateKey) -> Self {
        self.engine = self.engine.with_request_state_key(key);
        self
    }

    /// Sets the name and version the server reports (`serverInfo`).
    #[must_use]
    pub fn with_server_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        let info = Implementation::new(name.into(), version.into());
        self.engine = self.engine.with_server_info(info.clone());
        Arc::make_mut(&mut self.config).server_info = info;
        self
    }

    /// Sets the instructions for clients.
    #[must_use]
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.config).instructions = Some(instructions.into());
        self
    }

    /// The engine.
    #[must_use]
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Deals with tasks a previous process left unfinished; see [`Engine::recover`]. Call it
    /// once at start-up, before serving.
    ///
    /// # Errors
    /// A failure of the store.
    pub async fn recover(&self) -> Result<RecoveryReport, StoreError> {
        self.engine.recover().await
    }
}

impl ServerHandler for TaskServer {
    fn get_info(&self) -> ServerConfig {
        (*self.config).clone()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(self.engine.list_tools())
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.engine
            .toolkit()
            .get(name)
            .map(|r| r.definition.tool().clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.engine.call_tool(request, &context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.engine.get_task(request, &context).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.engine.update_task(request, &context).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.engine.cancel_task(request, &context).await
    }
}
