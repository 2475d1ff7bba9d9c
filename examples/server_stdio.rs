//! A task server on stdio:
//! `cargo run --example server_stdio [-- --store sqlite:tasks.db] [--journal PATH]`; on
//! `--store postgres://...` an instance of a cluster (the flags of `examples/common/mod.rs`).

mod common;

use std::time::Duration;

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
    let (served, rest) = common::server(std::env::args().skip(1), Duration::from_secs(1)).await?;
    if let Some(other) = rest.first() {
        return Err(std::io::Error::other(format!(
            "unknown argument `{other}`; expected --store memory|sqlite:PATH|postgres://..., \
             --journal PATH, --pace-ms N (see examples/common/mod.rs for the Postgres flags)"
        )));
    }
    match served {
        common::Served::Server(server) => mcp_tasks::serve_stdio(server).await,
        // A worker speaks no protocol: it runs the cluster's tasks until stopped.
        common::Served::Worker(worker) => worker.run().await.map_err(std::io::Error::other),
    }
}
