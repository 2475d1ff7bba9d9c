//! Restart behaviour on the SQLite store: what a tool's restart policy and version decide,
//! what recovery does with a task whose tool, arguments or steps no longer match the code,
//! and that expiry keeps working across a restart (docs/protocol.md R20).
//!
//! A restart is real: the first server runs on a tokio runtime of its own (its own thread),
//! which is shut down, dropping every task of it (running tools, the reaper, the transport),
//! and the store's threads (writer, checkpointer) are seen to exit before the second server
//! opens the file and recovers. Nothing of the first process can act after that.

mod common;

use std::{sync::Arc, time::Duration};

use common::{Patience, Peer, Stdio, TASKS, restart::run_then_stop};
use mcp_tasks::{SqliteStore, TaskContext, TaskServer, ToolError, task_tool, toolkit};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// The tests of this file watch the store threads of the process: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits for a cancellation (or a restart).
#[task_tool(
    name = "job",
    mode = "required",
    restart = "resume",
    version = "1",
    ttl = "2s",
    poll_interval = "100ms"
)]
async fn job_v1(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// The same tool, changed.
#[task_tool(
    name = "job",
    mode = "required",
    restart = "resume",
    version = "2",
    ttl = "2s",
    poll_interval = "100ms"
)]
async fn job_v2(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// Fails on restart (the default policy).
#[task_tool(mode = "required")]
async fn fragile(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

struct Db(std::path::PathBuf);

impl Db {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "mcp-tasks-durable-{name}-{}.db",
            std::process::id()
        ));
        let db = Self(path);
        db.clean();
        db
    }
    fn clean(&self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
    fn server(&self, toolkit: mcp_tasks::Toolkit) -> TaskServer {
        server_on(&self.0, toolkit)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.clean();
    }
}

fn server_on(path: &std::path::Path, toolkit: mcp_tasks::Toolkit) -> TaskServer {
    TaskServer::from_engine(
        mcp_tasks::Engine::builder(toolkit)
            .with_store(SqliteStore::open(path).expect("open the database"))
            .build(),
    )
}

fn task_id(response: &Value) -> String {
    response["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {response}"))
        .to_owned()
}

/// A task is only replayed by the tool version that started it; the default policy fails
/// the task with a message that says the server restarted.
#[tokio::test]
async fn restart_policy_and_tool_version() {
    let _serial = SERIAL.lock().await;
    let db = Db::new("policy");
    let path = db.0.clone();
    let (job, fragile) = run_then_stop(
        move || server_on(&path, toolkit![job_v1, fragile].unwrap()),
        |mut before| async move {
            let job = task_id(&before.call("job", json!({}), TASKS).await);
            let fragile = task_id(&before.call("fragile", json!({}), TASKS).await);
            (job, fragile)
        },
    )
    .await;

    let restarted = db.server(toolkit![job_v2, fragile].unwrap());
    let report = restarted.recover().await.unwrap();
    let counts = (report.resumed, report.failed, report.waiting);
    assert_eq!(counts, (0, 1, 1), "{report:?}");
    let mut after = Peer::Stdio(Stdio::start(restarted));
    let job = after.get(&job).await["result"].clone();
    assert_eq!(job["status"], "working", "{job}");
    let message = job["statusMessage"].as_str().unwrap();
    assert!(
        message.contains("waiting for a server that runs version `1` of tool `job`"),
        "{message}"
    );
    let fragile = after.get(&fragile).await["result"].clone();
    assert_eq!(fragile["status"], "failed");
    assert_eq!(fragile["error"]["code"], -32603);
    assert_eq!(
        fragile["error"]["message"],
        "the server restarted while the task was running"
    );
}

/// A resumed task keeps its deadline from creation: past its TTL after the restart, it is
/// `failed` with "task expired" (R20), by the new process alone (the first is gone).
#[tokio::test]
async fn expiry_across_a_restart() {
    let _serial = SERIAL.lock().await;
    let db = Db::new("expiry");
    let path = db.0.clone();
    let created = run_then_stop(
        move || server_on(&path, toolkit![job_v1].unwrap()),
        |mut before| async move { before.call("job", json!({}), TASKS).await },
    )
    .await;
    assert_eq!(created["result"]["ttlMs"], 2000);
    let job = task_id(&created);

    let restarted = db.server(toolkit![job_v1].unwrap());
    assert_eq!(restarted.recover().await.unwrap().resumed, 1);
    let mut after = Peer::Stdio(Stdio::start(restarted));
    let resumed = after.get(&job).await["result"].clone();
    assert_eq!(resumed["status"], "working");
    assert_eq!(resumed["statusMessage"], "resumed after a server restart");
    assert_eq!(resumed["createdAt"], created["result"]["createdAt"], "R57");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let expired = after.get(&job).await["result"].clone();
    assert_eq!(expired["status"], "failed", "{expired}");
    assert_eq!(expired["error"]["message"], "task expired");
}

