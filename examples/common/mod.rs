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
    #[arg(
        default,
        description = "Ask before the task starts: the question comes back as the call's answer"
    )]
    confirm_first: bool,
) -> Result<String, ToolError> {
    if confirm || confirm_first {
        let schema = ElicitationSchema::builder()
            .required_bool("go")
            .build()
            .map_err(|e| ToolError::rpc(ErrorData::internal_error(e.to_string(), None)))?;
        let question = format!("Import {batches} batches?");
        let answer = if confirm_first {
            ctx.elicit_form_before_task(question, schema).await?
        } else {
            ctx.elicit_form(question, schema).await?
        };
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

/// Every setting of the example HTTP server: its flag, the environment variable that sets it
/// when the flag is not given, and whether it takes a value (else it is a switch, set in
/// the environment by `1`/`true`/`yes`). The README's "Deploying" section lists them in one
/// table; a flag wins over its variable.
pub const SETTINGS: &[(&str, &str, bool)] = &[
    ("--bind", "MCP_TASKS_BIND", true),
    ("--port", "MCP_TASKS_PORT", true),
    ("--allowed-hosts", "MCP_TASKS_ALLOWED_HOSTS", true),
    ("--allowed-origins", "MCP_TASKS_ALLOWED_ORIGINS", true),
    ("--tokens", "MCP_TASKS_TOKENS", true),
    ("--request-state-key", "MCP_TASKS_REQUEST_STATE_KEY", true),
    ("--store", "MCP_TASKS_STORE", true),
    ("--schema", "MCP_TASKS_SCHEMA", true),
    ("--instance", "MCP_TASKS_INSTANCE", true),
    ("--lease-ms", "MCP_TASKS_LEASE_MS", true),
    ("--renew-ms", "MCP_TASKS_RENEW_MS", true),
    ("--claim-ms", "MCP_TASKS_CLAIM_MS", true),
    ("--reread-ms", "MCP_TASKS_REREAD_MS", true),
    ("--shutdown-grace-ms", "MCP_TASKS_SHUTDOWN_GRACE_MS", true),
    ("--max-running", "MCP_TASKS_MAX_RUNNING", true),
    ("--queued-calls", "MCP_TASKS_QUEUED_CALLS", false),
    ("--no-execution", "MCP_TASKS_NO_EXECUTION", false),
    ("--worker", "MCP_TASKS_WORKER", false),
    ("--journal", "MCP_TASKS_JOURNAL", true),
    ("--pace-ms", "MCP_TASKS_PACE_MS", true),
    ("--admin-bind", "MCP_TASKS_ADMIN_BIND", true),
];

/// The flags the `MCP_TASKS_*` environment sets ([`SETTINGS`]), to be read before the
/// command line's (so a flag given there wins).
///
/// # Errors
/// A switch variable set to something other than `1`/`true`/`yes`/`0`/`false`/`no`/empty.
#[allow(
    dead_code,
    reason = "only the HTTP server binaries read the environment"
)]
pub fn env_flags() -> std::io::Result<Vec<String>> {
    let mut flags = Vec::new();
    for &(flag, var, takes_value) in SETTINGS {
        let Some(value) = std::env::var_os(var) else {
            continue;
        };
        let value = value
            .into_string()
            .map_err(|_| usage(&format!("{var} is not valid UTF-8")))?;
        if takes_value {
            flags.push(flag.to_owned());
            flags.push(value);
            continue;
        }
        match value.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" => flags.push(flag.to_owned()),
            "" | "0" | "false" | "no" => {}
            _ => return Err(usage(&format!("{var} is a switch: set it to 1 or 0"))),
        }
    }
    Ok(flags)
}

/// The example server from command-line flags: `--store memory` (the default),
/// `--store sqlite:PATH` or `--store postgres://USER@HOST:PORT/DATABASE`, `--journal PATH`
/// for `import_rows`, `--pace-ms N` for each step of `workspace_report` (default `step`).
/// On a durable store it deals with the tasks a previous process left unfinished before it
/// serves. On Postgres it is one instance of a cluster (any number share the store):
/// `--schema NAME` (default `mcp_tasks`), `--instance ID` (default random), `--lease-ms`,
/// `--renew-ms`, `--claim-ms`, `--reread-ms` (`ClusterConfig`),
/// `--queued-calls` (calls only record their task), `--no-execution` (runs no work),
/// `--worker` (serves nothing: a [`mcp_tasks::Worker`]). `--request-state-key SECRET` seals
/// multi round-trip state; `--shutdown-grace-ms N` is the grace period of a shutdown;
/// `--max-running N` bounds the tasks that run at once on this instance or worker.
#[allow(dead_code, reason = "the demo example builds its server itself")]
pub async fn server(
    flags: impl Iterator<Item = String>,
    step: Duration,
) -> std::io::Result<(Served, Vec<String>)> {
    build(flags, step, false).await
}

