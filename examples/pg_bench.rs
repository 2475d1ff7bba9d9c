//! Durable creates per second on Postgres, measured:
//! `cargo run --release --example pg_bench [-- URL] [--callers N]... [--seconds N]`.
//!
//! Side by side, in one run, on the server at URL (default `MCP_TASKS_POSTGRES_URL`, else
//! `postgres://postgres@127.0.0.1:5432/test`), with 1, 16 and 64 concurrent callers:
//! - the baseline: one `INSERT` per transaction (autocommit) of the same row into the same
//!   table (`PostgresStore`'s schema, its indexes included), one statement at a time per
//!   connection: (a) the callers taking turns on one connection (one commit per create, the
//!   SQLite benchmark's baseline), (b) the callers sharing as many connections as the store's
//!   pool has (the server then flushes concurrent commits together);
//! - `PostgresStore::create` (creates queued at the same moment share one multi-row insert
//!   and one commit) of tasks left for workers (each batch also sends one notification).
//!   Tasks that the creating instance runs itself are created by the runtime only; the
//!   store's API for them is internal to the crate.
//!
//! Every create is durable under the server's `synchronous_commit` (printed). Each
//! measurement starts after a warm-up and lasts `--seconds` (default 3). The schemas it
//! makes (`bench_*`) are dropped at the end.

mod ids;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use mcp_tasks::{PostgresStore, TaskStore, store::NewTask};
use tokio::sync::Mutex;
use tokio_postgres::NoTls;

const CALLERS: [usize; 3] = [1, 16, 64];
const POOL: usize = 8;
const WARMUP: Duration = Duration::from_millis(500);

#[derive(Default)]
struct Meter {
    done: AtomicU64,
    stop: AtomicBool,
}

impl Meter {
    async fn measure(&self, run: Duration) -> f64 {
        tokio::time::sleep(WARMUP).await;
        let (from, base) = (Instant::now(), self.done.load(Ordering::Relaxed));
        tokio::time::sleep(run).await;
        let (to, end) = (Instant::now(), self.done.load(Ordering::Relaxed));
        self.stop.store(true, Ordering::Relaxed);
        (end - base) as f64 / (to - from).as_secs_f64()
    }
}

/// A task as the runtime records it for a worker to claim.
fn new_task() -> NewTask {
    NewTask::new(
        Arc::from(ids::task_id()),
        Arc::from("bench"),
        Arc::from("noop_task"),
    )
    .with_ttl(Some(Duration::from_secs(3600)))
    .with_poll_interval(Duration::from_secs(1))
}

/// The baseline's statement: the row `PostgresStore` writes for a new task, one per
/// transaction.
const INSERT: &str = "INSERT INTO tasks (id, owner, tool, tool_version, status, status_message, \
    created_at_ms, last_updated_at_ms, ttl_ms, poll_interval_ms, arguments, request_meta, \
    input_requests, used_keys, answers, answer_seq, outcome, cancel_requested, deadline_ms, \
    purge_at_ms, runner, epoch, lease_until_ms, idempotency_key) VALUES ($1, 'bench', \
    'noop_task', '', 'working', NULL, $2, $2, 3600000, 1000, '{}', '{}', '{}', '[]', '{}', 0, \
    NULL, FALSE, $3, NULL, NULL, 0, NULL, NULL)";

