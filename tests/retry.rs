//! An operator retries or forks a task that failed (admin API, real HTTP on 127.0.0.1): the
//! new task replays the old one's history and goes on from there; the old one stays as it
//! ended. Over the memory store, a SQLite file and Postgres (two instances: the retry asked
//! of one, which runs it). And in a cluster, a cancel ends a task whose version of its tool
//! no instance runs; and an end written on one instance (an operator's fail, the expiry of
//! the task's TTL) stops its work on the instance that runs it.

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{
    collections::HashMap,
    sync::{LazyLock, Mutex},
};

use common::{Http, Peer, TASKS};
use mcp_tasks::{
    Engine, HttpOptions, MemoryStore, SqliteStore, TaskContext, TaskServer, TaskStore, ToolError,
    admin::{self, AdminCredential},
    task_tool, toolkit,
};
use serde_json::{Value, json};

const CREDENTIAL: &str = "retry-test-admin-credential";

/// How many times each (workspace, step) ran, and the workspaces whose upstream is down.
static RUNS: LazyLock<Mutex<HashMap<(String, &'static str), u32>>> =
    LazyLock::new(Default::default);
static DOWN: LazyLock<Mutex<Vec<String>>> = LazyLock::new(Default::default);

fn ran(workspace: &str, step: &'static str) -> u32 {
    let runs = RUNS.lock().unwrap();
    runs.get(&(workspace.to_owned(), step))
        .copied()
        .unwrap_or(0)
}

async fn counted(ctx: &TaskContext, workspace: &str, step: &'static str) -> Result<u32, ToolError> {
    let workspace = workspace.to_owned();
    let value = ctx
        .step(step, || async move {
            let mut runs = RUNS.lock().unwrap();
            let n = runs.entry((workspace, step)).or_default();
            *n += 1;
            *n
        })
        .await?;
    Ok(value)
}

/// Fetches, then publishes: fails between the two while the workspace's upstream is down.
#[task_tool(mode = "required", restart = "resume", version = "1", ttl = "1m")]
async fn publish(ctx: TaskContext, workspace: String) -> Result<String, ToolError> {
    counted(&ctx, &workspace, "fetch").await?;
    if DOWN.lock().unwrap().contains(&workspace) {
        return Err(ToolError::internal(format!(
            "the upstream of {workspace} is down"
        )));
    }
    counted(&ctx, &workspace, "publish").await?;
    Ok(format!("{workspace} published"))
}

/// The MCP router and the admin router of `engine`, served on 127.0.0.1: a client of both.
async fn serve(engine: Engine) -> Http {
    let credential = AdminCredential::new(CREDENTIAL).unwrap();
    let admin = admin::router(&engine, credential);
    let server = TaskServer::from_engine(engine);
    Http::start_router(mcp_tasks::http_router(server, HttpOptions::new()).merge(admin)).await
}

/// `POST /admin/api/tasks/{path}`: the status and the JSON body.
async fn admin_post(http: &Http, path: &str) -> (u16, Value) {
    let base = http.url.trim_end_matches("/mcp");
    let response = (http.client.post(format!("{base}/admin/api/tasks/{path}")))
        .bearer_auth(CREDENTIAL)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// `GET /admin/{path}` with the credential, as the API takes it (`api/...`: a bearer token)
/// or as a browser sends it (a page: basic authentication): the body's text.
async fn admin_get(http: &Http, path: &str) -> String {
    let base = http.url.trim_end_matches("/mcp");
    let request = http.client.get(format!("{base}/admin/{path}"));
    let request = match path.starts_with("api/") {
        true => request.bearer_auth(CREDENTIAL),
        false => request.basic_auth("operator", Some(CREDENTIAL)),
    };
    request.send().await.unwrap().text().await.unwrap()
}

/// A task of `publish` for `workspace` that failed (its upstream down), then its retry
/// (the upstream back) completing, and a fork from step 0 fetching again; `via` serves the
/// MCP calls, `operator` the admin API.
async fn retry_and_fork(workspace: &str, via: Http, operator: &Http) {
    DOWN.lock().unwrap().push(workspace.to_owned());
    let mut peer = Peer::Http(via);
    let (status, created) = match &mut peer {
        Peer::Http(http) => {
            let mut meta = common::meta(TASKS);
            meta["traceparent"] = json!(TRACEPARENT);
            http.rpc_meta("tools/call", call(workspace), meta).await
        }
        Peer::Stdio(_) => unreachable!(),
    };
    assert_eq!(status, 200, "{created}");
    let old = created["result"]["taskId"]
        .as_str()
        .or(created["result"]["task"]["taskId"].as_str())
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    let failed = peer.wait_terminal(&old).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!((ran(workspace, "fetch"), ran(workspace, "publish")), (1, 0));

    // Refused: a fork past the stored steps, an unknown parameter, an unknown task.
    let (status, answer) = admin_post(operator, &format!("{old}/fork?step=2")).await;
    assert_eq!(
        (status, &answer["error"]["parameter"]),
        (400, &json!("step")),
        "{answer}"
    );
    let (status, answer) = admin_post(operator, &format!("{old}/retry?now=1")).await;
    assert_eq!(status, 400, "{answer}");
    let (status, _) = admin_post(operator, "01nosuchtask/retry").await;
    assert_eq!(status, 404);

    // The retry replays `fetch` (stored) and goes on.
    DOWN.lock().unwrap().retain(|w| w != workspace);
    let (status, answer) = admin_post(operator, &format!("{old}/retry")).await;
    assert_eq!(
        (status, &answer["outcome"]),
        (200, &json!("retried")),
        "{answer}"
    );
    let retried = answer["newTaskId"].as_str().unwrap().to_owned();
    assert_ne!(retried, old, "a retry is a new task");
    let done = peer.wait_terminal(&retried).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        (ran(workspace, "fetch"), ran(workspace, "publish")),
        (1, 1),
        "the retry did not fetch again"
    );
    // The new task is created with the old one's origin: its trace context too.
    assert_eq!(trace_of(operator, &retried).await, json!(TRACEPARENT));
    let still = peer.get(&old).await["result"].clone();
    assert_eq!(
        still["status"], "failed",
        "the old task stays as it ended: {still}"
    );

    // A completed task is not retried; the failed one may be forked from its first step.
    let (status, answer) = admin_post(operator, &format!("{retried}/retry")).await;
    assert_eq!(status, 409, "{answer}");
    let (status, answer) = admin_post(operator, &format!("{old}/fork?step=0")).await;
    assert_eq!(
        (status, &answer["outcome"]),
        (200, &json!("forked")),
        "{answer}"
    );
    let forked = answer["newTaskId"].as_str().unwrap().to_owned();
    let done = peer.wait_terminal(&forked).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        (ran(workspace, "fetch"), ran(workspace, "publish")),
        (2, 2),
        "the fork from step 0 fetched again"
    );
    assert_eq!(trace_of(operator, &forked).await, json!(TRACEPARENT));
}

