//! Drain: what a graceful stop does, with real processes and sockets.
//!
//! - Two example servers (`mcp-tasks-example-http`) on one Postgres schema; the first gets a
//!   real SIGTERM while it runs a `resume` task and a `fail` task: its readiness goes false,
//!   a new `tools/call` answers HTTP 503 with a retryable JSON-RPC error, `tasks/get` is
//!   still served, and once the grace period ends the `resume` task runs on the other
//!   instance within 2 s (its lease is 30 s: no lease wait), without a step running twice,
//!   and the `fail` task is failed saying the server was shut down.
//! - Questions outstanding at a drain and at a kill, in a cluster (real processes, real
//!   Postgres): an answer and a cancel sent to the draining instance during its grace take
//!   effect; a `resume` task still waiting for its answer moves to another instance, which
//!   asks the same question, and its answer there completes it; the same after `kill -9`
//!   once the lease lapsed. Every batch runs once.
//! - One example server on SQLite: SIGTERM, then the next start resumes the same task.
//! - In process on real sockets: `serve_http_with_shutdown`'s order (readiness false, new
//!   calls refused, other requests served, in-flight requests finish), health endpoints
//!   outside authentication, and readiness false while the store is unreachable.

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use common::{
    TASKS, V2026, meta, parse_body,
    process::{Process, Scratch},
};
use mcp_tasks::{
    Engine, HttpOptions, StaticTokens, TaskContext, TaskServer, ToolError, task_tool, toolkit,
};
use serde_json::{Value, json};

const KEY: &str = "drain-test-request-state-key-0123456789abcdef";

fn example_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mcp-tasks-example-http"))
}

/// One example server process.
struct Example {
    process: Process,
    url: String,
    base: String,
}

impl Example {
    fn start(args: &[&str]) -> Self {
        let mut command = Command::new(example_binary());
        command
            .args(["--port", "0"])
            .args(args)
            .env("MCP_TASKS_REQUEST_STATE_KEY", KEY);
        let (process, url) = Process::serving("the example server", &mut command);
        let base = url.trim_end_matches("/mcp").to_owned();
        Self { process, url, base }
    }

    /// SIGKILL: no drain, no release; its leases lapse.
    fn kill9(&mut self) {
        self.process.kill9();
    }

    fn sigterm(&self) {
        self.process.signal("-TERM");
    }

    /// Waits for the process to exit (at most `bound`); its exit status and its stderr.
    fn exited(&mut self, bound: Duration) -> (std::process::ExitStatus, Vec<String>) {
        self.process.exited(bound)
    }
}

/// A JSON-RPC request to `url`: the HTTP status, headers and the response message.
async fn rpc(
    url: &str,
    method: &str,
    mut params: Value,
) -> (u16, reqwest::header::HeaderMap, Value) {
    params["_meta"] = meta(TASKS);
    let name = params["name"]
        .as_str()
        .or(params["taskId"].as_str())
        .unwrap_or_default()
        .to_owned();
    let body = json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params });
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", V2026)
        .header("mcp-method", method)
        .header("mcp-name", name)
        .body(body.to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} to {url}: {e}"));
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, parse_body(&response.text().await.unwrap()))
}

async fn call(url: &str, tool: &str, arguments: Value) -> String {
    let (_, _, response) = rpc(
        url,
        "tools/call",
        json!({ "name": tool, "arguments": arguments }),
    )
    .await;
    assert_eq!(response["result"]["resultType"], "task", "{response}");
    response["result"]["taskId"].as_str().unwrap().to_owned()
}

async fn get(url: &str, id: &str) -> Value {
    let (status, _, response) = rpc(url, "tasks/get", json!({ "taskId": id })).await;
    assert_eq!(status, 200, "{response}");
    assert!(
        response.get("error").is_none(),
        "tasks/get {id}: {response}"
    );
    response["result"].clone()
}

async fn health(base: &str, path: &str) -> (u16, Value) {
    let response = reqwest::get(format!("{base}{path}"))
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let status = response.status().as_u16();
    (status, parse_body(&response.text().await.unwrap()))
}

