//! A storm of wake-ups that the runtime cannot keep up with (issue 21, item 6): its
//! broadcast buffer overflows (`Lagged`), and every task still gets its answers and cancels.
//!
//! Two engines on one Postgres schema, in this process. A holds one wake-up at most
//! (`PostgresBuilder::with_wakeup_capacity(1)`) and runs [`TASKS`] tasks that each ask for
//! input, then wait for a cancel; the periodic re-read runs every 2 minutes, far above
//! every bound here. While a raw connection floods the schema's channel with bursts of
//! notifications for tasks that do not exist, B answers every task and then cancels every
//! one. A's listener hands each burst to a buffer of one, so the runtime lags and most of
//! the real wake-ups among the storm are dropped: only the re-read that a lag sets off can
//! deliver them in time. That a lag happened is checked, not assumed: the process's
//! Prometheus recorder counts the wake-ups missed (`mcp_tasks_wakeups_missed_total`). The
//! count is the process's, A's and B's together (the metrics name no instance); of the two
//! listeners on one feed, A's buffer of one is the first to overflow, and a storm that
//! overflows none (too small, or over before the answers) fails here.

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{
    collections::HashSet,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use common::{Http, TASKS as CAPS};
use mcp_tasks::{
    ClusterConfig, Engine, PostgresStore, State, TaskContext, TaskServer, ToolError, task_tool,
    toolkit,
};
use rmcp::model::ElicitationSchema;
use serde_json::{Value, json};

/// Tasks that A runs.
const TASKS: usize = 30;
/// Notifications of one burst of the storm (one transaction).
const BURST: usize = 2_000;
/// How long every answer, and then every cancel, may take to reach the work.
const BOUND: Duration = Duration::from_secs(10);

/// Which tasks got their answer, and which their cancel.
#[derive(Clone, Default)]
struct Seen {
    answered: Arc<Mutex<HashSet<String>>>,
    cancelled: Arc<Mutex<HashSet<String>>>,
}

/// Asks for a confirmation, then waits for a cancel (at most 60 s).
#[task_tool(mode = "required", poll_interval = "50ms")]
async fn ask(ctx: TaskContext, State(seen): State<Seen>) -> Result<String, ToolError> {
    let schema = ElicitationSchema::builder()
        .required_bool("ok")
        .build()
        .map_err(|e| ToolError::new(e.to_string()))?;
    ctx.elicit_form("Go on?", schema).await?;
    // Set after the first await (the task exists by then).
    let id = ctx.task_id().unwrap_or_default().to_owned();
    seen.answered.lock().unwrap().insert(id.clone());
    if ctx
        .until_cancelled(tokio::time::sleep(Duration::from_secs(60)))
        .await
        .is_err()
    {
        seen.cancelled.lock().unwrap().insert(id);
        return Err(ToolError::cancelled());
    }
    Ok("never cancelled".to_owned())
}

async fn instance(store: PostgresStore, name: &'static str, seen: &Seen) -> Http {
    let engine = Engine::builder(toolkit![ask].unwrap().with_state(seen.clone()))
        .with_store(store)
        .with_instance_id(name)
        .with_cluster(ClusterConfig::default().with_reread_interval(Duration::from_secs(120)))
        .build();
    engine.start().expect("start the cluster loops");
    Http::start(TaskServer::from_engine(engine)).await
}

async fn get(http: &mut Http, id: &str) -> Value {
    let (_, response) = http.rpc("tasks/get", json!({ "taskId": id }), CAPS).await;
    response["result"].clone()
}

/// Waits until `done` holds every one of `ids`, or fails after [`BOUND`].
async fn all_within(what: &str, done: &Mutex<HashSet<String>>, ids: &[String]) -> Duration {
    let started = Instant::now();
    loop {
        let missing = ids
            .iter()
            .filter(|id| !done.lock().unwrap().contains(*id))
            .count();
        if missing == 0 {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < BOUND,
            "{missing} of {} tasks did not get their {what} within {BOUND:?}",
            ids.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_wakeups_lose_no_answer_and_no_cancel() {
    let Some(db) = pg::Db::new().await else {
        eprintln!("skipped: no Postgres (MCP_TASKS_POSTGRES_URL)");
        return;
    };
    let store_a = db
        .builder()
        .with_wakeup_capacity(1)
        .connect()
        .await
        .expect("A connects");
    let metrics = mcp_tasks::metrics::install_prometheus().expect("the process's recorder");
    let store_b = db.store().await.expect("B connects");
    let seen = Seen::default();
    let mut a = instance(store_a, "a", &seen).await;
    let mut b = instance(store_b, "b", &seen).await;

    let mut ids = Vec::new();
    for _ in 0..TASKS {
        let (_, response) = a
            .rpc(
                "tools/call",
                json!({ "name": "ask", "arguments": {} }),
                CAPS,
            )
            .await;
        ids.push(
            response["result"]["taskId"]
                .as_str()
                .unwrap_or_else(|| panic!("a task: {response}"))
                .to_owned(),
        );
    }
    let mut keys = Vec::new();
    for id in &ids {
        let patience = common::Patience::with_bound("the question", Duration::from_secs(10));
        let key = loop {
            let task = get(&mut b, id).await;
            if let Some(key) = task["inputRequests"]
                .as_object()
                .and_then(|requests| requests.keys().next().cloned())
            {
                break key;
            }
            patience.wait().await;
        };
        keys.push(key);
    }

    // The storm: bursts of notifications for tasks that do not exist, until the end.
    let storming = Arc::new(AtomicBool::new(true));
    let bursts = Arc::new(AtomicU64::new(0));
    let storm = {
        let raw = db.raw().await;
        let channel = format!("mcp_tasks.{}", db.schema);
        let (storming, bursts) = (Arc::clone(&storming), Arc::clone(&bursts));
        let burst = i64::try_from(BURST).unwrap();
        tokio::spawn(async move {
            while storming.load(Ordering::SeqCst) {
                let n = i64::try_from(bursts.fetch_add(1, Ordering::SeqCst)).unwrap();
                raw.execute(
                    "SELECT pg_notify($1, 'a:1:storm-' || $2::bigint || '-' || g) \
                     FROM generate_series(1, $3::bigint) AS g",
                    &[&channel, &n, &burst],
                )
                .await
                .expect("a burst of notifications");
            }
        })
    };
    // Let the first bursts reach A.
    let patience = common::Patience::with_bound("the first 3 bursts of the storm", BOUND);
    while bursts.load(Ordering::SeqCst) < 3 {
        assert!(
            !storm.is_finished(),
            "the storm stopped before its third burst"
        );
        patience.wait().await;
    }

    for (id, key) in ids.iter().zip(&keys) {
        let (_, answered) = b
            .rpc(
                "tasks/update",
                json!({ "taskId": id, "inputResponses": {
                    key: { "action": "accept", "content": { "ok": true } } } }),
                CAPS,
            )
            .await;
        assert!(answered.get("error").is_none(), "{answered}");
    }
    let answers_took = all_within("answer", &seen.answered, &ids).await;
    for id in &ids {
        let (_, cancelled) = b.rpc("tasks/cancel", json!({ "taskId": id }), CAPS).await;
        assert!(cancelled.get("error").is_none(), "{cancelled}");
    }
    let cancels_took = all_within("cancel", &seen.cancelled, &ids).await;
    storming.store(false, Ordering::SeqCst);
    storm.await.unwrap();
    for id in &ids {
        assert_eq!(get(&mut a, id).await["status"], "cancelled", "{id}");
    }
    // The storm overflowed A's buffer: without a lag, the re-read path never ran and the
    // answers came by their wake-ups, which proves nothing here.
    let missed = common::counter(&metrics.render(), mcp_tasks::metrics::WAKEUPS_MISSED);
    assert!(
        missed > 0,
        "no wake-up was missed: the storm did not make A lag, so its re-read went untested"
    );
    eprintln!(
        "{TASKS} tasks under a storm of {} bursts of {BURST} notifications, a wake-up buffer \
         of 1 and a re-read every 2 minutes: {missed} wake-ups missed, every answer in \
         {answers_took:?}, every cancel in {cancels_took:?}",
        bursts.load(Ordering::SeqCst)
    );
}
