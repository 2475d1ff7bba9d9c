//! Rate limits: a tool's (`#[task_tool(rate = "10/1m")]`) and a step limiter's
//! (`TaskContext::step_limited`). No window of the rate's length ever holds more starts than
//! its count: in one process over the memory store, and (a step limiter) across three
//! instances over one Postgres task space, where a tool's rate that held tasks back starts
//! them as soon as its window has room. The starts are read from the tools' own journal.
//! A tool's rate across processes, 10 a minute for two minutes: `tests/limits_processes.rs`.

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use common::{Http, Patience, Peer};
use mcp_tasks::{
    State, TaskContext, TaskServer, ToolError,
    rate::{Limiter, Rate},
    task_tool, toolkit,
};
use serde_json::json;

/// When each start happened, as the tools saw it.
#[derive(Clone, Default)]
struct Journal(Arc<Mutex<Vec<Instant>>>);

impl Journal {
    fn started(&self) {
        self.0.lock().unwrap().push(Instant::now());
    }

    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// The starts, in order.
    fn times(&self) -> Vec<Instant> {
        let mut times = self.0.lock().unwrap().clone();
        times.sort();
        times
    }

    /// Waits until `n` starts were seen.
    async fn until(&self, n: usize, bound: Duration) {
        let patience = Patience::with_bound(format!("{n} starts"), bound);
        while self.len() < n {
            patience.wait().await;
        }
    }
}

/// Asserts that no window of `per` (less `slack`, the spread between a start's record and
/// the tool seeing it) holds more than `count` of `times` (sorted): each start and the
/// `count`-th after it are at least that far apart.
fn assert_rate_held(times: &[Instant], count: usize, per: Duration, slack: Duration) {
    for (i, pair) in times.windows(count + 1).enumerate() {
        let apart = pair[count] - pair[0];
        assert!(
            apart >= per - slack,
            "starts {i} and {} are only {apart:?} apart: more than {count} in {per:?} \
             (every start after the first: {:?})",
            i + count,
            times.iter().map(|t| *t - times[0]).collect::<Vec<_>>()
        );
    }
}

/// Sends a report to a rate-limited upstream: at most 3 a second.
#[task_tool(mode = "required", rate = "3/1s", poll_interval = "50ms")]
async fn report(State(journal): State<Journal>) -> Result<String, ToolError> {
    journal.started();
    Ok("sent".to_owned())
}

/// Calls an upstream API whose limit is 4 calls in 2 seconds, whichever task calls.
#[task_tool(mode = "required", restart = "resume", poll_interval = "50ms")]
async fn fetch(ctx: TaskContext, State(journal): State<Journal>) -> Result<String, ToolError> {
    let upstream = Limiter::new("upstream", Rate::new(4, Duration::from_secs(2)));
    ctx.step_limited(&upstream, "call the upstream", || async {
        journal.started();
    })
    .await?;
    Ok("fetched".to_owned())
}

/// `n` calls of `tool` spread over `urls`; each answers with a task at once. The task ids.
async fn call(urls: &[String], tool: &str, n: usize) -> Vec<(String, String)> {
    let mut ids = Vec::new();
    for i in 0..n {
        let url = &urls[i % urls.len()];
        let id = Http::to(url).call_task(tool, json!({})).await;
        ids.push((url.clone(), id));
    }
    ids
}

