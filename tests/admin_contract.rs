//! The admin operations of the store contract ([`mcp_tasks::store::admin`]): one set of
//! checks, generic over `S: TaskStore`, run against every store, as in `store_contract.rs`.
#![allow(
    deprecated,
    reason = "roots/list is deprecated by SEP-2577 yet part of the 2026-07-28 wire; it is the simplest input request"
)]

use std::{sync::Arc, time::Duration};

use mcp_tasks::trace::TraceContext;
use mcp_tasks::{
    MemoryStore, SqliteStore, TaskStore,
    store::{
        AdminStore, Claim, Created, NewTask, Outcome, Step, StoreError,
        admin::{self, Cancelled, CursorError, TaskFilter, TaskQuery},
    },
};
use rmcp::model::{InputRequest, InputResponses, JsonObject, ListRootsRequest, TaskStatus};
use serde_json::json;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn task(id: &str, owner: &str, tool: &str) -> NewTask {
    NewTask::new(Arc::from(id), Arc::from(owner), Arc::from(tool))
}

fn roots_request() -> InputRequest {
    InputRequest::ListRoots(ListRootsRequest {
        method: Default::default(),
        extensions: Default::default(),
    })
}

fn object(value: serde_json::Value) -> JsonObject {
    value.as_object().cloned().unwrap_or_default()
}

fn admin_of(store: &impl TaskStore) -> &dyn AdminStore {
    store
        .admin()
        .expect("every store of the crate offers the admin operations")
}

async fn ids(store: &impl TaskStore, filter: TaskFilter) -> Vec<String> {
    let page = admin_of(store)
        .list(&TaskQuery::new(filter).with_limit(100))
        .await
        .unwrap();
    assert!(page.next_cursor.is_none(), "one page holds them all");
    page.tasks.iter().map(|t| t.task.id.to_string()).collect()
}

/// Runs every check against stores made by `make`. Time must be paused.
async fn contract<S: TaskStore>(make: impl Fn() -> S) {
    filters_and_counts(make()).await;
    pages(make()).await;
    detail(make()).await;
    cancel(make()).await;
    fail_and_set_version(make()).await;
    purge(make()).await;
    instances(make()).await;
    reads_report_their_expiries(make()).await;
}

/// A task that an operator's read expired (reads apply due expiry first) is reported by the
/// store's next expiry sweep, once, so that the runtime stops its work. Single-process
/// stores: a cluster's instances learn of an expiry from the store's notices.
async fn reads_report_their_expiries(store: impl TaskStore) {
    if store.cluster().is_some() {
        return;
    }
    store
        .create(task("short", "alice", "t").with_ttl(Some(Duration::from_secs(1))))
        .await
        .unwrap();
    assert!(store.expire_due().await.unwrap().is_empty());
    tokio::time::advance(Duration::from_secs(2)).await;
    let counts = admin_of(&store).count(&TaskFilter::new()).await.unwrap();
    assert_eq!(counts.failed, 1, "the read applied the expiry");
    let listed = ids(&store, TaskFilter::new()).await;
    assert_eq!(listed, ["short"]);
    let reported: Vec<String> = store
        .expire_due()
        .await
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        reported,
        ["short"],
        "the next sweep reports the task the read expired"
    );
    assert!(store.expire_due().await.unwrap().is_empty(), "once");
}

