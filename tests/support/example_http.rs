//! The example HTTP server (`examples/server_http.rs`) as a binary the crash and cluster
//! tests can start and kill (`CARGO_BIN_EXE_mcp-tasks-example-http`); cargo builds it before
//! the tests.
//!
//! With `--store postgres://...` it runs as one instance of a cluster:
//!
//! | flag | meaning |
//! | --- | --- |
//! | `--store postgres://URL` | the shared store |
//! | `--schema NAME` | its Postgres schema (default `mcp_tasks`) |
//! | `--instance ID` | the instance id (default random) |
//! | `--lease-ms N`, `--renew-ms N`, `--claim-ms N`, `--reread-ms N` | cluster timing |
//! | `--pace-ms N` | each step of `workspace_report` (default 1000) |
//! | `--journal PATH` | the side-effect journal of `import_rows` |
//! | `--queued-calls` | calls only record their task (workers run them) |
//! | `--no-execution` | this instance runs no claimed work |
//! | `--worker` | serve no HTTP: run as a [`mcp_tasks::Worker`] |
//! | `--port N` | the HTTP port (0 picks one; the address is printed on stderr) |
//!
//! Any other store goes to the example's own flag handling.

#[path = "../../examples/common/mod.rs"]
mod common;

use std::time::Duration;

use mcp_tasks::{ClusterConfig, Engine, PostgresStore, TaskServer, Worker};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let postgres = args
        .windows(2)
        .any(|w| w[0] == "--store" && w[1].starts_with("postgres://"));
    if postgres {
        cluster_main(args).await
    } else {
        common::main_http(args.into_iter()).await
    }
}

fn usage(message: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, message.to_owned())
}

fn millis(value: Option<String>, flag: &str) -> std::io::Result<Duration> {
    value
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
        .ok_or_else(|| usage(&format!("{flag} takes milliseconds, e.g. {flag} 1000")))
}

async fn cluster_main(args: Vec<String>) -> std::io::Result<()> {
    let (mut url, mut schema, mut instance) = (String::new(), None, None);
    let mut config = ClusterConfig::default();
    let (mut port, mut pace, mut journal) = (0u16, Duration::from_secs(1), None);
    let (mut reread, mut worker) = (None, false);
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--store" => url = args.next().unwrap_or_default(),
            "--schema" => schema = args.next(),
            "--instance" => instance = args.next(),
            "--lease-ms" => config = config.with_lease(millis(args.next(), &flag)?),
            "--renew-ms" => config = config.with_renewal(millis(args.next(), &flag)?),
            "--claim-ms" => config = config.with_claim_interval(millis(args.next(), &flag)?),
            "--reread-ms" => reread = Some(millis(args.next(), &flag)?),
            "--pace-ms" => pace = millis(args.next(), &flag)?,
            "--journal" => journal = args.next(),
            "--queued-calls" => config = config.with_queued_calls(true),
            "--no-execution" => config = config.with_execution(false),
            "--worker" => worker = true,
            "--port" => {
                port = args
                    .next()
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| usage("--port takes a number, e.g. --port 8080"))?;
            }
            other => return Err(usage(&format!("unknown argument `{other}`"))),
        }
    }
    let mut builder = PostgresStore::builder(url);
    if let Some(schema) = schema {
        builder = builder.with_schema(schema);
    }
    if let Some(reread) = reread {
        builder = builder.with_reread_interval(reread);
    }
    let store = builder.connect().await.map_err(std::io::Error::other)?;
    let mut toolkit = common::toolkit(pace);
    if let Some(path) = journal {
        toolkit = toolkit.with_state(common::Journal::open(&path)?);
    }
    if worker {
        let mut worker = Worker::new(store, toolkit).with_cluster(config);
        if let Some(id) = instance {
            worker = worker.with_instance_id(id);
        }
        eprintln!("worker {} running", worker.instance_id());
        return worker.run().await.map_err(std::io::Error::other);
    }
    let mut engine = Engine::new(toolkit).with_store(store).with_cluster(config);
    if let Some(id) = instance {
        engine = engine.with_instance_id(id);
    }
    let report = engine.recover().await.map_err(std::io::Error::other)?;
    eprintln!(
        "instance {}: {} task(s) taken over, {} failed",
        engine.instance_id(),
        report.resumed,
        report.failed
    );
    let server = TaskServer::from_engine(engine);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!("serving MCP on http://{}/mcp", listener.local_addr()?);
    mcp_tasks::serve_http(listener, server).await
}
