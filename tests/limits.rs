//! Task-level limits over real HTTP: live tasks per owner, outstanding input requests per
//! task, `statusMessage` length, a request's `_meta` (docs/protocol.md R22: informative
//! errors).

mod common;
#[path = "support/postgres.rs"]
mod pg;
#[path = "support/temp_db.rs"]
mod temp_db;

use std::{sync::Arc, time::Duration};

use common::{Http, Peer, Stdio, TASKS, first_input_key};
use mcp_tasks::{
    Engine, Limits, MemoryStore, Owner, SqliteStore, TaskContext, TaskServer, TaskStore, ToolError,
    task_tool, toolkit,
};
use serde_json::{Value, json};

/// Waits until cancelled.
#[task_tool(mode = "required", poll_interval = "100ms")]
async fn park(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// Asks `n` questions at once and returns how many were answered.
#[task_tool(mode = "required", poll_interval = "100ms")]
async fn ask(ctx: TaskContext, n: u32) -> Result<String, ToolError> {
    let schema = rmcp::model::ElicitationSchema::builder()
        .required_bool("ok")
        .build()
        .map_err(|e| ToolError::new(e.to_string()))?;
    let questions = (0..n).map(|i| ctx.elicit_form(format!("question {i}"), schema.clone()));
    let answers = futures::future::try_join_all(questions).await?;
    Ok(format!("{} answered", answers.len()))
}

/// Returns at once.
#[task_tool(mode = "required", poll_interval = "100ms")]
async fn quick() -> Result<String, ToolError> {
    Ok("done".into())
}

/// Sets a long status once its task exists, then waits until cancelled.
#[task_tool(mode = "required", poll_interval = "100ms")]
async fn chatty(ctx: TaskContext, chars: usize) -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_millis(20)).await; // the task exists after this wait
    ctx.status("é".repeat(chars)).await;
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// Returns `levels` nested arrays around a string; with `step`, saves them as a step first.
#[task_tool(mode = "required", poll_interval = "100ms")]
async fn deep(ctx: TaskContext, levels: u32, step: bool) -> Result<Value, ToolError> {
    let mut value = json!("bottom");
    for _ in 0..levels {
        value = json!([value]);
    }
    if step {
        let saved = value.clone();
        ctx.step("deep", || async move { saved }).await?;
    }
    Ok(value)
}

/// [`deep`]'s value, answered inline.
#[task_tool(mode = "inline")]
async fn deep_now(levels: u32) -> Result<Value, ToolError> {
    let mut value = json!("bottom");
    for _ in 0..levels {
        value = json!([value]);
    }
    Ok(value)
}

async fn peer(limits: Limits) -> Peer {
    let tools = toolkit![park, ask, chatty].expect("toolkit");
    let engine = mcp_tasks::Engine::builder(tools)
        .with_limits(limits)
        .build();
    Peer::Http(Http::start(TaskServer::from_engine(engine)).await)
}

fn task_id(created: &Value) -> String {
    created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task handle: {created}"))
        .to_owned()
}

