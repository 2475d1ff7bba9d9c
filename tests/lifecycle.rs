//! The task lifecycle seen from the wire: expiry found by a read, terminal status messages,
//! `serverInfo` in results, fallible steps. Rule numbers: docs/protocol.md.

mod common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::{Http, PLAIN, Peer, Stdio, TASKS, first_text};
use mcp_tasks::{Engine, TaskContext, TaskServer, ToolError, task_tool, toolkit};
use serde_json::{Value, json};

/// How many times a tool saw its cancellation, per test (each test has its own counter).
#[derive(Clone, Default)]
struct Seen(Arc<AtomicUsize>);

/// Waits for a cancellation and counts it; ends on its own after 30 s.
#[task_tool(ttl = "300ms", poll_interval = "100ms", mode = "required")]
async fn sleeper(
    ctx: TaskContext,
    mcp_tasks::State(seen): mcp_tasks::State<Seen>,
) -> Result<String, ToolError> {
    tokio::select! {
        () = ctx.cancelled() => {
            seen.0.fetch_add(1, Ordering::SeqCst);
            Err(ToolError::cancelled())
        }
        () = tokio::time::sleep(Duration::from_secs(30)) => Ok("slept".into()),
    }
}

/// Ends as its argument says, after setting a progress message.
#[task_tool(mode = "required", poll_interval = "100ms")]
async fn ends(ctx: TaskContext, how: String) -> Result<String, ToolError> {
    ctx.status("waiting for your answer").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    match how.as_str() {
        "rpc" => Err(ToolError::rpc(rmcp::model::ErrorData::invalid_request(
            "the upstream API refused the job",
            None,
        ))),
        "internal" => Err(ToolError::internal("the cache is corrupt")),
        "panic" => panic!("index out of range"),
        "cancelled" => Err(ToolError::cancelled()),
        "tool-error" => Err(ToolError::new("no such workspace")),
        _ => Ok(format!("ended {how}")),
    }
}

/// A fallible durable step: fails for `fail = true`, else stores its value.
#[task_tool(mode = "required", poll_interval = "100ms")]
async fn fallible(ctx: TaskContext, fail: bool) -> Result<String, ToolError> {
    let value: u32 = ctx
        .try_step("fetch", || async move {
            if fail {
                Err("upstream timed out")
            } else {
                Ok(7)
            }
        })
        .await?;
    Ok(format!("fetched {value}"))
}

/// Ends on its own after 300 ms.
#[task_tool(mode = "required", poll_interval = "100ms")]
async fn lingers() -> String {
    tokio::time::sleep(Duration::from_millis(300)).await;
    "done".into()
}

/// As `sleeper`, under the default TTL.
#[task_tool(mode = "required", poll_interval = "100ms")]
async fn waits(
    ctx: TaskContext,
    mcp_tasks::State(seen): mcp_tasks::State<Seen>,
) -> Result<String, ToolError> {
    ctx.cancelled().await;
    seen.0.fetch_add(1, Ordering::SeqCst);
    Err(ToolError::cancelled())
}

/// Says hello inline.
#[task_tool(mode = "inline")]
async fn hello() -> String {
    "hello".into()
}

async fn server(seen: &Seen, sweep: Duration) -> (Engine, Peer) {
    let tools = toolkit![sleeper, ends, fallible, hello, lingers, waits]
        .expect("toolkit")
        .with_state(seen.clone());
    let engine = Engine::builder(tools).with_expiry_sweep(sweep).build();
    let peer = Peer::Http(Http::start(TaskServer::from_engine(engine.clone())).await);
    (engine, peer)
}

async fn create(peer: &mut Peer, tool: &str, arguments: Value) -> String {
    let created = peer.call(tool, arguments, TASKS).await;
    created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task handle: {created}"))
        .to_owned()
}

/// Waits (real time, bounded) until `check` holds.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..500 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what} did not happen within 5 s");
}

