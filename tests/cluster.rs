//! Several instances, one task space (issue 11): real server processes
//! (`mcp-tasks-example-http --store postgres://...`) on one Postgres schema, with clients that
//! send each request to the next instance, round robin.
//!
//! - `three_instances_one_task_space`: mixed tasks (steps, input, cancel) created on every
//!   instance; every `tasks/get`/`update`/`cancel` answered by any instance; answers and
//!   cancels sent to another instance than the one running the work reach it (p99 printed);
//!   a retried call with the same idempotency key on another instance answers the same task
//!   and runs nothing twice; then SIGKILL of one instance mid-task: its `resume` tasks
//!   complete on the others with no completed step run twice (the tools' side-effect
//!   journals, outside the servers), its `fail` tasks are `failed` with the message, no task
//!   id lost, within lease + a few seconds; then SIGSTOP of another instance until it loses
//!   its leases, SIGCONT, and nothing it held is overwritten (fencing).
//!   The re-read that covers lost notifications runs every 2 minutes here, far above every
//!   bound on a wake-up, so those bounds are met by `LISTEN/NOTIFY` or not at all. After the
//!   kill every batch ran at most once except at most the one in flight per task; the
//!   SIGSTOP is sent once each of the stopped instance's tasks stored a step; the SIGCONT
//!   once b took every one over (epoch 2, runner b) and still runs it: the resumed instance
//!   runs the one step it was inside per task (its record refused), starts no other, and
//!   takes nothing back, every wait on a condition (the rows, c's journal), none a sleep.
//! - `workers_run_what_a_front_records`: a front that runs nothing and two workers; tasks
//!   complete, and killing a worker mid-task hands its tasks to the other.
//!
//! - In process, on Postgres: `a_stalled_instance_that_lost_its_lease_writes_nothing` (the
//!   runtime's fencing, deterministic: A stops renewing, B takes over, A's work stops or its
//!   step and outcome are refused; every wait is on the exact event, B's step started, A's
//!   stop counted by this process's recorder, none a sleep) and `another_owner_finds_nothing_on_any_instance` (owner scoping).
//! - Idempotency over HTTP on one in-process server (memory store), and `TaskClient`
//!   retrying a lost `tools/call` answer with the same key.
//!
//! `MCP_TASKS_CLUSTER_TASKS` sets the number of mixed tasks (default 300).

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    process::Command,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use common::{
    TASKS, first_input_key, first_text, meta, parse_body,
    process::{Process, Scratch},
};
use mcp_tasks::{
    State, TaskContext, TaskServer, ToolError, client::TaskClient, task_tool, toolkit,
};
use serde_json::{Value, json};

/// Lease, renewal, claim and re-read settings of every instance in these tests.
const LEASE_MS: u64 = 4000;
const RENEW_MS: u64 = 1000;
const CLAIM_MS: u64 = 250;
/// Far above every bound these tests put on a wake-up: answers and cancels sent to another
/// instance can only meet those bounds by `LISTEN/NOTIFY`, not by the periodic re-read.
const REREAD_MS: u64 = 120_000;
/// How often a waiting client polls `tasks/get`.
const POLL_MS: u64 = 20;
/// Task flows of phase 1 under way at once.
const CONCURRENT_FLOWS: usize = 12;

fn example_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mcp-tasks-example-http"))
}

/// One server process of the cluster.
struct Instance {
    process: Process,
    url: Option<String>,
    journal: PathBuf,
}

impl Instance {
    /// Starts an instance (or, with `--worker` in `extra`, a worker) on `db`'s schema.
    fn start(db: &pg::Db, dir: &Path, name: &str, extra: &[&str]) -> Self {
        let journal = dir.join(format!("journal-{name}.txt"));
        let mut command = Command::new(example_binary());
        command
            .args(["--store", &db.url, "--schema", &db.schema])
            // Every instance of a cluster shares the request-state key (the example refuses
            // to start one without it).
            .env(
                "MCP_TASKS_REQUEST_STATE_KEY",
                "cluster-test-request-state-key-0123456789",
            )
            // A worker serves no HTTP (and refuses a port).
            .args(if extra.contains(&"--worker") {
                &[][..]
            } else {
                &["--port", "0"][..]
            })
            .args(["--instance", name, "--pace-ms", "200"])
            .args(["--lease-ms", &LEASE_MS.to_string()])
            .args(["--renew-ms", &RENEW_MS.to_string()])
            .args(["--claim-ms", &CLAIM_MS.to_string()])
            .args(["--reread-ms", &REREAD_MS.to_string()])
            .arg("--journal")
            .arg(&journal)
            .args(extra);
        let (process, url) = Process::start(&format!("instance {name}"), &mut command, |line| {
            match line.strip_prefix("serving MCP on ") {
                Some(url) => Some(Some(url.to_owned())),
                // A worker serves nothing.
                None => line.starts_with("worker ").then_some(None),
            }
        });
        Self {
            process,
            url,
            journal,
        }
    }
}

/// Sends each request to the next instance, round robin (or to a chosen one).
#[derive(Clone)]
struct Clients {
    urls: Arc<Vec<String>>,
    next: Arc<AtomicUsize>,
    http: reqwest::Client,
}

impl Clients {
    fn new(urls: Vec<String>) -> Self {
        Self {
            urls: Arc::new(urls),
            next: Arc::new(AtomicUsize::new(0)),
            http: reqwest::Client::new(),
        }
    }

    fn pick(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.urls.len()
    }

