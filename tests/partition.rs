//! A network partition between one instance and Postgres (issue 21): self-fencing.
//!
//! Two engines on one Postgres schema, in this process: A reaches Postgres through a TCP
//! proxy ([`proxy::Proxy`]) that the test blackholes (nothing forwarded, every socket kept
//! open, as a real partition looks to both ends), B directly. In process rather than as
//! server processes: the tool's side effects are recorded with their wall-clock instants
//! inside the work, so "stopped before the lease lapsed" is measured against the lease
//! deadline Postgres holds (same host, same clock), not inferred from logs; the store, the
//! runtime, the proxy's TCP hop and Postgres are the real ones.
//!
//! A runs tasks whose step (4 s) is longer than the lease (3 s); the partition starts while
//! every task is inside its first step. Half the steps watch for a cancellation
//! (`until_cancelled`), half do not (a plain sleep, then the side effect). What must hold:
//! - A's work stops before the lease lapses: a step that watches ends at the fence point,
//!   one that does not is dropped shortly after it, its side effect not done either way; no
//!   step of A starts after the partition;
//! - B takes every task over (epoch 2) and completes it;
//! - one runner per task: every step's start and end (its end when it returns or when its
//!   future is dropped) is recorded on both instances, and no two runs of one task overlap;
//!   no step's side effect happens twice;
//! - after the partition heals, A writes nothing stale (the rows B finished stay as they
//!   are) and serves again: a new task created on A runs on A.
//!
//! `a_cancel_sent_while_the_listener_reconnects_reaches_the_work`: A's connections are cut
//! (the proxy severs them and holds the new ones) while a cancel for A's task is sent to B,
//! so its notification reaches no listener of A; the re-read runs every 2 minutes: the
//! cancel reaches the work only because the listener, back, makes the runtime read again
//! what it may have missed.

mod common;
#[path = "support/postgres.rs"]
mod pg;
#[path = "support/proxy.rs"]
mod proxy;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use common::{Http, TASKS};
use mcp_tasks::{
    ClusterConfig, Engine, PostgresStore, State, StepError, TaskContext, TaskServer, ToolError,
    task_tool, toolkit,
};
use serde_json::{Value, json};

const LEASE: Duration = Duration::from_secs(3);
const STEP_MS: u64 = 4000;
const TASKS_PER_KIND: usize = 3;

fn now_ms() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// One run of a step, as the tool saw it (wall clock, ms since the epoch): recorded when
/// the step returns or when its future is dropped ([`Running`]).
#[derive(Clone, Debug)]
struct Run {
    who: &'static str,
    task: String,
    seq: u32,
    started: i64,
    ended: i64,
    /// Its side effect was done (the step's work reached its end).
    effect: bool,
}

/// Where the instances' tools record their step runs.
#[derive(Clone)]
struct Record {
    who: &'static str,
    runs: Arc<Mutex<Vec<Run>>>,
}

impl Record {
    fn push(&self, run: Run) {
        self.runs.lock().unwrap().push(run);
    }
}

/// A step run under way: recorded when dropped, so a run whose future is dropped mid-way is
/// recorded too, with the instant it ended and its side effect not done.
struct Running {
    record: Record,
    task: String,
    seq: u32,
    started: i64,
    effect: bool,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.record.push(Run {
            who: self.record.who,
            task: std::mem::take(&mut self.task),
            seq: self.seq,
            started: self.started,
            ended: now_ms(),
            effect: self.effect,
        });
    }
}

