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

use clap::builder::BoolishValueParser;
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

    fn record(&self, task: &str, what: impl std::fmt::Display) -> std::io::Result<()> {
        match &self.0 {
            Some(file) => {
                let mut file = file
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                writeln!(file, "{task} {what}")
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

mod ledger;

/// The example toolkit; `step` paces `workspace_report`.
pub fn toolkit(step: Duration) -> Toolkit {
    toolkit![greet, workspace_report, import_rows]
        .expect("the example tools have distinct, valid definitions")
        .with_state(Pace(step))
        .with_state(Journal::default())
}

/// What [`server`] made of the settings: a server to serve, or (`--worker`) a worker that
/// serves nothing and runs the cluster's tasks.
pub enum Served {
    /// Serve this.
    Server(TaskServer),
    /// Run this ([`mcp_tasks::Worker::run`]); boxed, as it carries every engine setting.
    Worker(Box<mcp_tasks::Worker>),
}

/// Where tasks are kept: the value of `--store`.
#[derive(Clone)]
pub enum Store {
    /// In this process's memory (the default).
    Memory,
    /// A SQLite file.
    Sqlite(String),
    /// A Postgres database (a cluster of instances shares it).
    Postgres(String),
}

impl Store {
    /// `--store`'s value parser: `memory`, `sqlite:PATH` or `postgres://...`.
    fn parse(value: &str) -> Result<Self, String> {
        match value.split_once(':') {
            None if value == "memory" => Ok(Self::Memory),
            Some(("sqlite", path)) if !path.is_empty() => Ok(Self::Sqlite(path.to_owned())),
            Some(("postgres" | "postgresql", _)) => Ok(Self::Postgres(value.to_owned())),
            _ => Err("use `memory`, `sqlite:PATH` or `postgres://USER@HOST:PORT/DATABASE`".into()),
        }
    }
}

fn request_state_key(secret: &str) -> Result<mcp_tasks::RequestStateKey, String> {
    mcp_tasks::RequestStateKey::new(secret.as_bytes().to_vec())
        .map_err(|e| format!("{e}; make one with `openssl rand -hex 32`"))
}

/// The settings of a task server, from flags or (a flag wins) `MCP_TASKS_*` environment
/// variables; `--help` lists both. A switch's variable takes `1`/`true`/`yes` or
/// `0`/`false`/`no`.
#[derive(clap::Args)]
pub struct ServerArgs {
    /// Where tasks are kept: `memory`, `sqlite:PATH` (kept across restarts) or
    /// `postgres://USER@HOST:PORT/DATABASE` (one instance of a cluster)
    #[arg(long, env = "MCP_TASKS_STORE", hide_env_values = true, value_name = "STORE",
          default_value = "memory", value_parser = Store::parse)]
    pub store: Store,
    /// The key that seals multi round-trip state, at least 32 characters (`openssl rand -hex
    /// 32`); the same on every instance of a cluster (required there)
    #[arg(long, env = "MCP_TASKS_REQUEST_STATE_KEY", hide_env_values = true,
          value_name = "SECRET", value_parser = request_state_key)]
    pub request_state_key: Option<mcp_tasks::RequestStateKey>,
    /// How long running work may go on after SIGTERM, in milliseconds [default: 10000]
    #[arg(long, env = "MCP_TASKS_SHUTDOWN_GRACE_MS", value_name = "MS")]
    pub shutdown_grace_ms: Option<u64>,
    /// The tasks that run at once on this instance or worker [default: no limit]
    #[arg(long, env = "MCP_TASKS_MAX_RUNNING", value_name = "N")]
    pub max_running: Option<std::num::NonZeroUsize>,
    /// Postgres: the schema the instances share [default: mcp_tasks]
    #[arg(long, env = "MCP_TASKS_SCHEMA", value_name = "NAME")]
    pub schema: Option<String>,
    /// Postgres: this instance's id, unique among live instances [default: random]
    #[arg(long, env = "MCP_TASKS_INSTANCE", value_name = "ID")]
    pub instance: Option<String>,
    /// Postgres: how long a crashed instance's tasks wait before another takes them, in
    /// milliseconds [default: 30000]
    #[arg(long, env = "MCP_TASKS_LEASE_MS", value_name = "MS")]
    pub lease_ms: Option<u64>,
    /// Postgres: the lease renewal interval, in milliseconds [default: 10000]
    #[arg(long, env = "MCP_TASKS_RENEW_MS", value_name = "MS")]
    pub renew_ms: Option<u64>,
    /// Postgres: how often queued and lapsed tasks are claimed, in milliseconds
    /// [default: 2000]
    #[arg(long, env = "MCP_TASKS_CLAIM_MS", value_name = "MS")]
    pub claim_ms: Option<u64>,
    /// Postgres: how often running tasks are re-read for a lost wake-up, in milliseconds
    /// [default: 2000]
    #[arg(long, env = "MCP_TASKS_REREAD_MS", value_name = "MS")]
    pub reread_ms: Option<u64>,
    /// Postgres: calls only record their task; workers run it
    #[arg(long, env = "MCP_TASKS_QUEUED_CALLS", value_parser = BoolishValueParser::new())]
    pub queued_calls: bool,
    /// Postgres: this instance runs no claimed work (a pure front)
    #[arg(long, env = "MCP_TASKS_NO_EXECUTION", value_parser = BoolishValueParser::new())]
    pub no_execution: bool,
    /// Postgres: serve nothing, only run the cluster's tasks
    #[arg(long, env = "MCP_TASKS_WORKER", value_parser = BoolishValueParser::new())]
    pub worker: bool,
    /// Example only: where `import_rows` records its batches
    #[arg(long, env = "MCP_TASKS_JOURNAL", value_name = "PATH")]
    pub journal: Option<String>,
    /// Example only: each step of `workspace_report`, in milliseconds [default: 1000]
    #[arg(long, env = "MCP_TASKS_PACE_MS", value_name = "MS")]
    pub pace_ms: Option<u64>,
    /// Example only: offer `sync_ledger` as build 1, 2 (a patched step and an added one,
    /// same version) or 3 (version 2, changed without a patch)
    #[arg(long, env = "MCP_TASKS_LEDGER_BUILD", value_name = "BUILD",
          value_parser = clap::value_parser!(u8).range(1..=3))]
    pub ledger_build: Option<u8>,
}