/// Three instances over one Postgres task space, each with 8 free slots, serving `toolkit`.
async fn cluster(db: &pg::Db, journal: &Journal) -> Vec<String> {
    let tools = || {
        toolkit![fetch]
            .expect("toolkit")
            .with_state(journal.clone())
    };
    let engines = db
        .three_instances(tools, 8, Duration::from_millis(200))
        .await;
    Http::serve_all(engines).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_starts_at_most_its_rate_in_one_process() {
    let journal = Journal::default();
    let server = TaskServer::new(
        toolkit![report]
            .expect("toolkit")
            .with_state(journal.clone()),
    );
    let http = Http::start(server).await;
    let begun = Instant::now();
    call(std::slice::from_ref(&http.url), "report", 9).await;
    journal.until(9, Duration::from_secs(20)).await;
    assert_rate_held(
        &journal.times(),
        3,
        Duration::from_secs(1),
        Duration::from_millis(100),
    );
    assert!(
        begun.elapsed() >= Duration::from_millis(1900),
        "9 starts at 3 a second take two windows"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_under_a_limiter_keep_its_rate_in_one_process() {
    let journal = Journal::default();
    let server = TaskServer::new(
        toolkit![fetch]
            .expect("toolkit")
            .with_state(journal.clone()),
    );
    let http = Http::start(server).await;
    call(std::slice::from_ref(&http.url), "fetch", 10).await;
    journal.until(10, Duration::from_secs(20)).await;
    assert_rate_held(
        &journal.times(),
        4,
        Duration::from_secs(2),
        Duration::from_millis(100),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_under_a_limiter_keep_its_rate_across_instances() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let journal = Journal::default();
    let urls = cluster(&db, &journal).await;
    let tasks = call(&urls, "fetch", 12).await;
    journal.until(12, Duration::from_secs(30)).await;
    // The starts are counted by the database's clock; the tools see them a little later.
    assert_rate_held(
        &journal.times(),
        4,
        Duration::from_secs(2),
        Duration::from_millis(400),
    );
    for (url, id) in tasks {
        let done = Peer::Http(Http::to(&url)).wait_terminal(&id).await;
        assert_eq!(done["status"], "completed", "{done}");
    }
}

/// A cluster starts the tasks a tool's rate held back when the rate's window has room, not
/// at its next claim interval (here 30 s): 9 tasks of a tool of 3 a second, called across
/// three instances, all start within about two seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_starts_what_a_rate_held_back_once_its_window_has_room() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let journal = Journal::default();
    let tools = || {
        toolkit![report]
            .expect("toolkit")
            .with_state(journal.clone())
    };
    let engines = db.three_instances(tools, 8, Duration::from_secs(30)).await;
    let urls = Http::serve_all(engines).await;
    let begun = Instant::now();
    let tasks = call(&urls, "report", 9).await;
    // Waiting for the claim interval would take 30 s.
    journal.until(9, Duration::from_secs(8)).await;
    let took = begun.elapsed();
    assert_rate_held(
        &journal.times(),
        3,
        Duration::from_secs(1),
        Duration::from_millis(400),
    );
    assert!(
        took >= Duration::from_millis(1600),
        "9 starts at 3 a second take two windows, not {took:?}"
    );
    for (url, id) in tasks {
        let done = Peer::Http(Http::to(&url)).wait_terminal(&id).await;
        assert_eq!(done["status"], "completed", "{done}");
    }
}

/// How often `fetch_then_nap` ran (a replay after its park is a run), and how often its
/// step's work ran.
#[derive(Clone, Default)]
struct Runs {
    runs: Arc<std::sync::atomic::AtomicUsize>,
    calls: Arc<std::sync::atomic::AtomicUsize>,
}

/// Calls an upstream that takes 1 call in 20 s, then sleeps long enough to park; woken, it
/// replays the stored call.
#[task_tool(
    mode = "required",
    restart = "resume",
    park_after = "100ms",
    poll_interval = "50ms"
)]
async fn fetch_then_nap(ctx: TaskContext, State(runs): State<Runs>) -> Result<String, ToolError> {
    use std::sync::atomic::Ordering::SeqCst;
    runs.runs.fetch_add(1, SeqCst);
    let upstream = Limiter::new("slow-upstream", Rate::new(1, Duration::from_secs(20)));
    let calls = runs.calls.clone();
    ctx.step_limited(&upstream, "call the upstream", || async move {
        calls.fetch_add(1, SeqCst);
    })
    .await?;
    ctx.sleep("nap", Duration::from_millis(400)).await?;
    Ok("fetched".to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_that_finds_the_step_takes_no_place() {
    use std::sync::atomic::Ordering::SeqCst;
    let runs = Runs::default();
    let server = TaskServer::new(
        toolkit![fetch_then_nap]
            .expect("toolkit")
            .with_state(runs.clone()),
    );
    let http = Http::start(server).await;
    let begun = Instant::now();
    let id = Http::to(&http.url)
        .call_task("fetch_then_nap", json!({}))
        .await;
    let done = Peer::Http(Http::to(&http.url)).wait_terminal(&id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        runs.runs.load(SeqCst),
        2,
        "parked in its sleep, then replayed"
    );
    assert_eq!(
        runs.calls.load(SeqCst),
        1,
        "the stored call is not made again"
    );
    // A replay that took a place would wait 20 s for the window.
    assert!(
        begun.elapsed() < Duration::from_secs(10),
        "the replay waited for the limiter: {:?}",
        begun.elapsed()
    );
}
