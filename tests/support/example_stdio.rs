//! The example server on stdio, as a binary the client tests can start as a child process
//! (`CARGO_BIN_EXE_mcp-tasks-example-stdio`). `MCP_TASKS_EXAMPLE_STEP_MS` sets the length of
//! each scanning step of `workspace_report` (default 1000).

#[path = "../../examples/common/mod.rs"]
mod common;

use std::time::Duration;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let step = std::env::var("MCP_TASKS_EXAMPLE_STEP_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .unwrap_or(1000);
    let server = mcp_tasks::TaskServer::new(common::toolkit(Duration::from_millis(step)));
    mcp_tasks::serve_stdio(server).await
}