/// R20 + issue 12.2: the first request to see that a running task is past its TTL (here a
/// `tasks/get`, `tasks/update` or `tasks/cancel`, with the sweep an hour away) stops the work
/// and the runtime lets go of it, as the sweep would. Real time, not paused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_found_by_a_read_stops_the_work() {
    for (method, params) in [
        ("tasks/get", json!({})),
        ("tasks/update", json!({ "inputResponses": {} })),
        ("tasks/cancel", json!({})),
    ] {
        let seen = Seen::default();
        let (engine, mut peer) = server(&seen, Duration::from_secs(3600)).await;
        let id = create(&mut peer, "sleeper", json!({})).await;
        assert_eq!(engine.running_tasks(), 1, "{method}: the work runs");
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(
            seen.0.load(Ordering::SeqCst),
            0,
            "{method}: nothing but the read may stop the work (the sweep is an hour away)"
        );

        let mut params = params;
        params["taskId"] = json!(id);
        let answer = peer.rpc(method, params, TASKS).await;
        assert!(answer.get("error").is_none(), "{method}: {answer}");

        eventually(&format!("{method}: the tool's cancellation"), || {
            seen.0.load(Ordering::SeqCst) == 1
        })
        .await;
        eventually(&format!("{method}: the runtime letting go"), || {
            engine.running_tasks() == 0
        })
        .await;
        let task = peer.get(&id).await["result"].clone();
        assert_eq!(task["status"], "failed", "{method}: {task}");
        assert!(
            task["statusMessage"]
                .as_str()
                .is_some_and(|m| m.contains("expired")),
            "{method}: R21 says why: {task}"
        );
    }
}

/// R21 + issue 12.3: a failed task says why in its statusMessage; no terminal task keeps the
/// progress text it had while it ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_tasks_carry_the_right_status_message() {
    let seen = Seen::default();
    let (_engine, mut peer) = server(&seen, Duration::from_secs(1)).await;
    let cases = [
        ("rpc", "failed", Some("the upstream API refused the job")),
        ("internal", "failed", Some("the cache is corrupt")),
        (
            "panic",
            "failed",
            Some("tool `ends` panicked: index out of range"),
        ),
        ("cancelled", "cancelled", None),
        ("tool-error", "completed", None),
        ("fine", "completed", None),
    ];
    for (how, status, message) in cases {
        let id = create(&mut peer, "ends", json!({ "how": how })).await;
        let task = peer.wait_terminal(&id).await;
        assert_eq!(task["status"], status, "{how}: {task}");
        assert_eq!(
            task["statusMessage"].as_str(),
            message,
            "{how}: the terminal statusMessage: {task}"
        );
    }

    let id = create(&mut peer, "sleeper", json!({})).await;
    let task = peer.wait_terminal(&id).await;
    assert_eq!(task["status"], "failed");
    assert_eq!(
        task["statusMessage"],
        "task expired: its ttl elapsed before it finished"
    );
}

/// `ToolError::internal` is a JSON-RPC -32603: the task is `failed` with it (R45).
#[tokio::test]
async fn internal_tool_errors_fail_the_task_with_32603() {
    let seen = Seen::default();
    let (_engine, mut peer) = server(&seen, Duration::from_secs(1)).await;
    let id = create(&mut peer, "ends", json!({ "how": "internal" })).await;
    let task = peer.wait_terminal(&id).await;
    assert_eq!(task["error"]["code"], -32603, "{task}");
    assert_eq!(task["error"]["message"], "the cache is corrupt");
}

/// `try_step`: the work's error is an `isError` result with its text (one `?`), and an `Ok`
/// goes on.
#[tokio::test]
async fn fallible_steps_end_with_one_question_mark() {
    let seen = Seen::default();
    let (_engine, mut peer) = server(&seen, Duration::from_secs(1)).await;
    let id = create(&mut peer, "fallible", json!({ "fail": true })).await;
    let task = peer.wait_terminal(&id).await;
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["result"]["isError"], true, "{task}");
    assert_eq!(first_text(&task["result"]), "upstream timed out");

    let id = create(&mut peer, "fallible", json!({ "fail": false })).await;
    let task = peer.wait_terminal(&id).await;
    assert_eq!(first_text(&task["result"]), "fetched 7", "{task}");
}

fn server_info(result: &Value) -> &Value {
    &result["_meta"]["io.modelcontextprotocol/serverInfo"]
}

/// C9: every result carries `_meta["io.modelcontextprotocol/serverInfo"]` (tools/list, an
/// inline tools/call, a task handle, an input_required round, tasks/get, and the
/// acknowledgements of tasks/update and tasks/cancel), on HTTP and on stdio.
#[tokio::test]
async fn results_carry_the_server_info() {
    let server = || {
        let tools = toolkit![hello, ends].expect("toolkit");
        TaskServer::from_engine(
            Engine::builder(tools)
                .with_server_info(rmcp::model::Implementation::new("report-server", "2.1.0"))
                .build(),
        )
    };
    let expected = json!({ "name": "report-server", "version": "2.1.0" });
    for mut peer in [
        Peer::Http(Http::start(server()).await),
        Peer::Stdio(Stdio::framed(server())),
    ] {
        every_result_carries(&mut peer, &expected).await;
    }
}

