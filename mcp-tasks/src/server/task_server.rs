//! [`TaskServer`]: a ready rmcp [`ServerHandler`] over an [`Engine`].

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams,
        ServerCapabilities, ServerConfig,
    },
    service::RequestContext,
};

use super::Engine;
use crate::{runtime::recover::RecoveryReport, store::StoreError, toolkit::Toolkit};

/// A ready [`ServerHandler`]: tools from a [`Toolkit`], tasks in a [`TaskStore`](crate::TaskStore).
///
/// ```no_run
/// # #[cfg(feature = "http")]
/// # async fn run(toolkit: mcp_tasks::Toolkit) -> std::io::Result<()> {
/// let server = mcp_tasks::TaskServer::new(toolkit);
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// mcp_tasks::serve_http(listener, server, mcp_tasks::HttpOptions::new()).await
/// # }
/// ```
///
/// Over an engine set up with [`Engine::builder`] (a store, limits, the server's name):
///
/// ```no_run
/// # #[cfg(all(feature = "http", feature = "sqlite"))]
/// # async fn run(toolkit: mcp_tasks::Toolkit) -> Result<(), Box<dyn std::error::Error>> {
/// use mcp_tasks::{Engine, SqliteStore, TaskServer};
/// let engine = Engine::builder(toolkit)
///     .with_store(SqliteStore::open("tasks.db")?)
///     .with_server_info(rmcp::model::Implementation::new("reports", "2.1.0"))
///     .build();
/// let server = TaskServer::from_engine(engine);
/// server.recover().await?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// mcp_tasks::serve_http(listener, server, mcp_tasks::HttpOptions::new()).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct TaskServer {
    pub(super) engine: Engine,
    /// What `get_info` answers; built once, since rmcp asks for it on many requests.
    pub(super) config: Arc<ServerConfig>,
}

impl TaskServer {
    /// A server over `toolkit` with a [`MemoryStore`](crate::MemoryStore).
    #[must_use]
    pub fn new(toolkit: Toolkit) -> Self {
        Self::from_engine(Engine::new(toolkit))
    }

    /// A server over an engine built elsewhere ([`Engine::builder`]): it reports the
    /// engine's [`server_info`](Engine::server_info) and serves with its
    /// [`limits`](Engine::limits).
    #[must_use]
    pub fn from_engine(engine: Engine) -> Self {
        let config = ServerConfig::new(engine.capabilities(ServerCapabilities::default()))
            .with_server_info(engine.server_info().clone());
        Self {
            engine,
            config: Arc::new(config),
        }
    }

    /// What one request may carry: the engine's [`Limits`](crate::Limits).
    #[must_use]
    pub fn limits(&self) -> &crate::Limits {
        self.engine.limits()
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

/// The engine [`serve_http`](crate::serve_http) and [`http_router`](crate::http_router)
/// serve.
impl AsRef<Engine> for TaskServer {
    fn as_ref(&self) -> &Engine {
        &self.engine
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

    /// A method this server does not know: `-32601` saying so, where rmcp's answer is the
    /// method's name alone.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        Err(crate::errors::method_not_found(&request.method))
    }

    crate::task_methods!(engine);
}
