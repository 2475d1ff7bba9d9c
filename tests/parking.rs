//! Parked tasks: a task that waits past its tool's `park_after` gives its process back its
//! work, and only its row waits; an answer, its timer, a cancel or its expiry wakes (or
//! ends) it, and it goes on by replay. Real SQLite files, a real restart (a server process
//! of this test binary killed with SIGKILL, and another started on the file), a real
//! Postgres for the cluster case.

mod common;
#[path = "support/postgres.rs"]
mod pg;
#[path = "support/temp_db.rs"]
mod temp_db;

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use common::{Http, Patience, Peer, TASKS, first_input_key, process::Process};
use mcp_tasks::{
    Engine, SqliteStore, State, TaskContext, TaskServer, ToolError, task_tool, toolkit,
};
use serde_json::{Value, json};
use temp_db::TempDb;

/// How many times each (task, step) ran in this test process: a replay must run none twice.
static RUNS: std::sync::LazyLock<Mutex<HashMap<(String, &'static str), u32>>> =
    std::sync::LazyLock::new(Default::default);

/// Notes a run of `step` of the task; answers how many times it ran, this one included (in
/// every server process, for a server process of this binary).
fn ran(ctx: &TaskContext, step: &'static str) -> u32 {
    let id = ctx.task_id().unwrap_or("inline").to_owned();
    // A server process of `parked_tasks_survive_kill_9` also appends `<task id> <step>` to
    // its journal, one write a line, for the test process (and the next server) to count.
    if let Ok(journal) = std::env::var(CHILD_JOURNAL) {
        use std::io::Write as _;
        let line = format!("{id} {step}");
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&journal)
            .expect("open the journal");
        file.write_all(format!("{line}\n").as_bytes())
            .expect("append to the journal");
        let all = std::fs::read_to_string(&journal).expect("read the journal");
        return u32::try_from(all.lines().filter(|l| *l == line).count()).unwrap();
    }
    let mut runs = RUNS.lock().unwrap();
    let count = runs.entry((id, step)).or_default();
    *count += 1;
    *count
}

/// The environment of a server process this test binary runs ([`child_server`]).
const CHILD_DB: &str = "MCP_TASKS_PARKING_CHILD_DB";
const CHILD_JOURNAL: &str = "MCP_TASKS_PARKING_CHILD_JOURNAL";

fn runs(id: &str, step: &'static str) -> u32 {
    RUNS.lock()
        .unwrap()
        .get(&(id.to_owned(), step))
        .copied()
        .unwrap_or(0)
}

/// Where a tool runs (one per engine).
#[derive(Clone)]
struct Here(&'static str);

/// A step, a question, a step: parked while the question waits.
#[task_tool(
    mode = "required",
    restart = "resume",
    park_after = "200ms",
    ttl = "10m",
    poll_interval = "50ms"
)]
async fn approve(ctx: TaskContext, State(here): State<Here>, n: u32) -> Result<String, ToolError> {
    let step_ctx = ctx.clone();
    ctx.step("prepare", || async move { ran(&step_ctx, "prepare") })
        .await?;
    let name = common::ask_name(&ctx).await?;
    let step_ctx = ctx.clone();
    ctx.step("apply", || async move { ran(&step_ctx, "apply") })
        .await?;
    Ok(format!("{n} approved by {name} on {}", here.0))
}

/// Sleeps `ms` durably, parked after 200 ms; expires after its `ttl`.
#[task_tool(
    mode = "required",
    restart = "resume",
    park_after = "200ms",
    ttl = "3s",
    poll_interval = "50ms"
)]
async fn nap(ctx: TaskContext, ms: u64) -> Result<String, ToolError> {
    napping(ctx, ms).await
}

/// [`nap`] with a TTL of a minute.
#[task_tool(
    mode = "required",
    restart = "resume",
    park_after = "200ms",
    ttl = "1m",
    poll_interval = "50ms"
)]
async fn long_nap(ctx: TaskContext, ms: u64) -> Result<String, ToolError> {
    napping(ctx, ms).await
}

