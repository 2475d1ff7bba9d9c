//! The shared limits of a cluster whose instances are separate processes
//! (`tests/support/limits_server.rs`) over one Postgres task space: owners take turns at the
//! queued tasks, a tool's concurrency limit, a per-key limit, priorities, and a rate limit
//! of 10 a minute watched for two minutes (35 calls). What happened is read from the journals the
//! tools write in each process (wall-clock microseconds; every process is on this machine,
//! so one clock).

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{
    collections::HashMap,
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use common::{
    Http, Patience,
    process::{Process, Scratch},
};
use serde_json::json;

/// One process of the cluster, killed on drop.
struct Instance {
    _process: Process,
    url: String,
    journal: PathBuf,
}

/// Starts instance `name` on `db`'s schema with `extra` flags, once it serves.
fn start(db: &pg::Db, dir: &std::path::Path, name: &str, extra: &[&str]) -> Instance {
    let journal = dir.join(format!("journal-{name}.txt"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_mcp-tasks-limits-server"));
    command
        .args(["--db", &db.url, "--schema", &db.schema, "--instance", name])
        .arg("--journal")
        .arg(&journal)
        .args(extra);
    let (process, url) = Process::serving(&format!("instance {name}"), &mut command);
    Instance {
        _process: process,
        url,
        journal,
    }
}

/// One journal line: when (microseconds), what, of what.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    at: u128,
    /// Ends sort before starts at the same microsecond: a task's end is written before its
    /// row ends, and a start that waited for it comes after.
    rank: u8,
    event: String,
    detail: String,
}

/// Every instance's journal, merged in time order.
fn events(instances: &[Instance]) -> Vec<Event> {
    let mut events: Vec<Event> = instances
        .iter()
        .flat_map(|instance| {
            let text = std::fs::read_to_string(&instance.journal).unwrap_or_default();
            // Complete lines only: a line being written is read next time.
            let complete = text.rfind('\n').map_or("", |end| &text[..end]);
            complete
                .lines()
                .map(|line| {
                    let mut parts = line.splitn(3, ' ');
                    let at = parts.next().expect("time").parse().expect("micros");
                    let event = parts.next().expect("event").to_owned();
                    let detail = parts.next().unwrap_or_default().to_owned();
                    let rank = u8::from(!event.ends_with("-end"));
                    Event {
                        at,
                        rank,
                        event,
                        detail,
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect();
    events.sort();
    events
}

fn count(events: &[Event], event: &str) -> usize {
    events.iter().filter(|e| e.event == event).count()
}

/// Waits until the journals hold `n` of `event`; the merged journal.
async fn until(instances: &[Instance], event: &str, n: usize, bound: Duration) -> Vec<Event> {
    let patience = Patience::with_bound(format!("{n} {event}"), bound);
    loop {
        let events = events(instances);
        if count(&events, event) >= n {
            return events;
        }
        patience.wait().await;
    }
}

/// `n` calls of `tool` with `arguments(i)` by the owner of `token`, spread over `instances`,
/// eight at a time; each answers with a task at once.
async fn call(
    instances: &[&Instance],
    token: &str,
    tool: &str,
    n: usize,
    arguments: impl Fn(usize) -> serde_json::Value,
) {
    let arguments = &arguments;
    let lanes = (0..8).map(|lane| async move {
        for i in (lane..n).step_by(8) {
            let mut http = Http::to(&instances[i % instances.len()].url).bearing(token);
            http.call_task(tool, arguments(i)).await;
        }
    });
    futures::future::join_all(lanes).await;
}

/// The most tasks of `prefix` running at once, by detail (`-start`/`-end` pairs).
fn most_at_once(events: &[Event], prefix: &str) -> HashMap<String, usize> {
    let (start, end) = (format!("{prefix}-start"), format!("{prefix}-end"));
    let mut now: HashMap<String, usize> = HashMap::new();
    let mut most: HashMap<String, usize> = HashMap::new();
    for e in events {
        if e.event == start {
            let running = now.entry(e.detail.clone()).or_default();
            *running += 1;
            let top = most.entry(e.detail.clone()).or_default();
            *top = (*top).max(*running);
        } else if e.event == end {
            *now.get_mut(&e.detail).expect("started") -= 1;
        }
    }
    most
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_owner_is_not_held_back_across_processes() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let dir = Scratch::new(&format!("limits-{}", db.schema));
    // A front that records the calls, and two instances of two slots each that run them.
    let front = start(&db, &dir, "front", &["--front"]);
    let workers = [
        start(&db, &dir, "w1", &["--max-running", "2", "--claim-ms", "20"]),
        start(&db, &dir, "w2", &["--max-running", "2", "--claim-ms", "20"]),
    ];
    call(
        &[&front],
        "TOKEN_A",
        "job",
        500,
        |_| json!({ "who": "alice" }),
    )
    .await;
    // Alice's tasks that start while Alice's calls are still being made (more of them on a
    // loaded machine, where the calls take longer) are not ahead of Bob's: his do not exist
    // yet. What counts is how many of hers start once his are queued.
    let bob_called = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_micros();
    call(&[&front], "TOKEN_B", "job", 5, |_| json!({ "who": "bob" })).await;
    let alice_since = |events: &[Event]| {
        (events.iter())
            .filter(|e| e.detail == "alice" && e.at >= bob_called)
            .count()
    };
    let patience = Patience::new("Bob's 5 tasks start");
    let events = loop {
        let events = events(&workers);
        let bob = events.iter().filter(|e| e.detail == "bob").count();
        let alice = alice_since(&events);
        assert!(
            alice < 60,
            "60 of Alice's started after Bob's calls, and not all 5 of his"
        );
        if bob == 5 {
            break events;
        }
        patience.wait().await;
    };
    let bob_last = events.iter().rposition(|e| e.detail == "bob").expect("bob");
    let before = alice_since(&events[..bob_last]);
    eprintln!("{before} of Alice's tasks started after Bob's calls and before his last task");
    assert!(
        before < 40,
        "Bob's 5 tasks start before 40 more of Alice's: {before} of hers started first"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_limits_hold_across_processes() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let dir = Scratch::new(&format!("limits-{}", db.schema));
    let instances: Vec<Instance> = ["a", "b", "c"]
        .iter()
        .map(|name| start(&db, &dir, name, &["--max-running", "4"]))
        .collect();
    let all: Vec<&Instance> = instances.iter().collect();
    call(&all, "TOKEN_A", "export", 30, |_| json!({})).await;
    let workspaces = ["acme", "globex", "initech"];
    call(
        &all,
        "TOKEN_A",
        "sync",
        15,
        |i| json!({ "workspace": workspaces[i % 3] }),
    )
    .await;
    until(&instances, "export-end", 30, Duration::from_secs(60)).await;
    let events = until(&instances, "sync-end", 15, Duration::from_secs(60)).await;
    // The tool's own journal: never more than 3 exports at once, and the limit is used.
    assert_eq!(
        most_at_once(&events, "export").get("-"),
        Some(&3),
        "at most 3 exports at once across 3 processes of 4 slots each"
    );
    // One sync of a workspace at a time; the workspaces side by side.
    let by_workspace = most_at_once(&events, "sync");
    for workspace in workspaces {
        assert_eq!(by_workspace.get(workspace), Some(&1), "{by_workspace:?}");
    }
    let mut all_syncs = events.clone();
    for e in &mut all_syncs {
        e.detail = "-".to_owned();
    }
    assert!(
        most_at_once(&all_syncs, "sync")["-"] >= 2,
        "the workspaces' syncs run beside each other"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priorities_reorder_the_queue_across_processes() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let dir = Scratch::new(&format!("limits-{}", db.schema));
    let front = start(&db, &dir, "front", &["--front", "--priorities"]);
    // One slot: each claim takes one task, so the starts' order is the claims' order.
    let worker = start(
        &db,
        &dir,
        "w",
        &["--max-running", "1", "--claim-ms", "20", "--priorities"],
    );
    call(
        &[&front],
        "TOKEN_A",
        "job",
        100,
        |_| json!({ "who": "alice" }),
    )
    .await;
    call(&[&front], "TOKEN_B", "job", 5, |_| json!({ "who": "bob" })).await;
    let workers = [worker];
    let patience = Patience::new("Bob's 5 tasks start");
    let order: Vec<String> = loop {
        let events = events(&workers);
        if events.iter().filter(|e| e.detail == "bob").count() == 5 {
            break events.into_iter().map(|e| e.detail).collect();
        }
        patience.wait().await;
    };
    let first = order.iter().position(|w| w == "bob").expect("bob started");
    assert!(
        order[first..first + 5].iter().all(|w| w == "bob"),
        "once Bob's first starts, his 5 are the next: {:?}",
        &order[first..]
    );
    // Not starved: Alice's tasks go on after Bob's.
    let alice = until(&workers, "job", first + 7, Duration::from_secs(30)).await;
    assert_eq!(alice.last().expect("a start").detail, "alice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_of_10_a_minute_holds_across_processes_for_two_minutes() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let dir = Scratch::new(&format!("limits-{}", db.schema));
    let instances: Vec<Instance> = ["a", "b", "c"]
        .iter()
        .map(|name| {
            start(
                &db,
                &dir,
                name,
                &["--max-running", "8", "--claim-ms", "200"],
            )
        })
        .collect();
    let all: Vec<&Instance> = instances.iter().collect();
    let begun = Instant::now();
    call(&all, "TOKEN_A", "partner", 34, |_| json!({})).await;
    // A task past the window's room waits queued, and says why.
    until(&instances, "partner", 10, Duration::from_secs(30)).await;
    let mut http = Http::to(&instances[0].url).bearing("TOKEN_A");
    let id = http.call_task("partner", json!({})).await;
    let (_, got) = http
        .rpc("tasks/get", json!({ "taskId": id }), common::TASKS)
        .await;
    assert_eq!(got["result"]["status"], "working", "{got}");
    assert_eq!(
        got["result"]["statusMessage"],
        "queued: waiting to start (the tool starts at most 10 tasks in any 1m)",
        "{got}"
    );
    // Two minutes: 10 at once, 10 more a minute later, 10 more at two minutes.
    let events = until(&instances, "partner", 30, Duration::from_secs(150)).await;
    let elapsed = begun.elapsed();
    let starts: Vec<u128> = events
        .iter()
        .filter(|e| e.event == "partner")
        .map(|e| e.at)
        .collect();
    // No 60 s (less 1 s: the starts are counted by the database's clock, the journal
    // written a little later) hold more than 10 starts.
    for (i, pair) in starts.windows(11).enumerate() {
        let apart = pair[10] - pair[0];
        assert!(
            apart >= 59_000_000,
            "starts {i} and {} are only {apart} µs apart: more than 10 in a minute",
            i + 10
        );
    }
    assert!(
        elapsed >= Duration::from_secs(119),
        "30 starts at 10 a minute take two minutes, not {elapsed:?}"
    );
    assert_eq!(starts.len(), 30, "the rest wait for the next minute");
}
