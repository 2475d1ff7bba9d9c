//! Crash test of the durable store: the example HTTP server on a SQLite file, 200 tasks of
//! slow tools, some input answered, then `kill -9` and a restart on the same file. Nothing is
//! lost (R10, R19), `fail` tasks fail with the restart message, `resume` tasks complete
//! without re-running a step that completed before the kill or asking an answered question
//! again, and tasks that completed before the kill read back byte for byte.
//!
//! The kill comes once the database shows imports between steps and answered confirmations
//! still running (not after a fixed sleep), and what the test claims is checked against the
//! file as the dead process left it: answered tasks were live, with their answers stored;
//! the restart's report counts exactly the unfinished tasks of each policy.

mod common;

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use common::{
    Http, Patience, TASKS, first_input_key,
    process::{Process, Scratch},
};
use serde_json::{Value, json};

/// The example HTTP server, as a binary cargo builds before the tests.
fn example_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mcp-tasks-example-http"))
}

struct Server {
    process: Process,
    http: Http,
}

impl Server {
    /// Starts the example server on a free port with `db` and `journal`; returns it and the
    /// recovery line it printed.
    async fn start(db: &Path, journal: &Path) -> (Self, String) {
        let mut command = Command::new(example_binary());
        command
            .args(["--port", "0", "--store"])
            .arg(format!("sqlite:{}", db.display()))
            .arg("--journal")
            .arg(journal);
        let (process, url) = Process::serving("the example server", &mut command);
        let report = process
            .lines()
            .into_iter()
            .find(|line| line.starts_with("store sqlite:"))
            .unwrap_or_default();
        let mut http = Http::start_router(axum::Router::new()).await;
        http.url = url;
        (Self { process, http }, report)
    }

    /// SIGKILL: no destructor, no flush, no graceful shutdown.
    fn kill9(mut self) {
        self.process.kill9();
    }

    async fn call(&mut self, tool: &str, arguments: Value) -> String {
        let (_, response) = self
            .http
            .rpc(
                "tools/call",
                json!({ "name": tool, "arguments": arguments }),
                TASKS,
            )
            .await;
        assert_eq!(response["result"]["resultType"], "task", "{response}");
        response["result"]["taskId"].as_str().unwrap().to_owned()
    }

    async fn get(&mut self, id: &str) -> Value {
        let (_, response) = self
            .http
            .rpc("tasks/get", json!({ "taskId": id }), TASKS)
            .await;
        assert!(
            response.get("error").is_none(),
            "R10/R19: task {id} lost: {response}"
        );
        response["result"].clone()
    }

    /// Polls `tasks/get` until the task has `status` ([`Patience`]).
    async fn wait_status(&mut self, id: &str, status: &str) -> Value {
        let patience = Patience::new(format!("task {id} to be {status}"));
        loop {
            let snapshot = self.get(id).await;
            if snapshot["status"] == status {
                return snapshot;
            }
            patience.wait().await;
        }
    }

    async fn answer(&mut self, id: &str, key: &str, go: bool) {
        let (_, response) = self
            .http
            .rpc(
                "tasks/update",
                json!({ "taskId": id, "inputResponses": { key: { "action": "accept", "content": { "go": go } } } }),
                TASKS,
            )
            .await;
        assert_eq!(response["result"]["resultType"], "complete", "{response}");
    }
}

/// Steps stored per task, read straight from the database file.
fn stored_steps(db: &Path) -> HashMap<String, HashSet<u32>> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut steps: HashMap<String, HashSet<u32>> = HashMap::new();
    let mut query = conn.prepare("SELECT task_id, name FROM steps").unwrap();
    let rows = query
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .unwrap();
    for row in rows {
        let (task, name) = row.unwrap();
        let batch = name.strip_prefix("batch-").unwrap().parse().unwrap();
        steps.entry(task).or_default().insert(batch);
    }
    steps
}

/// A task's row, read straight from the database file.
#[derive(Debug)]
struct Row {
    tool: String,
    status: String,
    /// The stored answers to its input requests, by key.
    answers: serde_json::Map<String, Value>,
}

impl Row {
    fn live(&self) -> bool {
        matches!(self.status.as_str(), "working" | "input_required")
    }
}