/// One owner reaches its quota: the next `tools/call` answers -32603 with `data.quota` and a
/// message naming the limit, no work starts; a slot freed by a cancel is usable again.
#[tokio::test]
async fn an_owner_past_its_quota_is_refused_until_a_task_ends() {
    let mut peer = peer(Limits::default().with_max_live_tasks_per_owner(2)).await;
    let first = task_id(&peer.call("park", json!({}), TASKS).await);
    let _second = task_id(&peer.call("park", json!({}), TASKS).await);

    let refused = peer.call("park", json!({}), TASKS).await;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert_eq!(refused["error"]["data"]["quota"], 2, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("2 live tasks") && message.contains("with_max_live_tasks_per_owner"),
        "the message names the quota and how to raise it: {message}"
    );

    let cancelled = peer
        .rpc("tasks/cancel", json!({ "taskId": first }), TASKS)
        .await;
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    peer.wait_terminal(&first).await;
    let mut accepted = Value::Null;
    for _ in 0..200 {
        accepted = peer.call("park", json!({}), TASKS).await;
        if accepted["result"]["taskId"].is_string() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the freed slot was never usable again: {accepted}");
}

/// A task at its limit of outstanding input requests: the next question fails the tool with
/// -32603 naming the limit; within the limit every question is asked.
#[tokio::test]
async fn questions_past_the_limit_fail_with_a_clear_error() {
    let mut peer = peer(Limits::default().with_max_input_requests(2)).await;
    let id = task_id(&peer.call("ask", json!({ "n": 3 }), TASKS).await);
    let task = peer.wait_terminal(&id).await;
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(task["error"]["code"], -32603, "{task}");
    assert_eq!(task["error"]["data"]["maxInputRequests"], 2, "{task}");
    assert!(
        task["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("2 outstanding input requests")),
        "{task}"
    );

    let id = task_id(&peer.call("ask", json!({ "n": 2 }), TASKS).await);
    let waiting = peer.wait_status(&id, "input_required").await;
    let mut keys = 0;
    for _ in 0..200 {
        let task = peer.get(&id).await["result"].clone();
        keys = task["inputRequests"]
            .as_object()
            .map_or(0, serde_json::Map::len);
        if keys == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        keys, 2,
        "both questions within the limit are asked: {waiting}"
    );
    assert!(!first_input_key(&waiting).is_empty());
}

/// A status longer than the limit is cut to it, ending with `…`.
#[tokio::test]
async fn long_status_messages_are_cut_to_the_limit() {
    let mut peer = peer(Limits::default().with_max_status_chars(10)).await;
    let id = task_id(&peer.call("chatty", json!({ "chars": 50 }), TASKS).await);
    let mut message = String::new();
    for _ in 0..200 {
        let task = peer.get(&id).await["result"].clone();
        if let Some(text) = task["statusMessage"].as_str() {
            message = text.to_owned();
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(message, format!("{}…", "é".repeat(9)));
}

/// A `tools/call` whose `_meta` is over the default size (64 KiB) or depth (32 levels) limit
/// is refused on both transports with `-32602` naming `params._meta`, the limit and the
/// setter that raises it (HTTP `400`), and no task is created; the same call with a `_meta`
/// within the limits creates its task.
#[tokio::test]
async fn a_call_with_meta_over_its_limits_is_refused_and_creates_no_task() {
    let store = Arc::new(MemoryStore::new());
    let server = || {
        let tools = toolkit![park].expect("toolkit");
        let engine = mcp_tasks::Engine::builder(tools)
            .with_shared_store(store.clone())
            .build();
        TaskServer::from_engine(engine)
    };
    let mut padded = common::meta(TASKS);
    padded["pad"] = json!("x".repeat(64 * 1024));
    let mut deep = common::meta(TASKS);
    let mut nested = json!({});
    for _ in 0..38 {
        nested = json!({ "n": nested });
    }
    deep["deep"] = nested; // 39 levels, 40 with `_meta` itself
    let call = json!({ "name": "park", "arguments": {} });
    let mut http = Http::start(server()).await;
    let mut stdio = Stdio::framed(server());
    for (meta, names) in [
        (
            &padded,
            [
                "more than the limit of 65536 bytes",
                "Limits::with_max_meta_bytes",
            ],
        ),
        (
            &deep,
            [
                "nests 40 levels deep, more than the limit of 32",
                "Limits::with_max_meta_depth",
            ],
        ),
    ] {
        let (status, over_http) = http
            .rpc_meta("tools/call", call.clone(), meta.clone())
            .await;
        assert_eq!(status, 400, "{over_http}");
        let mut params = call.clone();
        params["_meta"] = meta.clone();
        let over_stdio = stdio
            .request(json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params }))
            .await;
        for refused in [over_http, over_stdio] {
            assert_eq!(refused["error"]["code"], -32602, "{refused}");
            let message = refused["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.starts_with("tools/call: params._meta ")
                    && names.iter().all(|name| message.contains(name)),
                "{message}"
            );
            assert_eq!(refused["error"]["data"]["field"], "params._meta");
        }
        assert_eq!(store.len(), 0, "no task is created");
    }
    let mut peer = Peer::Http(Http::start(server()).await);
    let mut within = common::meta(TASKS);
    within["pad"] = json!("x".repeat(60 * 1024));
    let created = peer.rpc_meta("tools/call", call, within).await;
    let id = task_id(&created);
    assert_eq!(
        store.len(),
        1,
        "within the limits the call creates its task"
    );
    peer.rpc("tasks/cancel", json!({ "taskId": id }), TASKS)
        .await;
}

/// One owner creating far more instant tasks than its bound of finished tasks: the other
/// owner is still served, and once the sweep ran the first owner keeps exactly its newest
/// finished tasks, up to the bound (`Limits::with_max_finished_tasks_per_owner`).
#[tokio::test]
async fn an_owner_keeps_its_bound_of_finished_tasks_and_others_are_served() {
    const BOUND: usize = 10;
    let store = Arc::new(MemoryStore::new());
    let engine = mcp_tasks::Engine::builder(toolkit![quick].expect("toolkit"))
        .with_shared_store(store.clone())
        .with_limits(Limits::default().with_max_finished_tasks_per_owner(BOUND))
        .build();
    let router = mcp_tasks::http_router(
        TaskServer::from_engine(engine),
        mcp_tasks::HttpOptions::new(),
    )
    .layer(axum::middleware::from_fn(
        |mut request: axum::extract::Request, next: axum::middleware::Next| async move {
            if let Some(user) = request
                .headers()
                .get("x-user")
                .and_then(|v| v.to_str().ok())
            {
                let owner = Owner::new(user);
                request.extensions_mut().insert(owner);
            }
            next.run(request).await
        },
    ));
    let mut mallory = Http::start_router(router).await;
    mallory.extra = vec![("x-user", "mallory".to_owned())];
    let mut bob = Http {
        url: mallory.url.clone(),
        client: reqwest::Client::new(),
        extra: vec![("x-user", "bob".to_owned())],
        next_id: 0,
    };
    let call = json!({ "name": "quick", "arguments": {} });
    let mut ids = Vec::new();
    for _ in 0..(BOUND * 8) {
        let (_, created) = mallory.rpc("tools/call", call.clone(), TASKS).await;
        ids.push(task_id(&created));
    }
    let (_, served) = bob.rpc("tools/call", call, TASKS).await;
    let bobs = task_id(&served);

    // Every task finished and the sweep ran: mallory's newest `BOUND` and bob's one remain.
    let patience = common::Patience::new("mallory's finished tasks trimmed to the bound");
    let mut kept = Vec::new();
    loop {
        if store.len() == BOUND + 1 {
            kept.clear();
            for id in &ids {
                let (_, task) = mallory
                    .rpc("tasks/get", json!({ "taskId": id }), TASKS)
                    .await;
                if task["result"]["status"] == "completed" {
                    kept.push(id.clone());
                }
            }
            if kept.len() == BOUND {
                break;
            }
        }
        patience.wait().await;
    }
    assert_eq!(kept, ids[ids.len() - BOUND..], "the newest are kept");
    let (_, task) = bob.rpc("tasks/get", json!({ "taskId": bobs }), TASKS).await;
    assert_eq!(task["result"]["status"], "completed", "{task}");
}

/// A task's result or step nested deeper than a JSON reader takes back (serde_json stops at
/// 128 levels) fails the task with an error that says so, on the memory store and on a
/// SQLite file alike: the task is never stored as a result that reads back as `{}`, nor as a
/// row no `tasks/get` can read; an inline call answers the same error. Within the limit the
/// value comes back whole.
#[tokio::test]
async fn results_and_steps_nested_past_the_limit_fail_the_task_with_a_clear_error() {
    let db = temp_db::TempDb::new("deep");
    for store in ["memory", "sqlite"] {
        let tools = toolkit![deep, deep_now].unwrap();
        let engine = match store {
            "memory" => mcp_tasks::Engine::builder(tools).build(),
            _ => {
                let sqlite = mcp_tasks::SqliteStore::open(&db.0).expect("open");
                mcp_tasks::Engine::builder(tools).with_store(sqlite).build()
            }
        };
        let mut peer = Peer::Http(Http::start(TaskServer::from_engine(engine)).await);
        let within = json!({ "levels": 90, "step": true });
        let id = task_id(&peer.call("deep", within, TASKS).await);
        let task = peer.wait_terminal(&id).await;
        assert_eq!(task["status"], "completed", "{store}: {task}");
        let result = &task["result"]["structuredContent"]["result"];
        let depth = std::iter::successors(Some(result), |v| v.get(0)).count();
        assert_eq!(
            depth, 91,
            "{store}: the 90 arrays and their string come back"
        );

        for (step, what) in [(false, "result"), (true, "step")] {
            let past = json!({ "levels": 150, "step": step });
            let id = task_id(&peer.call("deep", past, TASKS).await);
            let task = peer.wait_terminal(&id).await;
            assert_eq!(task["status"], "failed", "{store}, {what}: {task}");
            let error = &task["error"];
            let message = error["message"].as_str().unwrap_or_default();
            assert!(
                message.contains(what) && message.contains("100 levels"),
                "{store}: the error names the {what} and the limit: {error}"
            );
            assert_eq!(error["data"]["maxDepth"], 100, "{store}: {error}");
        }
        let answered = peer.call("deep_now", json!({ "levels": 150 }), TASKS).await;
        let error = &answered["error"];
        assert_eq!(
            error["data"]["maxDepth"], 100,
            "{store}, inline: {answered}"
        );
    }
}

/// An engine serving [`quick`] over `store` that keeps `bound` finished tasks per owner.
fn quick_engine(store: Arc<dyn TaskStore>, bound: usize) -> Engine {
    Engine::builder(toolkit![quick].expect("toolkit"))
        .with_shared_store(store)
        .with_limits(Limits::default().with_max_finished_tasks_per_owner(bound))
        .build()
}

/// Runs `count` [`quick`] tasks to their end, one after the other, and returns their ids
/// (oldest first).
async fn finish_quick(peer: &mut Peer, count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..count {
        // A few milliseconds apart: their order of creation is the order of the calls.
        tokio::time::sleep(Duration::from_millis(3)).await;
        let id = task_id(&peer.call("quick", json!({}), TASKS).await);
        let task = peer.wait_terminal(&id).await;
        assert_eq!(task["status"], "completed", "{task}");
        ids.push(id);
    }
    ids
}

/// Waits until, of `ids`, `peer` reads exactly the tasks `kept` (the others are gone).
async fn until_kept(peer: &mut Peer, ids: &[String], kept: &[String]) {
    let patience = common::Patience::new("the owner's oldest finished tasks to go");
    loop {
        let mut present = Vec::new();
        for id in ids {
            if peer.get(id).await["result"]["status"] == "completed" {
                present.push(id.clone());
            }
        }
        if present == kept || patience.expired() {
            assert_eq!(present, kept, "only the newest finished tasks are kept");
            return;
        }
        patience.wait().await;
    }
}

/// The bound on an owner's finished tasks after a restart, from the rows: a process that
/// finished twice the bound of one owner's tasks stopped before any sweep of its trimmed
/// them (it never started its loops); the next process on the same SQLite file trims them
/// at its first sweep, though no task is created there.
#[tokio::test]
async fn a_restart_trims_what_the_stopped_process_left_past_the_bound_on_sqlite() {
    const BOUND: usize = 3;
    let db = temp_db::TempDb::new("trim-restart");
    let path = db.0.clone();
    let open = |path: &std::path::Path| Arc::new(SqliteStore::open(path).expect("open"));
    let ids = common::restart::run_then_stop(
        move || TaskServer::from_engine(quick_engine(open(&path), BOUND)),
        |mut peer| async move { finish_quick(&mut peer, 2 * BOUND).await },
    )
    .await;
    let engine = quick_engine(open(&db.0), BOUND);
    engine.start().expect("start");
    let mut peer = Peer::Stdio(common::Stdio::start(TaskServer::from_engine(engine)));
    until_kept(&mut peer, &ids, &ids[BOUND..]).await;
}

/// The same across a cluster: the instance whose creates noted the owner stops before its
/// sweep trims (it never started its loops), and another instance over the same Postgres
/// task space trims the owner at its first sweep, as an instance started by a rolling
/// deploy does, though no task is created there.
#[tokio::test]
async fn a_starting_instance_trims_what_a_stopped_one_left_past_the_bound_on_postgres() {
    const BOUND: usize = 3;
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let first = Arc::new(db.store().await.expect("connect"));
    let mut noting = Peer::Stdio(common::Stdio::start(TaskServer::from_engine(quick_engine(
        first, BOUND,
    ))));
    let ids = finish_quick(&mut noting, 2 * BOUND).await;
    drop(noting);
    let second = Arc::new(db.store().await.expect("connect"));
    let engine = quick_engine(second, BOUND);
    engine.start().expect("start");
    let mut peer = Peer::Stdio(common::Stdio::start(TaskServer::from_engine(engine)));
    until_kept(&mut peer, &ids, &ids[BOUND..]).await;
}

/// And when no instance starts after it: an instance that runs on passes over every
/// owner's finished tasks again a while after its last pass ended (here 200 ms; an hour by
/// default), and trims what the stopped one left past the bound. It started, and ended its
/// first pass, before the stopped instance created anything.
#[tokio::test]
async fn a_running_instance_trims_what_a_stopped_one_left_past_the_bound_on_postgres() {
    const BOUND: usize = 3;
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let builder = db
        .builder()
        .with_trim_pass_every(Duration::from_millis(200));
    let running = Arc::new(builder.connect().await.expect("connect"));
    let engine = Engine::builder(toolkit![quick].expect("toolkit"))
        .with_shared_store(running)
        .with_limits(Limits::default().with_max_finished_tasks_per_owner(BOUND))
        .with_expiry_sweep(Duration::from_millis(20))
        .build();
    engine.start().expect("start");
    let mut peer = Peer::Stdio(common::Stdio::start(TaskServer::from_engine(engine)));
    // Its first pass, at its first sweep, finds no task.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let first = Arc::new(db.store().await.expect("connect"));
    let mut noting = Peer::Stdio(common::Stdio::start(TaskServer::from_engine(quick_engine(
        first, BOUND,
    ))));
    let ids = finish_quick(&mut noting, 2 * BOUND).await;
    drop(noting);
    until_kept(&mut peer, &ids, &ids[BOUND..]).await;
}
