//! mcp-tasks serving `noop_task(sleep_ms)`, written with `#[task_tool]` and `toolkit!`, on
//! `mcp_tasks::serve_http` (which sets `TCP_NODELAY`).
//!
//! `bench-ours --port 8101 [--store memory|sqlite|postgres] [--owner-per-token 1]
//! [--metrics off|prometheus]`
//!
//! - `--owner-per-token`: every bearer token is accepted and names its own owner (the push
//!   benchmark spreads its listen streams over owners: one owner may hold 64 open).
//! - `--metrics prometheus`: the crate's metrics recorded into a Prometheus recorder
//!   (`mcp_tasks::metrics::install_prometheus`), rendered every 5 s as a scraper would; the
//!   default `off` installs no recorder (every recording is a no-op).
//!
//! - `sqlite`: a fresh file in the temp folder.
//! - `postgres` (`--pg-pool N`: the pool size, default the store's): one instance of a cluster (leases, renewals, claims: what
//!   `examples/server_http --store postgres://...` runs) on the server at
//!   `MCP_TASKS_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`), schema
//!   `bench_ours_<port>`, which `scripts/bench.sh` drops before each run. (A runtime on a
//!   store that is a `ClusterStore` always runs as a cluster instance.)

use std::time::Duration;

use mcp_tasks::{
    ClusterConfig, Engine, HttpOptions, Limits, Owner, PostgresStore, TaskContext, TaskServer,
    task_tool, toolkit,
};
use mcp_tasks_bench::{Args, listen};
use rmcp::model::{CallToolResult, ContentBlock};

/// Does nothing; first sleeps `sleep_ms` milliseconds when that is above zero.
#[task_tool(ttl = "1h", poll_interval = "1s")]
async fn noop_task(#[arg(default)] sleep_ms: u64) -> CallToolResult {
    if sleep_ms > 0 {
        tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
    }
    CallToolResult::success(vec![ContentBlock::text("done")])
}

/// Sleeps `offset_ms`, then `ticks` times: sleeps `every_ms` and sets its status message to
/// the wall clock in nanoseconds since the Unix epoch, taken just before the change (the
/// push benchmark's latency is the time from that to the notification at the client).
#[task_tool(ttl = "1h", poll_interval = "1s")]
async fn ticker_task(
    ctx: TaskContext,
    offset_ms: u64,
    ticks: u32,
    every_ms: u64,
) -> CallToolResult {
    tokio::time::sleep(Duration::from_millis(offset_ms)).await;
    for _ in 0..ticks {
        tokio::time::sleep(Duration::from_millis(every_ms)).await;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        ctx.status(now.as_nanos().to_string()).await;
    }
    CallToolResult::success(vec![ContentBlock::text("done")])
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse()?;
    args.only(&[
        "port",
        "store",
        "pg-pool",
        "owner-per-token",
        "metrics",
        "keep-finished",
    ])?;
    let port: u16 = args.parsed("port", 8101)?;
    match args.get("metrics").unwrap_or("off") {
        "off" => {}
        "prometheus" => {
            let handle = mcp_tasks::metrics::install_prometheus().map_err(std::io::Error::other)?;
            tokio::spawn(async move {
                let mut every = tokio::time::interval(Duration::from_secs(5));
                loop {
                    every.tick().await;
                    std::hint::black_box(handle.render());
                }
            });
        }
        other => {
            return Err(std::io::Error::other(format!(
                "--metrics {other}: expected off or prometheus"
            )));
        }
    }
    let toolkit =
        toolkit![noop_task, ticker_task].map_err(|e| std::io::Error::other(e.to_string()))?;
    let info = rmcp::model::Implementation::new("mcp-tasks-bench", env!("CARGO_PKG_VERSION"));
    // `--keep-finished N`: the finished tasks one owner keeps (the library's bound by
    // default); a bound no run reaches keeps every task for its TTL, as builds before the
    // bound did, so an A/B against one of them compares the same retention.
    let keep_finished = args.parsed(
        "keep-finished",
        Limits::DEFAULT_MAX_FINISHED_TASKS_PER_OWNER,
    )?;
    let builder = Engine::builder(toolkit)
        .with_server_info(info)
        .with_limits(Limits::default().with_max_finished_tasks_per_owner(keep_finished));
    let engine = match args.get("store").unwrap_or("memory") {
        "memory" => builder.build(),
        "sqlite" => {
            // A fresh file per server run, removed with its WAL when the run starts again.
            let path = std::env::temp_dir().join(format!("mcp-tasks-bench-{port}.db"));
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            let store = mcp_tasks::SqliteStore::open(&path).map_err(std::io::Error::other)?;
            builder.with_store(store).build()
        }
        "postgres" => {
            let url = std::env::var("MCP_TASKS_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
            let pool = args.parsed("pg-pool", mcp_tasks::store::postgres::DEFAULT_POOL_SIZE)?;
            let pg = PostgresStore::builder(url)
                .with_schema(format!("bench_ours_{port}"))
                .with_pool_size(pool)
                .connect()
                .await
                .map_err(|e| std::io::Error::other(format!("{e}: {e:?}")))?;
            builder
                .with_store(pg)
                .with_cluster(ClusterConfig::default())
                .build()
        }
        other => {
            return Err(std::io::Error::other(format!(
                "--store {other}: expected memory, sqlite or postgres"
            )));
        }
    };
    let server = TaskServer::from_engine(engine);
    let listener = listen(port, "mcp-tasks").await?;
    let mut options = HttpOptions::new();
    if args.get("owner-per-token").is_some() {
        options = options.with_bearer(|token: String| async move { Ok(Owner::new(token)) });
    }
    mcp_tasks::serve_http(listener, server, options).await
}