/// Asks who approves, drafts, asks on which channel, then sends: fails after the send while
/// the workspace's upstream is down.
#[task_tool(mode = "required", restart = "resume", version = "1", ttl = "1m")]
async fn announce(ctx: TaskContext, workspace: String) -> Result<String, ToolError> {
    let approver = ask(&ctx, "approver").await?;
    counted(&ctx, &workspace, "draft").await?;
    let channel = ask(&ctx, "channel").await?;
    counted(&ctx, &workspace, "send").await?;
    if DOWN.lock().unwrap().contains(&workspace) {
        return Err(ToolError::internal(format!(
            "the upstream of {workspace} is down"
        )));
    }
    Ok(format!("{approver} sent it to {channel}"))
}

/// Asks for `field` (a form with that one string, "`field`?"): the answer.
async fn ask(ctx: &TaskContext, field: &str) -> Result<String, ToolError> {
    common::ask_string(ctx, format!("{field}?"), field).await
}

/// Waits for `id`'s one open question, checks it asks for `field`, and answers `value`.
async fn answer(peer: &mut Peer, id: &str, field: &str, value: &str) {
    let asked_or_ended = |task: &Value| {
        let status = task["status"].as_str().unwrap_or_default();
        matches!(
            status,
            "input_required" | "completed" | "failed" | "cancelled"
        )
    };
    let task = peer.wait_for(id, "a question", asked_or_ended).await;
    assert_eq!(task["status"], "input_required", "asks {field}: {task}");
    let questions = task["inputRequests"].as_object().expect("input requests");
    assert_eq!(questions.len(), 1, "one question at a time: {task}");
    let (key, question) = questions.iter().next().unwrap();
    assert_eq!(question["params"]["message"], format!("{field}?"), "{task}");
    let responses = json!({ key: { "action": "accept", "content": { field: value } } });
    let params = json!({ "taskId": id, "inputResponses": responses });
    let answered = peer.rpc("tasks/update", params, TASKS).await;
    assert!(answered.get("error").is_none(), "{answered}");
}

