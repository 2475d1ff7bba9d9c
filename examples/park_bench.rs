//! Parked tasks, measured: `cargo run --release --example park_bench -- MEASURE [FLAGS]`.
//!
//! Every measure runs a real server in this process (an `Engine` on a SQLite file or a
//! Postgres schema, served over Streamable HTTP on 127.0.0.1) and drives it over the wire;
//! the tools record, in this process, when their work goes on. `scripts/bench_park.sh` runs
//! each measure parked and live, one after the other, and prints the ratios.
//!
//! - `memory --tasks N --park parked|live [--store sqlite|postgres]`: N tasks wait for an
//!   answer; the process's resident memory (VmRSS) before the first call and once all N wait
//!   (parked: every row parked and no work left in memory; live: every task
//!   `input_required`, its work in memory), per task.
//! - `wake --tasks N --park parked|live [--across]`: N tasks wait for an answer; each is
//!   answered (`tasks/update`) in turn, and the time from sending the answer to the tool's
//!   code running again is recorded: p50, p99, max. `--across` (Postgres): the tasks park on
//!   instance A, A stops, and B takes the answers.
//! - `timers --tasks N --spread-s S`: N tasks sleep durably (parked) until deadlines spread
//!   over S seconds that start once all are armed; how late each tool goes on: p50, p99, max.
//! - `million --tasks N`: N tasks parked on one SQLite file, written through the store, then
//!   a server starts on the file: its start-up time (open, recover, start) and VmRSS.
//! - `held --tasks N`: N calls of a tool with `concurrency = 1` whose first task never
//!   ends, on SQLite: the other N - 1 wait for the limit; heap and VmRSS per waiting task,
//!   and how many tasks have work in memory.

#[path = "../tests/common/mod.rs"]
mod common;

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, LazyLock, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use common::{Http, TASKS};
use mcp_tasks::{
    Engine, SqliteStore, TaskContext, TaskServer, TaskStore, ToolError,
    store::{NewTask, Transition, Wait},
    task_tool, toolkit,
};
use rmcp::model::{ElicitRequestParams, ElicitationSchema, InputRequest, Request};
use serde_json::{Value, json};

/// The heap bytes this process holds now: every allocation counted, so that what the
/// tasks keep is told apart from what the allocator keeps of freed memory (VmRSS).
struct Counting;

static HELD: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

// SAFETY: every call goes to the system allocator unchanged; the counter only adds.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        HELD.fetch_sub(layout.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        HELD.fetch_add(
            new as isize - layout.size() as isize,
            std::sync::atomic::Ordering::Relaxed,
        );
        // SAFETY: the caller's contract, passed on.
        unsafe { std::alloc::System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn heap() -> i64 {
    HELD.load(std::sync::atomic::Ordering::Relaxed) as i64
}

/// When each task's code went on after its wait (the answer, or the timer): a task id to
/// an instant, and the lateness of each timer.
static WENT_ON: LazyLock<Mutex<HashMap<String, Instant>>> = LazyLock::new(Default::default);
static LATE_MS: LazyLock<Mutex<Vec<f64>>> = LazyLock::new(Default::default);

fn went_on(ctx: &TaskContext) {
    if let Some(id) = ctx.task_id() {
        WENT_ON
            .lock()
            .unwrap()
            .insert(id.to_owned(), Instant::now());
    }
}

async fn ask(ctx: &TaskContext) -> Result<(), ToolError> {
    let schema = ElicitationSchema::builder()
        .required_string("name")
        .build()
        .map_err(|e| ToolError::new(e.to_string()))?;
    ctx.elicit_form("Your name?", schema).await?;
    went_on(ctx);
    Ok(())
}

/// Asks, parked after 50 ms of waiting.
#[task_tool(mode = "required", restart = "resume", park_after = "50ms", ttl = "2h")]
async fn ask_parked(ctx: TaskContext) -> Result<String, ToolError> {
    ask(&ctx).await?;
    Ok("answered".into())
}

/// Asks, never parked.
#[task_tool(
    mode = "required",
    restart = "resume",
    park_after = "never",
    ttl = "2h"
)]
async fn ask_live(ctx: TaskContext) -> Result<String, ToolError> {
    ask(&ctx).await?;
    Ok("answered".into())
}