/// The task `id` on `url` once it is no longer `working` (waiting with a patience named
/// `what`).
async fn until_ended(url: &str, id: &str, what: &str) -> Value {
    let patience = common::Patience::new(what);
    loop {
        let snapshot = get(url, id).await;
        if snapshot["status"] != "working" {
            return snapshot;
        }
        patience.wait().await;
    }
}

/// `snapshot` is a `fail` task failed by a drain: its message says the server was shut down.
fn assert_shut_down(snapshot: &Value) {
    assert_eq!(snapshot["status"], "failed", "{snapshot}");
    assert!(
        snapshot["statusMessage"]
            .as_str()
            .unwrap_or_default()
            .contains("server was shut down"),
        "{snapshot}"
    );
}

/// The `(task, batch)` lines of the journals: how often each batch ran.
fn batches(journals: &[&Path]) -> HashMap<(String, u32), usize> {
    let mut seen = HashMap::new();
    for journal in journals {
        let text = std::fs::read_to_string(journal).unwrap_or_default();
        for line in text.lines() {
            let (task, batch) = line.split_once(' ').expect("a journal line");
            *seen
                .entry((task.to_owned(), batch.parse().expect("a batch")))
                .or_insert(0) += 1;
        }
    }
    seen
}

fn ran(journal: &Path, task: &str) -> usize {
    batches(&[journal])
        .keys()
        .filter(|(id, _)| id == task)
        .count()
}