    /// A JSON-RPC request to instance `at`; the response message.
    async fn rpc_at(&self, at: usize, method: &str, mut params: Value, key: Option<&str>) -> Value {
        params["_meta"] = meta(TASKS);
        if let Some(key) = key {
            params["_meta"]["mcp-tasks/idempotencyKey"] = json!(key);
        }
        let name = params["name"]
            .as_str()
            .or(params["taskId"].as_str())
            .unwrap_or_default()
            .to_owned();
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        let response = self
            .http
            .post(&self.urls[at])
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", common::V2026)
            .header("mcp-method", method)
            .header("mcp-name", name)
            .body(body.to_string())
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} to instance {at}: {e}"));
        parse_body(&response.text().await.unwrap())
    }

    /// `tools/call` on instance `at`: the task id.
    async fn call(&self, at: usize, tool: &str, arguments: Value, key: Option<&str>) -> String {
        let response = self
            .rpc_at(
                at,
                "tools/call",
                json!({ "name": tool, "arguments": arguments }),
                key,
            )
            .await;
        assert_eq!(response["result"]["resultType"], "task", "{response}");
        response["result"]["taskId"].as_str().unwrap().to_owned()
    }

    /// `tasks/get` on the next instance; every one must know every task.
    async fn get(&self, id: &str) -> Value {
        let at = self.pick();
        let response = self
            .rpc_at(at, "tasks/get", json!({ "taskId": id }), None)
            .await;
        assert!(
            response.get("error").is_none(),
            "tasks/get of {id} on instance {at}: {response}"
        );
        response["result"].clone()
    }

    /// Polls (next instance each time, every [`POLL_MS`]) until `done(snapshot)`, at most `limit`.
    async fn wait(&self, id: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let snapshot = self.get(id).await;
            if done(&snapshot) || started.elapsed() > limit {
                return snapshot;
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }

    async fn update_at(&self, at: usize, id: &str, key: &str, go: bool) {
        let answer = json!({ key: { "action": "accept", "content": { "go": go } } });
        let response = self
            .rpc_at(
                at,
                "tasks/update",
                json!({ "taskId": id, "inputResponses": answer }),
                None,
            )
            .await;
        assert!(
            response.get("error").is_none(),
            "tasks/update of {id} on instance {at}: {response}"
        );
    }

    async fn cancel_at(&self, at: usize, id: &str) {
        let response = self
            .rpc_at(at, "tasks/cancel", json!({ "taskId": id }), None)
            .await;
        assert!(
            response.get("error").is_none(),
            "tasks/cancel of {id} on instance {at}: {response}"
        );
    }
}

fn is_terminal(snapshot: &Value) -> bool {
    matches!(
        snapshot["status"].as_str(),
        Some("completed" | "failed" | "cancelled")
    )
}

/// `(task, batch)` → how many times the batch's side effect ran, over every journal.
fn journal_counts(journals: &[&Path]) -> HashMap<(String, u32), usize> {
    let mut counts = HashMap::new();
    for journal in journals {
        for line in std::fs::read_to_string(journal).unwrap_or_default().lines() {
            let (task, batch) = line.split_once(' ').expect("journal line `<task> <batch>`");
            *counts
                .entry((task.to_owned(), batch.parse().unwrap()))
                .or_default() += 1;
        }
    }
    counts
}

/// The steps stored per task, straight from the database.
async fn stored_steps(db: &pg::Db) -> HashSet<(String, u32)> {
    let client = db.raw().await;
    client
        .query("SELECT task_id, seq FROM steps", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.get::<_, String>(0),
                u32::try_from(r.get::<_, i64>(1)).unwrap(),
            )
        })
        .collect()
}

/// Each task's row as it is now: what a fenced instance must not change.
async fn rows(db: &pg::Db, ids: &[String]) -> HashMap<String, String> {
    let client = db.raw().await;
    client
        .query(
            "SELECT id, status, coalesce(status_message, ''), last_updated_at_ms::text, \
             coalesce(outcome, ''), epoch::text FROM tasks WHERE id = ANY($1)",
            &[&ids],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let fields: Vec<String> = (1..6).map(|i| r.get::<_, String>(i)).collect();
            (r.get::<_, String>(0), fields.join("|"))
        })
        .collect()
}

