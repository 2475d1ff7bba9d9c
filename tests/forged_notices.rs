//! A wake-up is a hint, never the truth: notices forged on a store's channel (with `psql`,
//! as any role that can connect to the database could send them) make an instance read the
//! task's row, and since the row says nothing changed, nothing changes. A forged cancel
//! stops no work and records no cancel; a forged answer delivers nothing; a forged queue or
//! change notice moves no task. Real Postgres, real `psql`, real HTTP.

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{
    process::Command,
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use common::{Http, TASKS, ask_name};
use mcp_tasks::{
    ClusterConfig, Engine, TaskContext, TaskServer, TaskStore, ToolError, task_tool, toolkit,
};
use rmcp::model::TaskStatus;
use serde_json::json;

/// How many times the work of `steady` saw its cancellation.
static CANCELS_SEEN: AtomicUsize = AtomicUsize::new(0);

/// Works until it is cancelled, counting the cancellation it sees.
#[task_tool(mode = "required", poll_interval = "50ms")]
async fn steady(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    CANCELS_SEEN.fetch_add(1, Ordering::SeqCst);
    Err(ToolError::cancelled())
}

/// Asks a question and answers with the name given.
#[task_tool(mode = "required", poll_interval = "50ms")]
async fn asking(ctx: TaskContext) -> Result<String, ToolError> {
    ask_name(&ctx).await
}

/// Sends `payload` on `channel` with the `psql` of the machine, as a database role would.
fn psql_notify(url: &str, channel: &str, payload: &str) {
    let status = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c"])
        .arg(format!(
            "SELECT pg_notify('{}', '{}')",
            channel.replace('\'', "''"),
            payload.replace('\'', "''")
        ))
        .stdout(std::process::Stdio::null())
        .status()
        .expect("psql runs (Debian's postgresql-client)");
    assert!(status.success(), "psql NOTIFY {payload}: {status}");
}

/// Calls `tool` as a task; its id.
async fn start(http: &mut Http, tool: &str) -> String {
    let (_, created) = http
        .rpc(
            "tools/call",
            json!({ "name": tool, "arguments": {} }),
            TASKS,
        )
        .await;
    created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_notices_change_nothing() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let store = std::sync::Arc::new(db.store().await.expect("connect"));
    let engine = Engine::builder(toolkit![steady, asking].expect("toolkit"))
        .with_shared_store(store.clone())
        .with_instance_id("a")
        .with_cluster(
            ClusterConfig::default()
                .with_lease(Duration::from_secs(5))
                .with_renewal(Duration::from_millis(500)),
        )
        .build();
    let mut http = Http::start(TaskServer::from_engine(engine.clone())).await;
    let working = start(&mut http, "steady").await;
    let asking_id = start(&mut http, "asking").await;
    let patience = common::Patience::new("both tasks under way");
    while store.get(&asking_id).await.unwrap().unwrap().status != TaskStatus::InputRequired
        || engine.running_tasks() != 2
    {
        patience.wait().await;
    }
    let before = [
        store.get(&working).await.unwrap().unwrap(),
        store.get(&asking_id).await.unwrap().unwrap(),
    ];

    let channel = format!("mcp_tasks.{}", db.schema);
    for payload in [
        format!("c:{working}"),
        format!("c:{asking_id}"),
        format!("a:1:{asking_id}"),
        format!("a:99:{asking_id}"),
        format!("u:{working}"),
        format!("q:{working}"),
        "m:".to_owned(),
    ] {
        psql_notify(&db.url, &channel, &payload);
    }
    // A genuine notice sent after the forged ones, on the same channel: once its effect is
    // seen, the instance has read every forged one before it (one listener, in order).
    store.request_cancel(&working).await.unwrap();
    let patience = common::Patience::new("the genuine cancel stops the work");
    while CANCELS_SEEN.load(Ordering::SeqCst) == 0 {
        patience.wait().await;
    }
    let patience = common::Patience::new("the cancelled work ends its task");
    while !store
        .get(&working)
        .await
        .unwrap()
        .unwrap()
        .status
        .is_terminal()
    {
        patience.wait().await;
    }
    assert_eq!(
        CANCELS_SEEN.load(Ordering::SeqCst),
        1,
        "the work saw one cancellation: the genuine one"
    );

    let after = store.get(&asking_id).await.unwrap().unwrap();
    assert_eq!(
        after, before[1],
        "the task waiting for an answer is as it was: no cancel recorded, no answer taken"
    );
    assert_eq!(
        engine.running_tasks(),
        1,
        "the asking task's work still runs"
    );
    let working_after = store.get(&working).await.unwrap().unwrap();
    assert!(working_after.cancel_requested);
    assert!(
        !before[0].cancel_requested,
        "no cancel before the genuine one"
    );
}