async fn baseline(url: &str, schema: &str, callers: usize, pool: usize, run: Duration) -> f64 {
    let mut connections = Vec::new();
    for _ in 0..callers.min(pool) {
        let (client, connection) = tokio_postgres::connect(url, NoTls)
            .await
            .expect("connect for the baseline");
        tokio::spawn(connection);
        client
            .batch_execute(&format!("SET search_path = \"{schema}\""))
            .await
            .unwrap();
        let insert = client.prepare(INSERT).await.unwrap();
        connections.push(Arc::new(Mutex::new((client, insert))));
    }
    let meter = Arc::new(Meter::default());
    let workers: Vec<_> = (0..callers)
        .map(|i| {
            let (conn, meter) = (
                Arc::clone(&connections[i % connections.len()]),
                Arc::clone(&meter),
            );
            tokio::spawn(async move {
                while !meter.stop.load(Ordering::Relaxed) {
                    let now = i64::try_from(
                        std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .unwrap()
                            .as_millis(),
                    )
                    .unwrap();
                    let id = ids::task_id();
                    let guard = conn.lock().await;
                    guard
                        .0
                        .execute(&guard.1, &[&id, &now, &(now + 3_600_000)])
                        .await
                        .expect("baseline insert");
                    drop(guard);
                    meter.done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let rate = meter.measure(run).await;
    futures::future::join_all(workers).await;
    rate
}

async fn store_creates(store: Arc<PostgresStore>, callers: usize, run: Duration) -> f64 {
    let meter = Arc::new(Meter::default());
    let workers: Vec<_> = (0..callers)
        .map(|_| {
            let (store, meter) = (Arc::clone(&store), Arc::clone(&meter));
            tokio::spawn(async move {
                while !meter.stop.load(Ordering::Relaxed) {
                    store.create(new_task()).await.expect("create");
                    meter.done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let rate = meter.measure(run).await;
    futures::future::join_all(workers).await;
    rate
}

async fn drop_schema(url: &str, schema: &str) {
    if let Ok((client, connection)) = tokio_postgres::connect(url, NoTls).await {
        tokio::spawn(connection);
        let _ = client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
            .await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    // Print the error's message: a `main` that returns it would print its Debug form.
    if let Err(error) = run().await {
        eprintln!("error: {error}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut url = std::env::var("MCP_TASKS_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let mut callers_list = Vec::new();
    let mut run = Duration::from_secs(3);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--callers" => callers_list.push(
                args.next()
                    .and_then(|n| n.parse().ok())
                    .ok_or("--callers takes a number")?,
            ),
            "--seconds" => {
                run = Duration::from_secs(
                    args.next()
                        .and_then(|n| n.parse().ok())
                        .ok_or("--seconds takes a number")?,
                );
            }
            _ => url = arg,
        }
    }
    if callers_list.is_empty() {
        callers_list = CALLERS.to_vec();
    }
    let (probe, connection) = tokio_postgres::connect(&url, NoTls).await?;
    tokio::spawn(connection);
    let sync: String = probe
        .query_one("SHOW synchronous_commit", &[])
        .await?
        .get(0);
    let version: String = probe.query_one("SHOW server_version", &[]).await?.get(0);
    println!(
        "pg_bench: Postgres {version}, synchronous_commit = {sync}, {} s per measurement, pool \
         {POOL}, queued tasks",
        run.as_secs(),
    );
    println!();
    println!(
        "| callers | (a) one INSERT per transaction, 1 connection | (b) the same, {POOL} connections | PostgresStore::create ({POOL} connections) | store / (a) | store / (b) |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    let pid = std::process::id();
    for callers in callers_list {
        let base_schema = format!("bench_base_{pid}_{callers}");
        let store_schema = format!("bench_store_{pid}_{callers}");
        // The baseline writes into a store's schema too: the same table, the same indexes.
        let schema_of_base = PostgresStore::builder(url.clone())
            .with_schema(base_schema.clone())
            .with_pool_size(1)
            .connect()
            .await?;
        drop(schema_of_base);
        let one = baseline(&url, &base_schema, callers, 1, run).await;
        let pooled = baseline(&url, &base_schema, callers, POOL, run).await;
        let store = Arc::new(
            PostgresStore::builder(url.clone())
                .with_schema(store_schema.clone())
                .with_pool_size(POOL)
                .connect()
                .await?,
        );
        let creates = store_creates(Arc::clone(&store), callers, run).await;
        drop(store);
        println!(
            "| {callers} | {one:.0}/s | {pooled:.0}/s | {creates:.0}/s | {:.1}× | {:.1}× |",
            creates / one,
            creates / pooled
        );
        drop_schema(&url, &base_schema).await;
        drop_schema(&url, &store_schema).await;
    }
    Ok(())
}
