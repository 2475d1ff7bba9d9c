//! Bounded work: `max_running` on a worker (claims take only free slots) and on an instance
//! (a task call over the limit is refused, retryably); in a cluster, a slot freed at the
//! limit is claimed at once, and an answered parked task takes it before the queued tasks.

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

use common::{Http, TASKS};
use mcp_tasks::{
    ClusterConfig, Engine, MemoryStore, State, TaskContext, TaskServer, TaskStore, ToolError,
    store::NewTask, task_tool, toolkit,
};
use rmcp::model::TaskStatus;
use serde_json::json;

/// How many `counted` tasks run now, and the most that ever ran at once.
#[derive(Clone, Default)]
struct Running {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

/// Counts itself running for 60 ms.
#[task_tool(mode = "required", poll_interval = "50ms")]
async fn counted(State(running): State<Running>) -> Result<String, ToolError> {
    let now = running.now.fetch_add(1, Ordering::SeqCst) + 1;
    running.most.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(60)).await;
    running.now.fetch_sub(1, Ordering::SeqCst);
    Ok("counted".into())
}

/// Waits until it is cancelled.
#[task_tool(mode = "required", poll_interval = "50ms")]
async fn parked(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// 50 tasks queued at once; a worker with `max_running = 4` runs them all, never more than 4
/// at once (and 4 at some point: the limit, not slowness, bounds it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_max_running_4_never_runs_more_than_4_of_50_queued() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let store = Arc::new(db.store().await.expect("connect"));
    let running = Running::default();
    let tools = || {
        toolkit![counted]
            .expect("toolkit")
            .with_state(running.clone())
    };
    let version = tools()
        .definitions()
        .next()
        .expect("one tool")
        .version()
        .to_owned();
    let ids: Vec<String> = (0..50).map(|i| format!("queued-{i:02}")).collect();
    for id in &ids {
        store
            .create(
                NewTask::new(
                    Arc::from(id.as_str()),
                    Arc::from("anonymous"),
                    Arc::from("counted"),
                )
                .with_tool_version(Arc::from(version.as_str())),
            )
            .await
            .expect("queue a task");
    }
    let worker = Engine::builder(tools())
        .with_shared_store(store.clone())
        .with_cluster(
            ClusterConfig::default()
                .with_claim_interval(Duration::from_millis(20))
                .with_reread_interval(Duration::from_millis(200)),
        )
        .with_max_running(4)
        .build_worker()
        .start()
        .expect("the worker starts");

    let patience = common::Patience::new("every queued task completed");
    let mut sampled_most = 0;
    loop {
        sampled_most = sampled_most.max(worker.running_tasks());
        let mut done = 0;
        for id in &ids {
            let task = store.get(id).await.unwrap().expect("the task");
            if task.status == TaskStatus::Completed {
                done += 1;
            }
        }
        if done == ids.len() {
            break;
        }
        patience.wait().await;
    }
    worker.shutdown(Duration::from_secs(1)).await;
    let most = running.most.load(Ordering::SeqCst);
    eprintln!("at most {most} ran at once (sampled: {sampled_most})");
    assert_eq!(
        most, 4,
        "never more than 4 at once, and the limit was reached"
    );
    assert!(sampled_most <= 4, "{sampled_most}");
}

/// An instance with `max_running = 2` refuses a third task call with a retryable `-32603`
/// saying so (nothing is created: the store holds the two tasks only), and takes one again
/// once a slot is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_at_its_limit_refuses_task_calls_retryably() {
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::builder(toolkit![parked].expect("toolkit"))
        .with_shared_store(store.clone())
        .with_max_running(2)
        .build();
    let mut http = Http::start(TaskServer::from_engine(engine.clone())).await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (_, created) = http
            .rpc(
                "tools/call",
                json!({ "name": "parked", "arguments": {} }),
                TASKS,
            )
            .await;
        ids.push(
            created["result"]["taskId"]
                .as_str()
                .unwrap_or_else(|| panic!("a task: {created}"))
                .to_owned(),
        );
    }
    let (_, refused) = http
        .rpc(
            "tools/call",
            json!({ "name": "parked", "arguments": {} }),
            TASKS,
        )
        .await;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert_eq!(refused["error"]["data"]["retryable"], true, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limit of 2 tasks"),
        "{refused}"
    );
    assert_eq!(engine.running_tasks(), 2);
    assert_eq!(store.len(), 2, "the refused call created no task");

    let (_, cancelled) = http
        .rpc("tasks/cancel", json!({ "taskId": ids[0] }), TASKS)
        .await;
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    let patience = common::Patience::new("a slot is free again");
    while engine.running_tasks() > 1 {
        patience.wait().await;
    }
    let (_, created) = http
        .rpc(
            "tools/call",
            json!({ "name": "parked", "arguments": {} }),
            TASKS,
        )
        .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    assert_eq!(
        store.len(),
        3,
        "the two tasks and the one taken once a slot was free"
    );
}

