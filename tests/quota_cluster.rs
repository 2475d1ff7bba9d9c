//! The per-owner quota of live tasks holds across a cluster: two instances over one Postgres
//! task space, three owners (bearer tokens), a quota of 2. An owner with one task on each
//! instance is at its quota, and a third call is refused on both instances with the
//! in-process quota's error (`-32603`, `data.quota`), while the other owners go on creating;
//! a task that ends frees a slot on every instance. The same holds with queued calls (fronts
//! that record tasks for workers and run nothing), where no instance counts in-process.

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{sync::Arc, time::Duration};

use common::{Http, TASKS};
use mcp_tasks::{
    ClusterConfig, Engine, HttpOptions, Limits, StaticTokens, TaskContext, TaskServer, ToolError,
    task_tool, toolkit,
};
use serde_json::{Value, json};

macro_rules! db {
    () => {
        match pg::Db::new().await {
            Some(db) => db,
            None => return,
        }
    };
}

const TOKENS: &str = "alice:TOKEN_A,bob:TOKEN_B,carol:TOKEN_C";
const QUOTA: usize = 2;

/// Waits until it is cancelled.
#[task_tool(mode = "required", poll_interval = "50ms")]
async fn parked(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// One instance of the cluster over HTTP: its URL.
async fn instance(db: &pg::Db, id: &str, cluster: ClusterConfig) -> String {
    let store = Arc::new(db.store().await.expect("connect"));
    let engine = Engine::builder(toolkit![parked].expect("toolkit"))
        .with_shared_store(store)
        .with_instance_id(id)
        .with_cluster(cluster)
        .with_limits(Limits::default().with_max_live_tasks_per_owner(QUOTA))
        .build();
    let options =
        HttpOptions::new().with_static_tokens(StaticTokens::parse(TOKENS).expect("tokens"));
    let router = mcp_tasks::http_router(TaskServer::from_engine(engine), options);
    Http::start_router(router).await.url
}

async fn call(http: &mut Http) -> Value {
    http.rpc(
        "tools/call",
        json!({ "name": "parked", "arguments": {} }),
        TASKS,
    )
    .await
    .1
}

/// A call with an idempotency key.
async fn call_keyed(http: &mut Http, key: &str) -> Value {
    let mut meta = common::meta(TASKS);
    meta["mcp-tasks/idempotencyKey"] = json!(key);
    http.rpc_meta(
        "tools/call",
        json!({ "name": "parked", "arguments": {} }),
        meta,
    )
    .await
    .1
}

async fn created(http: &mut Http, what: &str) -> String {
    let answer = call(http).await;
    answer["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: a task is created: {answer}"))
        .to_owned()
}

fn assert_refused(answer: &Value, what: &str) {
    assert_eq!(answer["error"]["code"], -32603, "{what}: {answer}");
    assert_eq!(answer["error"]["data"]["quota"], QUOTA, "{what}: {answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("owner `alice` has 2 live tasks")
            && message.contains("with_max_live_tasks_per_owner"),
        "{what}: the message names the owner, the quota and how to raise it: {message}"
    );
}

/// The owner's live tasks in the store.
async fn live(raw: &tokio_postgres::Client, owner: &str) -> i64 {
    raw.query_one(
        "SELECT count(*) FROM tasks WHERE owner = $1 AND purge_at_ms IS NULL",
        &[&owner],
    )
    .await
    .expect("count")
    .get(0)
}

/// The cluster of two instances `a` and `b` with `cluster`: alice takes her quota with one
/// task on each, is refused on both; bob and carol are not; a cancel frees alice a slot.
async fn quota_holds_across(db: &pg::Db, cluster: ClusterConfig, queued: bool) {
    let a = instance(db, "a", cluster.clone()).await;
    let b = instance(db, "b", cluster).await;
    let raw = db.raw().await;
    let (mut alice_a, mut alice_b) = (
        Http::to(&a).bearing("TOKEN_A"),
        Http::to(&b).bearing("TOKEN_A"),
    );

    let first = created(&mut alice_a, "alice's first, on a").await;
    let second = call_keyed(&mut alice_b, "alice-2").await;
    let second = second["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("alice's second, on b: {second}"))
        .to_owned();
    assert_eq!(live(&raw, "alice").await, 2);
    // Several calls at once on both instances: none gets past the quota.
    let (on_a, on_b) = tokio::join!(call(&mut alice_a), call(&mut alice_b));
    assert_refused(&on_a, "alice's third, on a");
    assert_refused(&on_b, "alice's third, on b");
    assert_eq!(
        live(&raw, "alice").await,
        2,
        "nothing was created past the quota"
    );
    // A retry of a call that created its task answers that task, quota or not.
    let retried = call_keyed(&mut alice_a, "alice-2").await;
    assert_eq!(retried["result"]["taskId"], second.as_str(), "{retried}");

    // The other owners are unaffected, on either instance. Bob calls six times at once,
    // three on each instance: exactly his quota of tasks is created.
    let bobs = (0..6).map(|i| {
        let mut bob = Http::to(if i % 2 == 0 { &a } else { &b }).bearing("TOKEN_B");
        async move { call(&mut bob).await }
    });
    let answers = futures::future::join_all(bobs).await;
    let made = answers
        .iter()
        .filter(|answer| answer["result"]["taskId"].is_string())
        .count();
    assert_eq!(made, QUOTA, "bob's calls at once: {answers:?}");
    for answer in answers.iter().filter(|a| a.get("error").is_some()) {
        assert_eq!(answer["error"]["data"]["quota"], QUOTA, "{answer}");
    }
    let mut carol_b = Http::to(&b).bearing("TOKEN_C");
    created(&mut carol_b, "carol's first, on b").await;
    created(&mut carol_b, "carol's second, on b").await;
    assert_refused(&call(&mut alice_b).await, "alice, still at her quota");

    // A task of alice's that ends frees a slot, taken on the other instance. Queued tasks
    // end when run: a worker claims them (and, running them, counts nothing against the
    // quota: the fronts counted them when they were recorded).
    let _worker = if queued {
        let store = Arc::new(db.store().await.expect("connect"));
        Some(
            Engine::builder(toolkit![parked].expect("toolkit"))
                .with_shared_store(store)
                .with_instance_id("worker")
                .with_cluster(
                    ClusterConfig::default().with_claim_interval(Duration::from_millis(50)),
                )
                .build_worker()
                .start()
                .expect("the worker starts"),
        )
    } else {
        None
    };
    let cancelled = alice_b
        .rpc("tasks/cancel", json!({ "taskId": first }), TASKS)
        .await
        .1;
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    let mut answer = Value::Null;
    for _ in 0..500 {
        answer = call(&mut alice_b).await;
        if answer["result"]["taskId"].is_string() {
            break;
        }
        assert_refused(&answer, "alice while her cancelled task ends");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        answer["result"]["taskId"].is_string(),
        "the freed slot is usable: {answer}"
    );
    assert_refused(&call(&mut alice_a).await, "alice, at her quota again");
    assert_eq!(live(&raw, "alice").await, 2);
    assert_eq!(live(&raw, "bob").await, 2);
    assert_eq!(live(&raw, "carol").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_at_its_quota_is_refused_on_every_instance() {
    let db = db!();
    quota_holds_across(&db, ClusterConfig::default(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quota_holds_for_queued_calls_too() {
    let db = db!();
    let fronts = ClusterConfig::default()
        .with_queued_calls(true)
        .with_execution(false);
    quota_holds_across(&db, fronts, true).await;
}