async fn every_result_carries(peer: &mut Peer, expected: &Value) {
    let listed = peer.rpc("tools/list", json!({}), PLAIN).await;
    assert_eq!(server_info(&listed["result"]), expected, "{listed}");
    let inline = peer.call("hello", json!({}), PLAIN).await;
    assert_eq!(server_info(&inline["result"]), expected, "{inline}");
    let created = peer.call("ends", json!({ "how": "fine" }), TASKS).await;
    assert_eq!(server_info(&created["result"]), expected, "{created}");
    let id = created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let got = peer.get(&id).await;
    assert_eq!(server_info(&got["result"]), expected, "{got}");
    let params = json!({ "taskId": id, "inputResponses": {} });
    let updated = peer.rpc("tasks/update", params, TASKS).await;
    assert_eq!(updated["result"]["resultType"], "complete", "{updated}");
    assert_eq!(server_info(&updated["result"]), expected, "{updated}");
    let cancelled = peer
        .rpc("tasks/cancel", json!({ "taskId": id }), TASKS)
        .await;
    assert_eq!(cancelled["result"]["resultType"], "complete", "{cancelled}");
    assert_eq!(server_info(&cancelled["result"]), expected, "{cancelled}");
}

/// C9 on an input_required round: the tool of tests/common asks before any task exists.
#[tokio::test]
async fn input_required_rounds_carry_the_server_info() {
    /// Asks one question before the task exists.
    #[task_tool(mode = "optional")]
    async fn confirm(ctx: TaskContext) -> Result<String, ToolError> {
        let schema = rmcp::model::ElicitationSchema::builder()
            .required_bool("ok")
            .build()
            .map_err(|e| ToolError::new(e.to_string()))?;
        ctx.elicit_form_before_task("Go on?", schema).await?;
        Ok("went on".into())
    }
    let mut peer =
        Peer::Http(Http::start(TaskServer::new(toolkit![confirm].expect("toolkit"))).await);
    let round = peer.call("confirm", json!({}), TASKS).await;
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    assert_eq!(
        server_info(&round["result"])["name"],
        "mcp-tasks",
        "the default serverInfo: {round}"
    );
}

/// Shutdown with a grace period: work that ends within it writes its outcome; work still
/// running when it ends is dropped (not cancelled: the tool never sees a cancellation) and
/// writes nothing itself; the drain fails its task (a `fail` tool cannot be resumed) saying
/// the server was shut down; then nothing of the engine runs, it does not start again, and
/// calls are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_work_end_within_its_grace_then_stops_the_rest() {
    let seen = Seen::default();
    let (engine, mut peer) = server(&seen, Duration::from_millis(20)).await;
    assert!(
        engine.is_running(),
        "serving the TaskServer started its engine"
    );
    let quick = create(&mut peer, "lingers", json!({})).await;
    let slow = create(&mut peer, "waits", json!({})).await;
    assert_eq!(engine.running_tasks(), 2);

    let report = engine.shutdown(Duration::from_millis(1500)).await;
    assert_eq!(report.abandoned, 1, "{report:?}");
    assert_eq!((report.failed, report.released), (1, 0), "{report:?}");
    assert!(engine.is_stopped());
    assert_eq!(engine.running_tasks(), 0);
    let status = |id: &str| {
        let store = engine.store().clone();
        let id = id.to_owned();
        async move { store.get(&id).await.unwrap().expect("the task").status }
    };
    assert_eq!(status(&quick).await, rmcp::model::TaskStatus::Completed);
    assert_eq!(status(&slow).await, rmcp::model::TaskStatus::Failed);
    let failed = engine.store().get(&slow).await.unwrap().expect("the task");
    assert!(
        failed
            .status_message
            .as_deref()
            .is_some_and(|m| m.contains("server was shut down")),
        "{:?}",
        failed.status_message
    );
    assert_eq!(
        seen.0.load(Ordering::SeqCst),
        0,
        "the work was dropped, not cancelled"
    );

    assert_eq!(engine.start(), Err(mcp_tasks::StartError::Stopped));
    let refused = peer.call("ends", json!({ "how": "ok" }), TASKS).await;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    let inline = peer.call("hello", json!({}), PLAIN).await;
    assert_eq!(inline["error"]["code"], -32603, "{inline}");
}

/// An engine that is never started answers calls (nothing starts from a request: no loop
/// runs), and a shutdown of it returns at once.
#[tokio::test]
async fn an_engine_that_was_never_started_shuts_down_at_once() {
    let engine = Engine::new(toolkit![hello].expect("toolkit"));
    assert!(!engine.is_running());
    let report = engine.shutdown(Duration::from_secs(3600)).await;
    assert_eq!(report.abandoned, 0);
    assert!(engine.is_stopped());
    assert_eq!(engine.start(), Err(mcp_tasks::StartError::Stopped));
}