/// Tasks in every state, newest first; each filter alone; the expiry that is due applies
/// before a list (a task past its TTL is `failed`); "stalled" means live and unchanged for
/// longer than the duration; counts by status.
async fn filters_and_counts(store: impl TaskStore) {
    let second = Duration::from_secs(1);
    let t0 = store.create(task("a1", "alice", "alpha")).await.unwrap();
    let t0 = t0.snapshot().created_at_ms;
    tokio::time::advance(second).await;
    store.create(task("a2", "bob", "alpha")).await.unwrap();
    store
        .request_input("a2", "k1", roots_request())
        .await
        .unwrap();
    tokio::time::advance(second).await;
    store.create(task("b1", "alice", "beta")).await.unwrap();
    store
        .finish("b1", Outcome::Completed(object(json!({ "content": [] }))))
        .await
        .unwrap();
    tokio::time::advance(second).await;
    store.create(task("b2", "bob", "beta")).await.unwrap();
    store
        .finish(
            "b2",
            Outcome::Failed(object(json!({ "code": -32603, "message": "boom" }))),
        )
        .await
        .unwrap();
    tokio::time::advance(second).await;
    store.create(task("b3", "alice", "beta")).await.unwrap();
    store.finish("b3", Outcome::Cancelled).await.unwrap();
    tokio::time::advance(second).await;
    store
        .create(task("g1", "alice", "gamma").with_ttl(Some(Duration::from_secs(2))))
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(60)).await;
    store
        .set_status_message("a2", Some("still asking".into()))
        .await
        .unwrap();

    assert_eq!(
        ids(&store, TaskFilter::new()).await,
        ["g1", "b3", "b2", "b1", "a2", "a1"],
        "newest first"
    );
    assert_eq!(
        ids(&store, TaskFilter::new().with_status(TaskStatus::Working)).await,
        ["a1"]
    );
    assert_eq!(
        ids(
            &store,
            TaskFilter::new()
                .with_status(TaskStatus::Failed)
                .with_status(TaskStatus::InputRequired)
        )
        .await,
        ["g1", "b2", "a2"],
        "g1 expired (kept for the retention): listed as failed"
    );
    assert_eq!(
        ids(&store, TaskFilter::new().with_tool("beta")).await,
        ["b3", "b2", "b1"]
    );
    assert_eq!(
        ids(&store, TaskFilter::new().with_owner("bob")).await,
        ["b2", "a2"]
    );
    assert_eq!(
        ids(
            &store,
            TaskFilter::new()
                .with_created_after_ms(t0 + 1_000)
                .with_created_before_ms(t0 + 3_000)
        )
        .await,
        ["b1", "a2"],
        "after is inclusive, before exclusive"
    );
    assert_eq!(
        ids(
            &store,
            TaskFilter::new().with_stalled_for(Duration::from_secs(30))
        )
        .await,
        ["a1"],
        "a2 changed a moment ago, the others ended"
    );
    assert!(
        ids(
            &store,
            TaskFilter::new().with_stalled_for(Duration::from_secs(70))
        )
        .await
        .is_empty(),
        "a1 is unchanged for 65 s, not 70"
    );
    assert!(
        ids(
            &store,
            TaskFilter::new().with_tool("alpha").with_owner("carol")
        )
        .await
        .is_empty(),
        "every condition must hold"
    );
    let admin = admin_of(&store);
    let counts = admin.count(&TaskFilter::new()).await.unwrap();
    let expected = [
        (TaskStatus::Working, 1),
        (TaskStatus::InputRequired, 1),
        (TaskStatus::Completed, 1),
        (TaskStatus::Failed, 2),
        (TaskStatus::Cancelled, 1),
    ];
    for (status, n) in expected {
        assert_eq!(counts.get(status), n, "{status:?} in {counts:?}");
    }
    assert_eq!(
        (counts.failed, counts.cancelled),
        (2, 1),
        "each status in its own field"
    );
    assert_eq!(counts.total(), 6);
    let beta = admin
        .count(&TaskFilter::new().with_tool("beta"))
        .await
        .unwrap();
    assert_eq!(
        (beta.working, beta.completed, beta.failed, beta.cancelled),
        (0, 1, 1, 1)
    );
    let page = admin
        .list(&TaskQuery::new(TaskFilter::new().with_owner("bob")))
        .await
        .unwrap();
    let a2 = &page.tasks[1].task;
    assert_eq!(
        (
            &*a2.id,
            &*a2.owner,
            &*a2.tool,
            a2.status,
            a2.status_message.as_deref()
        ),
        (
            "a2",
            "bob",
            "alpha",
            TaskStatus::InputRequired,
            Some("still asking")
        )
    );
    assert_eq!(a2.created_at_ms, t0 + 1_000);
}