impl ServerArgs {
    /// What the parser cannot see: a flag of a cluster instance without a shared store,
    /// and (`shared_key`, an HTTP instance behind a balancer) a cluster instance without
    /// the request-state key. A usage error's message.
    pub fn check(&self, shared_key: bool) -> Result<(), String> {
        let postgres = matches!(self.store, Store::Postgres(_));
        let cluster_flags = [
            ("--schema", self.schema.is_some()),
            ("--instance", self.instance.is_some()),
            ("--lease-ms", self.lease_ms.is_some()),
            ("--renew-ms", self.renew_ms.is_some()),
            ("--claim-ms", self.claim_ms.is_some()),
            ("--reread-ms", self.reread_ms.is_some()),
            ("--queued-calls", self.queued_calls),
            ("--no-execution", self.no_execution),
            ("--worker", self.worker),
        ];
        if let (Some((flag, _)), false) = (cluster_flags.iter().find(|(_, set)| *set), postgres) {
            return Err(format!(
                "{flag} is for an instance on a shared store: add --store postgres://... \
                 (the flags {CLUSTER_FLAGS} need one)"
            ));
        }
        // Multi round-trip requests carry state sealed with this key, and a balancer may
        // send the follow-up to any instance: with a key of its own (random) each instance
        // would refuse the others' states. The key is a secret, so it is not put in the
        // shared store (anyone with read access to the database could then forge states):
        // every instance gets the same one from its deployment.
        if shared_key && postgres && !self.worker && self.request_state_key.is_none() {
            return Err(
                "a cluster instance needs the request-state key every instance \
                 shares: set MCP_TASKS_REQUEST_STATE_KEY (or --request-state-key) to the same \
                 secret of at least 32 characters on each of them (e.g. `openssl rand -hex \
                 32`); without it a multi round-trip call whose retry reaches another instance \
                 is refused"
                    .to_owned(),
            );
        }
        Ok(())
    }
}

