//! The tools the example servers share, written with `#[task_tool]`.
//!
//! `greet` is an ordinary tool; `workspace_report` runs as a task when the client declares
//! the extension: it reports progress in `statusMessage`, honours `tasks/cancel`, and asks the
//! user a question through `tasks/update`.

use std::{
    io::Write,
    sync::{Arc, Mutex},
    time::Duration,
};

use mcp_tasks::{State, TaskContext, TaskServer, ToolError, Toolkit, task_tool, toolkit};
use rmcp::model::{ElicitationAction, ElicitationSchema, ErrorData};

// `greet`, `Pace` and `workspace_report` are the CLI tests' tools, kept in the runtime
// package so its tests build from the published crate; the examples use the same ones.
#[path = "../../mcp-tasks/tests/support/example.rs"]
#[allow(
    dead_code,
    reason = "its toolkit() is the CLI tests'; the examples build their own"
)]
mod shared_tools;
pub use shared_tools::{Pace, greet, workspace_report};

/// Where `import_rows` records each batch it imports: the side effect a replay after a
/// restart must not repeat. One line `<task id> <batch>` per batch.
#[derive(Clone, Default)]
pub struct Journal(pub Option<Arc<Mutex<std::fs::File>>>);

impl Journal {
    /// A journal appending to `path`.
    pub fn open(path: &str) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self(Some(Arc::new(Mutex::new(file)))))
    }

    fn record(&self, task: &str, batch: u32) -> std::io::Result<()> {
        match &self.0 {
            Some(file) => {
                let mut file = file
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                writeln!(file, "{task} {batch}")
            }
            None => Ok(()),
        }
    }
}

/// Import rows in batches: a durable task. On a durable store it survives a server restart:
/// the tool runs again, each batch that was imported before returns its stored count
/// without importing again, and an answered confirmation is not asked again.
#[task_tool(restart = "resume", poll_interval = "200ms")]
pub async fn import_rows(
    ctx: TaskContext,
    State(journal): State<Journal>,
    #[arg(description = "How many batches to import")] batches: u32,
    #[arg(default, description = "How long each batch takes, in milliseconds")] batch_ms: u64,
    #[arg(default, description = "Ask the user before importing")] confirm: bool,
) -> Result<String, ToolError> {
    if confirm {
        let schema = ElicitationSchema::builder()
            .required_bool("go")
            .build()
            .map_err(|e| ToolError::rpc(ErrorData::internal_error(e.to_string(), None)))?;
        let answer = ctx
            .elicit_form(format!("Import {batches} batches?"), schema)
            .await?;
        let go = answer.action == ElicitationAction::Accept
            && answer.content.as_ref().and_then(|c| c["go"].as_bool()) == Some(true);
        if !go {
            return Ok("import declined".to_owned());
        }
    }
    let mut rows = 0u64;
    for batch in 1..=batches {
        ctx.status(format!("importing batch {batch} of {batches}"))
            .await;
        let (journal, step_ctx) = (journal.clone(), ctx.clone());
        rows += ctx
            .step(&format!("batch-{batch}"), || async move {
                tokio::time::sleep(Duration::from_millis(batch_ms)).await;
                // Inside a step the call is a task (or runs inline, without one).
                let task = step_ctx.task_id().unwrap_or("inline");
                journal
                    .record(task, batch)
                    .map(|()| 100u64)
                    .map_err(|e| e.to_string())
            })
            .await?
            .map_err(ToolError::new)?;
    }
    Ok(format!("imported {rows} rows in {batches} batches"))
}

/// The example toolkit; `step` paces `workspace_report`.
pub fn toolkit(step: Duration) -> Toolkit {
    toolkit![greet, workspace_report, import_rows]
        .expect("the example tools have distinct, valid definitions")
        .with_state(Pace(step))
        .with_state(Journal::default())
}

/// What [`server`] made of the flags: a server to serve, or (`--worker`) a worker that
/// serves nothing and runs the cluster's tasks.
pub enum Served {
    /// Serve this.
    Server(TaskServer),
    /// Run this ([`mcp_tasks::Worker::run`]).
    Worker(mcp_tasks::Worker),
}

