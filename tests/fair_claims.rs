//! Owners take turns at the free slots of a cluster (`ClaimOrder::OwnersTakeTurns`, the
//! default): a front over one Postgres task space records calls queued, two workers with two
//! slots each run them. Alice queues 500 tasks, then Bob queues 5; Bob's tasks all start
//! before 20 more of Alice's do, where oldest first would start them after all 500 of hers.
//! The order is read from the tools' own journal of starts.

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{Http, Patience};
use mcp_tasks::{
    ClaimOrder, ClusterConfig, Engine, HttpOptions, PriorityInput, StaticTokens, TaskServer,
    ToolError, WorkerHandle, task_tool, toolkit,
};
use serde_json::json;

/// The owner of each task, in the order the tasks started (on any worker).
#[derive(Clone, Default)]
struct Starts(Arc<Mutex<Vec<String>>>);

/// Notes its start, then works for a while.
#[task_tool(mode = "required", poll_interval = "50ms")]
async fn job(
    who: String,
    mcp_tasks::State(starts): mcp_tasks::State<Starts>,
) -> Result<String, ToolError> {
    starts.0.lock().expect("journal").push(who.clone());
    tokio::time::sleep(Duration::from_millis(400)).await;
    Ok(who)
}

const TOKENS: &str = "alice:TOKEN_A,bob:TOKEN_B";

/// A front that records calls queued (and runs nothing): its URL.
async fn front(db: &pg::Db, starts: &Starts) -> String {
    front_with(db, starts, |_| 0).await
}

