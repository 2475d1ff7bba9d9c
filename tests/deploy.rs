//! A rolling deploy through a real load balancer: three example servers
//! (`mcp-tasks-example-http`) on one Postgres schema behind nginx (Debian's package; the
//! config is `deploy/nginx.conf` with its ports replaced by free ones), round robin, no
//! stickiness. 300 task flows of mixed tools (steps, input, cancel, a multi round-trip call)
//! go through the balancer while each instance in turn gets SIGTERM, drains and is started
//! again.
//!
//! Checked: no `resume` task fails, no step runs twice and none is skipped (journals outside
//! the servers: every batch of every import exactly once), every answered question and
//! cancel reaches its task wherever it runs, every multi round-trip call completes, and many
//! of them with their second round on another instance than the first (the balancer names
//! the upstream of each answer), each instance exits cleanly after its drain, and the tasks a
//! drained instance released run again on another instance within 2 s of their release (the
//! lease is 30 s: that is the release, not a lapse). Each drain starts only once a `resume`
//! task with more work left than the grace period runs on that instance (the setup fails
//! otherwise), and that task must move. A `fail` tool still running when an instance's grace
//! period ends fails saying the server was shut down; those are counted and printed.
//!
//! Under CI it fails when nginx is not installed (`.ci/run` installs it); elsewhere it says
//! so and returns.

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use common::{
    TASKS, V2026, meta, parse_body,
    process::{Process, Scratch},
};
use serde_json::{Value, json};

const KEY: &str = "deploy-test-request-state-key-0123456789abcdef";
const FLOWS: usize = 300;
/// Flow kinds: steps (`import_rows`), a question answered through `tasks/update`, a cancel,
/// and a question before the task (multi round-trip).
const KINDS: usize = 4;
const CONCURRENT: usize = 16;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn nginx() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// One example server process on a fixed port.
struct Instance {
    process: Process,
}