/// Pages: newest first, ties on `createdAt` broken by id; every task once; the last page has
/// no cursor; a cursor goes only with the filter it was made for.
async fn pages(store: impl TaskStore) {
    let mut expected = Vec::new();
    for i in 0..4 {
        store
            .create(task(&format!("solo-{i}"), "alice", "t"))
            .await
            .unwrap();
        expected.push(format!("solo-{i}"));
        tokio::time::advance(Duration::from_millis(5)).await;
    }
    // Three at one instant.
    for id in ["tie-b", "tie-a", "tie-c"] {
        store.create(task(id, "alice", "t")).await.unwrap();
    }
    expected.extend(["tie-a", "tie-b", "tie-c"].map(String::from));
    expected.reverse();
    let admin = admin_of(&store);
    let filter = TaskFilter::new().with_tool("t");
    let mut seen = Vec::new();
    let mut query = TaskQuery::new(filter.clone()).with_limit(3);
    let mut sizes = Vec::new();
    loop {
        let page = admin.list(&query).await.unwrap();
        sizes.push(page.tasks.len());
        seen.extend(page.tasks.iter().map(|t| t.task.id.to_string()));
        let Some(cursor) = page.next_cursor else {
            break;
        };
        query = TaskQuery::new(filter.clone())
            .with_limit(3)
            .with_cursor(cursor.as_str())
            .expect("the cursor of this query");
    }
    assert_eq!(seen, expected);
    assert_eq!(sizes, [3, 3, 1]);

    let first = admin
        .list(&TaskQuery::new(filter.clone()).with_limit(2))
        .await
        .unwrap();
    let cursor = first.next_cursor.expect("more than two");
    assert_eq!(
        TaskQuery::new(TaskFilter::new().with_tool("other")).with_cursor(cursor.as_str()),
        Err(CursorError::OtherQuery)
    );
    assert_eq!(
        TaskQuery::new(filter.clone().with_status(TaskStatus::Working))
            .with_cursor(cursor.as_str()),
        Err(CursorError::OtherQuery)
    );
    for garbage in ["", "zz", "abc", "00ff"] {
        assert_eq!(
            TaskQuery::new(filter.clone()).with_cursor(garbage),
            Err(CursorError::Malformed),
            "{garbage:?}"
        );
    }
    let second = admin
        .list(
            &TaskQuery::new(filter.clone())
                .with_limit(2)
                .with_cursor(cursor.as_str())
                .unwrap(),
        )
        .await
        .unwrap();
    let ids: Vec<_> = second.tasks.iter().map(|t| t.task.id.to_string()).collect();
    assert_eq!(ids, expected[2..4]);
}

/// One task in detail: steps done, questions open and answered, tool version, arguments;
/// a failed task's error; unknown ids are `None`.
async fn detail(store: impl TaskStore) {
    store
        .create(
            task("run", "bob", "report")
                .with_arguments(object(json!({ "n": 3 })))
                .with_tool_version(Arc::from("v7"))
                .with_trace_context(TraceContext::parse(TRACEPARENT, None)),
        )
        .await
        .unwrap();
    store
        .request_input("run", "k1", roots_request())
        .await
        .unwrap();
    store
        .request_input("run", "k2", roots_request())
        .await
        .unwrap();
    let mut answer = InputResponses::new();
    answer.insert("k1".into(), json!({ "roots": [] }));
    store.deliver_input("run", answer.clone()).await.unwrap();
    store
        .save_step("run", Step::new(1, "fetch", json!({ "rows": 7 })))
        .await
        .unwrap();
    let admin = admin_of(&store);
    let detail = admin.detail("run").await.unwrap().expect("known");
    assert_eq!(&*detail.task.owner, "bob");
    assert_eq!(detail.task.status, TaskStatus::InputRequired);
    assert_eq!(&*detail.origin.tool_version, "v7");
    assert_eq!(detail.origin.arguments, object(json!({ "n": 3 })));
    assert_eq!(
        detail.steps,
        vec![Step::new(1, "fetch", json!({ "rows": 7 }))]
    );
    assert_eq!(detail.answers, answer);
    assert_eq!(
        detail
            .questions
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["k2"],
        "k1 was answered"
    );
    assert!(detail.error().is_none());
    assert!(admin.detail("unknown").await.unwrap().is_none());

    let error = object(json!({ "code": -32603, "message": "disk full" }));
    store
        .finish("run", Outcome::Failed(error.clone()))
        .await
        .unwrap();
    let ended = admin.detail("run").await.unwrap().expect("kept");
    assert_eq!(ended.task.status, TaskStatus::Failed);
    assert_eq!(ended.error(), Some(&error));
    assert_eq!(ended.task.status_message.as_deref(), Some("disk full"));
    assert_eq!(ended.steps.len(), 1, "a failed task keeps its steps");
    assert_eq!(
        ended
            .origin
            .trace_context
            .as_ref()
            .map(TraceContext::traceparent),
        Some(TRACEPARENT),
        "the trace context stays after the task ends"
    );
}