/// `steps` steps of `step_ms` each, whose side effect is done at the step's end; with
/// `watch`, a step stops at a cancellation, its effect not done. Returns who ran each step.
#[task_tool(mode = "required", restart = "resume", poll_interval = "50ms")]
async fn batches(
    ctx: TaskContext,
    State(record): State<Record>,
    steps: u32,
    step_ms: u64,
    watch: bool,
) -> Result<String, ToolError> {
    let mut by = Vec::new();
    for seq in 1..=steps {
        let (record, step_ctx) = (record.clone(), ctx.clone());
        let who = ctx
            .try_step(&format!("batch-{seq}"), || async move {
                let mut running = Running {
                    task: step_ctx.task_id().unwrap_or_default().to_owned(),
                    record: record.clone(),
                    seq,
                    started: now_ms(),
                    effect: false,
                };
                let pause = tokio::time::sleep(Duration::from_millis(step_ms));
                let finished = if watch {
                    step_ctx.until_cancelled(pause).await.is_ok()
                } else {
                    pause.await;
                    true
                };
                // The side effect, at the step's end.
                running.effect = finished;
                drop(running);
                if finished {
                    Ok(record.who.to_owned())
                } else {
                    Err(())
                }
            })
            .await
            .map_err(|error| match error {
                StepError::Work(()) => ToolError::cancelled(),
                StepError::Failure(failure) => failure.into(),
                _ => ToolError::internal("unexpected step error"),
            })?;
        by.push(who);
    }
    Ok(by.join(","))
}

fn config() -> ClusterConfig {
    ClusterConfig::default()
        .with_lease(LEASE)
        .with_renewal(Duration::from_millis(500))
        .with_claim_interval(Duration::from_millis(100))
        .with_reread_interval(Duration::from_millis(500))
}

async fn instance(store: PostgresStore, record: &Record) -> Http {
    instance_with(store, record, config()).await
}

async fn instance_with(store: PostgresStore, record: &Record, config: ClusterConfig) -> Http {
    let engine = Engine::builder(toolkit![batches].unwrap().with_state(record.clone()))
        .with_store(store)
        .with_instance_id(record.who)
        .with_cluster(config)
        .build();
    engine.start().expect("start the cluster loops");
    Http::start(TaskServer::from_engine(engine)).await
}

async fn call(http: &mut Http, steps: u32, step_ms: u64, watch: bool) -> String {
    let (_, response) = http
        .rpc(
            "tools/call",
            json!({ "name": "batches", "arguments": {
                "steps": steps, "step_ms": step_ms, "watch": watch } }),
            TASKS,
        )
        .await;
    response["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {response}"))
        .to_owned()
}

async fn get(http: &mut Http, id: &str) -> Value {
    let (_, response) = http.rpc("tasks/get", json!({ "taskId": id }), TASKS).await;
    response["result"].clone()
}

