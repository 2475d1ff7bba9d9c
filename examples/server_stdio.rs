//! A task server on stdio:
//! `cargo run --example server_stdio [-- --store sqlite:tasks.db] [--journal PATH]`.

mod common;

use std::time::Duration;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let (server, rest) = common::server(std::env::args().skip(1), Duration::from_secs(1)).await?;
    if let Some(other) = rest.first() {
        return Err(std::io::Error::other(format!(
            "unknown argument `{other}`; expected --store memory|sqlite:PATH, --journal PATH"
        )));
    }
    mcp_tasks::serve_stdio(server).await
}