/// An operator cancels any owner's task through the state machine: the intent is recorded,
/// the status changes when the work ends; an ended task keeps its state; unknown ids are
/// `NotFound`.
async fn cancel(store: impl TaskStore) {
    store.create(task("live", "bob", "t")).await.unwrap();
    store.create(task("done", "carol", "t")).await.unwrap();
    store
        .finish("done", Outcome::Completed(object(json!({ "content": [] }))))
        .await
        .unwrap();
    match admin::cancel(&store, "live").await.unwrap() {
        Cancelled::Requested(task) => {
            assert!(task.cancel_requested);
            assert_eq!(task.status, TaskStatus::Working, "intent only");
        }
        other => panic!("a live task's cancel answered {other:?}"),
    }
    assert!(store.get("live").await.unwrap().unwrap().cancel_requested);
    store.finish("live", Outcome::Cancelled).await.unwrap();
    assert_eq!(
        store.get("live").await.unwrap().unwrap().status,
        TaskStatus::Cancelled
    );
    match admin::cancel(&store, "done").await.unwrap() {
        Cancelled::AlreadyEnded(task) => {
            assert_eq!(task.status, TaskStatus::Completed);
            assert!(!task.cancel_requested);
        }
        other => panic!("an ended task's cancel answered {other:?}"),
    }
    assert!(matches!(
        admin::cancel(&store, "unknown").await,
        Err(StoreError::NotFound)
    ));
}

/// An operator's failure ends a live task `failed` with the reason in its error; a version
/// change keeps the task as it is, with its steps, and its recovery then carries the new
/// version; neither changes an ended task, and an unknown id is not found.
async fn fail_and_set_version(store: impl TaskStore) {
    let new = |id: &str| task(id, "bob", "t").with_tool_version(Arc::from("1"));
    store.create(new("a")).await.unwrap();
    store.create(new("b")).await.unwrap();
    let step = Step::new(0, "fetch", json!(7));
    store.save_step("b", step.clone()).await.unwrap();
    let failed = admin::fail(&store, "a", "upstream gone").await.unwrap();
    assert_eq!(failed.status, TaskStatus::Failed);
    let message = failed.status_message.as_deref().unwrap_or_default();
    assert_eq!(message, "failed by an operator: upstream gone");
    match &failed.outcome {
        Some(Outcome::Failed(error)) => assert_eq!(error["message"], message, "{error:?}"),
        other => panic!("a failed outcome: {other:?}"),
    }
    assert!(matches!(
        admin::fail(&store, "a", "again").await,
        Err(StoreError::Terminal(TaskStatus::Failed))
    ));
    let admin = admin_of(&store);
    let moved = admin.set_tool_version("b", "2").await.unwrap();
    assert_eq!(moved.status, TaskStatus::Working);
    let detail = admin.detail("b").await.unwrap().unwrap();
    assert_eq!(&*detail.origin.tool_version, "2");
    assert_eq!(detail.steps, vec![step]);
    let recovery = store.recovery("b").await.unwrap().expect("live");
    assert_eq!(&*recovery.origin.tool_version, "2");
    assert!(matches!(
        admin.set_tool_version("a", "2").await,
        Err(StoreError::Terminal(TaskStatus::Failed))
    ));
    assert!(matches!(
        admin.set_tool_version("unknown", "2").await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        admin::fail(&store, "unknown", "x").await,
        Err(StoreError::NotFound)
    ));
}

