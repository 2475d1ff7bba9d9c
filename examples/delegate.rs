//! An rmcp handler of your own that keeps its other methods and routes tools and tasks to
//! an [`mcp_tasks::Engine`]: `cargo run --example delegate` (stdio).

mod common;

use std::time::Duration;

use mcp_tasks::Engine;
use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
        UpdateTaskParams,
    },
    service::RequestContext,
};

#[derive(Clone)]
struct MyServer {
    tasks: Engine,
}

/// The engine `mcp_tasks::serve_http` would serve (it starts it, applies its limits and
/// serves its task listens); this example serves stdio through rmcp, so only HTTP needs it.
impl AsRef<Engine> for MyServer {
    fn as_ref(&self) -> &Engine {
        &self.tasks
    }
}

impl ServerHandler for MyServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(self.tasks.capabilities(ServerCapabilities::default()))
            .with_instructions("An existing rmcp server that added mcp-tasks.")
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(self.tasks.list_tools())
    }

    async fn call_tool(
        &self,
        params: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.tasks.call_tool(params, &cx).await
    }

    async fn get_task(
        &self,
        params: GetTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.tasks.get_task(params, &cx).await
    }

    async fn update_task(
        &self,
        params: UpdateTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.update_task(params, &cx).await
    }

    async fn cancel_task(
        &self,
        params: CancelTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel_task(params, &cx).await
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Print the error's message: a `main` that returns it would print its Debug form.
    if let Err(error) = run().await {
        eprintln!("error: {error}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}

async fn run() -> std::io::Result<()> {
    let tasks = Engine::new(common::toolkit(Duration::from_secs(1)));
    // A handler of our own: its engine is started here, before serving.
    tasks.start().map_err(std::io::Error::other)?;
    let server = MyServer { tasks };
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(std::io::Error::other)?;
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}