/// The drain of a cluster instance on SIGTERM (see the module docs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_running_work_to_another_instance_at_once() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let dir = Scratch::new("drain-cluster");
    let (journal_a, journal_b) = (dir.join("a.txt"), dir.join("b.txt"));
    let instance = |name: &str, journal: &Path| {
        Example::start(&[
            "--store",
            &db.url,
            "--schema",
            &db.schema,
            "--instance",
            name,
            "--pace-ms",
            "200",
            // A lease far longer than the test's 2 s bound: a takeover within it is the
            // release, not a lapse.
            "--lease-ms",
            "30000",
            "--renew-ms",
            "5000",
            "--claim-ms",
            "250",
            "--reread-ms",
            "500",
            "--shutdown-grace-ms",
            "800",
            "--journal",
            journal.to_str().unwrap(),
        ])
    };
    let mut a = instance("a", &journal_a);
    let b = instance("b", &journal_b);
    assert_eq!(
        health(&a.base, "/readyz").await,
        (200, json!({ "ready": true }))
    );

    // On a: a resume tool (40 batches of 150 ms) and a fail tool that waits for an answer.
    let import = call(
        &a.url,
        "import_rows",
        json!({ "batches": 40, "batch_ms": 150 }),
    )
    .await;
    let report = call(&a.url, "workspace_report", json!({ "workspace_id": "w1" })).await;
    let started = Instant::now();
    while ran(&journal_a, &import) < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "import_rows runs on a"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    a.sigterm();
    // Readiness goes false first, and stays answered while the instance drains.
    let patience = common::Patience::with_bound("a's readiness false", Duration::from_secs(5));
    let not_ready = loop {
        let (status, body) = health(&a.base, "/readyz").await;
        if status == 503 {
            break body;
        }
        patience.wait().await;
    };
    assert_eq!(not_ready["ready"], false, "{not_ready}");
    assert_eq!(
        health(&a.base, "/healthz").await.0,
        200,
        "alive while draining"
    );
    // A new call is refused, retryably; tasks/get is still served.
    let (status, headers, refused) = rpc(
        &a.url,
        "tools/call",
        json!({ "name": "import_rows", "arguments": { "batches": 1 } }),
    )
    .await;
    assert_eq!(status, 503, "{refused}");
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert_eq!(refused["error"]["data"]["retryable"], true, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("shutting down"),
        "{refused}"
    );
    assert_eq!(get(&a.url, &import).await["status"], "working");

    let (status, lines) = a.exited(Duration::from_secs(20));
    let exited_at = Instant::now();
    assert!(
        status.success(),
        "a exits cleanly after its drain: {lines:?}"
    );
    let stopped = lines
        .iter()
        .find(|l| l.starts_with("stopped: "))
        .unwrap_or_else(|| panic!("a printed its shutdown report: {lines:?}"));
    assert!(
        stopped.contains("abandoned: 2")
            && stopped.contains("released: 1")
            && stopped.contains("failed: 1"),
        "{stopped}"
    );
    let done_on_a = ran(&journal_a, &import);

    // b runs the released task within 2 s of a's exit (the release is the last thing a
    // does), far within the 30 s lease.
    while ran(&journal_b, &import) == 0 {
        assert!(
            exited_at.elapsed() < Duration::from_secs(2),
            "the released task runs on b within 2 s (it ran {done_on_a} batches on a)"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let moved = exited_at.elapsed();
    eprintln!("the released task ran again on b {moved:?} after a exited");

    assert_shut_down(&get(&b.url, &report).await);

    let completed = until_ended(&b.url, &import, "the import completes on b").await;
    assert_eq!(completed["status"], "completed", "{completed}");
    let seen = batches(&[&journal_a, &journal_b]);
    for batch in 1..=40 {
        assert_eq!(
            seen.get(&(import.clone(), batch)),
            Some(&1),
            "batch {batch} ran exactly once across a and b"
        );
    }
    eprintln!("{done_on_a} batches ran on a, {} on b", 40 - done_on_a);
}

/// `import_rows` asking before it imports (3 batches of 50 ms), on `url`: its id, once its
/// question is outstanding.
async fn asking_import(url: &str) -> String {
    let id = call(
        url,
        "import_rows",
        json!({ "batches": 3, "batch_ms": 50, "confirm": true }),
    )
    .await;
    until_asking(url, &id, "the import asks").await;
    id
}

/// Task `id` on `url` once it is `input_required`.
async fn until_asking(url: &str, id: &str, what: &str) -> Value {
    let patience = common::Patience::new(what);
    loop {
        let snapshot = get(url, id).await;
        if snapshot["status"] == "input_required" {
            return snapshot;
        }
        patience.wait().await;
    }
}

/// Answers "go" to the outstanding question of `asking` (a `tasks/get` result) on `url`.
async fn answer_go(url: &str, asking: &Value) {
    let id = asking["taskId"].as_str().unwrap();
    let key = common::first_input_key(asking);
    let (status, _, answered) = rpc(
        url,
        "tasks/update",
        json!({ "taskId": id, "inputResponses": {
            key: { "action": "accept", "content": { "go": true } } } }),
    )
    .await;
    assert_eq!(status, 200, "{answered}");
    assert!(answered.get("error").is_none(), "{answered}");
}

/// Waits until instance `runner` holds task `id`'s lease (read from the row).
async fn until_runner(raw: &tokio_postgres::Client, id: &str, runner: &str) {
    let patience = common::Patience::new(format!("{runner} runs {id}"));
    loop {
        let row = raw
            .query_one("SELECT runner FROM tasks WHERE id = $1", &[&id])
            .await
            .expect("read the task's row");
        if row.get::<_, Option<String>>(0).as_deref() == Some(runner) {
            return;
        }
        patience.wait().await;
    }
}

/// Each of `tasks` ran each of its 3 batches exactly once, across `journals`.
fn each_batch_once(journals: &[&Path], tasks: &[&String]) {
    let seen = batches(journals);
    for task in tasks {
        for batch in 1..=3 {
            assert_eq!(
                seen.get(&((*task).clone(), batch)),
                Some(&1),
                "{task}: batch {batch} ran exactly once"
            );
        }
    }
}

/// Questions outstanding at a drain and at a kill, in a cluster (see the module docs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_outstanding_at_a_drain_or_a_kill_are_answered_on_another_instance() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let dir = Scratch::new("drain-questions");
    let journals = [dir.join("a.txt"), dir.join("b.txt"), dir.join("c.txt")];
    let instance = |name: &str, journal: &Path| {
        Example::start(&[
            "--store",
            &db.url,
            "--schema",
            &db.schema,
            "--instance",
            name,
            "--lease-ms",
            "3000",
            "--renew-ms",
            "1000",
            "--claim-ms",
            "250",
            "--shutdown-grace-ms",
            "800",
            "--journal",
            journal.to_str().unwrap(),
        ])
    };
    let mut a = instance("a", &journals[0]);
    let mut b = instance("b", &journals[1]);
    let waiting = asking_import(&a.url).await;
    let answered = asking_import(&a.url).await;
    let cancelled = asking_import(&a.url).await;

    // The drain: answers and cancels sent to a during its grace take effect.
    a.sigterm();
    let patience = common::Patience::with_bound("a draining", Duration::from_secs(5));
    while health(&a.base, "/readyz").await.0 != 503 {
        patience.wait().await;
    }
    answer_go(&a.url, &get(&a.url, &answered).await).await;
    let (status, _, cancel) = rpc(&a.url, "tasks/cancel", json!({ "taskId": cancelled })).await;
    assert_eq!(status, 200, "{cancel}");
    assert!(cancel.get("error").is_none(), "{cancel}");
    let (status, lines) = a.exited(Duration::from_secs(20));
    assert!(status.success(), "{lines:?}");
    let done = until_ended(&b.url, &answered, "the answered import completes").await;
    assert_eq!(done["status"], "completed", "{done}");
    let done = until_ended(&b.url, &cancelled, "the cancelled import ends").await;
    assert_eq!(done["status"], "cancelled", "{done}");
    // The task still waiting moved to b, which asks the same question; b's answer ends it.
    let raw = db.raw().await;
    let asked_on_a = get(&b.url, &waiting).await;
    until_runner(&raw, &waiting, "b").await;
    let asking = until_asking(&b.url, &waiting, "b asks the moved task's question").await;
    assert_eq!(
        common::first_input_key(&asking),
        common::first_input_key(&asked_on_a),
        "the same question"
    );
    answer_go(&b.url, &asking).await;
    let done = until_ended(&b.url, &waiting, "the moved import completes on b").await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(
        ran(&journals[1], &waiting) == 3,
        "the moved task imported on b"
    );

    // The kill: c takes b's waiting task over once b's lease lapsed, and asks it again.
    let c = instance("c", &journals[2]);
    let killed = asking_import(&b.url).await;
    let asked_on_b = get(&b.url, &killed).await;
    b.kill9();
    until_runner(&raw, &killed, "c").await;
    let asking = until_asking(&c.url, &killed, "c asks the killed task's question").await;
    answer_go(&c.url, &asking).await;
    assert_eq!(
        common::first_input_key(&asking),
        common::first_input_key(&asked_on_b),
        "the same question"
    );
    let done = until_ended(&c.url, &killed, "the killed instance's task completes on c").await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(ran(&journals[2], &killed), 3, "it imported on c");
    let paths: Vec<&Path> = journals.iter().map(PathBuf::as_path).collect();
    each_batch_once(&paths, &[&waiting, &answered, &killed]);
    assert_eq!(
        ran(&journals[0], &cancelled) + ran(&journals[1], &cancelled),
        0
    );
}

