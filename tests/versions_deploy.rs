//! A deploy that changes a tool while its tasks run: example servers
//! (`mcp-tasks-example-http`) on one Postgres schema, `sync_ledger` in three builds
//! (`--ledger-build`, `examples/common/ledger.rs`), instances replaced one by one with
//! SIGTERM (each drains, and the tasks it ran are claimed by the others).
//!
//! 1. **A patch.** Three instances of build 1 run tasks; each is replaced by build 2, whose
//!    `sync_ledger` (same version) posts another way and adds a step behind the patch
//!    `ledger-v2`. Every task completes; the tasks build 1 started replay build 1's path on
//!    build 2 (their `post-v1`, no `notify`), the tasks started on build 2 take the new one;
//!    no step runs twice (journals outside the servers).
//! 2. **A change without a patch.** Tasks started on build 2 are in flight when every
//!    instance is replaced by build 3 (version `2` of the tool). They wait: `working`, not
//!    claimed by any build 3 instance, while build 3's own tasks complete. An instance of
//!    build 2 started again claims them, and they complete on the new path they started on
//!    (their patch's marker is stored: a replay on another instance keeps `post-v2`).
//!
//! Under CI it fails when Postgres does not answer; elsewhere it says so and returns.

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{
    collections::{HashMap, HashSet},
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use common::{
    Http, TASKS,
    process::{Process, Scratch},
};
use serde_json::json;

/// One example server, of one build of `sync_ledger`, journaling to its own file.
struct Instance {
    process: Process,
    url: String,
}

impl Instance {
    fn start(db: &pg::Db, dir: &Path, name: &str, build: u8) -> Self {
        let journal = dir.join(format!("journal-{name}.txt"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcp-tasks-example-http"));
        command
            .args(["--store", &db.url, "--schema", &db.schema, "--port", "0"])
            .env(
                "MCP_TASKS_REQUEST_STATE_KEY",
                "versions-test-request-state-key-0123456789",
            )
            .args(["--instance", name, "--pace-ms", "100"])
            .args(["--ledger-build", &build.to_string()])
            // Released tasks are claimed at once; a crashed instance's would wait 30 s.
            .args(["--lease-ms", "30000", "--renew-ms", "5000"])
            .args(["--claim-ms", "200", "--reread-ms", "300"])
            .args(["--shutdown-grace-ms", "500"])
            .arg("--journal")
            .arg(&journal);
        let (process, url) = Process::serving(name, &mut command);
        Self { process, url }
    }

    /// SIGTERM, then the exit of its drain (at most 20 s).
    fn replace(mut self) {
        self.process.signal("-TERM");
        self.process.exited(Duration::from_secs(20));
    }

    fn client(&self) -> Http {
        Http::to(&self.url)
    }
}

/// The steps each task ran, by journal: `task -> [(journal, step)]`.
fn journals(dir: &Path) -> HashMap<String, Vec<(String, String)>> {
    let mut runs: HashMap<String, Vec<(String, String)>> = HashMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(instance) = file.strip_prefix("journal-") else {
            continue;
        };
        let instance = instance.trim_end_matches(".txt").to_owned();
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let (task, step) = line.split_once(' ').expect("`<task> <step>`");
            (runs.entry(task.to_owned()).or_default()).push((instance.clone(), step.to_owned()));
        }
    }
    runs
}

/// The steps task `id` ran (each once: asserted).
fn steps_of(runs: &HashMap<String, Vec<(String, String)>>, id: &str) -> HashSet<String> {
    let ran = runs.get(id).cloned().unwrap_or_default();
    let mut steps = HashSet::new();
    for (instance, step) in &ran {
        assert!(
            steps.insert(step.clone()),
            "task {id}: step {step} ran twice (again on {instance}): {ran:?}"
        );
    }
    steps
}

/// Waits until every task of `ids` journaled `step` (at most 20 s).
async fn until_each_ran(dir: &Path, ids: &[String], step: &str) {
    let started = Instant::now();
    loop {
        let runs = journals(dir);
        let done = ids.iter().all(|id| {
            runs.get(id)
                .is_some_and(|ran| ran.iter().any(|(_, s)| s == step))
        });
        if done {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "every task ran `{step}`: {runs:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Calls `sync_ledger` with `batches` on `instance`: the task's id.
async fn start_ledger(instance: &Instance, batches: u32) -> String {
    let mut client = instance.client();
    client
        .call_task("sync_ledger", json!({ "batches": batches }))
        .await
}

/// Each task's status through `client` (polled every 100 ms until every one ended, at most
/// `bound`): the final snapshots, by id.
async fn until_ended(
    client: &mut Http,
    ids: &[String],
    bound: Duration,
) -> HashMap<String, serde_json::Value> {
    let started = Instant::now();
    let mut ended = HashMap::new();
    while ended.len() < ids.len() {
        for id in ids {
            if ended.contains_key(id) {
                continue;
            }
            let (_, got) = client
                .rpc("tasks/get", json!({ "taskId": id }), TASKS)
                .await;
            let status = got["result"]["status"].as_str().unwrap_or_default();
            if matches!(status, "completed" | "failed" | "cancelled") {
                ended.insert(id.clone(), got["result"].clone());
            }
        }
        assert!(
            started.elapsed() < bound,
            "every task ended within {bound:?}; ended: {ended:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ended
}

/// Replaces each instance in turn by one of `build` (named `b<build>-<i>`): the new one
/// serves before the old one gets SIGTERM and drains.
fn roll(instances: &mut [Instance], db: &pg::Db, dir: &Path, build: u8) {
    for (i, instance) in instances.iter_mut().enumerate() {
        let name = format!("b{build}-{i}");
        std::mem::replace(instance, Instance::start(db, dir, &name, build)).replace();
    }
}

fn assert_completed(ended: &HashMap<String, serde_json::Value>) {
    for (id, task) in ended {
        assert_eq!(task["status"], "completed", "task {id}: {task}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_changes_while_its_tasks_run() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let scratch = Scratch::new("versions");
    let dir: &Path = &scratch;

    // 1. Build 1 runs six tasks; each instance is replaced by build 2.
    let mut instances: Vec<Instance> = (0..3)
        .map(|i| Instance::start(&db, dir, &format!("b1-{i}"), 1))
        .collect();
    let mut old = Vec::new();
    for i in 0..6 {
        old.push(start_ledger(&instances[i % 3], 50).await);
    }
    until_each_ran(dir, &old, "post-v1").await;
    roll(&mut instances, &db, dir, 2);
    let mut new = Vec::new();
    for i in 0..6 {
        new.push(start_ledger(&instances[i % 3], 3).await);
    }
    let mut client = instances[0].client();
    let all: Vec<String> = old.iter().chain(&new).cloned().collect();
    assert_completed(&until_ended(&mut client, &all, Duration::from_secs(60)).await);
    let runs = journals(dir);
    let mut replayed_on_build_2 = 0;
    for id in &old {
        let steps = steps_of(&runs, id);
        assert!(
            steps.contains("post-v1") && !steps.contains("post-v2") && !steps.contains("notify"),
            "task {id} started by build 1 keeps build 1's path: {steps:?}"
        );
        assert!(steps.contains("batch-50"), "task {id} settled: {steps:?}");
        if runs[id]
            .iter()
            .any(|(instance, _)| instance.starts_with("b2-"))
        {
            replayed_on_build_2 += 1;
        }
    }
    assert!(
        replayed_on_build_2 > 0,
        "some task started by build 1 went on on build 2: {runs:?}"
    );
    for id in &new {
        let steps = steps_of(&runs, id);
        assert!(
            steps.contains("post-v2") && steps.contains("notify") && !steps.contains("post-v1"),
            "task {id} started by build 2 takes the new path: {steps:?}"
        );
    }

    // 2. Build 2's tasks in flight; every instance is replaced by build 3 (version 2).
    let mut waiting = Vec::new();
    for i in 0..4 {
        waiting.push(start_ledger(&instances[i % 3], 40).await);
    }
    until_each_ran(dir, &waiting, "post-v2").await;
    roll(&mut instances, &db, dir, 3);
    let mut client = instances[0].client();
    let mut v2 = Vec::new();
    for instance in &instances {
        v2.push(start_ledger(instance, 2).await);
    }
    let ended = until_ended(&mut client, &v2, Duration::from_secs(30)).await;
    assert_completed(&ended);
    // Build 3 takes none of version 1's tasks: they wait, unfinished, and no instance claims
    // them (each claim would move a task's epoch on).
    let raw = db.raw().await;
    let epochs = || async {
        let rows = raw
            .query(
                "SELECT id, epoch FROM tasks WHERE id = ANY($1) ORDER BY id",
                &[&waiting],
            )
            .await
            .unwrap();
        rows.iter()
            .map(|row| (row.get::<_, String>(0), row.get::<_, i64>(1)))
            .collect::<Vec<_>>()
    };
    let before = epochs().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        epochs().await,
        before,
        "no claim of a task of version 1 by build 3"
    );
    for id in &waiting {
        let (_, got) = client
            .rpc("tasks/get", json!({ "taskId": id }), TASKS)
            .await;
        assert_eq!(
            got["result"]["status"], "working",
            "task {id} of version 1 waits for an instance that runs it: {got}"
        );
    }
    let runs = journals(dir);
    for id in &waiting {
        let on_build_3: Vec<_> = (runs[id].iter())
            .filter(|(instance, _)| instance.starts_with("b3-"))
            .collect();
        assert!(
            on_build_3.is_empty(),
            "task {id} ran on build 3: {on_build_3:?}"
        );
    }
    // An instance of build 2 again: it claims them, and they complete.
    instances.push(Instance::start(&db, dir, "b2-again", 2));
    assert_completed(&until_ended(&mut client, &waiting, Duration::from_secs(30)).await);
    let runs = journals(dir);
    for id in &waiting {
        let steps = steps_of(&runs, id);
        assert!(
            steps.contains("post-v2") && steps.contains("notify") && !steps.contains("post-v1"),
            "task {id} of build 2 keeps its new path after its replays: {steps:?}"
        );
        assert!(
            runs[id].iter().any(|(instance, _)| instance == "b2-again"),
            "task {id} completed on the build 2 instance started again: {:?}",
            runs[id]
        );
    }
    for id in &v2 {
        let steps = steps_of(&runs, id);
        assert!(
            steps.contains("post-v3"),
            "task {id} of version 2: {steps:?}"
        );
        assert!(
            runs[id]
                .iter()
                .all(|(instance, _)| instance.starts_with("b3-")),
            "task {id} of version 2 ran only on build 3: {:?}",
            runs[id]
        );
    }
}