async fn napping(ctx: TaskContext, ms: u64) -> Result<String, ToolError> {
    ctx.status("napping").await;
    ctx.sleep("nap", Duration::from_millis(ms)).await?;
    let step_ctx = ctx.clone();
    ctx.step("woke", || async move { ran(&step_ctx, "woke") })
        .await?;
    Ok(format!("slept {ms} ms"))
}

/// A step that always fails, retried 3 times in all, 4 s apart: parked while it waits.
#[task_tool(
    mode = "required",
    restart = "resume",
    park_after = "200ms",
    ttl = "1m",
    poll_interval = "50ms"
)]
async fn flaky(ctx: TaskContext) -> Result<String, ToolError> {
    let policy = mcp_tasks::RetryPolicy::attempts(3)
        .with_backoff(Duration::from_secs(4), 1.0, Duration::from_secs(4))
        .with_jitter(0.0);
    let step_ctx = ctx.clone();
    let value: u32 = ctx
        .retry_step(
            "fetch",
            &policy,
            |_| true,
            move || {
                let step_ctx = step_ctx.clone();
                async move {
                    let tries = ran(&step_ctx, "try");
                    Err::<u32, _>(format!("upstream said no (try {tries})"))
                }
            },
        )
        .await?;
    Ok(value.to_string())
}

fn tools(here: &'static str) -> mcp_tasks::Toolkit {
    toolkit![approve, nap, long_nap, flaky]
        .unwrap()
        .with_state(Here(here))
}

/// A SQLite file of one test ([`TempDb`]), with what the tests read of it.
struct Db(TempDb);

impl Db {
    fn new(name: &str) -> Self {
        Self(TempDb::new(&format!("parking-{name}")))
    }

    fn path(&self) -> &std::path::Path {
        &self.0.0
    }

    fn engine(&self) -> Engine {
        Engine::builder(tools("sqlite"))
            .with_store(SqliteStore::open(self.path()).expect("open the database"))
            .build()
    }

    fn parked(&self) -> i64 {
        parked_in(self.path())
    }
}

/// How many live tasks the file holds parked (read by a connection of the test's own).
fn parked_in(path: &std::path::Path) -> i64 {
    let conn = rusqlite::Connection::open(path).expect("open the file");
    conn.query_row(
        "SELECT count(*) FROM tasks WHERE parked_until_ms IS NOT NULL",
        [],
        |r| r.get(0),
    )
    .expect("count the parked tasks")
}

/// How many tasks the file holds completed (read by a connection of the test's own).
fn completed_in(path: &std::path::Path) -> i64 {
    let conn = rusqlite::Connection::open(path).expect("open the file");
    conn.query_row(
        "SELECT count(*) FROM tasks WHERE status = 'completed'",
        [],
        |r| r.get(0),
    )
    .expect("count the completed tasks")
}

/// Answers the question `key` of task `id` with the name `name`; the update is accepted.
async fn answer(peer: &mut Peer, id: &str, key: &str, name: &str) {
    let answer = json!({ "action": "accept", "content": { "name": name } });
    let updated = peer
        .rpc(
            "tasks/update",
            json!({ "taskId": id, "inputResponses": { key: answer } }),
            TASKS,
        )
        .await;
    assert!(updated.get("error").is_none(), "{updated}");
}

fn task_id(response: &Value) -> String {
    response["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {response}"))
        .to_owned()
}

/// Waits until `done` holds ([`Patience`]).
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let patience = Patience::new(what);
    while !done() {
        patience.wait().await;
    }
}

