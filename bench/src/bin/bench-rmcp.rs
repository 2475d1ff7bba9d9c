//! The baseline: `noop_task(sleep_ms)` on rmcp 3.11's `TaskManager`, written the way rmcp
//! documents it (its `tests/test_task.rs`): one shared `TaskManager`, a `call_tool` override
//! that spawns into it when the request declares the extension (otherwise the tool router
//! answers inline), and `tasks/get|update|cancel` delegated to it. Served by rmcp's
//! Streamable HTTP service with the transport settings of `mcp_tasks::serve_http` (see
//! [`transport_config`]), on a listener with `TCP_NODELAY`, so the two servers differ in
//! their task code only, not in how an answer travels.
//!
//! `bench-rmcp --port 8102`

use std::{sync::Arc, time::Duration};

use mcp_tasks_bench::{Args, listen, serve_nodelay};
use rmcp::{
    ErrorData as McpError, ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::*,
    service::{RequestContext, RoleServer},
    task_manager::{TaskExit, TaskManager, TaskOptions},
    tool, tool_router,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};

/// Tasks are kept an hour, as `#[task_tool]`'s default `ttl` in `bench-ours`.
const TTL_MS: u64 = 3_600_000;
const POLL_INTERVAL_MS: u64 = 1_000;

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct NoopArgs {
    /// Milliseconds to sleep first.
    #[serde(default)]
    sleep_ms: u64,
}

async fn noop(sleep_ms: u64) -> CallToolResult {
    if sleep_ms > 0 {
        tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
    }
    CallToolResult::success(vec![ContentBlock::text("done")])
}

/// Cheap to clone (the Streamable HTTP service clones the handler per request): the router is
/// shared, and `TaskManager` clones share one store.
#[derive(Clone)]
struct Baseline {
    tool_router: Arc<ToolRouter<Baseline>>,
    tasks: TaskManager,
}

#[tool_router]
impl Baseline {
    fn new() -> Self {
        Self {
            tool_router: Arc::new(Self::tool_router()),
            tasks: TaskManager::new(),
        }
    }

    /// Does nothing; first sleeps `sleep_ms` milliseconds when that is above zero.
    #[tool(description = "Does nothing; first sleeps sleep_ms milliseconds when above zero")]
    async fn noop_task(
        &self,
        Parameters(NoopArgs { sleep_ms }): Parameters<NoopArgs>,
    ) -> Result<CallToolResult, McpError> {
        Ok(noop(sleep_ms).await)
    }
}

impl ServerHandler for Baseline {
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let client_supports_tasks = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        if request.name == "noop_task" && client_supports_tasks {
            let NoopArgs { sleep_ms } = serde_json::from_value(serde_json::Value::Object(
                request.arguments.clone().unwrap_or_default(),
            ))
            .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
            let options = TaskOptions::new()
                .with_ttl_ms(TTL_MS)
                .with_poll_interval_ms(POLL_INTERVAL_MS);
            let task = self.tasks.spawn(options, move |ctx| {
                Box::pin(async move {
                    tokio::select! {
                        () = ctx.cancelled() => Err(TaskExit::Cancelled),
                        result = noop(sleep_ms) => Ok(result),
                    }
                })
            });
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
        }
        let tcc = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        self.tool_router.call(tcc).await
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tool_router.list_all()))
    }

    /// What `#[tool_handler]` generates, rmcp's documented way to serve a tool router: with
    /// it rmcp's Streamable HTTP service checks a call's standard and parameter headers
    /// against the tool's input schema, as it does for `bench-ours` (whose `TaskServer`
    /// answers `get_tool` too). Without it the baseline skips that work.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tool_router.get(name).cloned()
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel_task(&request.task_id)
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("rmcp-taskmanager-bench", "3.11"))
    }
}

/// The settings `mcp_tasks::serve_http` gives rmcp's Streamable HTTP service (keep the two
/// in step): the defaults (modern 2026-07-28 requests are served statelessly whatever
/// `legacy_session_mode` says; legacy `initialize` clients get sessions) plus
/// `json_response`, so a modern request whose handler sends nothing before its answer gets
/// one `application/json` body instead of a one-event `text/event-stream`.
fn transport_config() -> StreamableHttpServerConfig {
    StreamableHttpServerConfig::default().with_json_response(true)
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse()?;
    args.only(&["port"])?;
    let port: u16 = args.parsed("port", 8102)?;
    let server = Baseline::new();
    let service: StreamableHttpService<Baseline, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        transport_config(),
    );
    let listener = listen(port, "rmcp TaskManager").await?;
    serve_nodelay(listener, axum::Router::new().nest_service("/mcp", service)).await
}