/// Counts to `n` in a durable step, then waits for a cancellation (or a restart).
#[task_tool(name = "count", mode = "required", restart = "resume", version = "1")]
async fn count_v1(ctx: TaskContext, n: u32) -> Result<String, ToolError> {
    let counted = ctx.step("fetch", || async move { n }).await?;
    ctx.status(format!("counted {counted}")).await;
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// The same name and version, but its argument is now a list: what the first process
/// stored no longer decodes.
#[task_tool(name = "count", mode = "required", restart = "resume", version = "1")]
async fn count_list(ctx: TaskContext, n: Vec<u32>) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Ok(format!("{n:?}"))
}

/// The same name, version and argument, but its first step was renamed.
#[task_tool(name = "count", mode = "required", restart = "resume", version = "1")]
async fn count_renamed(ctx: TaskContext, n: u32) -> Result<String, ToolError> {
    let counted = ctx.step("download", || async move { n }).await?;
    Ok(format!("counted {counted}"))
}

/// The same name, version and step, but the step's result is now text: the number stored
/// no longer reads as its type.
#[task_tool(name = "count", mode = "required", restart = "resume", version = "1")]
async fn count_as_text(ctx: TaskContext, n: u32) -> Result<String, ToolError> {
    let counted: String = ctx.step("fetch", || async move { n.to_string() }).await?;
    Ok(format!("counted {counted}"))
}

/// Starts one `count` task (n = 7) in a first process and waits until its step is stored;
/// returns the task id.
async fn count_task_then_stop(db: &Db) -> String {
    let path = db.0.clone();
    run_then_stop(
        move || server_on(&path, toolkit![count_v1, job_v1].unwrap()),
        |mut before| async move {
            let id = task_id(&before.call("count", json!({ "n": 7 }), TASKS).await);
            let patience = Patience::new("the step to be stored");
            while before.get(&id).await["result"]["statusMessage"] != "counted 7" {
                patience.wait().await;
            }
            id
        },
    )
    .await
}

/// Recovery edge cases, each ending the task `failed` with a message that says what changed
/// (never a panic, never a task left running): the tool is gone; its stored arguments no
/// longer decode; a step was renamed (the replay reaches it and stops there).
#[tokio::test]
async fn recovery_when_the_code_changed() {
    let _serial = SERIAL.lock().await;

    // The tool is no longer offered.
    let db = Db::new("removed");
    let id = count_task_then_stop(&db).await;
    let restarted = db.server(toolkit![job_v1].unwrap());
    let report = restarted.recover().await.unwrap();
    assert_eq!((report.resumed, report.failed), (0, 1), "{report:?}");
    let mut after = Peer::Stdio(Stdio::start(restarted));
    let task = after.get(&id).await["result"].clone();
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(task["error"]["code"], -32603);
    assert_eq!(
        task["error"]["message"],
        "the server restarted and no longer offers tool `count`"
    );
    assert_eq!(task["statusMessage"], task["error"]["message"]);
    drop(after);

    // The stored arguments no longer decode.
    let db = Db::new("arguments");
    let id = count_task_then_stop(&db).await;
    let restarted = db.server(toolkit![count_list].unwrap());
    let report = restarted.recover().await.unwrap();
    assert_eq!((report.resumed, report.failed), (0, 1), "{report:?}");
    let mut after = Peer::Stdio(Stdio::start(restarted));
    let task = after.get(&id).await["result"].clone();
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(task["error"]["code"], -32603);
    let message = task["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("the stored arguments no longer decode") && message.contains("`n`"),
        "{message}"
    );
    drop(after);

    // A step was renamed: the replay runs, and stops at the step that differs.
    let db = Db::new("renamed");
    let id = count_task_then_stop(&db).await;
    let restarted = db.server(toolkit![count_renamed].unwrap());
    let report = restarted.recover().await.unwrap();
    assert_eq!((report.resumed, report.failed), (1, 0), "{report:?}");
    let mut after = Peer::Stdio(Stdio::start(restarted));
    let task = after.wait_terminal(&id).await;
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(task["error"]["code"], -32603);
    let message = task["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("step 1 was `fetch` when the task started and is `download` now"),
        "{message}"
    );
    drop(after);

    // A step's result type changed: the stored result no longer reads as it (the server's
    // code changed, not the client's answer).
    let db = Db::new("retyped");
    let id = count_task_then_stop(&db).await;
    let restarted = db.server(toolkit![count_as_text].unwrap());
    assert_eq!(restarted.recover().await.unwrap().resumed, 1);
    let mut after = Peer::Stdio(Stdio::start(restarted));
    let task = after.wait_terminal(&id).await;
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(task["error"]["code"], -32603, "{task}");
    let message = task["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("the stored result of step 1 `fetch` no longer reads as its type")
            && message.contains("the tool's code changed"),
        "{message}"
    );
}