/// The flags that only an instance on a shared (Postgres) store takes.
const CLUSTER_FLAGS: &str = "--schema, --instance, --lease-ms, --renew-ms, --claim-ms, \
    --reread-ms, --queued-calls, --no-execution, --worker";

/// The example server from its settings ([`ServerArgs`], checked by [`ServerArgs::check`]),
/// `step` pacing `workspace_report` unless `--pace-ms` says otherwise. On a durable store it
/// deals with the tasks a previous process left unfinished before it serves. On Postgres it
/// is one instance of a cluster (any number share the store), or with `--worker` a
/// [`mcp_tasks::Worker`] that serves nothing.
///
/// # Errors
/// The journal cannot be opened, the store cannot be opened or reached, recovery failed.
#[allow(dead_code, reason = "the demo example builds its server itself")]
pub async fn server(args: ServerArgs, step: Duration) -> std::io::Result<Served> {
    let step = args.pace_ms.map_or(step, Duration::from_millis);
    let mut toolkit = match args.ledger_build {
        None => toolkit(step),
        Some(build) => ledger::toolkit(step, build),
    };
    if let Some(path) = &args.journal {
        toolkit = toolkit.with_state(Journal::open(path)?);
    }
    let mut config = mcp_tasks::ClusterConfig::default()
        .with_queued_calls(args.queued_calls)
        .with_execution(!args.no_execution);
    if let Some(ms) = args.lease_ms {
        config = config.with_lease(Duration::from_millis(ms));
    }
    if let Some(ms) = args.renew_ms {
        config = config.with_renewal(Duration::from_millis(ms));
    }
    if let Some(ms) = args.claim_ms {
        config = config.with_claim_interval(Duration::from_millis(ms));
    }
    if let Some(ms) = args.reread_ms {
        config = config.with_reread_interval(Duration::from_millis(ms));
    }
    let grace = args.shutdown_grace_ms.map_or(
        mcp_tasks::cluster::DEFAULT_SHUTDOWN_GRACE,
        Duration::from_millis,
    );
    let info = rmcp::model::Implementation::new("mcp-tasks-example", env!("CARGO_PKG_VERSION"));
    let mut builder = mcp_tasks::Engine::builder(toolkit)
        .with_server_info(info)
        .with_shutdown_grace(grace);
    if let Some(max) = args.max_running {
        builder = builder.with_max_running(max.get());
    }
    if let Some(key) = args.request_state_key {
        builder = builder.with_request_state_key(key);
    }
    let server = match args.store {
        Store::Memory => TaskServer::from_engine(builder.build()),
        Store::Sqlite(path) => {
            let store = mcp_tasks::SqliteStore::open(&path).map_err(std::io::Error::other)?;
            let server = TaskServer::from_engine(builder.with_store(store).build());
            let report = server.recover().await.map_err(std::io::Error::other)?;
            eprintln!(
                "store sqlite:{path}: {} unfinished task(s) resumed, {} failed",
                report.resumed, report.failed
            );
            server
        }
        Store::Postgres(url) => {
            let mut store = mcp_tasks::PostgresStore::builder(url);
            if let Some(schema) = args.schema {
                store = store.with_schema(schema);
            }
            let pg = store
                .connect()
                .await
                .map_err(|e| std::io::Error::other(error_chain(&e)))?;
            let schema = pg.schema().to_owned();
            let mut builder = builder.with_store(pg).with_cluster(config);
            if let Some(id) = args.instance {
                builder = builder.with_instance_id(id);
            }
            if args.worker {
                return Ok(Served::Worker(Box::new(builder.build_worker())));
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
    };
    Ok(Served::Server(server))
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

/// The `server_http` example's command line: [`ServerArgs`] and where and how it serves.
#[derive(clap::Parser)]
#[command(
    version,
    long_about = None,
    about = "The example task server on Streamable HTTP: `greet`, `workspace_report` and \
             `import_rows` on http://ADDR:PORT/mcp. SIGTERM or Ctrl-C drains it.",
    after_help = "Every flag can be set by the environment variable named beside it (a flag \
                  wins); give secrets (the request-state key, the tokens, the admin \
                  credential) through the environment. With --admin-bind the credential of \
                  the admin API is MCP_TASKS_ADMIN_TOKEN (at least 16 characters), which \
                  only the environment sets."
)]
pub struct HttpArgs {
    /// Where to listen; `0.0.0.0:8080` in a container (an address other than loopback needs
    /// --tokens or --allow-anonymous)
    #[arg(
        long,
        env = "MCP_TASKS_BIND",
        value_name = "ADDR:PORT",
        default_value = "127.0.0.1:8080",
        conflicts_with = "worker"
    )]
    pub bind: std::net::SocketAddr,
    /// The port alone (`0` picks a free one; the address is printed on stderr)
    #[arg(
        long,
        env = "MCP_TASKS_PORT",
        value_name = "N",
        conflicts_with = "worker"
    )]
    pub port: Option<u16>,
    /// The `Host` values accepted, comma-separated; `*` for any, only behind a balancer that
    /// checks it [default: localhost, 127.0.0.1, ::1]
    #[arg(
        long,
        env = "MCP_TASKS_ALLOWED_HOSTS",
        value_name = "LIST",
        value_delimiter = ',',
        conflicts_with = "worker"
    )]
    pub allowed_hosts: Option<Vec<String>>,
    /// Browser `Origin`s accepted, comma-separated; `*` for any [default: the localhost
    /// origins]
    #[arg(
        long,
        env = "MCP_TASKS_ALLOWED_ORIGINS",
        value_name = "LIST",
        value_delimiter = ',',
        conflicts_with = "worker"
    )]
    pub allowed_origins: Option<Vec<String>>,
    /// `owner:token,...`: every request needs `Authorization: Bearer <token>`, and each owner
    /// sees only its own tasks [default: no authentication]
    #[arg(long, env = "MCP_TASKS_TOKENS", hide_env_values = true, value_name = "LIST",
          value_parser = |list: &str| mcp_tasks::StaticTokens::parse(list).map_err(|e| e.to_string()),
          conflicts_with = "worker")]
    pub tokens: Option<mcp_tasks::StaticTokens>,
    /// Serve an address other than loopback without --tokens: every caller is then the one
    /// anonymous owner and sees every task. Only when something else authenticates (a
    /// proxy) or no one else can reach the address; without it such a bind refuses to start
    #[arg(
        long,
        env = "MCP_TASKS_ALLOW_ANONYMOUS",
        value_parser = BoolishValueParser::new(),
        conflicts_with = "worker"
    )]
    pub allow_anonymous: bool,
    /// How long a client may take to send a request's headers, in milliseconds; a slower one
    /// is disconnected [default: 30000]
    #[arg(long, env = "MCP_TASKS_HEADER_TIMEOUT_MS", value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "worker")]
    pub header_timeout_ms: Option<u64>,
    /// The HTTP connections open at once; more are closed as they arrive [default: 1024]
    #[arg(
        long,
        env = "MCP_TASKS_MAX_CONNECTIONS",
        value_name = "N",
        conflicts_with = "worker"
    )]
    pub max_connections: Option<std::num::NonZeroUsize>,
    /// Serve the admin view and API (`/admin`, credential in MCP_TASKS_ADMIN_TOKEN) and the
    /// Prometheus page (`/metrics`) on a listener of their own
    #[arg(
        long,
        env = "MCP_TASKS_ADMIN_BIND",
        value_name = "ADDR:PORT",
        conflicts_with = "worker"
    )]
    pub admin_bind: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// The `server_http` example: [`HttpArgs`] from the command line and the `MCP_TASKS_*`