/// A task of `announce` that asked both questions and failed after its steps; a fork from
/// step 1 replays the first answer (asked before its kept step) and asks the second question
/// again (asked after it), then sends again with the new answer; a retry asks nothing.
async fn fork_asks_again(workspace: &str, via: Http, operator: &Http) {
    DOWN.lock().unwrap().push(workspace.to_owned());
    let mut peer = Peer::Http(via);
    let arguments = json!({ "workspace": workspace });
    let created = peer.call("announce", arguments, TASKS).await;
    let old = created["result"]["task"]["taskId"]
        .as_str()
        .or(created["result"]["taskId"].as_str())
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    answer(&mut peer, &old, "approver", "ann").await;
    answer(&mut peer, &old, "channel", "chat").await;
    let failed = peer.wait_terminal(&old).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    DOWN.lock().unwrap().retain(|w| w != workspace);
    let detail: Value =
        serde_json::from_str(&admin_get(operator, &format!("api/tasks/{old}")).await).unwrap();
    assert_eq!(
        detail["askedAtStep"],
        json!({ "elicit-2": 1 }),
        "the second question was asked after the first step began: {detail}"
    );
    let page = admin_get(operator, &format!("tasks/{old}")).await;
    assert!(
        page.contains("<code>elicit-2</code> by a fork from step 1 or an earlier one"),
        "the task's page says which forks ask the second question again: {page}"
    );

    let (status, forked) = admin_post(operator, &format!("{old}/fork?step=1")).await;
    assert_eq!(status, 200, "{forked}");
    let forked = forked["newTaskId"].as_str().unwrap().to_owned();
    answer(&mut peer, &forked, "channel", "email").await;
    let done = peer.wait_terminal(&forked).await;
    assert_eq!(
        common::first_text(&done["result"]),
        "ann sent it to email",
        "{done}"
    );
    assert_eq!((ran(workspace, "draft"), ran(workspace, "send")), (1, 2));

    let (status, retried) = admin_post(operator, &format!("{old}/retry")).await;
    assert_eq!(status, 200, "{retried}");
    let retried = retried["newTaskId"].as_str().unwrap().to_owned();
    let done = peer.wait_terminal(&retried).await;
    assert_eq!(
        common::first_text(&done["result"]),
        "ann sent it to chat",
        "{done}"
    );
    assert_eq!((ran(workspace, "draft"), ran(workspace, "send")), (1, 2));
}

/// `publish` of another build (version 2): an instance with it runs none of version 1's
/// tasks.
#[task_tool(
    name = "publish",
    mode = "required",
    restart = "resume",
    version = "2",
    ttl = "1m"
)]
async fn publish_v2(workspace: String) -> Result<String, ToolError> {
    Err(ToolError::internal(format!(
        "version 2 ran a task of {workspace}"
    )))
}