/// Asks two questions under keys it chose, one after the other (or after a restart).
#[task_tool(
    mode = "required",
    restart = "resume",
    version = "1",
    poll_interval = "20ms"
)]
async fn keyed_pair(ctx: TaskContext) -> Result<String, ToolError> {
    let schema = || {
        rmcp::model::ElicitationSchema::builder()
            .required_string("name")
            .build()
            .map_err(|e| ToolError::new(e.to_string()))
    };
    let name = |answer: rmcp::model::ElicitResult| {
        answer
            .content
            .and_then(|c| c["name"].as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let first = ctx.keyed("first").elicit_form("First?", schema()?).await?;
    ctx.status("asking second").await;
    let second = ctx
        .keyed("second")
        .elicit_form("Second?", schema()?)
        .await?;
    Ok(format!("{} then {}", name(first), name(second)))
}

/// R28 across a restart: the replay asks under the same chosen keys; the question answered
/// before the restart is not asked again, the open one is asked under its key, and its answer
/// completes the task.
#[tokio::test]
async fn chosen_keys_across_a_restart() {
    let _serial = SERIAL.lock().await;
    let db = Db::new("keyed");
    let path = db.0.clone();
    let id = run_then_stop(
        move || server_on(&path, toolkit![keyed_pair].unwrap()),
        |mut before| async move {
            let id = task_id(&before.call("keyed_pair", json!({}), TASKS).await);
            let asked = before.wait_status(&id, "input_required").await;
            assert_eq!(
                asked["inputRequests"]["first"]["params"]["message"],
                "First?"
            );
            let answer = json!({ "action": "accept", "content": { "name": "Ada" } });
            before
                .rpc(
                    "tasks/update",
                    json!({ "taskId": id, "inputResponses": { "first": answer } }),
                    TASKS,
                )
                .await;
            before
                .wait_for(&id, "the second question", |task| {
                    task["inputRequests"].get("second").is_some()
                })
                .await;
            id
        },
    )
    .await;

    let restarted = db.server(toolkit![keyed_pair].unwrap());
    assert_eq!(restarted.recover().await.unwrap().resumed, 1);
    let mut after = Peer::Stdio(Stdio::start(restarted));
    // The replay passed the first question (its stored answer) and asks the second again.
    let asked = after
        .wait_for(&id, "the replay to ask the second question", |task| {
            task["statusMessage"] == "asking second"
        })
        .await;
    let keys: Vec<&String> = asked["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["second"], "{asked}");
    // The status is set just before the replay asks; an answer that arrives before the
    // replay waits for it is found in the store all the same (runtime/call invariant 13).
    let answer = json!({ "action": "accept", "content": { "name": "Grace" } });
    let ack = after
        .rpc(
            "tasks/update",
            json!({ "taskId": id, "inputResponses": { "second": answer } }),
            TASKS,
        )
        .await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let done = after.wait_terminal(&id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "Ada then Grace");
}

/// Holds the replay of [`gated`] before it asks: the test lands an answer in that window.
#[derive(Clone, Default)]
struct Gate {
    /// Notified when the replay reached the gate.
    reached: Arc<Notify>,
    /// Notified by the test to let the replay ask.
    open: Arc<Notify>,
}

/// Asks one question under a chosen key; in a process with a [`Gate`], only once the gate
/// opens.
#[task_tool(
    mode = "required",
    restart = "resume",
    version = "1",
    poll_interval = "20ms"
)]
async fn gated(ctx: TaskContext) -> Result<String, ToolError> {
    if let Some(gate) = ctx.state::<Gate>() {
        gate.reached.notify_one();
        gate.open.notified().await;
    }
    let schema = rmcp::model::ElicitationSchema::builder()
        .required_string("name")
        .build()
        .map_err(|e| ToolError::new(e.to_string()))?;
    let answer = ctx.keyed("go").elicit_form("Go?", schema).await?;
    Ok(answer
        .content
        .and_then(|c| c["name"].as_str().map(str::to_owned))
        .unwrap_or_default())
}

/// Store invariant 6, runtime/call invariant 13: an answer the store takes after recovery read
/// the replay data but before the replay waits for it (tasks/update between `recover` and
/// the replay's question, held apart by a gate) still reaches the replay, which neither
/// asks again nor fails.
#[tokio::test]
async fn an_answer_before_the_replay_waits() {
    let _serial = SERIAL.lock().await;
    let db = Db::new("window");
    let path = db.0.clone();
    let id = run_then_stop(
        move || server_on(&path, toolkit![gated].unwrap()),
        |mut before| async move {
            let id = task_id(&before.call("gated", json!({}), TASKS).await);
            let asked = before.wait_status(&id, "input_required").await;
            assert_eq!(asked["inputRequests"]["go"]["params"]["message"], "Go?");
            id
        },
    )
    .await;

    let gate = Gate::default();
    let restarted = db.server(toolkit![gated].unwrap().with_state(gate.clone()));
    assert_eq!(restarted.recover().await.unwrap().resumed, 1);
    let mut after = Peer::Stdio(Stdio::start(restarted));
    gate.reached.notified().await;
    // The replay runs and holds before its question: the request is still outstanding in
    // the store, so the answer is taken, and no waiter exists yet.
    let answer = json!({ "action": "accept", "content": { "name": "Ada" } });
    let ack = after
        .rpc(
            "tasks/update",
            json!({ "taskId": id, "inputResponses": { "go": answer } }),
            TASKS,
        )
        .await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let taken = after.get(&id).await["result"].clone();
    assert_eq!(
        taken["status"], "working",
        "the store took the answer: {taken}"
    );
    gate.open.notify_one();
    let done = after.wait_terminal(&id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "Ada");
}

/// Asks one question before its task exists, one in the task, then one under a chosen key.
#[task_tool(
    mode = "required",
    restart = "resume",
    version = "1",
    poll_interval = "20ms"
)]
async fn before_then_during(ctx: TaskContext) -> Result<String, ToolError> {
    let schema = || {
        rmcp::model::ElicitationSchema::builder()
            .required_string("name")
            .build()
            .map_err(|e| ToolError::new(e.to_string()))
    };
    let name = |answer: rmcp::model::ElicitResult| {
        answer
            .content
            .and_then(|c| c["name"].as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let before = ctx.elicit_form_before_task("Before?", schema()?).await?;
    let during = ctx.elicit_form("During?", schema()?).await?;
    ctx.status("asking last").await;
    let last = ctx.keyed("last").elicit_form("Last?", schema()?).await?;
    Ok(format!(
        "{}, {}, {}",
        name(before),
        name(during),
        name(last)
    ))
}

/// Store invariant 6, runtime/call invariant 14, R28, R32: a tool asks by multi round-trip before
/// its task exists, then through the task; after a restart the replay (which asks everything
/// through the task) gives each question the answer given to it, and asks neither again.
#[tokio::test]
async fn before_task_answers_across_a_restart() {
    let _serial = SERIAL.lock().await;
    let db = Db::new("before");
    let path = db.0.clone();
    let accept = |name: &str| json!({ "action": "accept", "content": { "name": name } });
    let id = run_then_stop(
        move || server_on(&path, toolkit![before_then_during].unwrap()),
        move |mut before| async move {
            let round = before.call("before_then_during", json!({}), TASKS).await;
            let round = &round["result"];
            assert_eq!(round["resultType"], "input_required", "{round}");
            let key = common::first_input_key(round);
            assert_eq!(round["inputRequests"][&key]["params"]["message"], "Before?");
            let created = before
                .rpc(
                    "tools/call",
                    json!({
                        "name": "before_then_during",
                        "arguments": {},
                        "inputResponses": { key.clone(): accept("Ada") },
                        "requestState": round["requestState"],
                    }),
                    TASKS,
                )
                .await;
            let id = task_id(&created);
            let asked = before.wait_status(&id, "input_required").await;
            let during = common::first_input_key(&asked);
            assert_eq!(
                asked["inputRequests"][&during]["params"]["message"],
                "During?"
            );
            assert_ne!(during, key, "no task key repeats a key of the round before");
            before
                .rpc(
                    "tasks/update",
                    json!({ "taskId": id, "inputResponses": { during: accept("Grace") } }),
                    TASKS,
                )
                .await;
            before
                .wait_for(&id, "the last question", |task| {
                    task["inputRequests"].get("last").is_some()
                })
                .await;
            id
        },
    )
    .await;

    let restarted = db.server(toolkit![before_then_during].unwrap());
    assert_eq!(restarted.recover().await.unwrap().resumed, 1);
    let mut after = Peer::Stdio(Stdio::start(restarted));
    // The replay passes both answered questions and asks the last again; a question asked
    // again (or a stored answer given to the wrong one) shows as another key.
    let asked = after
        .wait_for(&id, "the replay to ask the last question", |task| {
            task["statusMessage"] == "asking last"
                || task["inputRequests"]
                    .as_object()
                    .is_some_and(|m| m.keys().any(|k| k != "last"))
                || task["status"] == "failed"
        })
        .await;
    let keys: Vec<&String> = asked["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["last"], "{asked}");
    after
        .rpc(
            "tasks/update",
            json!({ "taskId": id, "inputResponses": { "last": accept("Lin") } }),
            TASKS,
        )
        .await;
    let done = after.wait_terminal(&id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "Ada, Grace, Lin");
}

/// Sleeps `ms` durably, then answers.
#[task_tool(mode = "required", restart = "resume", poll_interval = "50ms")]
async fn nap(ctx: TaskContext, ms: u64) -> Result<String, ToolError> {
    ctx.status("napping").await;
    ctx.sleep("nap", Duration::from_millis(ms)).await?;
    Ok("rested".to_owned())
}

/// The deadline a `nap` task stored (epoch ms), read from the file; `None` before it is.
fn stored_deadline(path: &std::path::Path, task: &str) -> Option<u64> {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row(
        "SELECT value FROM steps WHERE task_id = ?1 AND name = 'nap'",
        [task],
        |row| row.get::<_, String>(0),
    )
    .ok()
    .map(|value| value.parse().expect("the deadline is a number"))
}

fn now_ms() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// Starts a `nap` of `ms` in a first process that stops `up_for` after the sleep's deadline
/// is stored; the task id and the stored deadline.
async fn nap_then_stop(db: &Db, ms: u64, up_for: Duration) -> (String, u64) {
    let path = db.0.clone();
    let file = db.0.clone();
    run_then_stop(
        move || server_on(&path, toolkit![nap].unwrap()),
        move |mut before| async move {
            let called = now_ms();
            let task = task_id(&before.call("nap", json!({ "ms": ms }), TASKS).await);
            let patience = Patience::new("the sleep's deadline to be stored");
            let deadline = loop {
                if let Some(deadline) = stored_deadline(&file, &task) {
                    break deadline;
                }
                patience.wait().await;
            };
            assert!(
                (called + ms..=now_ms() + ms).contains(&deadline),
                "the deadline is the call's time plus the sleep: {deadline}"
            );
            tokio::time::sleep(up_for).await;
            (task, deadline)
        },
    )
    .await
}

/// After a restart a durable sleep waits only for what is left of it: the task completes at
/// its stored deadline, not a whole sleep after the restart.
#[tokio::test]
async fn a_durable_sleep_waits_only_what_is_left_after_a_restart() {
    let _serial = SERIAL.lock().await;
    let db = Db::new("sleep-left");
    let (task, deadline) = nap_then_stop(&db, 6_000, Duration::from_secs(3)).await;
    let restarted = db.server(toolkit![nap].unwrap());
    let recovered_at = now_ms();
    assert_eq!(restarted.recover().await.unwrap().resumed, 1);
    let mut after = Peer::Stdio(Stdio::start(restarted));
    let done = after.wait_terminal(&task).await;
    let ended = now_ms();
    assert_eq!(done["status"], "completed", "{done}");
    assert!(ended >= deadline, "woke {} ms early", deadline - ended);
    // A sleep started again would end 6 s after the recovery, at least 3 s past the deadline.
    assert!(
        ended < deadline + 2_000 && ended < recovered_at + 6_000,
        "the sleep started again: ended {} ms after its deadline",
        ended - deadline
    );
}

/// A replay that reaches a sleep whose deadline passed while the server was down goes on at
/// once.
#[tokio::test]
async fn a_replay_past_a_finished_sleep_does_not_sleep_again() {
    let _serial = SERIAL.lock().await;
    let db = Db::new("sleep-past");
    let (task, deadline) = nap_then_stop(&db, 3_000, Duration::ZERO).await;
    let patience = Patience::new("the deadline to pass while the server is down");
    while now_ms() <= deadline {
        patience.wait().await;
    }
    let restarted = db.server(toolkit![nap].unwrap());
    let recovered_at = now_ms();
    assert_eq!(restarted.recover().await.unwrap().resumed, 1);
    let mut after = Peer::Stdio(Stdio::start(restarted));
    let done = after.wait_terminal(&task).await;
    assert_eq!(done["status"], "completed", "{done}");
    let took = now_ms() - recovered_at;
    assert!(took < 2_000, "the replay slept again: {took} ms");
}

/// A cancel ends a sleep at once, and so does the task's expiry: the work is gone, not
/// asleep until its deadline; so too a sleep too long for the wall clock to add
/// (`Duration::MAX`: until cancelled), which must not panic as it computes its deadline.
#[tokio::test]
async fn cancel_and_expiry_end_a_durable_sleep_at_once() {
    #[task_tool(
        name = "brief_nap",
        mode = "required",
        ttl = "1s",
        poll_interval = "50ms"
    )]
    async fn brief_nap(ctx: TaskContext, forever: bool) -> Result<String, ToolError> {
        ctx.status("napping").await;
        let nap = if forever {
            Duration::MAX
        } else {
            Duration::from_secs(600)
        };
        ctx.sleep("nap", nap).await?;
        Ok("rested".to_owned())
    }
    let engine = mcp_tasks::Engine::builder(toolkit![nap, brief_nap].unwrap()).build();
    let mut peer = Peer::Stdio(Stdio::start(TaskServer::from_engine(engine.clone())));

    let long = task_id(&peer.call("nap", json!({ "ms": 600_000 }), TASKS).await);
    peer.wait_for(&long, "napping", |t| t["statusMessage"] == "napping")
        .await;
    let cancelled = peer
        .rpc("tasks/cancel", json!({ "taskId": long }), TASKS)
        .await;
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    for forever in [false, true] {
        let short = task_id(
            &peer
                .call("brief_nap", json!({ "forever": forever }), TASKS)
                .await,
        );
        let expired = peer.wait_terminal(&short).await;
        assert_eq!(expired["status"], "failed", "{expired}");
        assert_eq!(expired["error"]["message"], "task expired", "{expired}");
    }
    let patience = Patience::with_bound("every sleep to end", Duration::from_secs(5));
    while engine.running_tasks() != 0 {
        assert!(!patience.expired(), "a sleep outlived its task");
        patience.wait().await;
    }
    assert_eq!(peer.get(&long).await["result"]["status"], "cancelled");
}

/// How many times `flaky`'s work ran, in this process.
static FLAKY_RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Fetches with retries (5 attempts, 1.5 s apart): the first `fail_times` runs fail.
#[task_tool(mode = "required", restart = "resume", poll_interval = "50ms")]
async fn flaky(ctx: TaskContext, fail_times: u32) -> Result<String, ToolError> {
    let policy = mcp_tasks::RetryPolicy::attempts(5)
        .with_backoff(
            Duration::from_millis(1500),
            1.0,
            Duration::from_millis(1500),
        )
        .with_jitter(0.0);
    let run = ctx
        .retry_step(
            "fetch",
            &policy,
            |_| true,
            || async move {
                let run = FLAKY_RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                if run <= fail_times {
                    Err(format!("upstream said no ({run})"))
                } else {
                    Ok(run)
                }
            },
        )
        .await?;
    Ok(format!("fetched on run {run}"))
}

/// The names and values of a task's stored steps, in order.
fn stored_steps(path: &std::path::Path, task: &str) -> Vec<(String, Value)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut statement = conn
        .prepare("SELECT name, value FROM steps WHERE task_id = ?1 ORDER BY seq")
        .unwrap();
    statement
        .query_map([task], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })
        .unwrap()
        .map(|row| {
            let (name, value) = row.unwrap();
            (name, serde_json::from_str(&value).unwrap())
        })
        .collect()
}