/// Each task's row (status, message, outcome, epoch, runner, last update) and its steps.
async fn rows(client: &tokio_postgres::Client, ids: &[String]) -> HashMap<String, String> {
    let mut rows: HashMap<String, String> = client
        .query(
            "SELECT id, status || '|' || coalesce(status_message, '') || '|' || \
             coalesce(outcome, '') || '|' || epoch || '|' || coalesce(runner, '') || '|' || \
             last_updated_at_ms FROM tasks WHERE id = ANY($1)",
            &[&ids],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    for r in client
        .query(
            "SELECT task_id, seq::text || '=' || value::text FROM steps \
             WHERE task_id = ANY($1) ORDER BY task_id, seq",
            &[&ids],
        )
        .await
        .unwrap()
    {
        let id: String = r.get(0);
        let step: String = r.get(1);
        rows.get_mut(&id).unwrap().push_str(&format!(" {step}"));
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_partitioned_instance_stops_its_work_before_its_lease_lapses() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let proxy = proxy::Proxy::to_url(&db.url).await;
    let store_a = db
        .builder_via(proxy.url(&db.url))
        .connect()
        .await
        .expect("A connects through the proxy");
    let store_b = db.store().await.expect("B connects");
    let (record_a, record_b) = (
        Record {
            who: "a",
            runs: Arc::default(),
        },
        Record {
            who: "b",
            runs: Arc::default(),
        },
    );
    let mut a = instance(store_a, &record_a).await;
    let mut b = instance(store_b, &record_b).await;
    let raw = db.raw().await;

    let mut ids = Vec::new();
    let mut watching = HashMap::new();
    for i in 0..2 * TASKS_PER_KIND {
        let watch = i % 2 == 0;
        let id = call(&mut a, 2, STEP_MS, watch).await;
        watching.insert(id.clone(), watch);
        ids.push(id);
    }
    // Every task is inside its first step on A: its run is under way (not recorded yet) and
    // its lease is A's. Wait for the leases, then partition A from Postgres.
    let patience = common::Patience::with_bound("A's tasks to run", Duration::from_secs(20));
    loop {
        let runners = raw
            .query(
                "SELECT count(*) FROM tasks WHERE id = ANY($1) AND runner = 'a' AND epoch = 1",
                &[&ids],
            )
            .await
            .unwrap();
        if runners[0].get::<_, i64>(0) == ids.len() as i64 {
            break;
        }
        patience.wait().await;
    }
    let partitioned_at = now_ms();
    proxy.blackhole();

    // Watch the leases from B's side: the deadline each lease had under A (the one that
    // lapses), and when B took it.
    let mut lapse: HashMap<String, i64> = HashMap::new();
    let mut taken: HashMap<String, i64> = HashMap::new();
    let started = Instant::now();
    while taken.len() < ids.len() {
        for r in raw
            .query(
                "SELECT id, epoch, runner, lease_until_ms FROM tasks WHERE id = ANY($1)",
                &[&ids],
            )
            .await
            .unwrap()
        {
            let (id, epoch, runner, until): (String, i64, String, i64) =
                (r.get(0), r.get(1), r.get(2), r.get(3));
            if epoch == 1 {
                lapse.insert(id, until);
            } else {
                assert_eq!(runner, "b", "only B can take the task over");
                taken.entry(id).or_insert_with(now_ms);
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "B took over {} of {} tasks: {taken:?}",
            taken.len(),
            ids.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Every task completes on B while A is still cut off.
    let patience = common::Patience::with_bound("B to finish", Duration::from_secs(30));
    let mut results = HashMap::new();
    while results.len() < ids.len() {
        for id in &ids {
            if results.contains_key(id) {
                continue;
            }
            let task = get(&mut b, id).await;
            if task["status"] == "completed" {
                results.insert(id.clone(), task);
            } else {
                assert_eq!(task["status"], "working", "{task}");
            }
        }
        patience.wait().await;
    }
    let finished = rows(&raw, &ids).await;

    // Heal: A's held requests reach Postgres now, under leases it no longer holds.
    proxy.heal();
    let healed = Instant::now();
    // A serves again: a new task created on A runs on A.
    let fresh = call(&mut a, 1, 50, false).await;
    let rejoined = healed.elapsed();
    let patience = common::Patience::with_bound("A's new task", Duration::from_secs(20));
    let done = loop {
        let task = get(&mut a, &fresh).await;
        if task["status"] == "completed" {
            break task;
        }
        patience.wait().await;
    };
    assert_eq!(common::first_text(&done["result"]), "a", "{done}");
    // Give A's held writes (steps, outcomes, renewals) time to land, if they could.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        rows(&raw, &ids).await,
        finished,
        "the healed instance changed tasks it no longer held"
    );

    let runs_a = record_a.runs.lock().unwrap().clone();
    let runs_b = record_b.runs.lock().unwrap().clone();
    // One runner per task: no two runs of a task's steps overlap, on whichever instance.
    for id in &ids {
        let mut runs: Vec<&Run> = runs_a
            .iter()
            .chain(&runs_b)
            .filter(|r| &r.task == id)
            .collect();
        runs.sort_by_key(|r| r.started);
        for pair in runs.windows(2) {
            assert!(
                pair[0].ended <= pair[1].started,
                "two runs of {id} overlap ({} ms, watch {}): {:?} and {:?}",
                pair[0].ended - pair[1].started,
                watching[id],
                pair[0],
                pair[1]
            );
        }
    }
    let mut twice = 0;
    for id in &ids {
        let watch = watching[id];
        let result = common::first_text(&results[id]["result"]);
        assert_eq!(result, "b,b", "B ran both steps of {id}");
        let mine: Vec<&Run> = runs_a.iter().filter(|r| &r.task == id).collect();
        let theirs: Vec<&Run> = runs_b.iter().filter(|r| &r.task == id).collect();
        // A ran only the step in flight at the partition, started before it.
        assert_eq!(mine.len(), 1, "A's runs of {id}: {mine:?}");
        let run = mine[0];
        assert_eq!((run.who, run.seq), ("a", 1), "{run:?}");
        assert!(run.started < partitioned_at, "{run:?}");
        // B ran each step once, the first one only after A's lease lapsed.
        assert_eq!(
            theirs.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [1, 2],
            "{theirs:?}"
        );
        assert!(theirs.iter().all(|r| r.effect));
        let lapsed = lapse[id];
        assert!(
            theirs[0].started >= lapsed - 50,
            "B started {id} at {} before A's lease lapsed at {lapsed}",
            theirs[0].started
        );
        // A's step stopped before the lease lapsed (and so before B could start it), its
        // side effect not done: at the fence point when it watches, dropped shortly after
        // when it does not.
        assert!(
            run.ended < lapsed,
            "A's step of {id} (watch {watch}) ran until {} (lease lapsed at {lapsed}, {} ms \
             earlier)",
            run.ended,
            run.ended - lapsed
        );
        if run.effect {
            twice += 1;
        }
        eprintln!(
            "{id} (watch {watch}): partition +{} ms, A's step ended +{} ms, lease lapsed \
             +{} ms, B took it +{} ms",
            0,
            run.ended - partitioned_at,
            lapsed - partitioned_at,
            taken[id] - partitioned_at
        );
    }
    eprintln!(
        "side effects run twice: {twice}; A served again {} ms after the partition healed",
        rejoined.as_millis()
    );
    assert_eq!(twice, 0, "no side effect happens twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_sent_while_the_listener_reconnects_reaches_the_work() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let proxy = proxy::Proxy::to_url(&db.url).await;
    let store_a = db
        .builder_via(proxy.url(&db.url))
        .connect()
        .await
        .expect("A connects through the proxy");
    let store_b = db.store().await.expect("B connects");
    let record = |who| Record {
        who,
        runs: Arc::default(),
    };
    // Only NOTIFY, or the catch-up after a reconnect, can deliver a cancel in time.
    let config = ClusterConfig::default().with_reread_interval(Duration::from_secs(120));
    let mut a = instance_with(store_a, &record("a"), config.clone()).await;
    let mut b = instance_with(store_b, &record("b"), config).await;
    let raw = db.raw().await;
    let listening = || db.listeners(&raw);
    let id = call(&mut a, 1, 600_000, true).await;
    // Both instances listen (B's own listener, and A's through the proxy).
    let patience = common::Patience::with_bound("two listeners", Duration::from_secs(10));
    while listening().await < 2 {
        patience.wait().await;
    }
    let accepted = proxy.accepted();
    // Cut A off: every connection closed, new ones held.
    proxy.blackhole();
    proxy.sever();
    let patience = common::Patience::with_bound("A's listener gone", Duration::from_secs(10));
    while listening().await > 1 {
        patience.wait().await;
    }
    let (_, cancelled) = b.rpc("tasks/cancel", json!({ "taskId": id }), TASKS).await;
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    // A's listener tries to connect again meanwhile (held by the proxy).
    let patience = common::Patience::with_bound("A to reconnect", Duration::from_secs(10));
    while proxy.accepted() == accepted {
        patience.wait().await;
    }
    let healed = Instant::now();
    proxy.heal();
    let patience = common::Patience::with_bound("the cancel to reach A", Duration::from_secs(10));
    loop {
        let task = get(&mut b, &id).await;
        if task["status"] == "cancelled" {
            break;
        }
        assert_eq!(task["status"], "working", "{task}");
        patience.wait().await;
    }
    eprintln!(
        "the cancel sent while A's listener was down reached the work {} ms after the \
         connection came back",
        healed.elapsed().as_millis()
    );
}
