//! A task server on stdio: `cargo run --example server_stdio`.

mod common;

use std::time::Duration;

use mcp_tasks::TaskServer;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let server = TaskServer::new(common::toolkit(Duration::from_secs(1)))
        .with_server_info("mcp-tasks-example", env!("CARGO_PKG_VERSION"));
    mcp_tasks::serve_stdio(server).await
}