/// A crash between attempts does not start the count again: the replay goes on with the
/// next attempt after what is left of the wait, and the status message says which attempt
/// failed while the task waits.
#[tokio::test]
async fn a_retried_step_keeps_its_count_across_a_restart() {
    let _serial = SERIAL.lock().await;
    FLAKY_RUNS.store(0, std::sync::atomic::Ordering::SeqCst);
    let db = Db::new("retry");
    let (path, file) = (db.0.clone(), db.0.clone());
    let task = run_then_stop(
        move || server_on(&path, toolkit![flaky].unwrap()),
        move |mut before| async move {
            let task = task_id(
                &before
                    .call("flaky", json!({ "fail_times": 2 }), TASKS)
                    .await,
            );
            let waiting = before
                .wait_for(&task, "the first attempt to fail", |t| {
                    t["statusMessage"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("fetch: attempt 1 of 5 failed"))
                })
                .await;
            assert!(
                waiting["statusMessage"]
                    .as_str()
                    .unwrap()
                    .contains("(upstream said no (1)); attempt 2 in 1"),
                "{waiting}"
            );
            assert_eq!(waiting["status"], "working");
            assert_eq!(stored_steps(&file, &task).len(), 1);
            task
        },
    )
    .await;
    assert_eq!(FLAKY_RUNS.load(std::sync::atomic::Ordering::SeqCst), 1);

    let restarted = db.server(toolkit![flaky].unwrap());
    assert_eq!(restarted.recover().await.unwrap().resumed, 1);
    let mut after = Peer::Stdio(Stdio::start(restarted));
    after
        .wait_for(&task, "the second attempt to fail", |t| {
            t["statusMessage"]
                .as_str()
                .is_some_and(|m| m.starts_with("fetch: attempt 2 of 5 failed"))
        })
        .await;
    // (The steps go with the rest of the replay data when the task ends: read them now.)
    let steps = stored_steps(&db.0, &task);
    let names: Vec<&str> = steps.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["fetch (attempt 1)", "fetch (attempt 2)"]);
    assert_eq!(steps[0].1["failed"]["error"], "upstream said no (1)");
    assert_eq!(steps[1].1["failed"]["error"], "upstream said no (2)");
    let gap = steps[1].1["failed"]["retry_at"].as_u64().unwrap()
        - steps[0].1["failed"]["retry_at"].as_u64().unwrap();
    assert!(
        gap >= 1500,
        "attempt 2 ran before its wait was over: {gap} ms"
    );
    let done = after.wait_terminal(&task).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "fetched on run 3");
    // Runs 1 (before the restart), 2 and 3: the stored first attempt did not run again.
    assert_eq!(FLAKY_RUNS.load(std::sync::atomic::Ordering::SeqCst), 3);
}

