//! One HTTP front that only records tasks, and two workers that run them, over one Postgres
//! task space:
//!
//! ```text
//! cargo run --example workers -- postgres://postgres@127.0.0.1:5432/test [--port 8080]
//! ```
//!
//! The front answers every `tools/call` with a queued task and runs no work; the workers
//! claim queued tasks (`FOR UPDATE SKIP LOCKED`) and run each under a lease. Here all three
//! run in this one process; in production each worker is a process of its own
//! (`Engine::builder(toolkit).with_store(store).build_worker().run().await`), on as many machines as the work needs, and
//! the front scales with the requests. Stop a worker while it runs a task: once its lease
//! lapses the other worker takes the task over (`import_rows` resumes from its last
//! completed batch; `workspace_report` fails, saying its server stopped).

mod common;

use std::time::Duration;

use mcp_tasks::{ClusterConfig, Engine, PostgresStore, TaskServer};

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
    let mut args = std::env::args().skip(1);
    let url = args.next().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "usage: workers postgres://USER@HOST:PORT/DATABASE [--port N]",
        )
    })?;
    let port = match (args.next().as_deref(), args.next()) {
        (Some("--port"), Some(port)) => port.parse().map_err(std::io::Error::other)?,
        _ => 8080u16,
    };
    let step = Duration::from_millis(500);
    let connect = || async {
        PostgresStore::builder(url.clone())
            .connect()
            .await
            .map_err(std::io::Error::other)
    };
    // Short leases so a stopped worker's tasks move within seconds.
    let config = ClusterConfig::default()
        .with_lease(Duration::from_secs(5))
        .with_renewal(Duration::from_millis(1500));
    for name in ["worker-1", "worker-2"] {
        let worker = Engine::builder(common::toolkit(step))
            .with_store(connect().await?)
            .with_instance_id(name)
            .with_cluster(config.clone())
            .build_worker();
        tokio::spawn(async move {
            if let Err(error) = worker.run().await {
                eprintln!("{name} stopped: {error}");
            }
        });
    }
    let front = Engine::builder(common::toolkit(step))
        .with_store(connect().await?)
        .with_instance_id("front")
        .with_cluster(config.with_queued_calls(true).with_execution(false))
        .build();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!(
        "front serving MCP on http://{}/mcp; worker-1 and worker-2 run its tasks",
        listener.local_addr()?
    );
    mcp_tasks::serve_http(
        listener,
        TaskServer::from_engine(front),
        mcp_tasks::HttpOptions::new(),
    )
    .await
}
