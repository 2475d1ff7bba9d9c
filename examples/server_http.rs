//! A task server on Streamable HTTP: `cargo run --example server_http -- --port 8080`,
//! then point a client at `http://127.0.0.1:8080/mcp`.

mod common;

use std::time::Duration;

use mcp_tasks::TaskServer;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut port = 8080u16;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => {
                port = args.next().and_then(|p| p.parse().ok()).ok_or_else(|| {
                    std::io::Error::other("--port takes a number, e.g. --port 8080")
                })?;
            }
            other => {
                return Err(std::io::Error::other(format!(
                    "unknown argument `{other}`; expected --port N"
                )));
            }
        }
    }
    let server = TaskServer::new(common::toolkit(Duration::from_secs(1)))
        .with_server_info("mcp-tasks-example", env!("CARGO_PKG_VERSION"));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!("serving MCP on http://{}/mcp", listener.local_addr()?);
    mcp_tasks::serve_http(listener, server).await
}