/// environment. A usage mistake ends the process with clap's message and exit code 2.
///
/// # Errors
/// The server cannot be built ([`server`]) or cannot listen.
#[allow(dead_code, reason = "only the HTTP server binaries use it")]
pub async fn main_http() -> std::io::Result<()> {
    use clap::{CommandFactory, FromArgMatches};
    // Parsed through the `Command` so that its usage errors below name the binary as
    // clap's own do.
    let mut command = HttpArgs::command();
    let args = HttpArgs::from_arg_matches(&command.get_matches_mut()).unwrap_or_else(|e| e.exit());
    let mut usage_error = |kind, message: String| -> ! { command.error(kind, message).exit() };
    if let Err(message) = args.server.check(true) {
        usage_error(clap::error::ErrorKind::ArgumentConflict, message);
    }
    // `serve_http` refuses this bind too; said here first, as a usage mistake.
    if !args.bind.ip().is_loopback() && args.tokens.is_none() && !args.allow_anonymous {
        usage_error(
            clap::error::ErrorKind::MissingRequiredArgument,
            format!(
                "--bind {} is not a loopback address: give --tokens (MCP_TASKS_TOKENS) so that \
                 callers authenticate, or --allow-anonymous (MCP_TASKS_ALLOW_ANONYMOUS=1) when \
                 something else guards the address",
                args.bind
            ),
        );
    }
    // Checked before anything is built: the credential comes from the environment only.
    let admin = match args.admin_bind {
        None => None,
        Some(bind) => {
            let credential = std::env::var("MCP_TASKS_ADMIN_TOKEN")
                .map_err(|_| {
                    "--admin-bind needs the admin credential in MCP_TASKS_ADMIN_TOKEN".to_owned()
                })
                .and_then(|token| {
                    mcp_tasks::admin::AdminCredential::new(token)
                        .map_err(|e| format!("MCP_TASKS_ADMIN_TOKEN: {e}"))
                });
            match credential {
                Ok(credential) => Some((bind, credential)),
                Err(message) => {
                    usage_error(clap::error::ErrorKind::MissingRequiredArgument, message)
                }
            }
        }
    };
    // The recorder goes in before the engine is built, which registers every metric at 0.
    let metrics = match admin {
        Some(_) => Some(mcp_tasks::metrics::install_prometheus().map_err(std::io::Error::other)?),
        None => None,
    };
    let server = match server(args.server, Duration::from_secs(1)).await? {
        Served::Server(server) => server,
        Served::Worker(worker) => {
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
    let mut bind = args.bind;
    if let Some(port) = args.port {
        bind.set_port(port);
    }
    let mut options = mcp_tasks::HttpOptions::new();
    // Items trimmed, empty ones dropped (`a, b,` is `a` and `b`).
    let list = |items: Vec<String>| -> Vec<String> {
        items
            .iter()
            .map(|item| item.trim())
            .filter(|item| !item.is_empty())
            .map(str::to_owned)
            .collect()
    };
    if let Some(hosts) = args.allowed_hosts.map(list) {
        options = if hosts.iter().any(|h| h == "*") {
            options.with_any_host()
        } else {
            options.with_allowed_hosts(hosts)
        };
    }
    if let Some(origins) = args.allowed_origins.map(list) {
        options = if origins.iter().any(|o| o == "*") {
            options.with_any_origin()
        } else {
            options.with_allowed_origins(origins)
        };
    }
    // Every request needs `Authorization: Bearer <token>`; the token names its owner.
    if let Some(tokens) = args.tokens {
        options = options.with_static_tokens(tokens);
    }
    // Without tokens, an address other than loopback is served only when asked for.
    if args.allow_anonymous {
        options = options.allow_anonymous();
    }
    if let Some(ms) = args.header_timeout_ms {
        options = options.with_header_read_timeout(Duration::from_millis(ms));
    }
    if let Some(n) = args.max_connections {
        options = options.with_max_connections(n.get());
    }
    if let (Some((bind, credential)), Some(metrics)) = (admin, metrics) {
        serve_admin(bind, credential, &server, metrics).await?;
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

/// The admin router (its credential from `MCP_TASKS_ADMIN_TOKEN`) and the Prometheus page
/// (`/metrics`, no credential) on a listener of their own, apart from the MCP one, as the
/// operating guide recommends.
async fn serve_admin(
    bind: std::net::SocketAddr,
    credential: mcp_tasks::admin::AdminCredential,
    server: &TaskServer,
    metrics: mcp_tasks::metrics::PrometheusHandle,
) -> std::io::Result<()> {
    let app = mcp_tasks::admin::router(server.engine(), credential)
        .merge(mcp_tasks::metrics::prometheus_router(metrics));
    let listener = tokio::net::TcpListener::bind(bind).await?;
    eprintln!(
        "serving the admin view on http://{0}/admin and metrics on http://{0}/metrics",
        listener.local_addr()?
    );
    // With each client's address: the admin router throttles wrong credentials per address
    // and names it in its audit events.
    let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(())
}