/// A parked question and a parked sleep hold no work in memory; a cancel ends the first at
/// once, the task's expiry ends the second, and a sleep's timer wakes a third, which then
/// completes after its deadline, not before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_expiry_and_timers_end_or_wake_parked_tasks() {
    let db = Db::new("ends");
    let engine = db.engine();
    engine.start().unwrap();
    let mut peer = Peer::Http(Http::start(TaskServer::from_engine(engine.clone())).await);
    let asked = task_id(&peer.call("approve", json!({ "n": 1 }), TASKS).await);
    let sleeper = task_id(&peer.call("nap", json!({ "ms": 3_600_000 }), TASKS).await);
    let started = Instant::now();
    let timed = task_id(&peer.call("nap", json!({ "ms": 1_200 }), TASKS).await);
    until("three tasks parked", || db.parked() == 3).await;
    until("no work left in memory", || engine.running_tasks() == 0).await;
    let sleeping = peer.get(&sleeper).await["result"].clone();
    assert_eq!(
        (&sleeping["status"], &sleeping["statusMessage"]),
        (&json!("working"), &json!("napping")),
        "a parked sleep reads as before: {sleeping}"
    );

    let cancel = peer
        .rpc("tasks/cancel", json!({ "taskId": asked }), TASKS)
        .await;
    assert!(cancel.get("error").is_none(), "{cancel}");
    let cancelled = peer.wait_terminal(&asked).await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(runs(&asked, "apply"), 0);

    let woke = peer.wait_terminal(&timed).await;
    let took = started.elapsed();
    assert_eq!(woke["status"], "completed", "{woke}");
    assert_eq!(common::first_text(&woke["result"]), "slept 1200 ms");
    assert!(took >= Duration::from_millis(1_200), "woke early: {took:?}");
    assert_eq!(runs(&timed, "woke"), 1);

    let expired = peer.wait_terminal(&sleeper).await;
    assert_eq!(expired["status"], "failed", "{expired}");
    assert_eq!(expired["error"]["message"], "task expired");
    assert_eq!(runs(&sleeper, "woke"), 0);
    assert_eq!(db.parked(), 0);
    engine.shutdown(Duration::from_secs(1)).await;
}

/// A parked task still counts against its owner's live tasks: with a quota of two, two
/// parked tasks refuse a third call, in the server they parked in and in the next one on the
/// file (after `recover`); once one is answered and completes, the third goes in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_task_still_counts_against_its_owners_quota() {
    let db = Db::new("quota");
    let engine = || {
        Engine::builder(tools("sqlite"))
            .with_store(SqliteStore::open(db.path()).expect("open the database"))
            .with_limits(mcp_tasks::Limits::default().with_max_live_tasks_per_owner(2))
            .build()
    };
    let first = engine();
    first.start().unwrap();
    let mut peer = Peer::Http(Http::start(TaskServer::from_engine(first.clone())).await);
    let parked = task_id(&peer.call("approve", json!({ "n": 1 }), TASKS).await);
    task_id(&peer.call("approve", json!({ "n": 2 }), TASKS).await);
    until("two tasks parked", || db.parked() == 2).await;
    until("no work left in memory", || first.running_tasks() == 0).await;
    let refused = peer.call("approve", json!({ "n": 3 }), TASKS).await;
    assert_eq!(refused["error"]["data"]["quota"], 2, "{refused}");
    first.shutdown(Duration::from_secs(1)).await;

    // The next server on the file: the two parked tasks still count.
    let second = engine();
    let recovered = second.recover().await.unwrap();
    assert_eq!((recovered.resumed, recovered.failed), (0, 0));
    second.start().unwrap();
    let mut peer = Peer::Http(Http::start(TaskServer::from_engine(second.clone())).await);
    let refused = peer.call("approve", json!({ "n": 3 }), TASKS).await;
    assert_eq!(
        refused["error"]["data"]["quota"], 2,
        "tasks parked before the restart count: {refused}"
    );
    let key = first_input_key(&peer.get(&parked).await["result"]);
    answer(&mut peer, &parked, &key, "ada").await;
    assert_eq!(peer.wait_terminal(&parked).await["status"], "completed");
    task_id(&peer.call("approve", json!({ "n": 3 }), TASKS).await);
    second.shutdown(Duration::from_secs(1)).await;
}

/// One tool, `ask`, under two definitions: the first server's parks only after an hour, the
/// restarted server's at once.
#[task_tool(
    name = "ask",
    mode = "required",
    restart = "resume",
    park_after = "1h",
    ttl = "10m",
    poll_interval = "50ms"
)]
async fn ask_slow(ctx: TaskContext) -> Result<String, ToolError> {
    common::ask_name(&ctx).await
}

/// [`ask_slow`], parked 1 ms after it asks.
#[task_tool(
    name = "ask",
    mode = "required",
    restart = "resume",
    park_after = "1ms",
    ttl = "10m",
    poll_interval = "50ms"
)]
async fn ask_now(ctx: TaskContext) -> Result<String, ToolError> {
    common::ask_name(&ctx).await
}

