//! A task server on stdio:
//! `cargo run --example server_stdio [-- --store sqlite:tasks.db] [--journal PATH]`; on
//! `--store postgres://...` an instance of a cluster. `--help` lists the flags and the
//! `MCP_TASKS_*` environment variables that set them (`common::ServerArgs`).

mod common;

use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser};

/// The example task server on stdio.
#[derive(Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    server: common::ServerArgs,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Parsed through the `Command` so that its usage error below names the binary as clap's
    // own do.
    let mut command = Args::command();
    let args = Args::from_arg_matches(&command.get_matches_mut()).unwrap_or_else(|e| e.exit());
    if let Err(message) = args.server.check(false) {
        command
            .error(clap::error::ErrorKind::ArgumentConflict, message)
            .exit();
    }
    // Print the error's message: a `main` that returns it would print its Debug form.
    if let Err(error) = run(args.server).await {
        eprintln!("error: {error}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}

async fn run(args: common::ServerArgs) -> std::io::Result<()> {
    match common::server(args, Duration::from_secs(1)).await? {
        common::Served::Server(server) => mcp_tasks::serve_stdio(server).await,
        // A worker speaks no protocol: it runs the cluster's tasks until stopped.
        common::Served::Worker(worker) => worker.run().await.map_err(std::io::Error::other),
    }
}