/// How many times `doomed`'s work ran.
static DOOMED_RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Always fails; `permanent` errors are not retried.
#[task_tool(mode = "required", poll_interval = "50ms")]
async fn doomed(ctx: TaskContext, permanent: bool) -> Result<String, ToolError> {
    let policy = mcp_tasks::RetryPolicy::attempts(3).with_backoff(
        Duration::from_millis(10),
        2.0,
        Duration::from_millis(20),
    );
    let retryable = |error: &String| !error.starts_with("permanent");
    let value: u32 = ctx
        .retry_step("call", &policy, retryable, || async move {
            let run = DOOMED_RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            Err(if permanent {
                format!("permanent failure ({run})")
            } else {
                format!("timed out ({run})")
            })
        })
        .await?;
    Ok(value.to_string())
}

/// The last attempt's error ends the step, after the policy's attempts; an error the policy
/// does not retry ends it at once.
#[tokio::test]
async fn a_retried_step_gives_up_after_its_attempts_or_on_a_permanent_error() {
    let _serial = SERIAL.lock().await;
    let engine = mcp_tasks::Engine::builder(toolkit![doomed].unwrap()).build();
    let mut peer = Peer::Stdio(Stdio::start(TaskServer::from_engine(engine)));
    DOOMED_RUNS.store(0, std::sync::atomic::Ordering::SeqCst);
    let task = task_id(
        &peer
            .call("doomed", json!({ "permanent": false }), TASKS)
            .await,
    );
    let ended = peer.wait_terminal(&task).await;
    assert_eq!(DOOMED_RUNS.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert!(ended.to_string().contains("timed out (3)"), "{ended}");

    DOOMED_RUNS.store(0, std::sync::atomic::Ordering::SeqCst);
    let task = task_id(
        &peer
            .call("doomed", json!({ "permanent": true }), TASKS)
            .await,
    );
    let ended = peer.wait_terminal(&task).await;
    assert_eq!(
        DOOMED_RUNS.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "{ended}"
    );
}

/// Whether [`one_at_a_time`]'s tasks may end: shut while the first server runs.
static PAGES_OPEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Renders page `n`, one at a time; a task waits until the pages are open.
#[task_tool(
    mode = "required",
    concurrency = 1,
    restart = "resume",
    version = "1",
    poll_interval = "50ms"
)]
async fn one_at_a_time(n: u32) -> Result<u32, ToolError> {
    while !PAGES_OPEN.load(std::sync::atomic::Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(n)
}

/// The tasks a tool's limit held back are rows: a restarted server recovers them, holds
/// them back again behind the one that runs, and runs every one to its end.
#[tokio::test]
async fn held_tasks_survive_a_restart() {
    let _serial = SERIAL.lock().await;
    let db = Db::new("held");
    let path = db.0.clone();
    PAGES_OPEN.store(false, std::sync::atomic::Ordering::SeqCst);
    let ids = run_then_stop(
        move || server_on(&path, toolkit![one_at_a_time].unwrap()),
        |mut before| async move {
            let mut ids = Vec::new();
            for n in 0..4 {
                ids.push(task_id(
                    &before.call("one_at_a_time", json!({ "n": n }), TASKS).await,
                ));
            }
            let held = before.get(&ids[3]).await["result"].clone();
            assert_eq!(
                held["statusMessage"],
                "queued: waiting to start (the tool runs at most 1 task at once)",
                "{held}"
            );
            ids
        },
    )
    .await;

    let restarted = db.server(toolkit![one_at_a_time].unwrap());
    let report = restarted.recover().await.unwrap();
    assert_eq!((report.resumed, report.failed), (4, 0), "{report:?}");
    // The held tasks start from the engine's loops (the serving functions start them).
    restarted.engine().start().unwrap();
    let mut after = Peer::Stdio(Stdio::start(restarted));
    let held = after.get(&ids[2]).await["result"].clone();
    assert_eq!(held["status"], "working", "{held}");
    assert_eq!(
        held["statusMessage"], "queued: waiting to start (the tool runs at most 1 task at once)",
        "held again after the restart: {held}"
    );
    PAGES_OPEN.store(true, std::sync::atomic::Ordering::SeqCst);
    for (n, id) in ids.iter().enumerate() {
        let task = after.wait_terminal(id).await;
        assert_eq!(task["status"], "completed", "task {n}: {task}");
        assert_eq!(
            task["result"]["structuredContent"],
            json!({ "result": n }),
            "{task}"
        );
    }
}

/// Waits for a cancellation, or a restart; long-lived (a minute), version 1.
#[task_tool(
    name = "waiter",
    mode = "required",
    restart = "resume",
    version = "1",
    ttl = "1m"
)]
async fn waiter_v1(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// `waiter`, version 2.
#[task_tool(
    name = "waiter",
    mode = "required",
    restart = "resume",
    version = "2",
    ttl = "1m"
)]
async fn waiter_v2(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// A task recorded by another version of its tool waits after a restart (no code runs, the
/// status message names the version it waits for) until the operator or a client decides:
/// a cancel ends it at once (one asked for while no server ran, at the restart); the admin
/// API fails one (with the reason in its error) or moves one to this server's version (it
/// starts here at once).
#[tokio::test]
async fn a_task_of_another_version_waits_for_it() {
    let _serial = SERIAL.lock().await;
    let db = Db::new("versions");
    let path = db.0.clone();
    let ids: Vec<String> = run_then_stop(
        move || server_on(&path, toolkit![waiter_v1].unwrap()),
        |mut before| async move {
            let mut ids = Vec::new();
            for _ in 0..5 {
                ids.push(task_id(&before.call("waiter", json!({}), TASKS).await));
            }
            ids
        },
    )
    .await;
    let [cancelled, failed, moved, left, asked] = [0, 1, 2, 3, 4].map(|i| ids[i].clone());
    // One's cancel was asked for while no server ran: the restart ends it, runs none of it.
    {
        let store = SqliteStore::open(&db.0).expect("open the database");
        mcp_tasks::TaskStore::request_cancel(&store, &asked)
            .await
            .unwrap();
    }

    // This test's process records metrics (nextest runs each test in a process of its own).
    let metrics = mcp_tasks::metrics::install_prometheus().expect("the first recorder");
    let waiting = move || {
        let page = metrics.render();
        let series = "mcp_tasks_tasks_waiting_for_version{tool=\"waiter\",version=\"1\"} ";
        let line = page.lines().find(|line| line.starts_with(series));
        line.map(|line| line[series.len()..].to_owned())
    };
    let restarted = db.server(toolkit![waiter_v2].unwrap());
    let report = restarted.recover().await.unwrap();
    let counts = (
        report.resumed,
        report.failed,
        report.waiting,
        report.cancelled,
    );
    assert_eq!(counts, (0, 0, 4, 1), "{report:?}");
    assert_eq!(waiting().as_deref(), Some("4"), "the gauge counts them");
    let credential = mcp_tasks::admin::AdminCredential::new("versions-admin-credential").unwrap();
    let admin =
        common::Http::start_router(mcp_tasks::admin::router(restarted.engine(), credential)).await;
    let base = admin.url.trim_end_matches("/mcp").to_owned();
    let post = |path: String| {
        let request = admin.client.post(format!("{base}/admin/api/tasks/{path}"));
        async move {
            let response = request
                .bearer_auth("versions-admin-credential")
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let mut peer = Peer::Stdio(Stdio::start(restarted));
    let task = peer.get(&asked).await["result"].clone();
    assert_eq!(task["status"], "cancelled", "{task}");
    for id in &ids[..4] {
        let task = peer.get(id).await["result"].clone();
        assert_eq!(task["status"], "working", "{task}");
        let message = task["statusMessage"].as_str().unwrap_or_default();
        assert!(
            message.contains("waiting for a server that runs version `1` of tool `waiter`"),
            "{message}"
        );
    }

    // A client's cancel ends a waiting task at once.
    let answer = peer_cancel(&mut peer, &cancelled).await;
    assert!(answer.get("error").is_none(), "{answer}");
    peer.wait_status(&cancelled, "cancelled").await;

    // The operator fails one, with a reason.
    let (status, answer) = post(format!(
        "{failed}/fail?reason=abandoned%20in%20the%20rollback"
    ))
    .await;
    assert_eq!(
        (status, &answer["status"]),
        (200, &json!("failed")),
        "{answer}"
    );
    let task = peer.get(&failed).await["result"].clone();
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(
        task["error"]["message"],
        "failed by an operator: abandoned in the rollback"
    );

    // The operator moves one to this server's version: it starts here at once.
    let (status, answer) = post(format!("{moved}/version")).await;
    assert_eq!(
        (status, &answer["outcome"]),
        (200, &json!("started")),
        "{answer}"
    );
    let task = peer.get(&moved).await["result"].clone();
    assert_eq!(task["status"], "working", "{task}");
    assert_eq!(
        task["statusMessage"],
        "moved to this server's version of its tool by an operator"
    );
    // Its work runs here: it honours a cancel.
    peer_cancel(&mut peer, &moved).await;
    let task = peer.wait_terminal(&moved).await;
    assert_eq!(task["status"], "cancelled", "{task}");

    // The one left waits; the gauge follows each end and move.
    assert_eq!(waiting().as_deref(), Some("1"));

    // An ended task is not changed.
    let (status, answer) = post(format!("{failed}/version?to=1")).await;
    assert_eq!(status, 409, "{answer}");
    let (status, answer) = post(format!("{left}/fail?colour=red")).await;
    assert_eq!(
        (status, &answer["error"]["parameter"]),
        (400, &json!("colour")),
        "{answer}"
    );
}

async fn peer_cancel(peer: &mut Peer, id: &str) -> Value {
    peer.rpc("tasks/cancel", json!({ "taskId": id }), TASKS)
        .await
}

/// A step whose result is a NaN: stored as JSON it is `null`, which no replay could read
/// back as an `f64`.
#[task_tool(mode = "required", restart = "resume", poll_interval = "50ms")]
async fn measure(ctx: TaskContext, nan: bool) -> Result<String, ToolError> {
    let value = if nan { f64::NAN } else { 0.5 };
    let read: f64 = ctx.step("measure", || async move { value }).await?;
    Ok(format!("measured {read}"))
}

/// A step result that would not read back as its type after a restart fails its step (and
/// the task) at once, with an error naming the step and why, instead of completing now and
/// failing every replay later; a step that reads back completes.
#[tokio::test]
async fn a_step_a_replay_could_not_read_fails_at_once() {
    let _serial = SERIAL.lock().await;
    let db = Db::new("unreadable-step");
    let mut peer = Peer::Stdio(Stdio::start(db.server(toolkit![measure].unwrap())));
    let fine = task_id(&peer.call("measure", json!({ "nan": false }), TASKS).await);
    let fine = peer.wait_terminal(&fine).await;
    assert_eq!(fine["status"], "completed", "{fine}");
    let nan = task_id(&peer.call("measure", json!({ "nan": true }), TASKS).await);
    let nan = peer.wait_terminal(&nan).await;
    assert_eq!(nan["status"], "failed", "{nan}");
    let message = nan["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("step `measure` does not read back as its type")
            && message.contains("a replay could not use it"),
        "{message}"
    );
}

/// A step named by its caller.
#[task_tool(mode = "required", poll_interval = "50ms")]
async fn named_step(ctx: TaskContext, name: String) -> Result<String, ToolError> {
    Ok(ctx.step(&name, || async { "done".to_owned() }).await?)
}

/// A step whose name has a NUL character (which a Postgres store cannot keep) fails its task
/// at once on every store, with an error that says so; the same step named without one
/// completes.
#[tokio::test]
async fn a_step_named_with_a_nul_fails_on_every_store() {
    let _serial = SERIAL.lock().await;
    let db = Db::new("nul-step-name");
    let mut peer = Peer::Stdio(Stdio::start(db.server(toolkit![named_step].unwrap())));
    let error = r#"step name "a\0" has a NUL character"#;
    for (name, status, message) in [("fetch", "completed", ""), ("a\u{0}", "failed", error)] {
        let arguments = json!({ "name": name });
        let id = task_id(&peer.call("named_step", arguments, TASKS).await);
        let task = peer.wait_terminal(&id).await;
        assert_eq!(task["status"], status, "{task}");
        let said = task["error"]["message"].as_str().unwrap_or_default();
        assert!(said.contains(message), "{task}");
    }
}