fn call(workspace: &str) -> Value {
    json!({ "name": "publish", "arguments": { "workspace": workspace } })
}

/// The trace context the failing `publish` call of `retry_and_fork` carries in `_meta`.
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The trace context of task `id` in the operator's detail.
async fn trace_of(operator: &Http, id: &str) -> Value {
    let detail: Value =
        serde_json::from_str(&admin_get(operator, &format!("api/tasks/{id}")).await)
            .expect("a task's detail");
    detail["traceContext"]["traceparent"].clone()
}

fn engine(store: impl TaskStore + 'static) -> Engine {
    Engine::builder(toolkit![publish, announce].unwrap())
        .with_store(store)
        .build()
}

#[tokio::test]
async fn a_failed_task_is_retried_and_forked_over_memory() {
    let http = serve(engine(MemoryStore::new())).await;
    let via = Http::to(&http.url);
    retry_and_fork("memory", via, &http).await;
}

#[tokio::test]
async fn a_failed_task_is_retried_and_forked_over_sqlite() {
    let path = std::env::temp_dir().join(format!("mcp-tasks-retry-{}.db", std::process::id()));
    let http = serve(engine(SqliteStore::open(&path).unwrap())).await;
    let via = Http::to(&http.url);
    retry_and_fork("sqlite", via, &http).await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[tokio::test]
async fn a_fork_asks_again_what_it_asked_after_its_step_over_memory() {
    let http = serve(engine(MemoryStore::new())).await;
    let via = Http::to(&http.url);
    fork_asks_again("memory-asks", via, &http).await;
}

#[tokio::test]
async fn a_fork_asks_again_what_it_asked_after_its_step_over_sqlite() {
    let dir = common::process::Scratch::new("retry-asks");
    let store = SqliteStore::open(dir.join("tasks.db")).unwrap();
    let http = serve(engine(store)).await;
    let via = Http::to(&http.url);
    fork_asks_again("sqlite-asks", via, &http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_asks_again_what_it_asked_after_its_step_over_postgres() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let http = instance(&db, toolkit![publish, announce].unwrap(), false).await;
    let via = Http::to(&http.url);
    fork_asks_again("postgres-asks", via, &http).await;
}

/// Two instances on one schema: the calls go to one, the operator asks the other, which
/// runs another version of the tool: the new task is released at once, claimed by the
/// first instance, and replays the steps the store copied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_task_is_retried_and_forked_across_instances() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let mut served = Vec::new();
    for toolkit in [toolkit![publish].unwrap(), toolkit![publish_v2].unwrap()] {
        let store = db.store().await.unwrap();
        let config = mcp_tasks::ClusterConfig::default()
            .with_claim_interval(std::time::Duration::from_millis(100));
        let engine = Engine::builder(toolkit)
            .with_store(store)
            .with_cluster(config)
            .build();
        engine.start().unwrap();
        served.push(serve(engine).await);
    }
    let via = Http::to(&served[0].url);
    retry_and_fork("postgres", via, &served[1]).await;
}

/// `engine` of `toolkit` in a cluster on `db`'s schema, started and served: a worker
/// claiming every 100 ms (so its cancel grace is 300 ms), or (`front`) one that queues its
/// calls and runs no work.
async fn instance(db: &pg::Db, toolkit: mcp_tasks::Toolkit, front: bool) -> Http {
    let config = mcp_tasks::ClusterConfig::default();
    instance_with(db, toolkit, front, config).await
}

/// [`instance`] with `config`'s other settings.
async fn instance_with(
    db: &pg::Db,
    toolkit: mcp_tasks::Toolkit,
    front: bool,
    config: mcp_tasks::ClusterConfig,
) -> Http {
    let store = db.store().await.unwrap();
    let config = config
        .with_claim_interval(std::time::Duration::from_millis(100))
        .with_queued_calls(front)
        .with_execution(!front);
    let engine = Engine::builder(toolkit)
        .with_store(store)
        .with_cluster(config)
        .build();
    engine.start().unwrap();
    serve(engine).await
}

/// A `Claim` built without a grace and a cluster configured without one wait alike: the
/// store's default grace is the configuration's default (three default claim intervals).
#[test]
fn the_stores_default_cancel_grace_is_the_clusters() {
    let config = mcp_tasks::ClusterConfig::default();
    assert_eq!(
        config.cancel_grace(),
        mcp_tasks::store::DEFAULT_CANCEL_GRACE
    );
    assert_eq!(
        config.cancel_grace(),
        3 * mcp_tasks::cluster::DEFAULT_CLAIM_INTERVAL
    );
}

/// Tasks recorded by version 1 of `publish` while only version 2 runs anywhere: they wait,
/// and a client's cancel ends one `cancelled` after the cancel grace (three claim
/// intervals: 300 ms), without any code running (the instance of version 2 claims it only
/// to end it); the other keeps waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_ends_a_task_whose_version_no_instance_runs() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let front = instance(&db, toolkit![publish].unwrap(), true).await;
    let _worker = instance(&db, toolkit![publish_v2].unwrap(), false).await;
    let mut http = Http::to(&front.url);
    let mut ids = Vec::new();
    for workspace in ["cancelled-unrun", "left-waiting"] {
        let arguments = json!({ "workspace": workspace });
        ids.push(http.call_task("publish", arguments).await);
    }
    let mut peer = Peer::Http(http);
    let answer = peer
        .rpc("tasks/cancel", json!({ "taskId": ids[0] }), TASKS)
        .await;
    assert!(answer.get("error").is_none(), "{answer}");
    let asked = std::time::Instant::now();
    peer.wait_status(&ids[0], "cancelled").await;
    let waited = asked.elapsed();
    assert!(
        waited < std::time::Duration::from_secs(3),
        "ended after {waited:?}: a grace of three 100 ms claim intervals"
    );
    // Claims went on meanwhile: the other task is still left for version 1.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let left = peer.get(&ids[1]).await;
    assert_eq!(left["result"]["status"], "working", "{left}");
    for workspace in ["cancelled-unrun", "left-waiting"] {
        assert_eq!(ran(workspace, "fetch"), 0, "{workspace}: no code ran");
    }
}