/// Every task's row, read straight from the database file (also while the server runs: a
/// WAL reader sees the last commit).
fn rows(db: &Path) -> HashMap<String, Row> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut query = conn
        .prepare("SELECT id, tool, status, answers FROM tasks")
        .unwrap();
    query
        .query_map([], |r| {
            let answers: String = r.get(3)?;
            Ok((
                r.get(0)?,
                Row {
                    tool: r.get(1)?,
                    status: r.get(2)?,
                    answers: serde_json::from_str(&answers).unwrap(),
                },
            ))
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// The counts of the restart's report line: "… N unfinished task(s) resumed, M failed".
fn report_counts(report: &str) -> (usize, usize) {
    let counts = report
        .split_once(": ")
        .map(|(_, counts)| counts)
        .unwrap_or_else(|| panic!("no counts in {report:?}"));
    let resumed = counts
        .strip_suffix(" failed")
        .and_then(|c| c.split_once(" unfinished task(s) resumed, "));
    let Some((resumed, failed)) = resumed else {
        panic!("unexpected report {report:?}");
    };
    (resumed.parse().unwrap(), failed.parse().unwrap())
}

/// How often each (task, batch) side effect happened.
fn journal_counts(journal: &Path) -> HashMap<(String, u32), usize> {
    let mut counts = HashMap::new();
    for line in std::fs::read_to_string(journal).unwrap_or_default().lines() {
        let (task, batch) = line.split_once(' ').unwrap();
        *counts
            .entry((task.to_owned(), batch.parse().unwrap()))
            .or_default() += 1;
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_lost_across_kill_9() {
    let dir = Scratch::new("crash");
    let (db, journal) = (dir.join("tasks.db"), dir.join("journal.txt"));

    let (mut server, _) = Server::start(&db, &journal).await;
    // 200 tasks: 60 `fail` tasks, 100 `resume` tasks with 6 steps, 30 `resume` tasks waiting
    // for a confirmation (15 answered before the kill), 10 that complete before the kill.
    let mut fail_ids = Vec::new();
    let mut steps_ids = Vec::new();
    let mut confirm_ids = Vec::new();
    let mut done_ids = Vec::new();
    for i in 0..60 {
        fail_ids.push(
            server
                .call(
                    "workspace_report",
                    json!({ "workspace_id": format!("w{i}") }),
                )
                .await,
        );
    }
    for _ in 0..100 {
        steps_ids.push(
            server
                .call("import_rows", json!({ "batches": 6, "batch_ms": 1000 }))
                .await,
        );
    }
    // Long batches: an answered import is still running when the process dies.
    for _ in 0..30 {
        confirm_ids.push(
            server
                .call(
                    "import_rows",
                    json!({ "batches": 6, "batch_ms": 600, "confirm": true }),
                )
                .await,
        );
    }
    for _ in 0..10 {
        done_ids.push(server.call("import_rows", json!({ "batches": 0 })).await);
    }
    let total = fail_ids.len() + steps_ids.len() + confirm_ids.len() + done_ids.len();
    assert_eq!(total, 200);

    // Answer half the confirmations (yes), once each task asks.
    let (answered_ids, _unanswered) = confirm_ids.split_at(15);
    for id in answered_ids {
        let snapshot = server.wait_status(id, "input_required").await;
        let key = first_input_key(&snapshot);
        server.answer(id, &key, true).await;
    }
    // The results of tasks that completed before the kill, as served then.
    let mut done_before = BTreeMap::new();
    for id in &done_ids {
        let snapshot = server.wait_status(id, "completed").await;
        assert_eq!(snapshot["status"], "completed");
        done_before.insert(id.clone(), snapshot["result"].to_string());
    }
    // Kill mid-flight: once the file shows ten imports between steps and an answered import
    // running with its answer and a step stored (whatever the disk's speed).
    let patience = Patience::new("imports between steps, and answered imports running");
    loop {
        let (rows, steps) = (rows(&db), stored_steps(&db));
        let has_steps = |id: &String| steps.get(id).is_some_and(|s| !s.is_empty());
        let between_steps = steps_ids
            .iter()
            .filter(|id| rows[*id].live() && has_steps(id))
            .count();
        let answered_running = answered_ids
            .iter()
            .any(|id| rows[id].live() && !rows[id].answers.is_empty() && has_steps(id));
        if between_steps >= 10 && answered_running {
            break;
        }
        patience.wait().await;
    }
    server.kill9();

    // What the dead process left in the file.
    let at_kill = rows(&db);
    let steps_before = stored_steps(&db);
    let stored: usize = steps_before.values().map(HashSet::len).sum();
    let running_at_kill = steps_ids.iter().filter(|id| at_kill[*id].live()).count();
    let midway = steps_ids
        .iter()
        .filter(|id| at_kill[*id].live() && steps_before.get(*id).is_some_and(|s| !s.is_empty()))
        .count();
    assert!(midway > 0, "the kill came while imports were between steps");
    let answered_live: Vec<&String> = answered_ids
        .iter()
        .filter(|id| at_kill[*id].live() && !at_kill[*id].answers.is_empty())
        .collect();
    assert!(
        answered_live
            .iter()
            .any(|id| steps_before.get(*id).is_some_and(|s| !s.is_empty())),
        "the kill came while answered imports were running, their answers and a step stored"
    );
    let unanswered_live = confirm_ids[15..]
        .iter()
        .filter(|id| at_kill[*id].status == "input_required")
        .count();
    let live_of = |tool: &str| {
        at_kill
            .values()
            .filter(|row| row.tool == tool && row.live())
            .count()
    };
    let (resume_live, fail_live) = (live_of("import_rows"), live_of("workspace_report"));
    assert_eq!(fail_live, 60, "every workspace_report was still running");

    let (mut server, report) = Server::start(&db, &journal).await;
    assert_eq!(
        report_counts(&report),
        (resume_live, fail_live),
        "the restart resumed every unfinished `resume` task and failed every `fail` one: \
         {report}"
    );

    // Every id returned before the kill resolves (0 lost).
    for id in fail_ids
        .iter()
        .chain(&steps_ids)
        .chain(&confirm_ids)
        .chain(&done_ids)
    {
        server.get(id).await;
    }
    // `fail` tasks failed with the restart message.
    for id in &fail_ids {
        let snapshot = server.get(id).await;
        assert_eq!(snapshot["status"], "failed", "{snapshot}");
        assert_eq!(snapshot["error"]["code"], -32603);
        assert!(
            snapshot["statusMessage"]
                .as_str()
                .unwrap()
                .contains("restarted"),
            "{snapshot}"
        );
    }
    // Completed tasks read back byte for byte.
    for (id, before) in &done_before {
        assert_eq!(&server.get(id).await["result"].to_string(), before);
    }
    // `resume` tasks complete; answered questions are never asked again; the unanswered ones
    // are asked again under the same key and answered now.
    let answered: HashSet<&String> = answered_ids.iter().collect();
    let mut pending: Vec<&String> = steps_ids.iter().chain(&confirm_ids).collect();
    let patience = Patience::with_bound("every resumed task to complete", Duration::from_secs(60));
    while !pending.is_empty() {
        let mut still = Vec::new();
        for id in pending {
            let snapshot = server.get(id).await;
            match snapshot["status"].as_str().unwrap() {
                "completed" => {
                    let text = snapshot["result"]["content"][0]["text"].as_str().unwrap();
                    assert!(text.starts_with("imported"), "{text}");
                }
                "input_required" => {
                    assert!(
                        !answered.contains(id),
                        "an answered question was asked again: {snapshot}"
                    );
                    let key = first_input_key(&snapshot);
                    assert_eq!(key, "elicit-1", "the replay asks under the same key");
                    server.answer(id, &key, true).await;
                    still.push(id);
                }
                "working" => still.push(id),
                other => panic!("task {id} ended {other}: {snapshot}"),
            }
        }
        pending = still;
        if !pending.is_empty() {
            patience.wait().await;
        }
    }
    // No step that completed before the kill ran again; every batch ran.
    let counts = journal_counts(&journal);
    for (task, batches) in &steps_before {
        for batch in batches {
            assert_eq!(
                counts.get(&(task.clone(), *batch)),
                Some(&1),
                "step batch-{batch} of {task} completed before the kill and ran again"
            );
        }
    }
    for id in steps_ids.iter().chain(answered_ids) {
        for batch in 1..=6 {
            assert!(
                counts.contains_key(&(id.clone(), batch)),
                "batch {batch} of {id} never ran"
            );
        }
    }
    eprintln!(
        "crash test: 200 tasks; at the kill {running_at_kill} of 100 imports running, {midway} \
         of them between steps, {} answered imports running with their answers stored, \
         {unanswered_live} waiting for an answer, {stored} steps stored; {report}",
        answered_live.len()
    );
    drop(server);
}