/// Tasks replayed at start-up that ask again and park at once count once each against their
/// owner's quota: a replay's park is not also held by the start-up's read of the parked tasks
/// (`Runtime::hold_parked`; it used to run after the replays were spawned, and held twice the
/// parks they had stored by then). With a quota of N, N such tasks answered and completed
/// (and not read since) leave room for N new calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_tasks_that_park_at_once_count_once_against_the_quota() {
    const N: usize = 16;
    let db = Db::new("replay-park");
    let engine = |tools: mcp_tasks::Toolkit| {
        Engine::builder(tools)
            .with_store(SqliteStore::open(db.path()).expect("open the database"))
            .with_limits(mcp_tasks::Limits::default().with_max_live_tasks_per_owner(N))
            .build()
    };
    let first = engine(toolkit![ask_slow].unwrap());
    first.start().unwrap();
    let mut peer = Peer::Http(Http::start(TaskServer::from_engine(first.clone())).await);
    let mut ids = Vec::new();
    for _ in 0..N {
        ids.push(task_id(&peer.call("ask", json!({}), TASKS).await));
    }
    for id in &ids {
        peer.wait_status(id, "input_required").await;
    }
    first.shutdown(Duration::from_millis(100)).await;
    assert_eq!(db.parked(), 0, "nothing parked before the restart");

    let second = engine(toolkit![ask_now].unwrap());
    assert_eq!(second.recover().await.unwrap().resumed, N);
    second.start().unwrap();
    let mut peer = Peer::Http(Http::start(TaskServer::from_engine(second.clone())).await);
    let all = i64::try_from(N).unwrap();
    until("every replay parked", || db.parked() == all).await;
    for id in &ids {
        let key = first_input_key(&peer.get(id).await["result"]);
        answer(&mut peer, id, &key, "ada").await;
    }
    // Seen in the file, not by `tasks/get`: a read of an ended task gives back a hold left
    // for it, which would hide a count held twice.
    until("every replay completed", || completed_in(db.path()) == all).await;
    for n in 1..=N {
        let call = peer.call("ask", json!({}), TASKS).await;
        assert!(
            call["result"]["taskId"].is_string(),
            "new call {n} of {N} refused, the owner's count stayed high: {call}"
        );
    }
    second.shutdown(Duration::from_secs(1)).await;
}

/// A parked task that expires gives its owner's count back, also when a `tasks/get` is the
/// first to apply the expiry (the expiry sweep here runs once an hour): with a quota of two,
/// two parked sleeps refuse a third call until they expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_parked_task_gives_back_its_owners_count() {
    let db = Db::new("quota-expiry");
    let engine = Engine::builder(tools("sqlite"))
        .with_store(SqliteStore::open(db.path()).expect("open the database"))
        .with_limits(mcp_tasks::Limits::default().with_max_live_tasks_per_owner(2))
        .with_expiry_sweep(Duration::from_secs(3600))
        .build();
    engine.start().unwrap();
    let mut peer = Peer::Http(Http::start(TaskServer::from_engine(engine.clone())).await);
    // `nap` expires after 3 s.
    let first = task_id(&peer.call("nap", json!({ "ms": 3_600_000 }), TASKS).await);
    let second = task_id(&peer.call("nap", json!({ "ms": 3_600_000 }), TASKS).await);
    until("two tasks parked", || db.parked() == 2).await;
    let refused = peer.call("approve", json!({ "n": 3 }), TASKS).await;
    assert_eq!(refused["error"]["data"]["quota"], 2, "{refused}");
    for id in [&first, &second] {
        let ended = peer.wait_terminal(id).await;
        assert_eq!(ended["error"]["message"], "task expired", "{ended}");
    }
    task_id(&peer.call("approve", json!({ "n": 3 }), TASKS).await);
    engine.shutdown(Duration::from_secs(1)).await;
}