/// Sleeps durably until `until_ms`, parked after 50 ms; records how late it went on.
#[task_tool(mode = "required", restart = "resume", park_after = "50ms", ttl = "2h")]
async fn nap_until(ctx: TaskContext, until_ms: u64) -> Result<String, ToolError> {
    ctx.sleep_until("nap", UNIX_EPOCH + Duration::from_millis(until_ms))
        .await?;
    let late = now_ms().saturating_sub(until_ms) as f64
        + f64::from(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .subsec_micros()
                % 1000,
        ) / 1000.0;
    LATE_MS.lock().unwrap().push(late);
    Ok("woke".into())
}

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// This process's resident memory, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn summary(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    format!(
        "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} samples)",
        percentile(&values, 50.0),
        percentile(&values, 99.0),
        values.last().copied().unwrap_or(f64::NAN),
        values.len()
    )
}

struct Args {
    measure: String,
    tasks: usize,
    parked: bool,
    postgres: bool,
    across: bool,
    spread_s: u64,
    /// `million`: start on the file an earlier run wrote, without writing it again.
    reuse: bool,
}

fn args() -> Args {
    let mut argv = std::env::args().skip(1);
    let measure = argv.next().unwrap_or_else(|| "memory".into());
    let mut args = Args {
        measure,
        tasks: 10_000,
        parked: true,
        postgres: false,
        across: false,
        spread_s: 60,
        reuse: false,
    };
    while let Some(flag) = argv.next() {
        let mut value = || argv.next().expect("a value after the flag");
        match flag.as_str() {
            "--tasks" => args.tasks = value().parse().expect("--tasks N"),
            "--park" => args.parked = value() == "parked",
            "--store" => args.postgres = value() == "postgres",
            "--across" => args.across = true,
            "--reuse" => args.reuse = true,
            "--spread-s" => args.spread_s = value().parse().expect("--spread-s S"),
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

fn db_file(name: &str) -> PathBuf {
    let dir = PathBuf::from("target/park-bench");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    path
}

/// Room for every task of the run under one owner.
fn limits() -> mcp_tasks::Limits {
    mcp_tasks::Limits::default().with_max_live_tasks_per_owner(2_000_000)
}

fn tools() -> mcp_tasks::Toolkit {
    toolkit![ask_parked, ask_live, nap_until, one_at_a_time].unwrap()
}

/// Exports page `n`, one at a time; never ends (the first holds the one place).
#[task_tool(mode = "required", concurrency = 1, restart = "resume", ttl = "2h")]
async fn one_at_a_time(n: u64) -> Result<u64, ToolError> {
    std::future::pending::<()>().await;
    Ok(n)
}

async fn held(args: &Args) {
    let engine = engine(args, "a").await;
    let http = Http::start(TaskServer::from_engine(engine.clone())).await;
    let (before, heap_before) = (rss(), heap());
    let started = Instant::now();
    create(
        &http.url,
        "one_at_a_time",
        args.tasks,
        |i| json!({ "n": i }),
    )
    .await;
    // Settled: the creates' writes are done.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let what = format!(
        "held: {} tasks of a tool with concurrency 1 in {:?}",
        args.tasks,
        started.elapsed()
    );
    report(&what, args.tasks, (before, heap_before), &engine);
}

/// Prints `what`, then the heap and VmRSS per task of `tasks` since `at_start` (VmRSS, heap)
/// and how many tasks have work in memory.
fn report(what: &str, tasks: usize, at_start: (u64, i64), engine: &Engine) {
    let (before, heap_before) = at_start;
    let (after, heap_after) = (rss(), heap());
    println!(
        "{what}; heap {heap_before} -> {heap_after} bytes: {:.0} bytes a task; RSS {before} -> \
         {after} bytes: {:.0} bytes a task; work in memory: {} tasks",
        (heap_after - heap_before) as f64 / tasks as f64,
        (after.saturating_sub(before)) as f64 / tasks as f64,
        engine.running_tasks()
    );
}

/// A Postgres store on a fresh schema of `MCP_TASKS_BENCH_PG` (default: the local test
/// database), and the schema's name.
async fn postgres(schema: &str) -> mcp_tasks::PostgresStore {
    let url = std::env::var("MCP_TASKS_BENCH_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect to Postgres");
    tokio::spawn(connection);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    mcp_tasks::PostgresStore::builder(&url)
        .with_schema(schema)
        .connect()
        .await
        .expect("the Postgres store")
}

async fn engine(args: &Args, instance: &str) -> Engine {
    let builder = Engine::builder(tools())
        .with_instance_id(instance)
        .with_limits(limits());
    let engine = if args.postgres {
        builder
            .with_store(postgres("park_bench").await)
            .with_cluster(mcp_tasks::ClusterConfig::default())
            .build()
    } else {
        builder
            .with_store(SqliteStore::open(db_file("park.db")).expect("open"))
            .build()
    };
    engine.start().expect("start");
    engine
}

/// One HTTP client for every call (its keep-alive connections reused).
fn client() -> reqwest::Client {
    static CLIENT: LazyLock<reqwest::Client> = LazyLock::new(reqwest::Client::new);
    CLIENT.clone()
}

/// Creates `n` tasks of `tool`, 32 calls at a time; their ids.
async fn create(
    url: &str,
    tool: &str,
    n: usize,
    arguments: impl Fn(usize) -> Value,
) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    let mut next = 0;
    while next < n {
        let batch: Vec<_> = (next..n.min(next + 32))
            .map(|i| {
                let url = url.to_owned();
                let arguments = arguments(i);
                let tool = tool.to_owned();
                tokio::spawn(async move {
                    let mut http = Http {
                        url,
                        client: client(),
                        extra: Vec::new(),
                        next_id: 0,
                    };
                    http.call_task(&tool, arguments).await
                })
            })
            .collect();
        for call in batch {
            ids.push(call.await.unwrap());
        }
        next = n.min(next + 32);
    }
    ids
}

async fn until(what: &str, bound: Duration, mut done: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !done().await {
        assert!(started.elapsed() < bound, "{what}: not within {bound:?}");
        // A count of every task is a scan: not too often.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// How many parked tasks the store holds (the admin filter).
async fn parked(engine: &Engine) -> usize {
    let admin = engine.store().admin().expect("an admin store");
    let filter = mcp_tasks::store::admin::TaskFilter::new().parked_only();
    admin
        .count(&filter)
        .await
        .expect("count the parked tasks")
        .total() as usize
}

async fn input_required(engine: &Engine) -> usize {
    let admin = engine.store().admin().expect("an admin store");
    let filter = mcp_tasks::store::admin::TaskFilter::new()
        .with_status(rmcp::model::TaskStatus::InputRequired);
    admin.count(&filter).await.expect("count").total() as usize
}

async fn memory(args: &Args) {
    let engine = engine(args, "a").await;
    let http = Http::start(TaskServer::from_engine(engine.clone())).await;
    let (before, heap_before) = (rss(), heap());
    let tool = if args.parked {
        "ask_parked"
    } else {
        "ask_live"
    };
    let started = Instant::now();
    create(&http.url, tool, args.tasks, |_| json!({})).await;
    let bound = Duration::from_secs(600);
    until("every task waits", bound, async || {
        input_required(&engine).await == args.tasks
    })
    .await;
    if args.parked {
        until("every task parked", bound, async || {
            parked(&engine).await == args.tasks && engine.running_tasks() == 0
        })
        .await;
    }
    // Settled: the last parks' writes and the work they dropped are gone.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let what = format!(
        "memory {} {}: {} tasks waiting for an answer in {:?}",
        if args.postgres { "postgres" } else { "sqlite" },
        if args.parked { "parked" } else { "live" },
        args.tasks,
        started.elapsed()
    );
    report(&what, args.tasks, (before, heap_before), &engine);
}

async fn answer(http: &mut Http, id: &str) -> Instant {
    let task = http
        .rpc("tasks/get", json!({ "taskId": id }), TASKS)
        .await
        .1;
    let key = common::first_input_key(&task["result"]);
    let sent = Instant::now();
    let (status, updated) = http
        .rpc(
            "tasks/update",
            json!({ "taskId": id, "inputResponses": {
                key: { "action": "accept", "content": { "name": "ada" } } } }),
            TASKS,
        )
        .await;
    assert_eq!(status, 200, "{updated}");
    sent
}

async fn wake(args: &Args) {
    let a = engine(args, "a").await;
    let on_a = Http::start(TaskServer::from_engine(a.clone())).await;
    let tool = if args.parked {
        "ask_parked"
    } else {
        "ask_live"
    };
    let ids = create(&on_a.url, tool, args.tasks, |_| json!({})).await;
    let bound = Duration::from_secs(600);
    until("every task waits", bound, async || {
        input_required(&a).await == args.tasks
    })
    .await;
    if args.parked {
        until("every task parked", bound, async || {
            parked(&a).await == args.tasks && a.running_tasks() == 0
        })
        .await;
    }
    let (engine, mut http) = if args.across {
        // A stops; B (same schema) takes the answers, and the tasks run where claimed.
        a.shutdown(Duration::from_secs(1)).await;
        let b = Engine::builder(tools())
            .with_limits(limits())
            .with_store(postgres_existing("park_bench").await)
            .with_instance_id("b")
            .with_cluster(mcp_tasks::ClusterConfig::default())
            .build();
        b.start().expect("start b");
        let http = Http::start(TaskServer::from_engine(b.clone())).await;
        (b, http)
    } else {
        (a, on_a)
    };
    let mut latencies = Vec::with_capacity(ids.len());
    for id in &ids {
        let sent = answer(&mut http, id).await;
        let mut spins = 0u64;
        let ran = loop {
            if let Some(ran) = WENT_ON.lock().unwrap().get(id) {
                break *ran;
            }
            spins += 1;
            assert!(spins < 10_000_000, "task {id} never went on");
            tokio::task::yield_now().await;
        };
        latencies.push(ran.duration_since(sent).as_secs_f64() * 1000.0);
    }
    println!(
        "wake {} {}{}: answer to the tool's code running again: {}",
        if args.postgres { "postgres" } else { "sqlite" },
        if args.parked { "parked" } else { "live" },
        if args.across { " across instances" } else { "" },
        summary(latencies)
    );
    engine.shutdown(Duration::from_secs(1)).await;
}

async fn postgres_existing(schema: &str) -> mcp_tasks::PostgresStore {
    let url = std::env::var("MCP_TASKS_BENCH_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    mcp_tasks::PostgresStore::builder(&url)
        .with_schema(schema)
        .connect()
        .await
        .expect("the Postgres store")
}

async fn timers(args: &Args) {
    let engine = engine(args, "a").await;
    let http = Http::start(TaskServer::from_engine(engine.clone())).await;
    // Deadlines start once every timer can be armed (a generous bound on the creates).
    let first = now_ms() + 20_000 + (args.tasks as u64) / 2;
    let spread = args.spread_s * 1000;
    let n = args.tasks as u64;
    let started = Instant::now();
    create(
        &http.url,
        "nap_until",
        args.tasks,
        |i| json!({ "until_ms": first + (i as u64 * spread) / n.max(1) }),
    )
    .await;
    let armed = started.elapsed();
    let bound = Duration::from_millis(first - now_ms()) + Duration::from_secs(args.spread_s + 600);
    until("every timer armed and parked", bound, async || {
        parked(&engine).await == args.tasks && engine.running_tasks() == 0
    })
    .await;
    let armed_rss = rss();
    assert!(
        now_ms() < first,
        "the timers were armed after the first deadline: raise the margin"
    );
    until("every timer went off", bound, async || {
        LATE_MS.lock().unwrap().len() == args.tasks
    })
    .await;
    let late = LATE_MS.lock().unwrap().clone();
    println!(
        "timers sqlite: {} timers armed (created in {armed:?}, RSS {} bytes), deadlines over {} \
         s; lateness {}",
        args.tasks,
        armed_rss,
        args.spread_s,
        summary(late)
    );
    engine.shutdown(Duration::from_secs(1)).await;
}

async fn million(args: &Args) {
    let path = if args.reuse {
        PathBuf::from("target/park-bench/million.db")
    } else {
        db_file("million.db")
    };
    if !args.reuse {
        let store = Arc::new(SqliteStore::open(&path).expect("open"));
        let started = Instant::now();
        let mut next = 0;
        while next < args.tasks {
            let batch: Vec<_> = (next..args.tasks.min(next + 512))
                .map(|i| {
                    let store = Arc::clone(&store);
                    tokio::spawn(async move {
                        let id: Arc<str> = Arc::from(format!("parked-{i:08}"));
                        let task = NewTask::new(
                            Arc::clone(&id),
                            Arc::from("anonymous"),
                            Arc::from("ask_parked"),
                        )
                        .with_ttl(Some(Duration::from_secs(7200)));
                        store.create(task).await.unwrap();
                        let request = InputRequest::Elicitation(Request::new(
                            ElicitRequestParams::FormElicitationParams {
                                meta: None,
                                message: "Your name?".into(),
                                requested_schema: ElicitationSchema::builder()
                                    .required_string("name")
                                    .build()
                                    .unwrap(),
                            },
                        ));
                        let key = "elicit-1".to_owned();
                        store
                            .apply(
                                &id,
                                None,
                                Transition::RequestInput {
                                    key: key.clone(),
                                    request,
                                    at_step: 0,
                                },
                            )
                            .await
                            .unwrap();
                        store
                            .apply(&id, None, Transition::Park(Wait::answer(key)))
                            .await
                            .unwrap();
                    })
                })
                .collect();
            for task in batch {
                task.await.unwrap();
            }
            next = args.tasks.min(next + 512);
        }
        println!(
            "million: {} parked tasks written in {:?}",
            args.tasks,
            started.elapsed()
        );
    }
    // The writer's threads exit with the store; a moment for them to go.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = rss();
    let started = Instant::now();
    let engine = Engine::builder(tools())
        .with_limits(limits())
        .with_store(SqliteStore::open(&path).expect("reopen"))
        .build();
    let report = engine.recover().await.expect("recover");
    engine.start().expect("start");
    let took = started.elapsed();
    let http = Http::start(TaskServer::from_engine(engine.clone())).await;
    let mut http = http;
    let got = http
        .rpc("tasks/get", json!({ "taskId": "parked-00000000" }), TASKS)
        .await
        .1;
    assert_eq!(got["result"]["status"], "input_required", "{got}");
    println!(
        "million: start-up on {} parked tasks: {took:?} (recovered {}), RSS {} -> {} bytes ({:.1} \
         bytes a parked task)",
        args.tasks,
        report.resumed,
        before,
        rss(),
        rss().saturating_sub(before) as f64 / args.tasks as f64
    );
    engine.shutdown(Duration::from_secs(1)).await;
}

#[tokio::main]
async fn main() {
    let args = args();
    match args.measure.as_str() {
        "memory" => memory(&args).await,
        "wake" => wake(&args).await,
        "timers" => timers(&args).await,
        "million" => million(&args).await,
        "held" => held(&args).await,
        other => panic!("unknown measure {other}: memory, wake, timers, million or held"),
    }
}
