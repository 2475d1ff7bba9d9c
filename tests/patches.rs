//! Patches (`TaskContext::patched`): a tool's code changes while its tasks wait, and each
//! task replays the path it took. Real SQLite files; each "deploy" stops one engine and
//! starts another, built from the other code, on the same file.
//!
//! `export` version 1 fetches, exports, asks for approval and publishes. Version 2 exports
//! another way behind the patch `export-v2`. A task started by version 1 and replayed by
//! version 2 keeps its old export (stored, not run again); a task started by version 2
//! takes the new one, and keeps it across a later restart (the patch's marker is stored).
//! Version 3 deprecates the patch: tasks that passed it still replay, new ones store nothing.

mod common;
#[path = "support/temp_db.rs"]
mod temp_db;

use std::{
    collections::HashMap,
    sync::{LazyLock, Mutex},
    time::Duration,
};

use common::{Patience, Peer, Stdio, TASKS, first_input_key};
use mcp_tasks::{Engine, SqliteStore, TaskContext, TaskServer, ToolError, task_tool, toolkit};
use serde_json::{Value, json};
use temp_db::TempDb;

/// How many times each (task, step) ran in this process.
static RUNS: LazyLock<Mutex<HashMap<(String, &'static str), u32>>> =
    LazyLock::new(Default::default);

fn ran(ctx: &TaskContext, step: &'static str) {
    let id = ctx.task_id().unwrap_or("inline").to_owned();
    *RUNS.lock().unwrap().entry((id, step)).or_default() += 1;
}

fn runs(id: &str, step: &'static str) -> u32 {
    RUNS.lock()
        .unwrap()
        .get(&(id.to_owned(), step))
        .copied()
        .unwrap_or(0)
}

/// The steps the versions share: `fetch` first, and the approval and `publish` last.
async fn fetch(ctx: &TaskContext) -> Result<(), mcp_tasks::Failure> {
    let c = ctx.clone();
    ctx.step("fetch", || async move { ran(&c, "fetch") }).await
}

async fn approve_and_publish(ctx: &TaskContext, n: u32, how: &str) -> Result<String, ToolError> {
    let name = common::ask_name(ctx).await?;
    let c = ctx.clone();
    ctx.step("publish", || async move { ran(&c, "publish") })
        .await?;
    Ok(format!("{n} exported {how}, approved by {name}"))
}

/// The export step named `step` (`export`: the old way, `export-v2`: the new way).
async fn export_step(ctx: &TaskContext, step: &'static str) -> Result<String, mcp_tasks::Failure> {
    let c = ctx.clone();
    ctx.step(step, || async move {
        ran(&c, step);
        if step == "export" {
            "the old way"
        } else {
            "the new way"
        }
        .to_owned()
    })
    .await
}

/// Version 1: fetch, export, approval, publish.
#[task_tool(name = "export", mode = "required", restart = "resume", version = "1")]
async fn export_v1(ctx: TaskContext, n: u32) -> Result<String, ToolError> {
    fetch(&ctx).await?;
    let how = export_step(&ctx, "export").await?;
    approve_and_publish(&ctx, n, &how).await
}

/// Version 2 of the same tool: the export changed behind a patch.
#[task_tool(name = "export", mode = "required", restart = "resume", version = "1")]
async fn export_v2(ctx: TaskContext, n: u32) -> Result<String, ToolError> {
    fetch(&ctx).await?;
    let how = if ctx.patched("export-v2").await? {
        export_step(&ctx, "export-v2").await?
    } else {
        export_step(&ctx, "export").await?
    };
    approve_and_publish(&ctx, n, &how).await
}

/// Version 3, once no version-1 task is left: only the new export, the patch deprecated.
#[task_tool(name = "export", mode = "required", restart = "resume", version = "1")]
async fn export_v3(ctx: TaskContext, n: u32) -> Result<String, ToolError> {
    fetch(&ctx).await?;
    ctx.deprecate_patch("export-v2");
    let how = export_step(&ctx, "export-v2").await?;
    approve_and_publish(&ctx, n, &how).await
}

/// An engine of `toolkit` on the file, its earlier tasks recovered, served over stdio.
async fn deploy(db: &TempDb, toolkit: mcp_tasks::Toolkit) -> (Engine, Peer) {
    let engine = Engine::builder(toolkit)
        .with_store(SqliteStore::open(&db.0).expect("open the database"))
        .build();
    engine.recover().await.expect("recover");
    engine.start().expect("start");
    let peer = Peer::Stdio(Stdio::start(TaskServer::from_engine(engine.clone())));
    (engine, peer)
}

async fn asking(peer: &mut Peer, id: &str) -> Value {
    let patience = Patience::new(format!("{id} asks"));
    loop {
        let task = peer.get(id).await["result"].clone();
        if task["status"] == "input_required" {
            return task;
        }
        assert_eq!(task["status"], "working", "{task}");
        patience.wait().await;
    }
}

async fn approve(peer: &mut Peer, id: &str) -> Value {
    let task = asking(peer, id).await;
    let key = first_input_key(&task);
    let answered = peer
        .rpc(
            "tasks/update",
            json!({ "taskId": id, "inputResponses": {
                key: { "action": "accept", "content": { "name": "ada" } } } }),
            TASKS,
        )
        .await;
    assert!(answered.get("error").is_none(), "{answered}");
    peer.wait_terminal(id).await
}

fn task_id(response: &Value) -> String {
    response["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {response}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_task_replays_the_path_it_took_across_a_patch() {
    let db = TempDb::new("patches");
    // Version 1 runs: a task exports the old way, then waits for approval.
    let (first, mut peer) = deploy(&db, toolkit![export_v1].unwrap()).await;
    let old = task_id(&peer.call("export", json!({ "n": 1 }), TASKS).await);
    asking(&mut peer, &old).await;
    first.shutdown(Duration::from_secs(1)).await;

    // Version 2 is deployed: the old task replays the old path; a new task takes the new.
    let (second, mut peer) = deploy(&db, toolkit![export_v2].unwrap()).await;
    let new = task_id(&peer.call("export", json!({ "n": 2 }), TASKS).await);
    asking(&mut peer, &new).await;
    let newer = task_id(&peer.call("export", json!({ "n": 3 }), TASKS).await);
    asking(&mut peer, &newer).await;
    let done = approve(&mut peer, &old).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        common::first_text(&done["result"]),
        "1 exported the old way, approved by ada"
    );
    assert_eq!(
        (runs(&old, "export"), runs(&old, "export-v2")),
        (1, 0),
        "the old export ran once, under version 1, and the new one never"
    );
    second.shutdown(Duration::from_secs(1)).await;

    // Restarted again: the new task's marker keeps it on the new path.
    let (third, mut peer) = deploy(&db, toolkit![export_v2].unwrap()).await;
    let done = approve(&mut peer, &new).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        common::first_text(&done["result"]),
        "2 exported the new way, approved by ada"
    );
    assert_eq!((runs(&new, "export"), runs(&new, "export-v2")), (0, 1));
    third.shutdown(Duration::from_secs(1)).await;

    // Version 3 deprecates the patch: a task that passed it replays (its marker consumed),
    // and a new one stores no marker.
    let (fourth, mut peer) = deploy(&db, toolkit![export_v3].unwrap()).await;
    let done = approve(&mut peer, &newer).await;
    assert_eq!(
        common::first_text(&done["result"]),
        "3 exported the new way, approved by ada",
        "{done}"
    );
    let newest = task_id(&peer.call("export", json!({ "n": 4 }), TASKS).await);
    let done = approve(&mut peer, &newest).await;
    assert_eq!(
        common::first_text(&done["result"]),
        "4 exported the new way, approved by ada",
        "{done}"
    );
    for id in [&old, &new, &newer, &newest] {
        assert_eq!(runs(id, "fetch"), 1, "{id}: fetch once");
        assert_eq!(runs(id, "publish"), 1, "{id}: publish once");
    }
    for id in [&newer, &newest] {
        assert_eq!((runs(id, "export"), runs(id, "export-v2")), (0, 1), "{id}");
    }
    fourth.shutdown(Duration::from_secs(1)).await;
}

/// An inline call takes the new code and stores nothing.
#[task_tool(name = "quick", version = "1")]
async fn quick(ctx: TaskContext) -> Result<String, ToolError> {
    Ok(if ctx.patched("faster").await? {
        "new".to_owned()
    } else {
        "old".to_owned()
    })
}

#[tokio::test]
async fn an_inline_call_takes_the_new_code() {
    let engine = Engine::builder(toolkit![quick].unwrap()).build();
    let mut peer = Peer::Stdio(Stdio::start(TaskServer::from_engine(engine)));
    let answer = peer.call("quick", json!({}), common::PLAIN).await;
    assert_eq!(common::first_text(&answer["result"]), "new", "{answer}");
}