/// Purge removes finished tasks last changed before the instant (all of them without one),
/// never a live one, and frees their idempotency keys.
async fn purge(store: impl TaskStore) {
    let keyed = |id: &str| task(id, "alice", "t").with_idempotency_key(Arc::from("call-1"));
    store.create(keyed("old")).await.unwrap();
    store.finish("old", Outcome::Cancelled).await.unwrap();
    tokio::time::advance(Duration::from_secs(60)).await;
    let cut = store.create(task("live", "alice", "t")).await.unwrap();
    let cut = cut.snapshot().created_at_ms;
    tokio::time::advance(Duration::from_secs(60)).await;
    store.create(task("new", "alice", "t")).await.unwrap();
    store.finish("new", Outcome::Cancelled).await.unwrap();
    let admin = admin_of(&store);
    assert_eq!(admin.purge_finished(Some(cut)).await.unwrap(), 1);
    assert!(store.get("old").await.unwrap().is_none(), "purged");
    assert!(
        store.get("new").await.unwrap().is_some(),
        "changed after the cut"
    );
    match store.create(keyed("again")).await {
        Ok(Created::New(task)) => assert_eq!(&*task.id, "again"),
        other => panic!("a purged task's key starts a new task: {other:?}"),
    }
    assert_eq!(admin.purge_finished(None).await.unwrap(), 1, "new");
    assert_eq!(ids(&store, TaskFilter::new()).await, ["again", "live"]);
    assert_eq!(admin.purge_finished(None).await.unwrap(), 0);
}

/// The instance running a task: in a cluster store, the holder of its lease (a filter finds
/// its tasks, the detail shows the lease); in a single-process store no task has one.
async fn instances(store: impl TaskStore) {
    store.create(task("q1", "alice", "t")).await.unwrap();
    tokio::time::advance(Duration::from_millis(5)).await;
    store.create(task("q2", "alice", "t")).await.unwrap();
    let admin = admin_of(&store);
    let Some(cluster) = store.cluster() else {
        assert!(
            ids(&store, TaskFilter::new().with_instance("node-1"))
                .await
                .is_empty()
        );
        let page = admin
            .list(&TaskQuery::new(TaskFilter::new()))
            .await
            .unwrap();
        assert!(page.tasks.iter().all(|t| t.instance.is_none()));
        assert!(admin.detail("q1").await.unwrap().unwrap().lease.is_none());
        return;
    };
    let claimed = cluster
        .claim(Claim::queued("node-1", Duration::from_secs(30), 1))
        .await
        .unwrap()
        .tasks;
    assert_eq!(claimed.len(), 1);
    let (held, lease) = &claimed[0];
    let other = if &*held.id == "q1" { "q2" } else { "q1" };
    assert_eq!(
        ids(&store, TaskFilter::new().with_instance("node-1")).await,
        [held.id.to_string()]
    );
    let page = admin
        .list(&TaskQuery::new(TaskFilter::new()))
        .await
        .unwrap();
    for summary in &page.tasks {
        let expected = (summary.task.id == held.id).then_some("node-1");
        assert_eq!(summary.instance.as_deref(), expected);
    }
    let detail = admin.detail(&held.id).await.unwrap().unwrap();
    let state = detail.lease.expect("a cluster store shows the lease");
    assert_eq!(state.instance.as_deref(), Some("node-1"));
    assert_eq!(state.epoch, lease.epoch);
    assert!(state.until_ms.is_some());
    let queued = admin.detail(other).await.unwrap().unwrap().lease.unwrap();
    assert_eq!(queued.instance, None, "queued for a worker");
}

#[tokio::test(start_paused = true)]
async fn memory_store_keeps_the_admin_contract() {
    contract(MemoryStore::new).await;
}

#[path = "support/temp_db.rs"]
mod temp_db;
#[path = "support/writes.rs"]
mod writes;
use temp_db::TempDb;
use writes::Writes;

#[tokio::test(start_paused = true)]
async fn sqlite_store_keeps_the_admin_contract() {
    let files = std::sync::Mutex::new(Vec::new());
    contract(|| {
        let db = TempDb::new("admin-contract");
        let store = SqliteStore::open(&db.0).expect("open a fresh database");
        files.lock().unwrap().push(db);
        store
    })
    .await;
}

#[path = "support/postgres.rs"]
mod pg;

/// Every check on a schema of its own; the stores connect before time is paused.
#[tokio::test]
async fn postgres_store_keeps_the_admin_contract() {
    // One store for each check of `contract`.
    let Some((_dbs, stores)) = pg::Db::stores(8).await else {
        return;
    };
    tokio::time::pause();
    let stores = std::sync::Mutex::new(stores);
    contract(|| stores.lock().unwrap().pop().expect("a store per check")).await;
}