impl Instance {
    fn start(db: &pg::Db, dir: &Path, name: &str, generation: usize, port: u16) -> Self {
        let journal = dir.join(format!("journal-{name}-{generation}.txt"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcp-tasks-example-http"));
        command
            .env("MCP_TASKS_REQUEST_STATE_KEY", KEY)
            .env("MCP_TASKS_STORE", &db.url)
            .env("MCP_TASKS_SCHEMA", &db.schema)
            .env("MCP_TASKS_BIND", format!("127.0.0.1:{port}"))
            .env("MCP_TASKS_INSTANCE", format!("{name}-{generation}"))
            .env("MCP_TASKS_LEASE_MS", "30000")
            .env("MCP_TASKS_RENEW_MS", "5000")
            .env("MCP_TASKS_CLAIM_MS", "250")
            .env("MCP_TASKS_REREAD_MS", "300")
            .env("MCP_TASKS_SHUTDOWN_GRACE_MS", "1000")
            .env("MCP_TASKS_PACE_MS", "100")
            .env("MCP_TASKS_JOURNAL", &journal);
        let (process, _) = Process::serving(&format!("instance {name}"), &mut command);
        Self { process }
    }

    fn sigterm(&self) {
        self.process.signal("-TERM");
    }

    /// The exit after SIGTERM (at most 20 s): the exit status and the shutdown report line.
    fn exited(&mut self) -> (std::process::ExitStatus, String) {
        let (status, lines) = self.process.exited(Duration::from_secs(20));
        let report = lines
            .iter()
            .find(|l| l.starts_with("stopped: "))
            .cloned()
            .unwrap_or_else(|| panic!("{} printed its report: {lines:?}", self.process.name()));
        (status, report)
    }
}

struct Nginx(Child);

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `deploy/nginx.conf` with its ports replaced, started with `dir` as its prefix.
fn start_nginx(binary: &Path, dir: &Path, listen: u16, upstreams: &[u16; 3]) -> Nginx {
    let template =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/nginx.conf"))
            .expect("deploy/nginx.conf");
    let mut config = template.replace("127.0.0.1:8080;", &format!("127.0.0.1:{listen};"));
    // The test's copy names the instance that answered each request.
    config = config.replacen(
        "location / {",
        "location / {\n            add_header X-Upstream $upstream_addr always;",
        1,
    );
    for (default, port) in [8081, 8082, 8083].iter().zip(upstreams) {
        config = config.replace(
            &format!("127.0.0.1:{default} "),
            &format!("127.0.0.1:{port} "),
        );
    }
    assert!(!config.contains(":808"), "every port replaced:\n{config}");
    let prefix = dir.join("nginx");
    std::fs::create_dir_all(&prefix).unwrap();
    let path = prefix.join("nginx.conf");
    std::fs::write(&path, config).unwrap();
    let child = Command::new(binary)
        .arg("-p")
        .arg(&prefix)
        .arg("-c")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nginx");
    Nginx(child)
}

/// A client of the balancer: JSON-RPC requests, retried while no instance can take them
/// (HTTP 502/503: every upstream was draining or restarting at that moment).
#[derive(Clone)]
struct Balancer {
    url: String,
    http: reqwest::Client,
    retries: Arc<AtomicUsize>,
}

impl Balancer {
    async fn rpc(&self, method: &str, params: Value, key: Option<&str>) -> Value {
        self.rpc_via(method, params, key).await.0
    }

    /// As [`Balancer::rpc`], with the address of the instance that answered.
    async fn rpc_via(&self, method: &str, mut params: Value, key: Option<&str>) -> (Value, String) {
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
        let started = Instant::now();
        loop {
            let sent = self
                .http
                .post(&self.url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", V2026)
                .header("mcp-method", method)
                .header("mcp-name", &name)
                .body(body.to_string())
                .send()
                .await;
            if let Ok(response) = sent {
                let status = response.status().as_u16();
                if status != 502 && status != 503 && status != 504 {
                    let upstream = response
                        .headers()
                        .get("x-upstream")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        // After a retry by nginx: the addresses tried, the last one answered.
                        .rsplit(", ")
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    return (parse_body(&response.text().await.unwrap()), upstream);
                }
            }
            self.retries.fetch_add(1, Ordering::Relaxed);
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{method} was never taken through the balancer"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn get(&self, id: &str) -> Value {
        let response = self.rpc("tasks/get", json!({ "taskId": id }), None).await;
        assert!(
            response.get("error").is_none(),
            "tasks/get {id}: {response}"
        );
        response["result"].clone()
    }
}

fn is_terminal(snapshot: &Value) -> bool {
    matches!(
        snapshot["status"].as_str(),
        Some("completed" | "failed" | "cancelled")
    )
}

/// For a multi round-trip call, the instances that answered its two rounds.
type Rounds = Option<(String, String)>;

/// One task flow through the balancer: the kind's tool, answered or cancelled as it goes;
/// the task id, its terminal snapshot and its rounds.
async fn flow(balancer: Balancer, n: usize) -> (usize, String, Value, Rounds) {
    let kind = n % KINDS;
    let key = format!("flow-{n}");
    let (tool, arguments) = match kind {
        0 => ("import_rows", json!({ "batches": 25, "batch_ms": 100 })),
        1 => (
            "workspace_report",
            json!({ "workspace_id": format!("w{n}") }),
        ),
        2 => (
            "workspace_report",
            json!({ "workspace_id": format!("c{n}") }),
        ),
        // A question before the task: a multi round-trip call, with no idempotency key (a
        // keyed call in cluster mode asks its questions through the task).
        _ => (
            "import_rows",
            json!({ "batches": 10, "batch_ms": 100, "confirm_first": true }),
        ),
    };
    let mut rounds = None;
    let created = if kind == 3 {
        let call = json!({ "name": tool, "arguments": arguments });
        let (round, first) = balancer.rpc_via("tools/call", call.clone(), None).await;
        let round = &round["result"];
        assert_eq!(round["resultType"], "input_required", "flow {n}: {round}");
        let question = common::first_input_key(round);
        let mut retry = call;
        retry["inputResponses"] =
            json!({ question: { "action": "accept", "content": { "go": true } } });
        retry["requestState"] = round["requestState"].clone();
        let (created, second) = balancer.rpc_via("tools/call", retry, None).await;
        rounds = Some((first, second));
        created
    } else {
        balancer
            .rpc(
                "tools/call",
                json!({ "name": tool, "arguments": arguments }),
                Some(&key),
            )
            .await
    };
    let id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("flow {n}: a task: {created}"))
        .to_owned();
    let started = Instant::now();
    let mut answered = HashSet::new();
    let mut cancelled = false;
    loop {
        let snapshot = balancer.get(&id).await;
        if is_terminal(&snapshot) {
            return (kind, id, snapshot, rounds);
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "flow {n} ({tool}) ends: {snapshot}"
        );
        if kind == 1 && snapshot["status"] == "input_required" {
            for key in snapshot["inputRequests"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.clone())
            {
                if answered.insert(key.clone()) {
                    let answer =
                        json!({ key: { "action": "accept", "content": { "include": true } } });
                    let response = balancer
                        .rpc(
                            "tasks/update",
                            json!({ "taskId": id, "inputResponses": answer }),
                            None,
                        )
                        .await;
                    assert!(response.get("error").is_none(), "{response}");
                }
            }
        }
        if kind == 2 && !cancelled && started.elapsed() > Duration::from_millis(120) {
            let response = balancer
                .rpc("tasks/cancel", json!({ "taskId": id }), None)
                .await;
            assert!(response.get("error").is_none(), "{response}");
            cancelled = true;
        }
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
}

/// Every `(task, batch)` line of the journals in `dir`, with its count.
fn journals(dir: &Path) -> HashMap<(String, u32), usize> {
    let mut batches = HashMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if !file.starts_with("journal-") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let (task, batch) = line.split_once(' ').unwrap();
            *batches
                .entry((task.to_owned(), batch.parse().unwrap()))
                .or_insert(0) += 1;
        }
    }
    batches
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_deploy_through_nginx_fails_no_resumable_task() {
    let Some(binary) = nginx() else {
        let line = "nginx is not installed (Debian's `nginx` package; .ci/run installs it)";
        assert!(
            std::env::var_os("CI").is_none(),
            "{line}, and CI requires it"
        );
        eprintln!("skipped: {line}");
        return;
    };
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let dir = Scratch::new("deploy");
    let ports = [free_port(), free_port(), free_port()];
    let names = ["a", "b", "c"];
    let mut instances: Vec<Instance> = names
        .iter()
        .zip(ports)
        .map(|(name, port)| Instance::start(&db, &dir, name, 0, port))
        .collect();
    let raw = db.raw().await;
    let listen = free_port();
    let _nginx = start_nginx(&binary, &dir, listen, &ports);
    let balancer = Balancer {
        url: format!("http://127.0.0.1:{listen}/mcp"),
        http: reqwest::Client::new(),
        retries: Arc::new(AtomicUsize::new(0)),
    };
    let patience = common::Patience::new("nginx answers");
    while reqwest::get(format!("http://127.0.0.1:{listen}/readyz"))
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
        != 200
    {
        patience.wait().await;
    }

    // The flows, CONCURRENT at a time, until FLOWS have run.
    let next = Arc::new(AtomicUsize::new(0));
    let results = Arc::new(Mutex::new(Vec::new()));
    let mut runners = Vec::new();
    for _ in 0..CONCURRENT {
        let (balancer, next, results) = (balancer.clone(), next.clone(), results.clone());
        runners.push(tokio::spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= FLOWS {
                    return;
                }
                let ended = flow(balancer.clone(), n).await;
                results.lock().unwrap().push(ended);
            }
        }));
    }