/// Asks a name, and is parked while the question waits.
#[task_tool(
    mode = "required",
    restart = "resume",
    park_after = "100ms",
    poll_interval = "50ms"
)]
async fn ask(ctx: TaskContext) -> Result<String, ToolError> {
    let name = common::ask_name(&ctx).await?;
    Ok(format!("answered by {name}"))
}

/// Works for 150 ms.
#[task_tool(mode = "required", poll_interval = "50ms")]
async fn chore(n: u32) -> Result<u32, ToolError> {
    tokio::time::sleep(Duration::from_millis(150)).await;
    Ok(n)
}

/// Queues `n` tasks of `chore` (of its `version`) in `store`, with no runner; their ids.
async fn queue_chores(store: &dyn TaskStore, version: &str, n: u32) -> Vec<String> {
    let mut chores = Vec::new();
    for n in 0..n {
        let id = format!("chore-{n:02}");
        let task = NewTask::new(
            Arc::from(id.as_str()),
            Arc::from("anonymous"),
            Arc::from("chore"),
        )
        .with_arguments(json!({ "n": n }).as_object().cloned().unwrap_or_default())
        .with_tool_version(Arc::from(version));
        store.create(task).await.expect("queue a chore");
        chores.push(id);
    }
    chores
}

/// How many of the tasks `ids` completed.
async fn completed(store: &dyn TaskStore, ids: &[String]) -> usize {
    let mut done = 0;
    for id in ids {
        let task = store.get(id).await.unwrap().expect("the task");
        done += usize::from(task.status == TaskStatus::Completed);
    }
    done
}

/// A parked task that is answered while queued work fills every slot (`max_running = 2`, 40
/// tasks of 150 ms queued) takes the next free slot: work already begun goes before the queue,
/// and is not left waiting until the queue is empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answered_parked_task_runs_before_the_queue_drains() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let store = Arc::new(db.store().await.expect("connect"));
    let tools = toolkit![ask, chore].expect("toolkit");
    let version = tools
        .definitions()
        .find(|tool| tool.name() == "chore")
        .expect("chore")
        .version()
        .to_owned();
    let engine = Engine::builder(tools)
        .with_shared_store(store.clone())
        .with_cluster(ClusterConfig::default().with_claim_interval(Duration::from_millis(20)))
        .with_max_running(2)
        .build();
    let mut http = Http::start(TaskServer::from_engine(engine.clone())).await;
    let id = http.call_task("ask", json!({})).await;
    let patience = common::Patience::new("the question is parked");
    loop {
        let task = store.get(&id).await.unwrap().expect("the task");
        if task.parked_until_ms.is_some() && engine.running_tasks() == 0 {
            break;
        }
        patience.wait().await;
    }

    let chores = queue_chores(&*store, &version, 40).await;
    let patience = common::Patience::new("the queue fills both slots");
    while engine.running_tasks() < 2 {
        patience.wait().await;
    }

    let (_, task) = http.rpc("tasks/get", json!({ "taskId": id }), TASKS).await;
    let key = common::first_input_key(&task["result"]);
    let answer = json!({ "action": "accept", "content": { "name": "ada" } });
    let (_, updated) = http
        .rpc(
            "tasks/update",
            json!({ "taskId": id, "inputResponses": { key: answer } }),
            TASKS,
        )
        .await;
    assert!(updated.get("error").is_none(), "{updated}");
    let patience = common::Patience::new("the answered task completed");
    loop {
        let task = store.get(&id).await.unwrap().expect("the task");
        if task.status == TaskStatus::Completed {
            break;
        }
        patience.wait().await;
    }
    let left = chores.len() - completed(&*store, &chores).await;
    eprintln!("{left} of 40 chores not yet done when the answered task completed");
    assert!(
        left >= 20,
        "the answered task waited for the queue: {left} of 40 chores left when it completed"
    );
    engine.shutdown(Duration::from_secs(1)).await;
}

/// A worker at its `max_running` claims the next queued task as soon as a slot is free, not
/// at its next claim interval (a minute here): 10 tasks of 150 ms on 2 slots all complete
/// within seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_slot_is_filled_at_once_not_at_the_next_claim_interval() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let store = Arc::new(db.store().await.expect("connect"));
    let tools = toolkit![chore].expect("toolkit");
    let version = tools
        .definitions()
        .next()
        .expect("one tool")
        .version()
        .to_owned();
    let chores = queue_chores(&*store, &version, 10).await;
    let started = std::time::Instant::now();
    let worker = Engine::builder(tools)
        .with_shared_store(store.clone())
        .with_cluster(ClusterConfig::default().with_claim_interval(Duration::from_secs(60)))
        .with_max_running(2)
        .build_worker()
        .start()
        .expect("the worker starts");
    let mut done = 0;
    while started.elapsed() < Duration::from_secs(10) {
        done = completed(&*store, &chores).await;
        if done == chores.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("{done} of 10 done in {:?}", started.elapsed());
    worker.shutdown(Duration::from_secs(1)).await;
    assert_eq!(
        done, 10,
        "the queued tasks waited for the claim interval: {done} of 10 done within 10 s"
    );
}
