//! The same idempotency key at the same moment to two instances (issue 21): over many
//! rounds, each key creates one task, and the tool's code before its first step runs once.
//!
//! Two engines on one Postgres schema in this process, each behind its own HTTP server; each
//! round sends one `tools/call` with a fresh key to both at once (both requests are under way
//! before either is answered).

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{Http, TASKS};
use mcp_tasks::{
    ClusterConfig, Engine, State, TaskContext, TaskServer, ToolError, task_tool, toolkit,
};
use serde_json::{Value, json};

const ROUNDS: u32 = 40;

/// How often each round's code ran: before the first step, and in the step.
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<HashMap<u32, (usize, usize)>>>);

/// Code before its first step, then one step.
#[task_tool(mode = "required", restart = "resume", poll_interval = "20ms")]
async fn charge(
    ctx: TaskContext,
    State(runs): State<Runs>,
    round: u32,
) -> Result<String, ToolError> {
    runs.0.lock().unwrap().entry(round).or_default().0 += 1;
    let step_runs = runs.clone();
    ctx.step("charge", || async move {
        step_runs.0.lock().unwrap().entry(round).or_default().1 += 1;
    })
    .await?;
    Ok(format!("charged {round}"))
}

async fn instance(db: &pg::Db, name: &str, runs: &Runs) -> Http {
    let engine = Engine::builder(toolkit![charge].unwrap().with_state(runs.clone()))
        .with_store(db.store().await.expect("connect"))
        .with_instance_id(name)
        .with_cluster(ClusterConfig::default().with_claim_interval(Duration::from_millis(200)))
        .build();
    engine.start().expect("start the cluster loops");
    Http::start(TaskServer::from_engine(engine)).await
}

/// `tools/call` of `charge` for `round` with idempotency key `key`.
async fn call(http: &Http, round: u32, key: &str) -> Value {
    let mut meta = common::meta(TASKS);
    meta["mcp-tasks/idempotencyKey"] = json!(key);
    let body = json!({
        "jsonrpc": "2.0", "id": round, "method": "tools/call",
        "params": { "name": "charge", "arguments": { "round": round }, "_meta": meta },
    });
    let headers = [
        ("mcp-protocol-version", common::V2026.to_owned()),
        ("mcp-method", "tools/call".to_owned()),
        ("mcp-name", "charge".to_owned()),
    ];
    http.post(&body, &headers).await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_key_at_once_on_two_instances_creates_one_task_and_runs_once() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let runs = Runs::default();
    let a = instance(&db, "a", &runs).await;
    let b = instance(&db, "b", &runs).await;
    let mut ids = Vec::new();
    for round in 0..ROUNDS {
        let key = format!("race-{round}");
        let (from_a, from_b) = tokio::join!(call(&a, round, &key), call(&b, round, &key));
        let id_a = from_a["result"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("{from_a}"));
        let id_b = from_b["result"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("{from_b}"));
        assert_eq!(id_a, id_b, "round {round}: two tasks for one key");
        ids.push(id_a.to_owned());
    }
    for id in &ids {
        let task = common::Peer::Http(Http {
            url: b.url.clone(),
            client: b.client.clone(),
            extra: Vec::new(),
            next_id: 0,
        })
        .wait_terminal(id)
        .await;
        assert_eq!(task["status"], "completed", "{task}");
    }
    let client = db.raw().await;
    let tasks: i64 = client
        .query_one("SELECT count(*) FROM tasks", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(tasks, i64::from(ROUNDS), "one task per key");
    let runs = runs.0.lock().unwrap().clone();
    for round in 0..ROUNDS {
        assert_eq!(
            runs.get(&round),
            Some(&(1, 1)),
            "round {round}: (code before the step, step) runs"
        );
    }
}