    // The rolling deploy: each instance in turn drains and starts again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut takeovers = Vec::new();
    let mut reports = Vec::new();
    for (i, name) in names.iter().enumerate() {
        // The test needs a `resume` task running here with more work left than the grace
        // period (1 s): at least 15 of its 25 batches of 100 ms to go. Without one, this
        // drain would check nothing: the setup fails instead.
        let me = format!("{name}-0");
        let wanted = Instant::now();
        let long = loop {
            let rows = raw
                .query(
                    "SELECT id, status_message FROM tasks WHERE runner = $1 \
                     AND purge_at_ms IS NULL AND lease_until_ms > 0 AND status = 'working' \
                     AND tool = 'import_rows'",
                    &[&me],
                )
                .await
                .unwrap();
            let found = rows.iter().find_map(|row| {
                let message: Option<String> = row.get(1);
                let (done, of) = message?
                    .strip_prefix("importing batch ")?
                    .split_once(" of ")
                    .map(|(d, o)| (d.parse::<u32>(), o.parse::<u32>()))?;
                (of.ok()? >= done.ok()? + 15).then(|| row.get::<_, String>(0))
            });
            if let Some(id) = found {
                break id;
            }
            assert!(
                wanted.elapsed() < Duration::from_secs(20),
                "test setup: {name} ran no `resume` task with work left for 20 s before its \
                 SIGTERM (the drain would check nothing)"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // The live tasks this instance runs now: after its drain each is held by another.
        let running_here: Vec<(String, String)> = raw
            .query(
                "SELECT id, tool FROM tasks WHERE runner = $1 AND purge_at_ms IS NULL \
                 AND status IN ('working', 'input_required')",
                &[&me],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
        assert!(
            running_here.iter().any(|(id, _)| *id == long),
            "{long} is among {running_here:?}"
        );
        let signalled = Instant::now();
        instances[i].sigterm();
        // Each task's takeover is timed from the last read that still showed it held here
        // (its release comes after that read) to the first read that shows it held by
        // another instance: anchored at the release itself, not at the SIGTERM, so a slow
        // drain does not eat into the 2 s.
        let mut held_at: HashMap<String, Instant> = running_here
            .iter()
            .map(|(id, _)| (id.clone(), signalled))
            .collect();
        let mut waiting: HashSet<String> = held_at.keys().cloned().collect();
        let mut moved = HashMap::new();
        let mut ended_here = HashMap::new();
        while !waiting.is_empty() {
            let read_at = Instant::now();
            let rows = raw
                .query(
                    "SELECT id, runner, status, lease_until_ms FROM tasks WHERE id = ANY($1)",
                    &[&waiting.iter().cloned().collect::<Vec<_>>()],
                )
                .await
                .unwrap();
            for row in rows {
                let (id, runner, status, lease): (String, Option<String>, String, Option<i64>) =
                    (row.get(0), row.get(1), row.get(2), row.get(3));
                let ended = !matches!(status.as_str(), "working" | "input_required");
                let elsewhere = runner.as_deref() != Some(me.as_str()) && lease.unwrap_or(0) > 0;
                if elsewhere && !ended {
                    moved.insert(id.clone(), held_at[&id].elapsed());
                } else if ended {
                    ended_here.insert(id.clone(), status);
                } else if lease.unwrap_or(0) > 0 {
                    held_at.insert(id.clone(), read_at);
                }
                if elsewhere || ended {
                    waiting.remove(&id);
                }
            }
            // The release is due at the end of the grace period (1 s); the bound leaves a
            // loaded machine 4 s more for it, while each takeover is held to 2 s below.
            assert!(
                signalled.elapsed() < Duration::from_secs(5),
                "{name}'s tasks are released and run on another instance within 5 s of its \
                 SIGTERM; still waiting: {waiting:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for (id, took) in &moved {
            assert!(
                *took <= Duration::from_secs(2),
                "{name}'s released task {id} ran on another instance {took:?} after its release"
            );
        }
        // A `resume` task is never failed by a drain: it ends here or runs on elsewhere; the
        // long one had more work left than the grace period, so it moved.
        for (id, tool) in &running_here {
            if tool == "import_rows" {
                assert!(
                    ended_here
                        .get(id)
                        .is_none_or(|status| status == "completed"),
                    "resume task {id} on {name} ended {:?} at its drain",
                    ended_here.get(id)
                );
            }
        }
        assert!(
            moved.contains_key(&long),
            "{name}'s long `resume` task {long} ran on another instance after the drain \
             (moved: {moved:?}, ended here: {ended_here:?})"
        );
        let slowest = moved.values().max().copied().unwrap_or_default();
        let (status, report) = instances[i].exited();
        assert!(status.success(), "{name}: {report}");
        reports.push(format!("{name}: {report}"));
        takeovers.push((name.to_string(), moved.len(), slowest));
        instances[i] = Instance::start(&db, &dir, name, 1, ports[i]);
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }

    for runner in runners {
        runner.await.expect("a flow runner");
    }
    let results = results.lock().unwrap().clone();
    assert_eq!(results.len(), FLOWS);
    let mut counts = HashMap::<(usize, String), usize>::new();
    let mut drain_failed = 0;
    let mut crossed = 0;
    for (kind, id, snapshot, rounds) in &results {
        let status = snapshot["status"].as_str().unwrap().to_owned();
        if let Some((first, second)) = rounds {
            assert!(
                !first.is_empty() && !second.is_empty(),
                "the balancer names upstreams"
            );
            crossed += usize::from(first != second);
        }
        match (kind, status.as_str()) {
            (0, "completed") | (2, "cancelled") | (1, "completed") => {}
            (3, "completed") => {
                let text = snapshot["result"]["content"][0]["text"].as_str();
                assert_eq!(
                    text,
                    Some("imported 1000 rows in 10 batches"),
                    "task {id}: the answer given in the second round reached the work"
                );
            }
            // Cancelled during its scan, unless a drain failed it first (below).
            (1 | 2, "failed")
                if snapshot["statusMessage"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("server was shut down") =>
            {
                drain_failed += 1;
            }
            _ => panic!("task {id} (kind {kind}) ended {status}: {snapshot}"),
        }
        *counts.entry((*kind, status)).or_insert(0) += 1;
    }
    let batches = journals(&dir);
    let twice: Vec<_> = batches.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "no step ran twice: {twice:?}");
    // Complete as well: every batch of every import, each exactly once in some instance's
    // journal, and nothing else (a replay that skipped a batch fails here).
    let expected: HashSet<(String, u32)> = results
        .iter()
        .filter_map(|(kind, id, _, _)| match kind {
            0 => Some((id, 25)),
            3 => Some((id, 10)),
            _ => None,
        })
        .flat_map(|(id, of)| (1..=of).map(move |batch| (id.clone(), batch)))
        .collect();
    let journaled: HashSet<(String, u32)> = batches.keys().cloned().collect();
    let mut missing: Vec<_> = expected.difference(&journaled).collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "every batch of every import is in a journal; missing {}: {missing:?}",
        missing.len()
    );
    let extra: Vec<_> = journaled.difference(&expected).collect();
    assert!(extra.is_empty(), "journal lines of no import: {extra:?}");
    // Round robin over three instances sends most second rounds elsewhere; each of those was
    // unsealed by an instance that did not seal it (the shared request-state key).
    let multi = results.iter().filter(|r| r.3.is_some()).count();
    assert!(
        crossed * 3 >= multi,
        "at least a third of the {multi} multi round-trip calls crossed instances: {crossed}"
    );
    eprintln!("flows: {counts:?}");
    eprintln!("multi round-trip calls: {multi}, second round on another instance: {crossed}");
    eprintln!("fail-tool tasks failed by a drain: {drain_failed}");
    eprintln!("drains: {reports:#?}");
    eprintln!("takeovers (instance, live tasks it left, slowest to run again): {takeovers:?}");
    eprintln!(
        "requests retried by the client (every upstream busy): {}",
        balancer.retries.load(Ordering::Relaxed)
    );
}