/// Waits for its cancel, then notes that its own handling of it ran.
#[task_tool(
    name = "watch",
    mode = "required",
    restart = "resume",
    version = "1",
    ttl = "1m"
)]
async fn watch(ctx: TaskContext, workspace: String) -> Result<String, ToolError> {
    clean_up_on_cancel(ctx, workspace).await
}

/// The body of `watch` and `watch_briefly`: waits for the cancel, then counts the cleanup.
async fn clean_up_on_cancel(ctx: TaskContext, workspace: String) -> Result<String, ToolError> {
    ctx.cancelled().await;
    *RUNS
        .lock()
        .unwrap()
        .entry((workspace, "cleanup"))
        .or_default() += 1;
    Err(ToolError::cancelled())
}

/// `watch` of another build.
#[task_tool(
    name = "watch",
    mode = "required",
    restart = "resume",
    version = "2",
    ttl = "1m"
)]
async fn watch_v2(ctx: TaskContext, workspace: String) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::internal(format!(
        "version 2 ran a task of {workspace}"
    )))
}

/// While instances of both versions run, a cancelled task is left for its cancel grace to
/// an instance of its own version, whose replay runs the tool's handling of the cancel:
/// here the instance of version 2, with a grace of 3 s, claims for a second before one of
/// version 1 starts, and takes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_task_is_left_to_its_own_version_first() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let front = instance(&db, toolkit![watch].unwrap(), true).await;
    let mut http = Http::to(&front.url);
    let id = http
        .call_task("watch", json!({ "workspace": "own-version" }))
        .await;
    let mut peer = Peer::Http(http);
    let answer = peer
        .rpc("tasks/cancel", json!({ "taskId": id }), TASKS)
        .await;
    assert!(answer.get("error").is_none(), "{answer}");

    let config =
        mcp_tasks::ClusterConfig::default().with_cancel_grace(std::time::Duration::from_secs(3));
    let _other = instance_with(&db, toolkit![watch_v2].unwrap(), false, config).await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let waiting = peer.get(&id).await;
    assert_eq!(waiting["result"]["status"], "working", "{waiting}");
    let _own = instance(&db, toolkit![watch].unwrap(), false).await;
    peer.wait_status(&id, "cancelled").await;
    assert_eq!(
        ran("own-version", "cleanup"),
        1,
        "its own cancel handling ran"
    );
}