/// In a cluster: a task parks on instance A, A stops, and the answer sent to instance B
/// wakes the task there, where it completes (its first step not run again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_parked_on_one_instance_is_answered_and_runs_on_another() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let instance = |here: &'static str| {
        let db = &db;
        async move {
            let engine = Engine::builder(tools(here))
                .with_store(db.store().await.expect("connect"))
                .with_instance_id(here)
                .with_cluster(
                    mcp_tasks::ClusterConfig::default()
                        .with_claim_interval(Duration::from_secs(60)),
                )
                .build();
            engine.start().expect("start");
            let http = Http::start(TaskServer::from_engine(engine.clone())).await;
            (engine, Peer::Http(http))
        }
    };
    let (a, mut on_a) = instance("a").await;
    let (b, mut on_b) = instance("b").await;
    let id = task_id(&on_a.call("approve", json!({ "n": 7 }), TASKS).await);
    let raw = db.raw().await;
    let patience = Patience::new("the task parked on a");
    loop {
        let parked: Option<i64> = raw
            .query_one("SELECT parked_until_ms FROM tasks WHERE id = $1", &[&id])
            .await
            .unwrap()
            .get(0);
        if parked.is_some() && a.running_tasks() == 0 {
            break;
        }
        patience.wait().await;
    }
    a.shutdown(Duration::from_secs(1)).await;
    let task = on_b.get(&id).await["result"].clone();
    assert_eq!(task["status"], "input_required", "{task}");
    let key = first_input_key(&task);
    let answered = Instant::now();
    answer(&mut on_b, &id, &key, "grace").await;
    let done = on_b.wait_terminal(&id).await;
    eprintln!(
        "answered on b, completed there {:?} later",
        answered.elapsed()
    );
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        common::first_text(&done["result"]),
        "7 approved by grace on b"
    );
    assert_eq!(runs(&id, "prepare"), 1);
    assert_eq!(runs(&id, "apply"), 1);
    drop(on_a);
    b.shutdown(Duration::from_secs(1)).await;
}

/// Not a test of its own: the server process of `parked_tasks_survive_kill_9`,
/// which runs this test binary again with [`CHILD_DB`] set. Serves the file over HTTP on
/// 127.0.0.1 and prints `serving <url>`, until it is killed.
#[test]
#[ignore = "the server process of parked_tasks_survive_kill_9"]
fn child_server() {
    let Ok(path) = std::env::var(CHILD_DB) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let engine = Engine::builder(tools("child"))
            .with_store(SqliteStore::open(&path).expect("open the database"))
            .build();
        let report = engine.recover().await.expect("recover");
        engine.start().expect("start");
        let http = Http::start(TaskServer::from_engine(engine)).await;
        println!("recovered {} {}", report.resumed, report.failed);
        println!("serving {}", http.url);
        std::future::pending::<()>().await;
    });
}

/// A server process of this test binary ([`child_server`]) on `db`.
struct Child {
    process: Process,
    url: String,
    recovered: String,
}

impl Child {
    fn start(db: &std::path::Path, journal: &std::path::Path) -> Self {
        let mut command = std::process::Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "child_server",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DB, db)
            .env(CHILD_JOURNAL, journal);
        // libtest writes `test child_server ... ` before the test's first line.
        let (process, url) = Process::start_stdout("the server process", &mut command, |line| {
            line.split_once("serving ").map(|(_, url)| url.to_owned())
        });
        let recovered = process
            .lines()
            .iter()
            .find_map(|line| {
                line.split_once("recovered ")
                    .map(|(_, counts)| counts.to_owned())
            })
            .unwrap_or_default();
        Self {
            process,
            url,
            recovered,
        }
    }

    async fn peer(&self) -> Peer {
        let mut http = Http::start_router(axum::Router::new()).await;
        http.url = self.url.clone();
        Peer::Http(http)
    }

    /// SIGKILL: no destructor, no flush, no shutdown.
    fn kill9(mut self) {
        self.process.kill9();
    }
}