/// One instance with a durable (SQLite) store: SIGTERM drains it within its grace period,
/// the next start resumes the `resume` task (no step twice), and the `fail` task is failed
/// by the drain, saying the server was shut down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_on_a_single_instance_resumes_the_task_at_next_start() {
    let dir = Scratch::new("drain-sqlite");
    let store = format!("sqlite:{}", dir.join("tasks.db").display());
    let journal = dir.join("journal.txt");
    let args = [
        "--store",
        &store,
        "--journal",
        journal.to_str().unwrap(),
        "--pace-ms",
        "200",
        "--shutdown-grace-ms",
        "300",
    ];
    let mut first = Example::start(&args);
    let import = call(
        &first.url,
        "import_rows",
        json!({ "batches": 20, "batch_ms": 100 }),
    )
    .await;
    let report = call(
        &first.url,
        "workspace_report",
        json!({ "workspace_id": "w" }),
    )
    .await;
    while ran(&journal, &import) < 2 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sent = Instant::now();
    first.sigterm();
    let (status, lines) = first.exited(Duration::from_secs(20));
    assert!(status.success(), "{lines:?}");
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "a 300 ms grace period: it exits soon after, not at the end of the work"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("stopped: ")
            && l.contains("left: 1")
            && l.contains("failed: 1")),
        "{lines:?}"
    );
    let done_before = ran(&journal, &import);
    assert!(done_before < 20, "the import was still running");

    let second = Example::start(&args);
    assert_shut_down(&get(&second.url, &report).await);
    let completed = until_ended(
        &second.url,
        &import,
        "the import completes after the restart",
    )
    .await;
    assert_eq!(completed["status"], "completed", "{completed}");
    let seen = batches(&[&journal]);
    for batch in 1..=20 {
        assert_eq!(
            seen.get(&(import.clone(), batch)),
            Some(&1),
            "batch {batch}"
        );
    }
}

