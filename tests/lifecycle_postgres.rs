//! The lifecycle of an engine and a worker on Postgres: `start`, then `shutdown(grace)`,
//! after which no claim, renewal, wake-up re-read or expiry sweep runs (the rows and every
//! connection of the instance's store in `pg_stat_activity` stay as they were) and every
//! loop has ended; and the re-read of the runtime, which covers a lost wake-up now that the
//! store keeps no list of leases.

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{sync::Arc, time::Duration};

use common::{Http, TASKS};
use mcp_tasks::{
    ClusterConfig, Engine, PostgresStore, TaskContext, TaskServer, TaskStore, ToolError,
    store::NewTask, task_tool, toolkit,
};
use rmcp::model::TaskStatus;
use serde_json::json;

macro_rules! db {
    () => {
        match pg::Db::new().await {
            Some(db) => db,
            None => return,
        }
    };
}

/// Waits until it is cancelled.
#[task_tool(mode = "required", poll_interval = "50ms")]
async fn parked(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// Timings far below the defaults, so a loop that went on after a shutdown would show
/// within the test's watch window many times over.
fn quick() -> ClusterConfig {
    ClusterConfig::default()
        .with_lease(Duration::from_millis(800))
        .with_renewal(Duration::from_millis(100))
        .with_claim_interval(Duration::from_millis(50))
        .with_reread_interval(Duration::from_millis(50))
}

const SWEEP: Duration = Duration::from_millis(50);

/// A store of this test whose connections carry `name` as their `application_name`.
async fn store_named(db: &pg::Db, name: &str) -> Arc<PostgresStore> {
    Arc::new(
        db.builder()
            .with_application_name(name.to_owned())
            .connect()
            .await
            .expect("connect"),
    )
}

/// Every task row, as text.
async fn rows(raw: &tokio_postgres::Client) -> Vec<String> {
    raw.query(
        "SELECT concat_ws('|', id, status, runner, epoch, lease_until_ms, last_updated_at_ms, \
         purge_at_ms) FROM tasks ORDER BY id",
        &[],
    )
    .await
    .expect("read the rows")
    .iter()
    .map(|row| row.get(0))
    .collect()
}

/// Every connection of the named stores (pool and listener): pid, state, when its last
/// query started, and that query.
async fn activity(raw: &tokio_postgres::Client, names: &[String]) -> Vec<String> {
    raw.query(
        "SELECT concat_ws('|', pid, state, query_start, query) FROM pg_stat_activity \
         WHERE application_name = ANY($1) ORDER BY pid",
        &[&names],
    )
    .await
    .expect("read pg_stat_activity")
    .iter()
    .map(|row| row.get(0))
    .collect()
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An engine and a worker each run a task when they are shut down: afterwards their rows and
/// their stores' connections stay untouched for many claim, renewal, re-read and sweep
/// intervals (and past the lease, so a claim loop still running would take the lapsed tasks
/// back), and every loop they spawned has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_shutdown_nothing_runs() {
    let db = db!();
    let names = [
        format!("{}_engine", db.schema),
        format!("{}_worker", db.schema),
    ];
    let engine_store = store_named(&db, &names[0]).await;
    let worker_store = store_named(&db, &names[1]).await;
    let tools = || toolkit![parked].expect("toolkit");

    // The engine runs its own calls and claims nothing; the worker claims the queued task.
    let engine = Engine::builder(tools())
        .with_shared_store(engine_store.clone())
        .with_instance_id("engine")
        .with_cluster(quick().with_execution(false))
        .with_expiry_sweep(SWEEP)
        .build();
    let mut http = Http::start(TaskServer::from_engine(engine.clone())).await;
    assert!(
        engine.is_running(),
        "serving the TaskServer started its engine"
    );
    let worker = Engine::builder(tools())
        .with_shared_store(worker_store.clone())
        .with_instance_id("worker")
        .with_cluster(quick())
        .with_expiry_sweep(SWEEP)
        .build_worker()
        .start()
        .expect("the worker starts");

    let (_, created) = http
        .rpc(
            "tools/call",
            json!({ "name": "parked", "arguments": {} }),
            TASKS,
        )
        .await;
    let served = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    let version = tools()
        .definitions()
        .next()
        .expect("one tool")
        .version()
        .to_owned();
    worker_store
        .create(
            NewTask::new(
                Arc::from("queued"),
                Arc::from("anonymous"),
                Arc::from("parked"),
            )
            .with_tool_version(Arc::from(version)),
        )
        .await
        .expect("queue a task");
    wait_until("both run their task", || {
        engine.running_tasks() == 1 && worker.running_tasks() == 1
    })
    .await;
    // A few renewals under way.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let grace = Duration::from_millis(100);
    let (engine_report, worker_report) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(engine.shutdown(grace), worker.shutdown(grace))
    })
    .await
    .expect("shutdown returns once every loop ended");
    assert_eq!(engine_report.abandoned, 1, "{engine_report:?}");
    assert_eq!(worker_report.abandoned, 1, "{worker_report:?}");
    assert_eq!(engine_report.failed + worker_report.failed, 2);
    assert!(engine.is_stopped() && worker.is_stopped());
    assert!(!engine.is_running());
    assert_eq!(engine.running_tasks() + worker.running_tasks(), 0);
    assert_eq!(
        engine.start(),
        Err(mcp_tasks::StartError::Stopped),
        "a stopped engine does not start again"
    );

    let raw = db.raw().await;
    // Let the view settle: a query answered just before the shutdown returned, and the
    // connection of work abandoned inside a transaction (closed when the work was dropped,
    // which the server sees a moment later, more so on a loaded machine).
    let settle = tokio::time::Instant::now() + Duration::from_secs(5);
    let activity_before = loop {
        let now = activity(&raw, &names).await;
        if now.iter().all(|a| a.contains("|idle|")) || tokio::time::Instant::now() > settle {
            break now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let rows_before = rows(&raw).await;
    assert!(
        !activity_before.is_empty(),
        "the stores' connections are listed"
    );
    assert!(
        activity_before.iter().all(|a| a.contains("|idle|")),
        "nothing of either instance is running a query: {activity_before:#?}"
    );
    // Past the lease (800 ms): a claim loop still running would take the lapsed tasks.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        rows(&raw).await,
        rows_before,
        "no row changed after shutdown"
    );
    assert_eq!(
        activity(&raw, &names).await,
        activity_before,
        "no connection of either instance started a query after shutdown"
    );

    // The drain failed both tasks (`parked` is a `fail` tool: it cannot be resumed).
    for id in [served.as_str(), "queued"] {
        let task = engine_store.get(id).await.unwrap().expect("the task");
        assert_eq!(task.status, TaskStatus::Failed, "{id}");
        assert!(
            task.status_message
                .as_deref()
                .is_some_and(|m| m.contains("server was shut down")),
            "{id}: {:?}",
            task.status_message
        );
    }
    // Calls are refused once the engine is shut down.
    let (_, refused) = http
        .rpc(
            "tools/call",
            json!({ "name": "parked", "arguments": {} }),
            TASKS,
        )
        .await;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
}

/// A cancel intent written behind the store's back (so no NOTIFY at all) still reaches the
/// work: the runtime re-reads the tasks it runs every `reread_interval`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_wakeup_is_covered_by_the_runtimes_reread() {
    let db = db!();
    let store = store_named(&db, &db.schema).await;
    let engine = Engine::builder(toolkit![parked].expect("toolkit"))
        .with_shared_store(store.clone())
        .with_cluster(quick().with_lease(Duration::from_secs(30)))
        .build();
    let mut http = Http::start(TaskServer::from_engine(engine.clone())).await;
    let (_, created) = http
        .rpc(
            "tools/call",
            json!({ "name": "parked", "arguments": {} }),
            TASKS,
        )
        .await;
    let id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    wait_until("the work runs", || engine.running_tasks() == 1).await;
    db.raw()
        .await
        .execute(
            "UPDATE tasks SET cancel_requested = TRUE WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    wait_until("the re-read cancels the work", || {
        engine.running_tasks() == 0
    })
    .await;
    let task = store.get(&id).await.unwrap().expect("the task");
    assert_eq!(task.status, TaskStatus::Cancelled);
    let report = engine.shutdown(Duration::ZERO).await;
    assert_eq!(report.abandoned, 0);
}