fn percentile(mut samples: Vec<Duration>, p: f64) -> Duration {
    samples.sort();
    let rank = ((samples.len() as f64) * p).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

/// How many mixed tasks phase 1 runs (`MCP_TASKS_CLUSTER_TASKS`, default 300).
fn mixed_tasks() -> usize {
    std::env::var("MCP_TASKS_CLUSTER_TASKS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_one_task_space() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    // The schema is created once, before three processes race to create it.
    drop(db.store().await.expect("create the schema"));
    let dir = Scratch::new("cluster");
    let mut instances: Vec<Instance> = ["a", "b", "c"]
        .iter()
        .map(|name| Instance::start(&db, &dir, name, &[]))
        .collect();
    let clients = Clients::new(instances.iter().map(|i| i.url.clone().unwrap()).collect());
    let started = Instant::now();

    // 1. Mixed tasks, each created on instance `at` (which runs it); the answer or cancel
    //    goes to the next instance, and gets go round robin.
    let n = mixed_tasks();
    let limits = Arc::new(tokio::sync::Semaphore::new(CONCURRENT_FLOWS));
    let mut flows = Vec::new();
    for i in 0..n {
        let (clients, limits) = (clients.clone(), limits.clone());
        flows.push(tokio::spawn(async move {
            let _permit = limits.acquire().await.unwrap();
            let at = i % 3;
            let other = (at + 1) % 3;
            match i % 3 {
                0 => {
                    let id = clients
                        .call(
                            at,
                            "import_rows",
                            json!({ "batches": 3, "batch_ms": 20 }),
                            None,
                        )
                        .await;
                    let done = clients
                        .wait(&id, Duration::from_secs(20), is_terminal)
                        .await;
                    assert_eq!(done["status"], "completed", "{done}");
                    assert_eq!(
                        first_text(&done["result"]),
                        "imported 300 rows in 3 batches"
                    );
                    None
                }
                1 => {
                    let arguments = json!({ "batches": 1, "batch_ms": 0, "confirm": true });
                    let id = clients.call(at, "import_rows", arguments, None).await;
                    let asked = clients
                        .wait(&id, Duration::from_secs(20), |s| {
                            s["status"] == "input_required"
                        })
                        .await;
                    assert_eq!(asked["status"], "input_required", "{asked}");
                    let key = first_input_key(&asked);
                    let sent = Instant::now();
                    clients.update_at(other, &id, &key, true).await;
                    let done = clients
                        .wait(&id, Duration::from_secs(20), is_terminal)
                        .await;
                    let took = sent.elapsed();
                    assert_eq!(done["status"], "completed", "{done}");
                    assert_eq!(
                        first_text(&done["result"]),
                        "imported 100 rows in 1 batches"
                    );
                    Some(("answer", took))
                }
                _ => {
                    let id = clients
                        .call(
                            at,
                            "workspace_report",
                            json!({ "workspace_id": format!("w{i}") }),
                            None,
                        )
                        .await;
                    let sent = Instant::now();
                    clients.cancel_at(other, &id).await;
                    let done = clients
                        .wait(&id, Duration::from_secs(20), is_terminal)
                        .await;
                    let took = sent.elapsed();
                    assert_eq!(done["status"], "cancelled", "{done}");
                    Some(("cancel", took))
                }
            }
        }));
    }
    let mut samples: HashMap<&str, Vec<Duration>> = HashMap::new();
    for flow in flows {
        if let Some((kind, took)) = flow.await.expect("a task flow failed") {
            samples.entry(kind).or_default().push(took);
        }
    }
    eprintln!(
        "phase 1: {n} mixed tasks on 3 instances in {:?}",
        started.elapsed()
    );
    for (kind, took) in &samples {
        eprintln!(
            "  {kind} sent to another instance than the runner's, until the outcome read back \
             (polling every {POLL_MS} ms): p50 {:?}, p99 {:?} ({} samples)",
            percentile(took.clone(), 0.5),
            percentile(took.clone(), 0.99),
            took.len()
        );
    }
    let p99 = percentile(samples.into_values().flatten().collect(), 0.99);
    // A generous bound: on a loaded 2-core machine most of this is the load of the polling
    // clients themselves (with 3 flows at once the p50 is ~40 ms cancel, ~70 ms answer).
    assert!(p99 < Duration::from_secs(5), "p99 propagation {p99:?}");

    // 2. A retried call (same key) on another instance answers the same task, and its work
    //    runs once.
    let key = "retry-of-one-call";
    let arguments = json!({ "batches": 2, "batch_ms": 50 });
    let first = clients
        .call(0, "import_rows", arguments.clone(), Some(key))
        .await;
    let retry = clients
        .call(1, "import_rows", arguments.clone(), Some(key))
        .await;
    assert_eq!(first, retry, "a retry with the same key is the same task");
    let other_key = clients
        .call(1, "import_rows", arguments.clone(), Some("another-call"))
        .await;
    assert_ne!(first, other_key);
    for id in [&first, &other_key] {
        let done = clients.wait(id, Duration::from_secs(20), is_terminal).await;
        assert_eq!(done["status"], "completed", "{done}");
    }
    let again = clients.call(2, "import_rows", arguments, Some(key)).await;
    assert_eq!(
        first, again,
        "a retry after the task completed is still that task"
    );
    let journals: Vec<PathBuf> = instances.iter().map(|i| i.journal.clone()).collect();
    let journal_refs: Vec<&Path> = journals.iter().map(PathBuf::as_path).collect();
    let counts = journal_counts(&journal_refs);
    for batch in 1..=2 {
        assert_eq!(
            counts.get(&(first.clone(), batch)),
            Some(&1),
            "batch {batch} of the retried call ran once"
        );
    }

    // A task that runs for longer than two leases on a healthy instance: its renewals keep
    // it there (epoch 1, every batch once), checked after phase 3.
    let long = clients
        .call(
            1,
            "import_rows",
            json!({ "batches": 3, "batch_ms": 3000 }),
            None,
        )
        .await;

    // 3. SIGKILL instance a mid-task: 24 `resume` tasks with 8 steps, 12 `fail` tasks.
    let mut resume_ids = Vec::new();
    let mut fail_ids = Vec::new();
    for i in 0..24 {
        resume_ids.push(
            clients
                .call(
                    0,
                    "import_rows",
                    json!({ "batches": 8, "batch_ms": 150 }),
                    None,
                )
                .await,
        );
        if i % 2 == 0 {
            fail_ids.push(
                clients
                    .call(
                        0,
                        "workspace_report",
                        json!({ "workspace_id": format!("k{i}") }),
                        None,
                    )
                    .await,
            );
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    instances[0].process.kill9();
    let killed = Instant::now();
    let steps_at_kill = stored_steps(&db).await;
    let midway = resume_ids
        .iter()
        .filter(|id| steps_at_kill.iter().any(|(t, _)| t == *id))
        .count();
    assert!(midway > 0, "the kill came mid-task: some steps were stored");
    let survivors = Clients::new(
        instances[1..]
            .iter()
            .map(|i| i.url.clone().unwrap())
            .collect(),
    );
    let deadline = Duration::from_millis(LEASE_MS) + Duration::from_secs(8);
    for id in &fail_ids {
        let done = survivors.wait(id, deadline, is_terminal).await;
        assert_eq!(done["status"], "failed", "{done}");
        let message = done["statusMessage"].as_str().unwrap_or_default();
        assert!(
            message.contains("stopped"),
            "the message says the server stopped: {message}"
        );
    }
    let fail_took = killed.elapsed();
    for id in &resume_ids {
        let done = survivors
            .wait(id, deadline + Duration::from_secs(2), is_terminal)
            .await;
        assert_eq!(done["status"], "completed", "{id}: {done}");
        assert_eq!(
            first_text(&done["result"]),
            "imported 800 rows in 8 batches"
        );
    }
    let resume_took = killed.elapsed();
    let counts = journal_counts(&journal_refs);
    for (task, batch) in &steps_at_kill {
        if resume_ids.contains(task) {
            assert_eq!(
                counts.get(&(task.clone(), *batch)),
                Some(&1),
                "step {batch} of {task} completed before the kill and must not run again"
            );
        }
    }
    // Every batch ran at most once, except at most one per task: the one in flight at the
    // kill (its side effect done, its result not stored), which the takeover runs again.
    for id in &resume_ids {
        let twice: Vec<u32> = (1..=8)
            .filter(|batch| counts.get(&(id.clone(), *batch)).is_some_and(|n| *n > 1))
            .collect();
        assert!(
            twice.len() <= 1,
            "{id}: batches {twice:?} ran more than once (at most the one in flight may)"
        );
        for batch in &twice {
            assert_eq!(counts[&(id.clone(), *batch)], 2, "{id} batch {batch}");
            assert!(
                !steps_at_kill.contains(&(id.clone(), *batch)),
                "{id} batch {batch} was stored before the kill and ran again"
            );
        }
    }
    for id in &resume_ids {
        for batch in 1..=8 {
            assert!(
                counts.contains_key(&(id.clone(), batch)),
                "{id} batch {batch} ran"
            );
        }
    }
    eprintln!(
        "phase 3: SIGKILL with {} resume tasks ({midway} midway) and {} fail tasks: failed \
         within {fail_took:?}, resumed ones completed within {resume_took:?} (lease {LEASE_MS} ms)",
        resume_ids.len(),
        fail_ids.len()
    );
    assert!(fail_took < Duration::from_millis(LEASE_MS) + Duration::from_secs(5));
    let done = survivors
        .wait(&long, Duration::from_secs(15), is_terminal)
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    let counts = journal_counts(&journal_refs);
    for batch in 1..=3 {
        assert_eq!(
            counts.get(&(long.clone(), batch)),
            Some(&1),
            "long task, batch {batch}"
        );
    }
    let epoch = rows(&db, std::slice::from_ref(&long)).await[&long].clone();
    assert!(
        epoch.ends_with("|1"),
        "a task that outlived its lease length on a live instance kept its first lease \
         (renewed, never taken over): {epoch}"
    );

    // 4. SIGSTOP instance c while it runs tasks, until b took every one over; SIGCONT
    //    while b still runs them: c runs the step it was inside to its end, its writes are
    //    refused, and it starts nothing more.
    let (b, c) = (0usize, 1usize); // indexes into `survivors`
    // Long enough that the first task b takes over is still running when the last one's
    // lease runs out: the takeovers spread over up to a lease length, and c's first tasks
    // are several steps ahead of its last when it stops (24 x 500 ms leaves b >= 8 s).
    const BATCHES: u32 = 24;
    let mut stopped_ids = Vec::new();
    for _ in 0..8 {
        stopped_ids.push(
            survivors
                .call(
                    c,
                    "import_rows",
                    json!({ "batches": BATCHES, "batch_ms": 500 }),
                    None,
                )
                .await,
        );
    }
    // Stop c once every one of its tasks stored a step: mid-task, on a condition.
    let waited = Instant::now();
    loop {
        let steps = stored_steps(&db).await;
        if stopped_ids
            .iter()
            .all(|id| steps.iter().any(|(task, _)| task == id))
        {
            break;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(20),
            "c's tasks never stored a step"
        );
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
    instances[2].process.signal("-STOP");
    // Every task taken over by b (epoch 2, runner b), still running there.
    let client = db.raw().await;
    let taken_over = || async {
        client
            .query(
                "SELECT id, runner, epoch, status FROM tasks WHERE id = ANY($1)",
                &[&stopped_ids],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r.get::<_, String>(0),
                    (
                        r.get::<_, Option<String>>(1),
                        r.get::<_, i64>(2),
                        r.get::<_, String>(3),
                    ),
                )
            })
            .collect::<HashMap<_, _>>()
    };
    let waited = Instant::now();
    let takeover = loop {
        let now = taken_over().await;
        if now
            .values()
            .all(|(runner, epoch, _)| runner.as_deref() == Some("b") && *epoch > 1)
        {
            break now;
        }
        assert!(
            waited.elapsed() < Duration::from_millis(LEASE_MS) + Duration::from_secs(10),
            "c's tasks not all taken over by b: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    };
    for (id, (_, epoch, status)) in &takeover {
        assert_eq!(epoch, &2, "{id} taken over once");
        assert_eq!(
            status, "working",
            "{id} still running on b when c resumes: {takeover:?}"
        );
    }
    let c_journal = instances[2].journal.clone();
    let c_lines = |journal: &Path| {
        std::fs::read_to_string(journal)
            .unwrap_or_default()
            .lines()
            .filter(|line| stopped_ids.iter().any(|id| line.starts_with(id.as_str())))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let before_cont = c_lines(&c_journal).len();
    instances[2].process.signal("-CONT");
    // c wakes up inside one step of (nearly) every task: that step's side effect happens
    // (a step's code is not interrupted), and its record is refused. Waited for, not slept
    // on: c has resumed once a step of its ended after SIGCONT.
    let waited = Instant::now();
    while c_lines(&c_journal).len() == before_cont {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "c ran none of its in-flight steps after SIGCONT"
        );
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
    let only_b = Clients::new(vec![survivors.urls[b].clone()]);
    for id in &stopped_ids {
        let done = only_b.wait(id, Duration::from_secs(30), is_terminal).await;
        assert_eq!(done["status"], "completed", "{id} completed on b: {done}");
        assert_eq!(
            first_text(&done["result"]),
            format!("imported {} rows in {BATCHES} batches", 100 * BATCHES)
        );
    }
    let after = taken_over().await;
    for (id, (runner, epoch, _)) in &after {
        assert_eq!(
            (runner.as_deref(), *epoch),
            (takeover[id].0.as_deref(), takeover[id].1),
            "{id}: the resumed instance took nothing back"
        );
    }
    // While b ran them to their end, c started no step of them: each of its refused step
    // records is the one step it was inside at the stop (a task stopped between two steps
    // has none).
    let resumed = c_lines(&c_journal).split_off(before_cont);
    for id in &stopped_ids {
        let runs = resumed
            .iter()
            .filter(|line| line.starts_with(id.as_str()))
            .count();
        assert!(
            runs <= 1,
            "{id}: after SIGCONT c ran {runs} steps of a task it had lost (at most the one \
             it was inside may end): {resumed:?}"
        );
    }
    eprintln!(
        "phase 4: SIGSTOP, takeover by b (epoch 2) of {} tasks, SIGCONT: c's {} \
         in-flight steps ended, none stored (fenced), and c started no step after",
        stopped_ids.len(),
        resumed.len()
    );
    // c still serves, for every task.
    let c_only = Clients::new(vec![survivors.urls[c].clone()]);
    for id in stopped_ids.iter().chain(&resume_ids).take(10) {
        assert_eq!(c_only.get(id).await["status"], "completed");
    }
    eprintln!(
        "three_instances_one_task_space: {:?} in all",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_run_what_a_front_records() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    drop(db.store().await.expect("create the schema"));
    let dir = Scratch::new("workers");
    let front = Instance::start(&db, &dir, "front", &["--queued-calls", "--no-execution"]);
    let mut workers = [
        Instance::start(&db, &dir, "w1", &["--worker"]),
        Instance::start(&db, &dir, "w2", &["--worker"]),
    ];
    let clients = Clients::new(vec![front.url.clone().unwrap()]);

    // Queued tasks complete on the workers; the front ran nothing (it writes no journal).
    let mut quick = Vec::new();
    for _ in 0..10 {
        quick.push(
            clients
                .call(
                    0,
                    "import_rows",
                    json!({ "batches": 2, "batch_ms": 10 }),
                    None,
                )
                .await,
        );
    }
    // A question asked by the work reaches the client through the task (the front that
    // received the call does not run it).
    let asking = clients
        .call(
            0,
            "import_rows",
            json!({ "batches": 1, "confirm": true }),
            None,
        )
        .await;
    for id in &quick {
        let done = clients.wait(id, Duration::from_secs(15), is_terminal).await;
        assert_eq!(done["status"], "completed", "{done}");
    }
    let asked = clients
        .wait(&asking, Duration::from_secs(15), |s| {
            s["status"] == "input_required"
        })
        .await;
    let key = first_input_key(&asked);
    clients.update_at(0, &asking, &key, true).await;
    let done = clients
        .wait(&asking, Duration::from_secs(15), is_terminal)
        .await;
    assert_eq!(
        first_text(&done["result"]),
        "imported 100 rows in 1 batches"
    );
    assert!(
        std::fs::read_to_string(&front.journal)
            .unwrap_or_default()
            .is_empty(),
        "the front ran no work"
    );

    // Kill worker 1 mid-task: its tasks move to worker 2.
    let mut slow = Vec::new();
    for _ in 0..12 {
        slow.push(
            clients
                .call(
                    0,
                    "import_rows",
                    json!({ "batches": 6, "batch_ms": 200 }),
                    None,
                )
                .await,
        );
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    workers[0].process.kill9();
    let killed = Instant::now();
    let steps_at_kill = stored_steps(&db).await;
    let w1_tasks: HashSet<String> = journal_counts(&[&workers[0].journal])
        .into_keys()
        .map(|(task, _)| task)
        .filter(|task| slow.contains(task))
        .collect();
    assert!(
        !w1_tasks.is_empty(),
        "worker 1 was running some of the tasks"
    );
    for id in &slow {
        let done = clients
            .wait(
                id,
                Duration::from_millis(LEASE_MS) + Duration::from_secs(10),
                is_terminal,
            )
            .await;
        assert_eq!(done["status"], "completed", "{id}: {done}");
    }
    let took = killed.elapsed();
    let counts = journal_counts(&[&workers[0].journal, &workers[1].journal]);
    let w2_tasks: HashSet<String> = journal_counts(&[&workers[1].journal])
        .into_keys()
        .map(|(task, _)| task)
        .collect();
    for task in &w1_tasks {
        assert!(
            w2_tasks.contains(task),
            "{task}, killed with worker 1, was finished by worker 2"
        );
    }
    for (task, batch) in &steps_at_kill {
        if slow.contains(task) {
            assert_eq!(
                counts.get(&(task.clone(), *batch)),
                Some(&1),
                "{task} {batch}"
            );
        }
    }
    eprintln!(
        "workers: {} tasks of the killed worker finished by the other within {took:?}",
        w1_tasks.len()
    );
}

/// How often the step of [`counted`] ran.
#[derive(Clone, Default)]
struct Runs(Arc<AtomicUsize>);

/// Runs one step that counts its runs.
#[task_tool(mode = "required", poll_interval = "20ms")]
async fn counted(ctx: TaskContext, State(runs): State<Runs>) -> Result<String, ToolError> {
    let n = ctx
        .step("count", || async move {
            runs.0.fetch_add(1, Ordering::SeqCst) + 1
        })
        .await?;
    Ok(format!("run {n}"))
}

fn counted_server(runs: &Runs) -> TaskServer {
    TaskServer::new(toolkit![counted].unwrap().with_state(runs.clone()))
}

/// A retried `tools/call` with the same key (memory store, over HTTP) answers the same task
/// and runs nothing twice; another key is another call; a key that is not a short string
/// is refused with `-32602` saying what to send.
#[tokio::test]
async fn a_retry_with_the_same_key_is_the_same_task() {
    let runs = Runs::default();
    let http = common::Http::start(counted_server(&runs)).await;
    let clients = Clients::new(vec![http.url.clone()]);
    let first = clients.call(0, "counted", json!({}), Some("k1")).await;
    let retry = clients.call(0, "counted", json!({}), Some("k1")).await;
    assert_eq!(first, retry);
    let other = clients.call(0, "counted", json!({}), Some("k2")).await;
    assert_ne!(first, other);
    let unkeyed = clients.call(0, "counted", json!({}), None).await;
    for id in [&first, &other, &unkeyed] {
        let done = clients.wait(id, Duration::from_secs(5), is_terminal).await;
        assert_eq!(done["status"], "completed", "{done}");
    }
    assert_eq!(runs.0.load(Ordering::SeqCst), 3, "three calls, three runs");
    for bad in [json!(""), json!(7), json!("x".repeat(201))] {
        let mut params = json!({ "name": "counted", "arguments": {} });
        params["_meta"] = meta(TASKS);
        params["_meta"]["mcp-tasks/idempotencyKey"] = bad.clone();
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params });
        let (_, response, _) = http
            .post(
                &body,
                &[
                    ("mcp-protocol-version", common::V2026.to_owned()),
                    ("mcp-method", "tools/call".to_owned()),
                    ("mcp-name", "counted".to_owned()),
                ],
            )
            .await;
        assert_eq!(response["error"]["code"], -32602, "{bad}: {response}");
        let message = response["error"]["message"].as_str().unwrap();
        assert!(message.contains("mcp-tasks/idempotencyKey"), "{message}");
    }
}

/// `TaskClient` sends one key per logical call and the same key when it retries: the
/// answer to the first `tools/call` is lost (a proxy answers 502 after the server created
/// the task), the client retries, and the server answers with that task, not a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_client_retries_a_lost_answer_with_its_key() {
    let runs = Runs::default();
    let server = common::Http::start(counted_server(&runs)).await;
    let upstream = server.url.clone();
    let lost = Arc::new(AtomicUsize::new(0));
    let keys = Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let proxy = {
        let (lost, keys) = (lost.clone(), keys.clone());
        axum::Router::new().fallback(move |request: axum::extract::Request| {
            let (upstream, lost, keys) = (upstream.clone(), lost.clone(), keys.clone());
            async move {
                let (parts, body) = request.into_parts();
                let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
                let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let mut forward = reqwest::Client::new()
                    .request(parts.method.clone(), &upstream)
                    .body(body.to_vec());
                for (name, value) in &parts.headers {
                    if name != "host" && name != "content-length" {
                        forward = forward.header(name, value);
                    }
                }
                let answer = forward.send().await.unwrap();
                let status = answer.status();
                let headers = answer.headers().clone();
                let bytes = answer.bytes().await.unwrap();
                if message["method"] == "tools/call" {
                    keys.lock()
                        .unwrap()
                        .push(message["params"]["_meta"]["mcp-tasks/idempotencyKey"].clone());
                    if lost.fetch_add(1, Ordering::SeqCst) == 0 {
                        // The server created the task; its answer is lost on the way back.
                        return axum::response::Response::builder()
                            .status(502)
                            .body(axum::body::Body::from("bad gateway"))
                            .unwrap();
                    }
                }
                let mut response = axum::response::Response::builder().status(status.as_u16());
                for (name, value) in &headers {
                    if name != "content-length" && name != "transfer-encoding" {
                        response = response.header(name, value);
                    }
                }
                response.body(axum::body::Body::from(bytes)).unwrap()
            }
        })
    };
    let proxy = common::Http::start_router(proxy).await;
    let client = TaskClient::builder()
        .connect_http(&proxy.url)
        .await
        .expect("connect through the proxy");
    let result = client
        .call_tool("counted", ())
        .await
        .expect("the call succeeds");
    assert_eq!(first_text(&serde_json::to_value(&result).unwrap()), "run 1");
    let keys = keys.lock().unwrap().clone();
    assert_eq!(keys.len(), 2, "one lost answer, one retry: {keys:?}");
    assert!(keys[0].is_string(), "the client sent a key: {keys:?}");
    assert_eq!(keys[0], keys[1], "the retry carries the same key");
    assert_eq!(runs.0.load(Ordering::SeqCst), 1, "the work ran once");
    // A second logical call gets a key of its own.
    client
        .call_tool("counted", ())
        .await
        .expect("the second call succeeds");
    assert_eq!(runs.0.load(Ordering::SeqCst), 2);
}

/// Who ran a step of [`gated`], and the gate its step waits behind.
#[derive(Clone)]
struct Gated {
    who: &'static str,
    open: Arc<tokio::sync::watch::Sender<bool>>,
    /// Runs of the step started.
    runs: Arc<AtomicUsize>,
    /// Runs of the step under way (ended when they return or their future is dropped).
    running: Arc<AtomicUsize>,
    /// The most runs of the step ever under way at once.
    most: Arc<AtomicUsize>,
}

impl Gated {
    fn new(who: &'static str) -> Self {
        Self {
            who,
            open: Arc::new(tokio::sync::watch::Sender::new(false)),
            runs: Arc::default(),
            running: Arc::default(),
            most: Arc::default(),
        }
    }
}

/// A run of the gated step under way, counted in [`Gated::running`] until dropped.
struct GateRun(Arc<AtomicUsize>);

impl Drop for GateRun {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One step that waits for its gate (it does not watch for a cancellation), then returns
/// who ran it.
#[task_tool(mode = "required", restart = "resume", poll_interval = "20ms")]
async fn gated(ctx: TaskContext, State(gated): State<Gated>) -> Result<String, ToolError> {
    let mut open = gated.open.subscribe();
    let who = ctx
        .step("gated", || async move {
            gated.runs.fetch_add(1, Ordering::SeqCst);
            let now = gated.running.fetch_add(1, Ordering::SeqCst) + 1;
            gated.most.fetch_max(now, Ordering::SeqCst);
            let _run = GateRun(Arc::clone(&gated.running));
            let _ = open.wait_for(|open| *open).await;
            gated.who.to_owned()
        })
        .await?;
    Ok(format!("step by {who}"))
}

/// An engine on `db` as instance `name`, serving `gated` over HTTP.
async fn gated_instance(
    db: &pg::Db,
    name: &str,
    gate: &Gated,
    config: mcp_tasks::ClusterConfig,
) -> common::Http {
    let store = db.store().await.expect("connect");
    let engine = mcp_tasks::Engine::builder(toolkit![gated].unwrap().with_state(gate.clone()))
        .with_store(store)
        .with_instance_id(name)
        .with_cluster(config)
        .build();
    engine.start().expect("start the cluster loops");
    common::Http::start(TaskServer::from_engine(engine)).await
}

/// The process's Prometheus recorder, installed once: the in-process engines' counters.
fn recorder() -> &'static mcp_tasks::metrics::PrometheusHandle {
    static HANDLE: OnceLock<mcp_tasks::metrics::PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| mcp_tasks::metrics::install_prometheus().expect("the recorder"))
}

/// A counter of this process's recorder (`name` with its labels, as the page shows it). (Under
/// `cargo test` the in-process tests share the process and its counters; nextest runs each
/// test in a process of its own.)
fn counter(recorder: &mcp_tasks::metrics::PrometheusHandle, name: &str) -> f64 {
    recorder
        .render()
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0.0, |value| value.trim().parse().unwrap())
}

/// Writes of running work the store refused as fenced, and work dropped because its lease
/// was not renewed in time: the two ways an instance that lost its lease stops.
fn stopped(recorder: &mcp_tasks::metrics::PrometheusHandle) -> (f64, f64) {
    (
        counter(recorder, "mcp_tasks_fenced_writes_total"),
        counter(
            recorder,
            "mcp_tasks_leases_lost_total{reason=\"unrenewed\"}",
        ),
    )
}

/// Fencing in the runtime: instance A runs a task and stalls (it stops renewing, a
/// stand-in for a paused process), its lease lapses, B takes the task over; when A's work
/// goes on, its step and its outcome are refused (fenced): the task ends as B ran it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_instance_that_lost_its_lease_writes_nothing() {
    // Installed before the engines start (a recording before it is lost).
    let recorder = recorder();
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let before = stopped(recorder);
    let (gate_a, gate_b) = (Gated::new("a"), Gated::new("b"));
    // A never renews within the test and never claims; B claims every 50 ms.
    let a = gated_instance(
        &db,
        "a",
        &gate_a,
        mcp_tasks::ClusterConfig::default()
            .with_lease(Duration::from_millis(300))
            .with_renewal(Duration::from_secs(3600))
            .with_execution(false),
    )
    .await;
    let b = gated_instance(
        &db,
        "b",
        &gate_b,
        mcp_tasks::ClusterConfig::default()
            .with_lease(Duration::from_secs(30))
            .with_claim_interval(Duration::from_millis(50)),
    )
    .await;
    let clients = Clients::new(vec![a.url.clone(), b.url.clone()]);
    let id = clients.call(0, "gated", json!({}), None).await;
    // B claims the task once A's lease lapsed: the epoch moves on.
    let started = Instant::now();
    loop {
        let row = rows(&db, std::slice::from_ref(&id)).await[&id].clone();
        if !row.ends_with("|1") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "B never took over: {row}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // B runs the task once its step started: its takeover's writes landed before that, and
    // it writes nothing more until its gate opens.
    let started = Instant::now();
    while gate_b.runs.load(Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "B never started the task's step"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let taken_over = rows(&db, std::slice::from_ref(&id)).await;
    // A's work goes on, or was dropped already: it stops before its lease could lapse
    // (unrenewed), or its step's write is refused (fenced), and so is its outcome. Waited
    // for on that exact event, counted by A, or, in a build that lets a write through, on
    // the write itself (a stored step, the row changed).
    gate_a.open.send_replace(true);
    let started = Instant::now();
    loop {
        let (fenced, unrenewed) = stopped(recorder);
        if fenced > before.0
            || unrenewed > before.1
            || !stored_steps(&db).await.is_empty()
            || rows(&db, std::slice::from_ref(&id)).await != taken_over
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "A's work neither stopped nor wrote: {}",
            recorder.render()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        taken_over,
        rows(&db, std::slice::from_ref(&id)).await,
        "the instance that lost its lease changed the task"
    );
    assert!(stored_steps(&db).await.is_empty(), "A's step was refused");
    gate_b.open.send_replace(true);
    let done = clients
        .wait(&id, Duration::from_secs(10), is_terminal)
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(first_text(&done["result"]), "step by b");
}

/// Owner scoping holds across instances: a task created on A reads on C (same owner), and
/// is "not found" (`-32602`) for every `tasks/*` method on B, whose requests belong to
/// another owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_owner_finds_nothing_on_any_instance() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let gate = Gated::new("a");
    let mut urls = Vec::new();
    for (name, owner) in [("a", "alice"), ("b", "mallory"), ("c", "alice")] {
        let engine = mcp_tasks::Engine::builder(toolkit![gated].unwrap().with_state(gate.clone()))
            .with_store(db.store().await.expect("connect"))
            .with_instance_id(name)
            .with_default_owner(owner)
            .build();
        urls.push(
            common::Http::start(TaskServer::from_engine(engine))
                .await
                .url,
        );
    }
    let clients = Clients::new(urls);
    let id = clients.call(0, "gated", json!({}), None).await;
    let seen = clients
        .rpc_at(2, "tasks/get", json!({ "taskId": id }), None)
        .await;
    assert_eq!(seen["result"]["status"], "working", "{seen}");
    for (method, params) in [
        ("tasks/get", json!({ "taskId": id })),
        ("tasks/cancel", json!({ "taskId": id })),
        (
            "tasks/update",
            json!({ "taskId": id, "inputResponses": { "elicit-1": { "action": "decline" } } }),
        ),
    ] {
        let response = clients.rpc_at(1, method, params, None).await;
        assert_eq!(response["error"]["code"], -32602, "{method}: {response}");
    }
    gate.open.send_replace(true);
    let done = Clients::new(vec![clients.urls[2].clone()])
        .wait(&id, Duration::from_secs(10), is_terminal)
        .await;
    assert_eq!(
        done["status"], "completed",
        "the other owner's cancel changed nothing"
    );
}

/// An instance whose renewals stall stops its work before the lease lapses (self-fencing):
/// the step in flight, which does not watch for a cancellation, is dropped before the lease
/// can lapse and stores nothing. When the instance then claims its own lapsed task (no
/// other instance took it) it replays it, under a later epoch, only after that work was
/// dropped: the step runs again, never beside its earlier run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reclaiming_its_own_lapsed_task_replays_it_after_its_fenced_work_was_dropped() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let gate = Gated::new("a");
    let a = gated_instance(
        &db,
        "a",
        &gate,
        mcp_tasks::ClusterConfig::default()
            .with_lease(Duration::from_millis(200))
            .with_renewal(Duration::from_secs(3600))
            .with_claim_interval(Duration::from_millis(50)),
    )
    .await;
    let clients = Clients::new(vec![a.url.clone()]);
    let id = clients.call(0, "gated", json!({}), None).await;
    // A claims its lapsed task again and again (each claim's lease lapses in turn) while
    // each run's step waits behind the gate: each run is dropped before its lease lapses,
    // and the next replay starts after it.
    let started = Instant::now();
    loop {
        let row = rows(&db, std::slice::from_ref(&id)).await[&id].clone();
        let epoch: u64 = row.rsplit('|').next().unwrap().parse().unwrap();
        if epoch >= 3 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "a never reclaimed its task: {row}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        gate.runs.load(Ordering::SeqCst) >= 2,
        "the fenced work was not dropped: no replay could start"
    );
    assert!(stored_steps(&db).await.is_empty());
    gate.open.send_replace(true);
    let done = clients
        .wait(&id, Duration::from_secs(10), is_terminal)
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(first_text(&done["result"]), "step by a");
    assert_eq!(
        gate.most.load(Ordering::SeqCst),
        1,
        "a replay's step ran beside an earlier run of it"
    );
}