/// Sleeps `ms`, then answers.
#[task_tool(mode = "required", poll_interval = "50ms")]
async fn sleepy(ctx: TaskContext, ms: u64) -> Result<String, ToolError> {
    ctx.until_cancelled(tokio::time::sleep(Duration::from_millis(ms)))
        .await?;
    Ok("slept".into())
}

/// Answers inline after `ms`.
#[task_tool(mode = "inline")]
async fn slow_inline(ms: u64) -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok("answered".into())
}

/// A raw JSON-RPC POST with a bearer token (or none).
async fn post(url: &str, token: Option<&str>, method: &str, params: Value) -> (u16, Value) {
    let mut params = params;
    params["_meta"] = meta(TASKS);
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", V2026)
        .header("mcp-method", method)
        .header(
            "mcp-name",
            params["name"]
                .as_str()
                .or(params["taskId"].as_str())
                .unwrap_or(""),
        );
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.body(body.to_string()).send().await.expect("POST");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        if text.is_empty() {
            Value::Null
        } else {
            parse_body(&text)
        },
    )
}

/// `serve_http_with_shutdown` in process: readiness false first, new calls refused with a
/// retryable 503, other requests and the work's grace period go on, an in-flight request
/// finishes, then the listener closes; health endpoints answer without a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_stop_in_order_with_health_outside_authentication() {
    let engine = Engine::builder(toolkit![sleepy, slow_inline].expect("toolkit"))
        .with_shutdown_grace(Duration::from_millis(1500))
        .build();
    let server = TaskServer::from_engine(engine.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (url, base) = (format!("http://{addr}/mcp"), format!("http://{addr}"));
    let options =
        HttpOptions::new().with_static_tokens(StaticTokens::parse("alice:TOKEN_A").unwrap());
    let (signal, signalled) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(mcp_tasks::serve_http_with_shutdown(
        listener,
        server,
        options,
        async {
            let _ = signalled.await;
        },
    ));

    // Health needs no token; /mcp does.
    assert_eq!(
        health(&base, "/healthz").await,
        (200, json!({ "live": true }))
    );
    assert_eq!(
        health(&base, "/readyz").await,
        (200, json!({ "ready": true }))
    );
    assert_eq!(
        post(&url, None, "tasks/get", json!({ "taskId": "x" }))
            .await
            .0,
        401
    );

    let (_, created) = post(
        &url,
        Some("TOKEN_A"),
        "tools/call",
        json!({ "name": "sleepy", "arguments": { "ms": 600 } }),
    )
    .await;
    let id = created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    // An inline call in flight when the signal comes.
    let in_flight = tokio::spawn({
        let url = url.clone();
        async move {
            post(
                &url,
                Some("TOKEN_A"),
                "tools/call",
                json!({ "name": "slow_inline", "arguments": { "ms": 400 } }),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    signal.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;

    let (status, body) = health(&base, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["reason"].as_str().unwrap().contains("draining"),
        "{body}"
    );
    assert_eq!(health(&base, "/healthz").await.0, 200);
    let (status, refused) = post(
        &url,
        Some("TOKEN_A"),
        "tools/call",
        json!({ "name": "sleepy", "arguments": { "ms": 1 } }),
    )
    .await;
    assert_eq!(status, 503, "{refused}");
    assert_eq!(
        refused["id"], 1,
        "the refusal answers the request's id: {refused}"
    );
    assert_eq!(refused["error"]["data"]["retryable"], true, "{refused}");
    // Other requests are served while the work has its grace period.
    let (status, got) = post(&url, Some("TOKEN_A"), "tasks/get", json!({ "taskId": id })).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["result"]["status"], "working", "{got}");

    let (status, answered) = in_flight.await.unwrap();
    assert_eq!(status, 200, "the in-flight request finished: {answered}");
    assert_eq!(
        common::first_text(&answered["result"]),
        "answered",
        "{answered}"
    );

    let report = tokio::time::timeout(Duration::from_secs(10), serving)
        .await
        .expect("serve_http_with_shutdown returns after the drain")
        .unwrap()
        .expect("no I/O error");
    assert_eq!(
        report.abandoned, 0,
        "the task ended within its grace: {report:?}"
    );
    let stored = engine.store().get(&id).await.unwrap().expect("the task");
    assert_eq!(stored.status, rmcp::model::TaskStatus::Completed);
    assert!(engine.is_stopped());
    assert!(
        reqwest::get(format!("{base}/healthz")).await.is_err(),
        "the listener is closed once it returned"
    );
}

/// Readiness follows the store: false while its Postgres server is down, true again once
/// it is back; liveness stays true.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_is_false_while_the_store_is_unreachable() {
    let Some(mut cluster) = pg::OwnCluster::init() else {
        return;
    };
    cluster.start();
    let store = mcp_tasks::PostgresStore::builder(cluster.url(""))
        .with_schema(pg::unique_schema())
        .connect()
        .await
        .expect("connect");
    let engine = Engine::builder(toolkit![sleepy].expect("toolkit"))
        .with_store(store)
        .build();
    let http = common::Http::start(TaskServer::from_engine(engine)).await;
    let base = http.url.trim_end_matches("/mcp").to_owned();
    assert_eq!(
        health(&base, "/readyz").await,
        (200, json!({ "ready": true }))
    );

    cluster.stop();
    let (status, body) = health(&base, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["reason"].as_str().unwrap().contains("task store"),
        "{body}"
    );
    assert_eq!(health(&base, "/healthz").await.0, 200);

    cluster.start();
    let patience = common::Patience::new("ready again once the store is back");
    while health(&base, "/readyz").await.0 != 200 {
        patience.wait().await;
    }
}

/// An application whose own router answers the health paths merges `http_router` built
/// with `HttpOptions::without_health_endpoints`: its answers are served (merging the router
/// with them would overlap, which axum refuses), and MCP is served beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_can_serve_its_own_health_endpoints() {
    let engine = Engine::builder(toolkit![slow_inline].expect("toolkit")).build();
    let mcp = mcp_tasks::http_router(
        TaskServer::from_engine(engine),
        HttpOptions::new().without_health_endpoints(),
    );
    let app = axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ours" }))
        .route("/readyz", axum::routing::get(|| async { "ours too" }))
        .merge(mcp);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let base = format!("http://{addr}");
    for (path, ours) in [("/healthz", "ours"), ("/readyz", "ours too")] {
        let answer = reqwest::get(format!("{base}{path}")).await.unwrap();
        assert_eq!(answer.text().await.unwrap(), ours, "{path}");
    }
    let (status, answered) = post(
        &format!("{base}/mcp"),
        None,
        "tools/call",
        json!({ "name": "slow_inline", "arguments": { "ms": 1 } }),
    )
    .await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(common::first_text(&answered["result"]), "answered");
}
