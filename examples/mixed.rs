//! An rmcp server with its own `#[tool]` methods AND task tools, in one `tools/list`:
//! `cargo run --example mixed`.
//!
//! The rmcp tools come from `#[tool_router]`; the task tools from `toolkit!`, routed by
//! `Engine::tool_router`; `mcp_tasks::task_methods!` answers `tasks/*`. The example serves it
//! on 127.0.0.1 (a free port), then a `TaskClient` lists the tools, calls the rmcp tool
//! (inline) and the task tool (a task), and prints `done: ...`.

use std::time::Duration;

use mcp_tasks::{
    Engine, TaskContext, ToolError,
    client::{Call, TaskClient, TaskEnd},
    task_tool, toolkit,
};
use rmcp::{
    ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{ServerCapabilities, ServerConfig},
    schemars, tool, tool_handler, tool_router,
};

/// Counts to `to`, one number every 50 ms, as a task.
#[task_tool(mode = "optional", poll_interval = "50ms")]
async fn count(ctx: TaskContext, to: u32) -> Result<String, ToolError> {
    for n in 1..=to {
        ctx.status(format!("at {n} of {to}")).await;
        ctx.until_cancelled(tokio::time::sleep(Duration::from_millis(50)))
            .await?;
    }
    Ok(format!("counted to {to}"))
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

#[derive(Clone)]
struct Calculator {
    tasks: Engine,
    tools: ToolRouter<Self>,
}

#[tool_router]
impl Calculator {
    fn new(tasks: Engine) -> Self {
        // The rmcp tools and the task tools, in one router.
        let tools = Self::tool_router() + tasks.tool_router();
        Self { tasks, tools }
    }

    /// Adds two numbers.
    #[tool]
    async fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        (a + b).to_string()
    }
}

/// The engine `serve_http` serves: it starts it, applies its limits and serves its task
/// listens.
impl AsRef<Engine> for Calculator {
    fn as_ref(&self) -> &Engine {
        &self.tasks
    }
}

#[tool_handler(router = self.tools)]
impl ServerHandler for Calculator {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            self.tasks
                .capabilities(ServerCapabilities::builder().enable_tools().build()),
        )
    }

    mcp_tasks::task_methods!(tasks);
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

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::new(toolkit![count]?);
    let server = Calculator::new(engine);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    tokio::spawn(mcp_tasks::serve_http(
        listener,
        server,
        mcp_tasks::HttpOptions::new(),
    ));

    let client = TaskClient::builder().connect_http(&url).await?;
    let mut names: Vec<String> = client
        .list_tools()
        .await?
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect();
    names.sort();
    println!("tools/list: {names:?}");
    if names != ["add", "count"] {
        return Err(format!("expected the rmcp tool and the task tool, got {names:?}").into());
    }

    let sum = match client
        .call(
            "add",
            serde_json::json!({ "a": 2, "b": 3 }).as_object().cloned(),
        )
        .await?
    {
        Call::Inline(result) => first_text(&result),
        _ => return Err("`add` is an rmcp tool: it answers inline".into()),
    };
    println!("add(2, 3) = {sum}");

    let mut task = match client
        .call("count", serde_json::json!({ "to": 3 }).as_object().cloned())
        .await?
    {
        Call::Task(task) => task,
        _ => return Err("`count` called by a task client runs as a task".into()),
    };
    println!("count: task {}", task.id());
    let counted = match task.wait().await? {
        TaskEnd::Completed(result) => first_text(&result),
        other => return Err(format!("count ended {other:?}").into()),
    };
    client.close().await;
    if sum != "5" || counted != "counted to 3" {
        return Err(format!("unexpected answers: {sum:?}, {counted:?}").into());
    }
    println!("done: add = {sum}, count = {counted:?}");
    Ok(())
}

fn first_text(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}
