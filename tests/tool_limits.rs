//! A tool's concurrency limit (`#[task_tool(concurrency = 3)]`): never more than 3 of its
//! tasks run at once, in one process over the memory store, and across three instances
//! over one Postgres task space, each instance with more free slots than that; the limit is
//! read from the tool's own count of its running tasks. Every call still gets its task at
//! once, and every task completes. In one process the tasks a limit holds back take no
//! running slot (`max_running` refuses none of them), start oldest first, and a cancel
//! ends one at once without running it.

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::{Http, Patience, Peer, TASKS};
use mcp_tasks::{Engine, State, TaskServer, ToolError, task_tool, toolkit};
use serde_json::json;

/// The tool's own journal: how many of its tasks run now, the most that ever ran at once,
/// and how many ended.
#[derive(Clone, Default)]
struct Journal {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    ended: Arc<AtomicUsize>,
}

/// Exports something scarce: at most 3 at once.
#[task_tool(mode = "required", concurrency = 3, poll_interval = "50ms")]
async fn export(State(journal): State<Journal>) -> Result<String, ToolError> {
    let running = journal.now.fetch_add(1, Ordering::SeqCst) + 1;
    journal.most.fetch_max(running, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(80)).await;
    journal.now.fetch_sub(1, Ordering::SeqCst);
    journal.ended.fetch_add(1, Ordering::SeqCst);
    Ok("exported".to_owned())
}

/// `n` calls spread over `urls`, eight at a time; every one answers with a task at once.
async fn call(urls: &[String], n: usize) {
    let calls = (0..8).map(|lane| {
        let urls = urls.to_vec();
        async move {
            for i in (lane..n).step_by(8) {
                let mut http = Http::to(&urls[i % urls.len()]);
                http.call_task("export", json!({})).await;
            }
        }
    });
    futures::future::join_all(calls).await;
}

/// Waits until `n` exports ended; the most that ran at once.
async fn most_at_once(journal: &Journal, n: usize) -> usize {
    let patience = Patience::new(format!("{n} exports end"));
    while journal.ended.load(Ordering::SeqCst) < n {
        patience.wait().await;
    }
    journal.most.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_runs_at_most_its_limit_in_one_process() {
    let journal = Journal::default();
    let server = TaskServer::new(
        toolkit![export]
            .expect("toolkit")
            .with_state(journal.clone()),
    );
    let http = Http::start(server).await;
    call(std::slice::from_ref(&http.url), 12).await;
    let most = most_at_once(&journal, 12).await;
    assert_eq!(most, 3, "at most 3 exports at once, and the limit is used");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_runs_at_most_its_limit_across_instances() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let journal = Journal::default();
    let tools = || {
        toolkit![export]
            .expect("toolkit")
            .with_state(journal.clone())
    };
    let engines = db
        .three_instances(tools, 4, Duration::from_millis(50))
        .await;
    let urls = Http::serve_all(engines).await;
    call(&urls, 30).await;
    let most = most_at_once(&journal, 30).await;
    assert_eq!(
        most, 3,
        "at most 3 exports at once across 3 instances of 4 slots each, and the limit is used"
    );
}

/// What [`render`] saw: the order its tasks started in; and the valve each task waits at.
#[derive(Clone)]
struct Valve {
    started: Arc<std::sync::Mutex<Vec<u64>>>,
    open: Arc<tokio::sync::Semaphore>,
}

/// Renders page `n`, one at a time; each waits until the test lets one through.
#[task_tool(mode = "required", concurrency = 1, poll_interval = "50ms")]
async fn render(State(valve): State<Valve>, n: u64) -> Result<u64, ToolError> {
    valve.started.lock().unwrap().push(n);
    valve.open.acquire().await.expect("never closed").forget();
    Ok(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_tasks_take_no_running_slot_and_start_in_order() {
    let valve = Valve {
        started: Arc::default(),
        open: Arc::new(tokio::sync::Semaphore::new(0)),
    };
    let tools = toolkit![render].expect("toolkit").with_state(valve.clone());
    // Two running slots: the 18 tasks held back behind the running one must take none.
    let engine = Engine::builder(tools).with_max_running(2).build();
    let http = Http::start(TaskServer::from_engine(engine)).await;
    let mut ids = Vec::new();
    for n in 0..20 {
        let id = Http::to(&http.url)
            .call_task("render", json!({ "n": n }))
            .await;
        ids.push(id);
    }
    let mut peer = Peer::Http(Http::to(&http.url));
    let last = peer.get(&ids[19]).await;
    assert_eq!(last["result"]["status"], "working", "{last}");
    assert_eq!(
        last["result"]["statusMessage"],
        "queued: waiting to start (the tool runs at most 1 task at once)",
        "{last}"
    );
    // A held task cancelled ends at once, and never runs.
    let cancelled = peer
        .rpc("tasks/cancel", json!({ "taskId": ids[5] }), TASKS)
        .await;
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    peer.wait_status(&ids[5], "cancelled").await;
    valve.open.add_permits(20);
    for (n, id) in ids.iter().enumerate() {
        let task = peer.wait_terminal(id).await;
        let want = if n == 5 { "cancelled" } else { "completed" };
        assert_eq!(task["status"], want, "task {n}: {task}");
    }
    let started = valve.started.lock().unwrap().clone();
    let want: Vec<u64> = (0..20).filter(|n| *n != 5).collect();
    assert_eq!(
        started, want,
        "held tasks start oldest first; the cancelled one never"
    );
}