/// Real processes, a real SQLite file. In a first server process 1,000 tasks park on their
/// question, an 8 s durable sleep parks, and a retried step that always fails parks in its
/// 4 s wait after its first attempt. The process is killed (`kill -9`) two seconds in. A
/// second process on the file recovers nothing (parked tasks run nowhere by design); the
/// retried step goes on with its second attempt at its stored time (the count survived),
/// and fails after its third; the sleep ends at its deadline, not 8 s after the restart; all
/// 1,000 questions are answered and their tasks complete. The journal both processes append
/// to shows every step of every task run once, and the retried step run 3 times in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_tasks_survive_kill_9() {
    const QUESTIONS: u32 = 1_000;
    let db = Db::new("kill9");
    let journal = db.path().with_extension("journal");
    let _ = std::fs::remove_file(&journal);
    let first = Child::start(db.path(), &journal);
    let mut peer = first.peer().await;
    let mut ids = Vec::new();
    for n in 0..QUESTIONS {
        ids.push(task_id(
            &peer.call("approve", json!({ "n": n }), TASKS).await,
        ));
    }
    until("the questions parked", || {
        db.parked() == i64::from(QUESTIONS)
    })
    .await;
    let began = Instant::now();
    let retried = task_id(&peer.call("flaky", json!({}), TASKS).await);
    let sleeper = task_id(&peer.call("long_nap", json!({ "ms": 8_000 }), TASKS).await);
    until("every task parked", || {
        db.parked() == i64::from(QUESTIONS) + 2
    })
    .await;
    // Two seconds in: before the retried step's second attempt (at 4 s) and half way
    // through its wait, a quarter of the way through the sleep.
    until("two seconds in", || {
        began.elapsed() >= Duration::from_secs(2)
    })
    .await;
    assert!(
        began.elapsed() < Duration::from_millis(3_500),
        "too slow to kill the first process before the second attempt: {:?}",
        began.elapsed()
    );
    first.kill9();

    let second = Child::start(db.path(), &journal);
    assert_eq!(second.recovered, "0 0", "parked tasks are not recovered");
    let mut peer = second.peer().await;
    // The count goes on: the second attempt (not a first one again) fails in this process.
    let waiting = peer
        .wait_for(&retried, "the second attempt to fail", |t| {
            t["statusMessage"]
                .as_str()
                .is_some_and(|m| m.starts_with("fetch: attempt 2 of 3 failed"))
        })
        .await;
    assert!(
        waiting["statusMessage"]
            .as_str()
            .unwrap()
            .contains("(upstream said no (try 2))"),
        "{waiting}"
    );
    assert!(
        began.elapsed() >= Duration::from_secs(4),
        "the second attempt ran before its stored time: {:?}",
        began.elapsed()
    );
    let woke = peer.wait_terminal(&sleeper).await;
    let took = began.elapsed();
    assert_eq!(woke["status"], "completed", "{woke}");
    assert!(
        took >= Duration::from_secs(8) && took < Duration::from_millis(9_900),
        "the sleep ends at its deadline, not 8 s after the restart: {took:?}"
    );
    // The tool's error: a completed task whose result is an error.
    let failed = peer.wait_terminal(&retried).await;
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    assert_eq!(
        common::first_text(&failed["result"]),
        "upstream said no (try 3)",
        "the third attempt is the last"
    );
    let answering = Instant::now();
    for id in &ids {
        let task = peer.get(id).await["result"].clone();
        assert_eq!(task["status"], "input_required", "{task}");
        let key = first_input_key(&task);
        answer(&mut peer, id, &key, "ada").await;
    }
    for (n, id) in ids.iter().enumerate() {
        let done = peer.wait_terminal(id).await;
        assert_eq!(
            common::first_text(&done["result"]),
            format!("{n} approved by ada on child")
        );
    }
    eprintln!(
        "{QUESTIONS} parked tasks answered and completed in {:?}",
        answering.elapsed()
    );
    assert_eq!(db.parked(), 0);
    let lines = std::fs::read_to_string(&journal).expect("the journal");
    let mut counts: HashMap<&str, u32> = HashMap::new();
    for line in lines.lines() {
        *counts.entry(line).or_default() += 1;
    }
    for id in &ids {
        for step in ["prepare", "apply"] {
            assert_eq!(
                counts.get(format!("{id} {step}").as_str()),
                Some(&1),
                "{id} {step}"
            );
        }
    }
    assert_eq!(counts.get(format!("{sleeper} woke").as_str()), Some(&1));
    assert_eq!(counts.get(format!("{retried} try").as_str()), Some(&3));
    let _ = std::fs::remove_file(&journal);
}