/// Two instances of `toolkit` on `db`'s schema, served, that re-read the work running on
/// them only once a minute: the first sweeps for expired tasks once a minute too, the
/// second every 50 ms.
async fn slow_to_reread(db: &pg::Db, toolkit: impl Fn() -> mcp_tasks::Toolkit) -> [Http; 2] {
    let minute = std::time::Duration::from_secs(60);
    let mut served = Vec::new();
    for sweep in [minute, std::time::Duration::from_millis(50)] {
        let engine = Engine::builder(toolkit())
            .with_store(db.store().await.unwrap())
            .with_cluster(mcp_tasks::ClusterConfig::default().with_reread_interval(minute))
            .with_expiry_sweep(sweep)
            .build();
        engine.start().unwrap();
        served.push(serve(engine).await);
    }
    served.try_into().unwrap_or_else(|_| unreachable!())
}

/// Waits (at most `within`) until the tool's handling of its cancel ran for `workspace`'s
/// task `id`, then checks that the task stays `failed`.
async fn cleaned_up_and_failed(http: Http, id: &str, workspace: &str, within: std::time::Duration) {
    let deadline = tokio::time::Instant::now() + within;
    while ran(workspace, "cleanup") == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the work of {workspace} went on for {within:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let task = Peer::Http(http).get(id).await;
    assert_eq!(task["result"]["status"], "failed", "{task}");
}

/// An operator's fail, asked of one instance, stops the work of the task on the instance
/// that runs it at once: that instance hears of it as of a cancel (its periodic re-read, a
/// minute here, would come too late), and the task stays `failed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_fail_stops_the_work_where_it_runs() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let [runner, operator] = slow_to_reread(&db, || toolkit![watch].unwrap()).await;
    let mut http = Http::to(&runner.url);
    let id = http
        .call_task("watch", json!({ "workspace": "failed-elsewhere" }))
        .await;
    let (status, failed) = admin_post(&operator, &format!("{id}/fail?reason=stuck")).await;
    assert_eq!(status, 200, "{failed}");
    let within = std::time::Duration::from_secs(5);
    cleaned_up_and_failed(http, &id, "failed-elsewhere", within).await;
}

/// Waits for its cancel (or the end of its 1 s TTL), then notes that its handling of it ran.
#[task_tool(mode = "required", ttl = "1s")]
async fn watch_briefly(ctx: TaskContext, workspace: String) -> Result<String, ToolError> {
    clean_up_on_cancel(ctx, workspace).await
}

/// A task whose TTL ends while it runs on one instance, expired by another instance's sweep:
/// its work stops at once (the running instance sweeps and re-reads only once a minute here,
/// and nobody reads the task), and it stays `failed` as the expiry left it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_past_its_ttl_stops_its_work_where_it_runs() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let [runner, _sweeper] = slow_to_reread(&db, || toolkit![watch_briefly].unwrap()).await;
    let mut http = Http::to(&runner.url);
    let id = http
        .call_task("watch_briefly", json!({ "workspace": "expired-elsewhere" }))
        .await;
    let within = std::time::Duration::from_secs(6);
    cleaned_up_and_failed(http, &id, "expired-elsewhere", within).await;
}