/// [`server`]; `shared_key`: refuse a cluster instance without `--request-state-key` (an
/// HTTP instance behind a balancer: see the check below).
async fn build(
    flags: impl Iterator<Item = String>,
    step: Duration,
    shared_key: bool,
) -> std::io::Result<(Served, Vec<String>)> {
    let mut store = "memory".to_owned();
    let (mut journal, mut pace) = (None, step);
    let (mut schema, mut instance, mut worker) = (None, None, false);
    let mut config = mcp_tasks::ClusterConfig::default();
    let mut cluster_flag = None;
    let (mut key, mut grace, mut max_running) = (None, None, None);
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
            "--shutdown-grace-ms" => grace = Some(millis(flags.next(), &flag)?),
            "--max-running" => {
                max_running = Some(
                    flags
                        .next()
                        .and_then(|n| n.parse::<usize>().ok())
                        .filter(|&n| n > 0)
                        .ok_or_else(|| {
                            usage("--max-running takes a number of tasks, at least 1")
                        })?,
                );
            }
            "--request-state-key" => {
                let secret = flags.next().unwrap_or_default();
                key = Some(
                    mcp_tasks::RequestStateKey::new(secret.into_bytes()).map_err(|e| {
                        usage(&format!(
                            "--request-state-key (MCP_TASKS_REQUEST_STATE_KEY): {e}; make one with \
                         `openssl rand -hex 32`"
                        ))
                    })?,
                );
            }
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
    // Multi round-trip requests carry state sealed with this key, and a balancer may send
    // the follow-up to any instance: with a key of its own (random) each instance would
    // refuse the others' states. The key is a secret, so it is not put in the shared store
    // (anyone with read access to the database could then forge states): every instance
    // gets the same one from its deployment.
    if shared_key && postgres && !worker && key.is_none() {
        return Err(usage(
            "a cluster instance needs the request-state key every instance shares: set \
             MCP_TASKS_REQUEST_STATE_KEY (or --request-state-key) to the same secret of at \
             least 32 characters on each of them (e.g. `openssl rand -hex 32`); without it a \
             multi round-trip call whose retry reaches another instance is refused",
        ));
    }
    let grace = grace.unwrap_or(mcp_tasks::cluster::DEFAULT_SHUTDOWN_GRACE);
    let info = rmcp::model::Implementation::new("mcp-tasks-example", env!("CARGO_PKG_VERSION"));
    let engine = |toolkit| {
        let mut builder = mcp_tasks::Engine::builder(toolkit)
            .with_server_info(info)
            .with_shutdown_grace(grace);
        if let Some(max) = max_running {
            builder = builder.with_max_running(max);
        }
        match key {
            Some(key) => builder.with_request_state_key(key),
            None => builder,
        }
    };
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
            let mut builder = engine(toolkit).with_store(pg).with_cluster(config);
            if let Some(id) = instance {
                builder = builder.with_instance_id(id);
            }
            if worker {
                return Ok((Served::Worker(builder.build_worker()), rest));
            }
            // One instance of a cluster: its work runs under leases, so any number of
            // instances share the schema and take over each other's tasks.
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

/// A comma-separated list, without empty items.
fn list(value: Option<String>, flag: &str) -> std::io::Result<Vec<String>> {
    let value = value.ok_or_else(|| usage(&format!("{flag} takes a comma-separated list")))?;
    Ok(value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Resolves on SIGTERM (what an orchestrator sends to stop a process) or Ctrl-C.
#[allow(dead_code, reason = "only the HTTP server binaries use it")]
pub async fn terminated() {
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(error) => {
                eprintln!("SIGTERM is not handled ({error}); Ctrl-C still is");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The `server_http` example: the settings of [`SETTINGS`] from the `MCP_TASKS_*`
/// environment and then from `flags` (a flag wins): `--bind ADDR:PORT` (default
/// `127.0.0.1:8080`), `--port N` (0 picks a free one; the address is printed on stderr),
/// `--allowed-hosts`, `--allowed-origins` (comma-separated, `*` for any), `--tokens`, plus
/// the flags of [`server`]. SIGTERM or Ctrl-C stops it gracefully (drain).
#[allow(dead_code, reason = "only the HTTP server binaries use it")]
pub async fn main_http(flags: impl Iterator<Item = String>) -> std::io::Result<()> {
    let flags: Vec<String> = env_flags()?.into_iter().chain(flags).collect();
    if flags.iter().any(|f| f == "--help" || f == "-h") {
        print!("{}", help());
        return Ok(());
    }
    // The recorder goes in before the engine is built, which registers every metric at 0.
    let metrics = if flags.iter().any(|f| f == "--admin-bind") {
        Some(mcp_tasks::metrics::install_prometheus().map_err(std::io::Error::other)?)
    } else {
        None
    };
    let (served, rest) = build(flags.into_iter(), Duration::from_secs(1), true).await?;
    let server = match served {
        Served::Server(server) => server,
        Served::Worker(worker) => {
            if let Some(flag) = rest.first() {
                return Err(usage(&format!("{flag}: a worker serves no HTTP")));
            }
            eprintln!("worker {} running", worker.instance_id());
            let grace = worker.shutdown_grace();
            let handle = worker.start().map_err(std::io::Error::other)?;
            terminated().await;
            eprintln!("draining");
            let report = handle.shutdown(grace).await;
            eprintln!("stopped: {report:?}");
            return Ok(());
        }
    };
    let mut bind: std::net::SocketAddr = ([127, 0, 0, 1], 8080).into();
    let mut admin_bind: Option<std::net::SocketAddr> = None;
    let mut options = mcp_tasks::HttpOptions::new();
    let mut rest = rest.into_iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--admin-bind" => {
                admin_bind = Some(rest.next().and_then(|a| a.parse().ok()).ok_or_else(|| {
                    usage(
                        "--admin-bind takes an address and port, e.g. --admin-bind 127.0.0.1:9090",
                    )
                })?);
            }
            "--bind" => {
                bind = rest.next().and_then(|a| a.parse().ok()).ok_or_else(|| {
                    usage("--bind takes an address and port, e.g. --bind 0.0.0.0:8080")
                })?;
            }
            "--port" => {
                let port = rest
                    .next()
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| usage("--port takes a number, e.g. --port 8080"))?;
                bind.set_port(port);
            }
            "--allowed-hosts" => {
                let hosts = list(rest.next(), &arg)?;
                options = if hosts.iter().any(|h| h == "*") {
                    options.with_any_host()
                } else {
                    options.with_allowed_hosts(hosts)
                };
            }
            "--allowed-origins" => {
                let origins = list(rest.next(), &arg)?;
                options = if origins.iter().any(|o| o == "*") {
                    options.with_any_origin()
                } else {
                    options.with_allowed_origins(origins)
                };
            }
            // Every request needs `Authorization: Bearer <token>`; the token names its owner.
            "--tokens" => {
                let tokens = mcp_tasks::StaticTokens::parse(&rest.next().unwrap_or_default())
                    .map_err(|e| usage(&format!("--tokens: {e}")))?;
                options = options.with_static_tokens(tokens);
            }
            other => {
                return Err(usage(&format!(
                    "unknown argument `{other}`; expected --bind ADDR:PORT, --port N, \
                     --allowed-hosts LIST, --allowed-origins LIST, --tokens owner:token,..., \
                     --request-state-key SECRET, --shutdown-grace-ms N, --max-running N, \
                     --store memory|sqlite:PATH|postgres://..., --journal PATH, --pace-ms N, \
                     --admin-bind ADDR:PORT, --help, \
                     or on Postgres {CLUSTER_FLAGS}"
                )));
            }
        }
    }
    if let (Some(admin_bind), Some(metrics)) = (admin_bind, metrics) {
        serve_admin(admin_bind, &server, metrics).await?;
    }
    let listener = tokio::net::TcpListener::bind(bind).await?;
    eprintln!("serving MCP on http://{}/mcp", listener.local_addr()?);
    let report = mcp_tasks::serve_http_with_shutdown(listener, server, options, async {
        terminated().await;
        eprintln!("draining");
    })
    .await?;
    eprintln!("stopped: {report:?}");
    Ok(())
}

/// The admin router (credential: `MCP_TASKS_ADMIN_TOKEN`) and the Prometheus page
/// (`/metrics`, no credential) on a listener of their own, apart from the MCP one, as the
/// operating guide recommends.
async fn serve_admin(
    bind: std::net::SocketAddr,
    server: &TaskServer,
    metrics: mcp_tasks::metrics::PrometheusHandle,
) -> std::io::Result<()> {
    let token = std::env::var("MCP_TASKS_ADMIN_TOKEN")
        .map_err(|_| usage("--admin-bind needs the admin credential in MCP_TASKS_ADMIN_TOKEN"))?;
    let credential = mcp_tasks::admin::AdminCredential::new(token)
        .map_err(|e| usage(&format!("MCP_TASKS_ADMIN_TOKEN: {e}")))?;
    let app = mcp_tasks::admin::router(server.engine(), credential)
        .merge(mcp_tasks::metrics::prometheus_router(metrics));
    let listener = tokio::net::TcpListener::bind(bind).await?;
    eprintln!(
        "serving the admin view on http://{0}/admin and metrics on http://{0}/metrics",
        listener.local_addr()?
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(())
}

/// `--help`: every flag, with the environment variable that sets it.
fn help() -> String {
    let mut text = String::from(
        "The example task server on Streamable HTTP.\n\n\
         Usage: server_http [FLAGS]\n\n\
         Each flag may be set by its environment variable instead (a flag wins); see the \
         README's \"Deploying\" table for what each does.\n\n",
    );
    for &(flag, var, takes_value) in SETTINGS {
        let value = if takes_value { " <VALUE>" } else { "" };
        text.push_str(&format!("  {:<30} {var}\n", format!("{flag}{value}")));
    }
    text.push_str(
        "\n--admin-bind ADDR:PORT serves the admin view (/admin, credential in \
         MCP_TASKS_ADMIN_TOKEN) and the Prometheus page (/metrics) there.\n",
    );
    text
}

fn usage(message: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, message.to_owned())
}