fn millis(value: Option<String>, flag: &str) -> std::io::Result<Duration> {
    value
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
        .ok_or_else(|| usage(&format!("{flag} takes milliseconds, e.g. {flag} 1000")))
}

/// The flags that only an instance on a shared (Postgres) store takes.
const CLUSTER_FLAGS: &str = "--schema, --instance, --lease-ms, --renew-ms, --claim-ms, \
    --reread-ms, --queued-calls, --no-execution, --worker";

/// The example server from command-line flags: `--store memory` (the default),
/// `--store sqlite:PATH` or `--store postgres://USER@HOST:PORT/DATABASE`, `--journal PATH`
/// for `import_rows`, `--pace-ms N` for each step of `workspace_report` (default `step`).
/// On a durable store it deals with the tasks a previous process left unfinished before it
/// serves. On Postgres it is one instance of a cluster (any number share the store):
/// `--schema NAME` (default `mcp_tasks`), `--instance ID` (default random), `--lease-ms`,
/// `--renew-ms`, `--claim-ms`, `--reread-ms` (`ClusterConfig`),
/// `--queued-calls` (calls only record their task), `--no-execution` (runs no work),
/// `--worker` (serves nothing: a [`mcp_tasks::Worker`]).
#[allow(dead_code, reason = "the demo example builds its server itself")]
pub async fn server(
    flags: impl Iterator<Item = String>,
    step: Duration,
) -> std::io::Result<(Served, Vec<String>)> {
    let mut store = "memory".to_owned();
    let (mut journal, mut pace) = (None, step);
    let (mut schema, mut instance, mut worker) = (None, None, false);
    let mut config = mcp_tasks::ClusterConfig::default();
    let mut cluster_flag = None;
    let mut rest = Vec::new();
    let mut flags = flags.peekable();
    while let Some(flag) = flags.next() {
        match flag.as_str() {
            "--store" => {
                store = flags.next().ok_or_else(|| {
                    usage("--store takes `memory`, `sqlite:PATH` or `postgres://...`")
                })?
            }
            "--journal" => {
                journal = Some(
                    flags
                        .next()
                        .ok_or_else(|| usage("--journal takes a file path"))?,
                );
            }
            "--pace-ms" => pace = millis(flags.next(), &flag)?,
            "--schema" | "--instance" | "--lease-ms" | "--renew-ms" | "--claim-ms"
            | "--reread-ms" | "--queued-calls" | "--no-execution" | "--worker" => {
                match flag.as_str() {
                    "--schema" => schema = flags.next(),
                    "--instance" => instance = flags.next(),
                    "--lease-ms" => config = config.with_lease(millis(flags.next(), &flag)?),
                    "--renew-ms" => config = config.with_renewal(millis(flags.next(), &flag)?),
                    "--claim-ms" => {
                        config = config.with_claim_interval(millis(flags.next(), &flag)?);
                    }
                    "--reread-ms" => {
                        config = config.with_reread_interval(millis(flags.next(), &flag)?);
                    }
                    "--queued-calls" => config = config.with_queued_calls(true),
                    "--no-execution" => config = config.with_execution(false),
                    _ => worker = true,
                }
                cluster_flag = Some(flag);
            }
            _ => rest.push(flag),
        }
    }
    let mut toolkit = toolkit(pace);
    if let Some(path) = journal {
        toolkit = toolkit.with_state(Journal::open(&path)?);
    }
    let postgres = matches!(store.split_once(':'), Some(("postgres" | "postgresql", _)));
    if let (Some(flag), false) = (&cluster_flag, postgres) {
        return Err(usage(&format!(
            "{flag} is for an instance on a shared store: add --store postgres://... \
             (the flags {CLUSTER_FLAGS} need one)"
        )));
    }
    let info = rmcp::model::Implementation::new("mcp-tasks-example", env!("CARGO_PKG_VERSION"));
    let engine = |toolkit| mcp_tasks::Engine::builder(toolkit).with_server_info(info);
    let server = match store.split_once(':') {
        None if store == "memory" => TaskServer::from_engine(engine(toolkit).build()),
        Some(("sqlite", path)) if !path.is_empty() => {
            let server = TaskServer::from_engine(
                engine(toolkit)
                    .with_store(mcp_tasks::SqliteStore::open(path).map_err(std::io::Error::other)?)
                    .build(),
            );
            let report = server.recover().await.map_err(std::io::Error::other)?;
            eprintln!(
                "store sqlite:{path}: {} unfinished task(s) resumed, {} failed",
                report.resumed, report.failed
            );
            server
        }
        _ if postgres => {
            let mut builder = mcp_tasks::PostgresStore::builder(store.clone());
            if let Some(schema) = schema {
                builder = builder.with_schema(schema);
            }
            let pg = builder
                .connect()
                .await
                .map_err(|e| std::io::Error::other(error_chain(&e)))?;
            let schema = pg.schema().to_owned();
            if worker {
                let mut worker = mcp_tasks::Worker::new(pg, toolkit).with_cluster(config);
                if let Some(id) = instance {
                    worker = worker.with_instance_id(id);
                }
                return Ok((Served::Worker(worker), rest));
            }
            // One instance of a cluster: its work runs under leases, so any number of
            // instances share the schema and take over each other's tasks.
            let mut builder = engine(toolkit).with_store(pg).with_cluster(config);
            if let Some(id) = instance {
                builder = builder.with_instance_id(id);
            }
            let engine = builder.build();
            let report = engine.recover().await.map_err(std::io::Error::other)?;
            eprintln!(
                "instance {} (postgres schema {schema}): {} task(s) taken over, {} failed",
                engine.instance_id(),
                report.resumed,
                report.failed
            );
            TaskServer::from_engine(engine)
        }
        _ => {
            return Err(usage(&format!(
                "unknown store `{store}`; use `memory`, `sqlite:PATH` or \
                 `postgres://USER@HOST:PORT/DATABASE`"
            )));
        }
    };
    Ok((Served::Server(server), rest))
}