/// [`front`], deriving each task's priority with `priority`.
async fn front_with(
    db: &pg::Db,
    starts: &Starts,
    priority: impl Fn(&PriorityInput<'_>) -> i16 + Send + Sync + 'static,
) -> String {
    let store = Arc::new(db.store().await.expect("connect"));
    let engine = Engine::builder(toolkit![job].expect("toolkit").with_state(starts.clone()))
        .with_priority(priority)
        .with_shared_store(store)
        .with_instance_id("front")
        .with_cluster(
            ClusterConfig::default()
                .with_queued_calls(true)
                .with_execution(false),
        )
        .build();
    let options =
        HttpOptions::new().with_static_tokens(StaticTokens::parse(TOKENS).expect("tokens"));
    Http::start_router(mcp_tasks::http_router(
        TaskServer::from_engine(engine),
        options,
    ))
    .await
    .url
}

/// A worker with two slots, claiming in `order`.
async fn worker(db: &pg::Db, starts: &Starts, id: &str, order: ClaimOrder) -> WorkerHandle {
    let config = ClusterConfig::default()
        .with_claim_interval(Duration::from_millis(20))
        .with_claim_order(order);
    worker_with(db, starts, id, 2, config).await
}

/// A worker with `slots` slots and `config`.
async fn worker_with(
    db: &pg::Db,
    starts: &Starts,
    id: &str,
    slots: usize,
    config: ClusterConfig,
) -> WorkerHandle {
    let store = Arc::new(db.store().await.expect("connect"));
    Engine::builder(toolkit![job].expect("toolkit").with_state(starts.clone()))
        .with_shared_store(store)
        .with_instance_id(id)
        .with_max_running(slots)
        .with_cluster(config)
        .build_worker()
        .start()
        .expect("the worker starts")
}

/// `n` calls of `who`'s, eight at a time.
async fn queue(url: &str, token: &str, who: &str, n: usize) {
    let calls = (0..8).map(|lane| {
        let mut http = Http::to(url).bearing(token);
        async move {
            for _ in (lane..n).step_by(8) {
                http.call_task("job", json!({ "who": who })).await;
            }
        }
    });
    futures::future::join_all(calls).await;
}

/// Alice queues 500, then Bob 5, with four slots in the cluster: how many of Alice's tasks
/// started after Bob began to queue and before his last one started (`None`: Bob's did not
/// all start while 50 more of Alice's did). The workers run while Alice queues, so on a slow
/// machine some of hers start before Bob queues at all; those are not counted.
async fn alices_before_bobs_last(order: ClaimOrder) -> Option<usize> {
    let db = pg::Db::new().await?;
    let starts = Starts::default();
    let url = front(&db, &starts).await;
    let _workers = [
        worker(&db, &starts, "w1", order).await,
        worker(&db, &starts, "w2", order).await,
    ];
    queue(&url, "TOKEN_A", "alice", 500).await;
    let alice_queued = starts.0.lock().expect("journal").len();
    queue(&url, "TOKEN_B", "bob", 5).await;
    let patience = Patience::new("Bob's tasks start, or 50 more of Alice's");
    loop {
        let (before_bobs_last, alice) = {
            let starts = starts.0.lock().expect("journal");
            let bob_last = starts
                .iter()
                .enumerate()
                .filter(|(_, w)| *w == "bob")
                .nth(4);
            let alice = |n: usize| starts[..n].iter().filter(|w| *w == "alice").count();
            (bob_last.map(|(at, _)| alice(at)), alice(starts.len()))
        };
        if let Some(before) = before_bobs_last {
            eprintln!(
                "{order:?}: {alice_queued} of Alice's started while she queued; \
                 {before} before Bob's last"
            );
            return Some(before - alice_queued);
        }
        if alice >= alice_queued + 50 {
            eprintln!("{order:?}: 50 more of Alice's started, Bob's had not");
            return None;
        }
        patience.wait().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_owner_is_not_held_back_by_a_big_one() {
    if pg::url().await.is_none() {
        return;
    }
    let before = alices_before_bobs_last(ClaimOrder::OwnersTakeTurns).await;
    assert!(
        before.is_some_and(|n| n < 20),
        "Bob's 5 tasks all start before 20 more of Alice's: {before:?} of hers started first"
    );
}

/// The baseline the turns are measured against: oldest first, Bob waits behind Alice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oldest_first_holds_a_small_owner_back() {
    if pg::url().await.is_none() {
        return;
    }
    let before = alices_before_bobs_last(ClaimOrder::OldestFirst).await;
    assert_eq!(
        before, None,
        "oldest first, Bob's tasks wait behind Alice's"
    );
}

/// A queued task says so in its status message until an instance claims it; the claim clears
/// the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_task_says_so_until_it_is_claimed() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let starts = Starts::default();
    let url = front(&db, &starts).await;
    let mut alice = Http::to(&url).bearing("TOKEN_A");
    let id = alice.call_task("job", json!({ "who": "alice" })).await;
    let queued = task(&mut alice, &id).await;
    assert_eq!(queued["result"]["status"], "working", "{queued}");
    assert_eq!(
        queued["result"]["statusMessage"],
        "queued: waiting for an instance with a free slot to start it",
        "{queued}"
    );
    let _worker = worker(&db, &starts, "w", ClaimOrder::OwnersTakeTurns).await;
    let patience = Patience::new("the task is claimed and starts");
    while starts.0.lock().expect("journal").is_empty() {
        patience.wait().await;
    }
    // Running now (the tool works 400 ms and sets no message of its own).
    let running = task(&mut alice, &id).await;
    assert_eq!(running["result"]["status"], "working", "{running}");
    assert!(
        running["result"].get("statusMessage").is_none(),
        "the claim cleared the queued message: {running}"
    );
    assert!(
        running["result"]["lastUpdatedAt"].as_str() > queued["result"]["lastUpdatedAt"].as_str(),
        "the claim is a change: {queued} then {running}"
    );
}

/// Bob's calls have a higher priority (the application's choice, by owner): queued behind
/// 100 of Alice's, his 5 tasks are the next 5 to start, not one in two as the owners' turns
/// alone would give him.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_goes_first() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let starts = Starts::default();
    let url = front_with(&db, &starts, |call| if call.owner == "bob" { 5 } else { 0 }).await;
    let config = ClusterConfig::default()
        .with_claim_interval(Duration::from_millis(20))
        .with_priorities(Duration::from_secs(3600));
    // One slot: each claim takes one task, so the order of the starts is the claims' order
    // (tasks claimed together start together, in no particular order).
    let _worker = worker_with(&db, &starts, "w", 1, config).await;
    queue(&url, "TOKEN_A", "alice", 100).await;
    queue(&url, "TOKEN_B", "bob", 5).await;
    let patience = Patience::new("Bob's 5 tasks start");
    let order = loop {
        let order = starts.0.lock().expect("journal").clone();
        if order.iter().filter(|w| *w == "bob").count() == 5 {
            break order;
        }
        patience.wait().await;
    };
    let first = order.iter().position(|w| w == "bob").expect("bob started");
    eprintln!(
        "{first} of Alice's started before Bob's first: {:?}",
        &order[first..]
    );
    assert!(
        order[first..first + 5].iter().all(|w| w == "bob"),
        "once Bob's first starts, his 5 are the next to start: {:?}",
        &order[first..]
    );
}

/// What `tasks/get` answers for task `id`.
async fn task(http: &mut Http, id: &str) -> serde_json::Value {
    http.rpc("tasks/get", json!({ "taskId": id }), common::TASKS)
        .await
        .1
}
