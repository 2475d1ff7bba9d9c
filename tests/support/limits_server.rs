//! One instance of a Postgres cluster for the tests of shared limits as separate processes
//! (`tests/limits_processes.rs`, `CARGO_BIN_EXE_mcp-tasks-limits-server`): tools under a
//! concurrency limit, a rate limit and a per-key limit, and a plain one for the claim order,
//! each writing its starts and ends to this process's journal with the wall-clock time in
//! microseconds (one line each: `<micros> <event> <detail>`). Prints `serving MCP on <url>`
//! on stderr once it serves.
//!
//! Flags: `--db URL --schema NAME --instance ID --journal PATH` and optionally
//! `--max-running N`, `--claim-ms MS`, `--front` (records calls queued and runs nothing),
//! `--priorities` (Bob's calls at priority 5; claims by priority). Bearer tokens `TOKEN_A`
//! (owner `alice`) and `TOKEN_B` (`bob`) are accepted; a call without one is the default
//! owner.

use std::{
    io::Write,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use mcp_tasks::{
    ClusterConfig, Engine, HttpOptions, PostgresStore, PriorityInput, State, StaticTokens,
    TaskServer, ToolError, task_tool, toolkit,
};

/// This process's journal.
#[derive(Clone)]
struct Journal(Arc<Mutex<std::fs::File>>);

impl Journal {
    fn note(&self, event: &str, detail: &str) {
        let micros = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_micros();
        // One write of the whole line: a reader never sees half of one.
        let line = format!("{micros} {event} {detail}\n");
        let mut file = self.0.lock().expect("journal");
        file.write_all(line.as_bytes()).expect("journal write");
    }
}

/// Notes its start, then works for a while (the claim order's test).
#[task_tool(mode = "required", poll_interval = "50ms")]
async fn job(who: String, State(journal): State<Journal>) -> Result<String, ToolError> {
    journal.note("job", &who);
    tokio::time::sleep(Duration::from_millis(400)).await;
    Ok(who)
}

/// At most 3 at once across the cluster.
#[task_tool(mode = "required", concurrency = 3, poll_interval = "50ms")]
async fn export(State(journal): State<Journal>) -> Result<String, ToolError> {
    journal.note("export-start", "-");
    tokio::time::sleep(Duration::from_millis(80)).await;
    journal.note("export-end", "-");
    Ok("exported".to_owned())
}

/// At most 10 starts in any minute across the cluster.
#[task_tool(mode = "required", rate = "10/1m", poll_interval = "1s")]
async fn partner(State(journal): State<Journal>) -> Result<String, ToolError> {
    journal.note("partner", "-");
    Ok("sent".to_owned())
}

/// One at a time for each workspace across the cluster.
#[task_tool(
    mode = "required",
    key_concurrency = 1,
    limit_key = "workspace",
    poll_interval = "50ms"
)]
async fn sync(State(journal): State<Journal>, workspace: String) -> Result<String, ToolError> {
    journal.note("sync-start", &workspace);
    tokio::time::sleep(Duration::from_millis(100)).await;
    journal.note("sync-end", &workspace);
    Ok(workspace)
}

/// The flags.
struct Args {
    db: String,
    schema: String,
    instance: String,
    journal: String,
    max_running: Option<usize>,
    claim_ms: u64,
    front: bool,
    priorities: bool,
}

fn args() -> Result<Args, String> {
    let mut args = Args {
        db: String::new(),
        schema: String::new(),
        instance: String::new(),
        journal: String::new(),
        max_running: None,
        claim_ms: 50,
        front: false,
        priorities: false,
    };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let mut value = || given.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--db" => args.db = value()?,
            "--schema" => args.schema = value()?,
            "--instance" => args.instance = value()?,
            "--journal" => args.journal = value()?,
            "--max-running" => {
                args.max_running = Some(value()?.parse().map_err(|e| format!("{flag}: {e}"))?);
            }
            "--claim-ms" => args.claim_ms = value()?.parse().map_err(|e| format!("{flag}: {e}"))?,
            "--front" => args.front = true,
            "--priorities" => args.priorities = true,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if args.db.is_empty() || args.schema.is_empty() || args.instance.is_empty() {
        return Err("--db, --schema and --instance are required".to_owned());
    }
    if args.journal.is_empty() {
        return Err("--journal is required".to_owned());
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let args = args()?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.journal)
        .map_err(|e| format!("{}: {e}", args.journal))?;
    let journal = Journal(Arc::new(Mutex::new(file)));
    let store = PostgresStore::builder(args.db)
        .with_schema(args.schema)
        .connect()
        .await
        .map_err(|e| e.to_string())?;
    let mut config = ClusterConfig::default()
        .with_claim_interval(Duration::from_millis(args.claim_ms))
        .with_queued_calls(args.front)
        .with_execution(!args.front);
    if args.priorities {
        config = config.with_priorities(Duration::from_secs(3600));
    }
    let tools = toolkit![job, export, partner, sync]
        .map_err(|e| e.to_string())?
        .with_state(journal);
    let mut builder = Engine::builder(tools)
        .with_store(store)
        .with_instance_id(args.instance)
        .with_cluster(config);
    if let Some(max) = args.max_running {
        builder = builder.with_max_running(max);
    }
    if args.priorities {
        builder = builder.with_priority(
            |call: &PriorityInput<'_>| {
                if call.owner == "bob" { 5 } else { 0 }
            },
        );
    }
    let engine = builder.build();
    engine.recover().await.map_err(|e| e.to_string())?;
    let tokens = StaticTokens::parse("alice:TOKEN_A,bob:TOKEN_B").map_err(|e| e.to_string())?;
    let router = mcp_tasks::http_router(
        TaskServer::from_engine(engine),
        HttpOptions::new().with_static_tokens(tokens),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let url = format!(
        "http://{}/mcp",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    eprintln!("serving MCP on {url}");
    axum::serve(listener, router)
        .await
        .map_err(|e| e.to_string())
}