/// A store error with its sources, in one line (a Postgres error says what to fix in its
/// source).
fn error_chain(error: &mcp_tasks::store::StoreError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// The `server_http` example: `--port N` (0 picks a free one; the address is printed on
/// stderr) plus the flags of [`server`].
#[allow(dead_code, reason = "only the HTTP server binaries use it")]
pub async fn main_http(flags: impl Iterator<Item = String>) -> std::io::Result<()> {
    let (served, rest) = server(flags, Duration::from_secs(1)).await?;
    let server = match served {
        Served::Server(server) => server,
        Served::Worker(worker) => {
            if let Some(flag) = rest.first() {
                return Err(usage(&format!("{flag}: a worker serves no HTTP")));
            }
            eprintln!("worker {} running", worker.instance_id());
            return worker.run().await.map_err(std::io::Error::other);
        }
    };
    let mut port = 8080u16;
    let mut options = mcp_tasks::HttpOptions::new();
    let mut rest = rest.into_iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--port" => {
                port = rest
                    .next()
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| usage("--port takes a number, e.g. --port 8080"))?;
            }
            // Every request needs `Authorization: Bearer <token>`; the token names its owner.
            "--tokens" => {
                let tokens = mcp_tasks::StaticTokens::parse(&rest.next().unwrap_or_default())
                    .map_err(|e| usage(&format!("--tokens: {e}")))?;
                options = options.with_static_tokens(tokens);
            }
            other => {
                return Err(usage(&format!(
                    "unknown argument `{other}`; expected --port N, --tokens owner:token,..., \
                     --store memory|sqlite:PATH|postgres://..., --journal PATH, --pace-ms N, \
                     or on Postgres {CLUSTER_FLAGS}"
                )));
            }
        }
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!("serving MCP on http://{}/mcp", listener.local_addr()?);
    mcp_tasks::serve_http(listener, server, options).await
}

fn usage(message: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, message.to_owned())
}
