//! The task server over real transports: Streamable HTTP on 127.0.0.1:0 and stdio framing.
//! Each test names the docs/protocol.md rules it checks.

mod common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::*;
use mcp_tasks::{
    MemoryStore, Owner, State, TaskContext, TaskServer, ToolError, task_tool, toolkit,
};
use rmcp::model::{ElicitationSchema, ErrorCode, ErrorData};
use serde_json::{Value, json};

/// What the tools below record, shared with the tests through `State<Probes>`.
#[derive(Clone, Default)]
struct Probes {
    /// Starts of `budget`'s work.
    runs: Arc<AtomicUsize>,
    /// Whether `cancellable` saw its cancellation.
    saw_cancel: Arc<AtomicBool>,
    /// Whether `stubborn` saw its cancellation (and finished anyway).
    stubborn_saw_cancel: Arc<AtomicBool>,
    /// Whether `inline_waits` saw the cancellation of its request.
    inline_saw_cancel: Arc<AtomicBool>,
    /// Starts and drops (before the end) of `slow_optional`'s work.
    slow_started: Arc<AtomicUsize>,
    slow_dropped: Arc<AtomicUsize>,
}

/// Echoes its text.
#[task_tool]
async fn echo(text: String) -> String {
    format!("echo: {text}")
}

/// An ordinary tool.
#[task_tool(mode = "inline")]
async fn plain() -> String {
    "plain".to_owned()
}

/// Runs only as a task.
#[task_tool(mode = "required")]
async fn only_task() -> String {
    "done".to_owned()
}

/// A tool-level failure: `isError`.
#[task_tool(mode = "required")]
async fn tool_error() -> Result<String, String> {
    Err("disk full".to_owned())
}

/// A JSON-RPC error during execution.
#[task_tool(mode = "required")]
async fn rpc_error() -> Result<String, ToolError> {
    Err(ToolError::rpc(ErrorData::new(
        ErrorCode(1001),
        "API rate limit exceeded",
        Some(json!({ "retryAfterMs": 500 })),
    )))
}

/// Panics.
#[task_tool(mode = "required")]
async fn panics() -> String {
    panic!("boom")
}

/// Waits for a cancellation and honours it.
#[task_tool(mode = "required")]
async fn cancellable(ctx: TaskContext, State(probes): State<Probes>) -> Result<String, ToolError> {
    ctx.status("waiting to be cancelled").await;
    ctx.cancelled().await;
    probes.saw_cancel.store(true, Ordering::SeqCst);
    Err(ToolError::cancelled())
}

/// Ignores a cancellation: it runs until it is cancelled, and then finishes anyway. (It
/// never ends without one, so a test of it shows the cancel reached the work.)
#[task_tool(mode = "required")]
async fn stubborn(ctx: TaskContext, State(probes): State<Probes>) -> String {
    ctx.cancelled().await;
    probes.stubborn_saw_cancel.store(true, Ordering::SeqCst);
    "finished anyway".to_owned()
}

/// An ordinary (never a task) tool that waits until its request is cancelled.
#[task_tool(mode = "inline")]
async fn inline_waits(ctx: TaskContext, State(probes): State<Probes>) -> Result<String, ToolError> {
    ctx.cancelled().await;
    probes.inline_saw_cancel.store(true, Ordering::SeqCst);
    Err(ToolError::cancelled())
}

/// Counts a drop that comes before the work's end.
struct DropProbe(Arc<AtomicUsize>, bool);

impl Drop for DropProbe {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Optional, with a 1 s inline budget; works for 3 s and ignores cancellation. Counts its
/// starts, and its work dropped before the end.
#[task_tool(inline_budget = "1s")]
async fn slow_optional(State(probes): State<Probes>) -> String {
    probes.slow_started.fetch_add(1, Ordering::SeqCst);
    let mut guard = DropProbe(probes.slow_dropped.clone(), false);
    tokio::time::sleep(Duration::from_secs(3)).await;
    guard.1 = true;
    "slow done".to_owned()
}

/// Asks for the client's roots, then for a completion, and answers with both.
#[task_tool(mode = "required", poll_interval = "20ms")]
#[allow(
    deprecated,
    reason = "sampling and roots are still part of the 2026-07-28 wire"
)]
async fn roots_then_sample(ctx: TaskContext) -> Result<String, ToolError> {
    let roots = ctx.roots().await?;
    let uris: Vec<String> = roots.roots.iter().map(|r| r.uri.clone()).collect();
    let params: rmcp::model::CreateMessageRequestParams = serde_json::from_value(json!({
        "messages": [{ "role": "user", "content": { "type": "text", "text": "6 x 7?" } }],
        "maxTokens": 10
    }))
    .map_err(|e| ToolError::new(e.to_string()))?;
    let reply = ctx.sample(params).await?;
    let said = serde_json::to_value(&reply.message.content).unwrap_or_default();
    Ok(format!(
        "roots {}; {} said {}",
        uris.join(","),
        reply.model,
        said["text"].as_str().unwrap_or("?")
    ))
}

/// Sleeps `ms`; answers inline when that fits in its 1 s budget. The tests call it with 0 ms
/// (1 s of margin for a loaded machine) and 1,500 ms (a sleep never ends early).
#[task_tool(inline_budget = "1s")]
async fn budget(State(probes): State<Probes>, #[arg(default)] ms: u64) -> String {
    probes.runs.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(ms)).await;
    format!("slept {ms}")
}

/// Never ends on its own; expires after 10 s.
#[task_tool(mode = "required", ttl = "10s")]
async fn forever(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

fn text_field(field: &'static str) -> ElicitationSchema {
    ElicitationSchema::builder()
        .required_string(field)
        .build()
        .expect("schema")
}

fn answer(result: &rmcp::model::ElicitResult, field: &str) -> String {
    result
        .content
        .as_ref()
        .and_then(|c| c[field].as_str())
        .unwrap_or("?")
        .to_owned()
}

/// Asks a name with `elicit`: through the task, or by round trip when there is no task.
#[task_tool]
async fn ask_name(ctx: TaskContext) -> Result<String, ToolError> {
    let name = ctx.elicit_form("Your name?", text_field("name")).await?;
    Ok(format!("hi {}", answer(&name, "name")))
}

/// Asks two questions before its task exists, then works as a task.
#[task_tool(mode = "required")]
async fn ask_then_work(
    ctx: TaskContext,
    State(probes): State<Probes>,
) -> Result<String, ToolError> {
    let name = ctx
        .elicit_form_before_task("Your name?", text_field("name"))
        .await?;
    let city = ctx
        .elicit_form_before_task("Your city?", text_field("city"))
        .await?;
    probes.runs.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(20)).await;
    Ok(format!(
        "{} from {}",
        answer(&name, "name"),
        answer(&city, "city")
    ))
}

/// Every tool above, with the probes they record into.
struct Fixture {
    probes: Probes,
}

impl Fixture {
    fn new() -> Self {
        Self {
            probes: Probes::default(),
        }
    }

    fn server(&self) -> TaskServer {
        TaskServer::new(self.toolkit())
    }

    fn toolkit(&self) -> mcp_tasks::Toolkit {
        toolkit![
            echo,
            plain,
            only_task,
            tool_error,
            rpc_error,
            panics,
            cancellable,
            stubborn,
            common::two_questions,
            budget,
            forever,
            ask_name,
            ask_then_work,
            inline_waits,
            slow_optional,
            roots_then_sample
        ]
        .expect("distinct, valid tools")
        .with_state(self.probes.clone())
    }
}

fn task_id(response: &Value) -> String {
    assert_eq!(
        response["result"]["resultType"], "task",
        "expected a task: {response}"
    );
    response["result"]["taskId"].as_str().unwrap().to_owned()
}

fn error_code(response: &Value) -> i64 {
    response["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error: {response}"))
}

fn without_meta(mut result: Value) -> Value {
    if let Some(map) = result.as_object_mut() {
        map.remove("_meta");
    }
    result
}

/// R1, R2, R3, C3: the same client declares on one call and not on the next; only the
/// declaring call gets a task.
#[tokio::test]
async fn negotiation_is_per_request() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        let first = peer.call("echo", json!({ "text": "a" }), TASKS).await;
        task_id(&first);
        let second = peer.call("echo", json!({ "text": "b" }), PLAIN).await;
        assert_eq!(second["result"]["resultType"], "complete", "{second}");
        assert!(second["result"].get("taskId").is_none());
        assert_eq!(first_text(&second["result"]), "echo: b");
    }
}

/// R3, R55: a client that does not declare the extension gets the ordinary result of an
/// optional tool; an inline tool never becomes a task, even for a declaring client.
#[tokio::test]
async fn inline_fallback() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        let plain = peer.call("echo", json!({ "text": "hi" }), PLAIN).await;
        assert_eq!(first_text(&plain["result"]), "echo: hi");
        assert_eq!(plain["result"]["isError"], false);
        let inline = peer.call("plain", json!({}), TASKS).await;
        assert_eq!(inline["result"]["resultType"], "complete");
        assert_eq!(first_text(&inline["result"]), "plain");
    }
}

/// R6, §3.4: a task-only tool called without the extension answers -32021 with exactly
/// `data.requiredCapabilities = {"extensions": {"io.modelcontextprotocol/tasks": {}}}`.
#[tokio::test]
async fn required_tool_without_extension_is_32021() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        let response = peer.call("only_task", json!({}), PLAIN).await;
        assert_eq!(error_code(&response), -32021);
        assert_eq!(
            response["error"]["data"],
            json!({ "requiredCapabilities": { "extensions": { "io.modelcontextprotocol/tasks": {} } } })
        );
    }
}

/// R8, R10, R12, R14, R16, R47, §2.2: create → tasks/get at once → poll → completed, whose
/// `result` is exactly the inline result of the same call.
#[tokio::test]
async fn task_completes_with_the_inline_result() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        let created = peer.call("echo", json!({ "text": "same" }), TASKS).await;
        let id = task_id(&created);
        let seed = &created["result"];
        assert_eq!(seed["status"], "working");
        for field in ["createdAt", "lastUpdatedAt"] {
            assert!(
                seed[field].as_str().is_some_and(|s| s.ends_with('Z')),
                "{seed}"
            );
        }
        assert!(
            seed.get("ttlMs").is_some(),
            "ttlMs must be present (§2.1): {seed}"
        );
        for payload in ["result", "error", "inputRequests"] {
            assert!(
                seed.get(payload).is_none(),
                "CreateTaskResult carries no {payload}"
            );
        }
        assert_eq!(
            id.len(),
            12 + 32,
            "12 hex digits of creation time + 128 random bits in hex (R13)"
        );

        let immediately = peer.get(&id).await;
        assert!(immediately.get("error").is_none(), "R10: {immediately}");
        assert_eq!(immediately["result"]["resultType"], "complete");

        let done = peer.wait_terminal(&id).await;
        assert_eq!(done["status"], "completed");
        assert_eq!(done["resultType"], "complete");
        assert_eq!(
            done["createdAt"], seed["createdAt"],
            "R57: createdAt never changes"
        );
        let inline = peer.call("echo", json!({ "text": "same" }), PLAIN).await;
        assert_eq!(
            without_meta(done["result"].clone()),
            without_meta(inline["result"].clone())
        );
        // R56: the terminal snapshot is stable.
        assert_eq!(peer.get(&id).await["result"], done);
    }
}

/// R46: a tool result with `isError: true` is a successful outcome: `completed`.
#[tokio::test]
async fn tool_error_completes_with_is_error() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        let id = task_id(&peer.call("tool_error", json!({}), TASKS).await);
        let done = peer.wait_terminal(&id).await;
        assert_eq!(done["status"], "completed");
        assert_eq!(done["result"]["isError"], true);
        assert_eq!(first_text(&done["result"]), "disk full");
        assert!(done.get("error").is_none());
    }
}

/// R45, R21: a JSON-RPC error during execution ends the task `failed` with exactly that error.
#[tokio::test]
async fn rpc_error_fails_the_task() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        let id = task_id(&peer.call("rpc_error", json!({}), TASKS).await);
        let done = peer.wait_terminal(&id).await;
        assert_eq!(done["status"], "failed");
        assert_eq!(
            done["error"],
            json!({ "code": 1001, "message": "API rate limit exceeded", "data": { "retryAfterMs": 500 } })
        );
        assert!(done.get("result").is_none());
    }
}

/// R45: a panicking tool ends `failed` with -32603, and the server keeps serving.
#[tokio::test]
async fn panicking_tool_fails_and_server_survives() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        let id = task_id(&peer.call("panics", json!({}), TASKS).await);
        let done = peer.wait_terminal(&id).await;
        assert_eq!(done["status"], "failed");
        assert_eq!(done["error"]["code"], -32603);
        assert!(
            done["error"]["message"].as_str().unwrap().contains("boom"),
            "{done}"
        );
        let after = peer
            .call("echo", json!({ "text": "still here" }), PLAIN)
            .await;
        assert_eq!(first_text(&after["result"]), "echo: still here");
    }
}

/// R17, R25, R36: an unknown id answers -32602 on get, update and cancel.
#[tokio::test]
async fn unknown_task_is_32602() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(error_code(&peer.get(id).await), -32602);
        let update = peer
            .rpc(
                "tasks/update",
                json!({ "taskId": id, "inputResponses": {} }),
                TASKS,
            )
            .await;
        assert_eq!(error_code(&update), -32602);
        let cancel = peer
            .rpc("tasks/cancel", json!({ "taskId": id }), TASKS)
            .await;
        assert_eq!(error_code(&cancel), -32602);
    }
}

/// R34, R35, R37: cancel is acknowledged with an empty result; a tool that honours it ends
/// `cancelled`, one that ignores it ends `completed`.
#[tokio::test]
async fn cancel_honoured_and_ignored() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        // Each pass (HTTP, stdio) starts with its probes unset.
        fx.probes.saw_cancel.store(false, Ordering::SeqCst);
        fx.probes.stubborn_saw_cancel.store(false, Ordering::SeqCst);
        let id = task_id(&peer.call("cancellable", json!({}), TASKS).await);
        // statusMessage is visible in tasks/get while the task runs.
        let working = peer
            .wait_for(&id, "its status message", |task| {
                task["statusMessage"] == "waiting to be cancelled"
            })
            .await;
        assert_eq!(working["status"], "working");
        assert!(!fx.probes.saw_cancel.load(Ordering::SeqCst));
        let ack = peer
            .rpc("tasks/cancel", json!({ "taskId": id }), TASKS)
            .await;
        assert_ack(&ack);
        assert_eq!(peer.wait_terminal(&id).await["status"], "cancelled");
        assert!(
            fx.probes.saw_cancel.load(Ordering::SeqCst),
            "the work saw it"
        );

        // `stubborn` ends only once a cancel reaches it, and then completes: the status is
        // what the work did, not what was asked (R37).
        let id = task_id(&peer.call("stubborn", json!({}), TASKS).await);
        assert_eq!(peer.get(&id).await["result"]["status"], "working");
        let ack = peer
            .rpc("tasks/cancel", json!({ "taskId": id }), TASKS)
            .await;
        assert_ack(&ack);
        let done = peer.wait_terminal(&id).await;
        assert!(fx.probes.stubborn_saw_cancel.load(Ordering::SeqCst));
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(first_text(&done["result"]), "finished anyway");
    }
}

/// R14, R15, R23, R26, R27, R28: two input requests outstanding at once; a partial update
/// with an unknown key; the rest; completion.
#[tokio::test]
async fn input_required_partial_answers() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        let id = task_id(&peer.call("two_questions", json!({}), TASKS).await);
        let mut snapshot = peer.wait_status(&id, "input_required").await;
        for _ in 0..100 {
            if snapshot["inputRequests"].as_object().map_or(0, |m| m.len()) == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            snapshot = peer.get(&id).await["result"].clone();
        }
        let requests = snapshot["inputRequests"].as_object().unwrap().clone();
        assert_eq!(requests.len(), 2, "{snapshot}");
        for request in requests.values() {
            assert_eq!(request["method"], "elicitation/create");
            assert!(request.get("jsonrpc").is_none() && request.get("id").is_none());
        }
        let mut keys: Vec<String> = requests.keys().cloned().collect();
        keys.sort();
        let name_key = keys
            .iter()
            .find(|k| requests[*k]["params"]["message"] == "Your name?")
            .unwrap()
            .clone();
        let city_key = keys.iter().find(|k| **k != name_key).unwrap().clone();

        // A malformed answer is refused with -32602 and changes nothing.
        let bad = peer
            .rpc(
                "tasks/update",
                json!({ "taskId": id, "inputResponses": { name_key.clone(): { "action": "maybe" } } }),
                TASKS,
            )
            .await;
        assert_eq!(error_code(&bad), -32602);
        // So is an answer that does not fill in the form (C21): the message says which field
        // and why, and the question stays open for a good answer.
        for (content, why) in [
            (
                json!({ "name": 5 }),
                "content.name must be a string, got a number",
            ),
            (json!({ "city": "Turin" }), "content.name is missing"),
        ] {
            let misfit = peer
                .rpc(
                    "tasks/update",
                    json!({ "taskId": id, "inputResponses": {
                        name_key.clone(): { "action": "accept", "content": content } } }),
                    TASKS,
                )
                .await;
            assert_eq!(error_code(&misfit), -32602, "{misfit}");
            let message = misfit["error"]["message"].as_str().unwrap();
            assert!(
                message.contains(&name_key) && message.contains(why),
                "{message}"
            );
        }
        assert_eq!(
            peer.get(&id).await["result"]["inputRequests"],
            snapshot["inputRequests"]
        );

        let ack = peer
            .rpc(
                "tasks/update",
                json!({ "taskId": id, "inputResponses": {
                    name_key.clone(): { "action": "accept", "content": { "name": "Luca" } },
                    "never-issued": { "action": "accept", "content": {} }
                } }),
                TASKS,
            )
            .await;
        assert_ack(&ack);
        let partial = peer.get(&id).await["result"].clone();
        assert_eq!(partial["status"], "input_required", "R27");
        let outstanding: Vec<&String> = partial["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(outstanding, vec![&city_key]);

        // Answering the same key again is ignored (R26).
        let again = peer
            .rpc(
                "tasks/update",
                json!({ "taskId": id, "inputResponses": {
                    name_key.clone(): { "action": "accept", "content": { "name": "Mallory" } },
                    city_key.clone(): { "action": "accept", "content": { "city": "Turin" } }
                } }),
                TASKS,
            )
            .await;
        assert_eq!(again["result"]["resultType"], "complete");
        let done = peer.wait_terminal(&id).await;
        assert_eq!(done["status"], "completed");
        assert_eq!(first_text(&done["result"]), "Luca from Turin");
    }
}

/// Inline budget, both ways: a fast call answers inline, a slow one becomes a task around
/// the running work; each call's work starts once. Real time with margins a loaded machine
/// keeps (0 ms of work against a 1 s budget; a 1.5 s sleep, which never ends early);
/// `inline_budget_on_paused_time` checks the boundary exactly.
#[tokio::test]
async fn inline_budget_both_ways() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        let before = fx.probes.runs.load(Ordering::SeqCst);
        let fast = peer.call("budget", json!({ "ms": 0 }), TASKS).await;
        assert_eq!(fast["result"]["resultType"], "complete", "{fast}");
        assert_eq!(first_text(&fast["result"]), "slept 0");
        let slow = peer.call("budget", json!({ "ms": 1500 }), TASKS).await;
        let id = task_id(&slow);
        let done = peer.wait_terminal(&id).await;
        assert_eq!(first_text(&done["result"]), "slept 1500");
        assert_eq!(
            fx.probes.runs.load(Ordering::SeqCst) - before,
            2,
            "each call's work ran once"
        );
    }
}

/// The inline budget on paused time (stdio pipe, no real I/O): work that ends 1 ms before
/// the budget answers inline, work that ends 1 ms after it becomes a task.
#[tokio::test(start_paused = true)]
async fn inline_budget_on_paused_time() {
    let fx = Fixture::new();
    let mut peer = Peer::Stdio(Stdio::start(fx.server()));
    let start = tokio::time::Instant::now();
    let under = peer.call("budget", json!({ "ms": 999 }), TASKS).await;
    assert_eq!(under["result"]["resultType"], "complete", "{under}");
    assert_eq!(first_text(&under["result"]), "slept 999");
    assert_eq!(start.elapsed(), Duration::from_millis(999));
    let start = tokio::time::Instant::now();
    let over = peer.call("budget", json!({ "ms": 1001 }), TASKS).await;
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(1000),
        "answered at the budget"
    );
    let id = task_id(&over);
    assert_eq!(
        first_text(&peer.wait_terminal(&id).await["result"]),
        "slept 1001"
    );
}

/// Invalid arguments never create a task: an immediate `isError` result naming the field.
#[tokio::test]
async fn bad_arguments_answer_at_once() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        let response = peer.call("echo", json!({ "text": 7 }), TASKS).await;
        assert_eq!(response["result"]["isError"], true, "{response}");
        assert!(response["result"].get("taskId").is_none());
        let message = first_text(&response["result"]);
        assert!(
            message.contains("`text`") && message.contains("expected a string"),
            "{message}"
        );
    }
}

/// §2.8, R43-style gate: tasks/* without the capability answer -32021; `tasks/result` and
/// `tasks/list` are not methods of this extension (R51, R54): -32601, as an unknown method.
#[tokio::test]
async fn tasks_methods_need_the_capability() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        let id = task_id(&peer.call("only_task", json!({}), TASKS).await);
        for (method, params) in [
            ("tasks/get", json!({ "taskId": id })),
            (
                "tasks/update",
                json!({ "taskId": id, "inputResponses": {} }),
            ),
            ("tasks/cancel", json!({ "taskId": id })),
        ] {
            let response = peer.rpc(method, params, PLAIN).await;
            assert_eq!(error_code(&response), -32021, "{method}: {response}");
            assert_eq!(
                response["error"]["data"]["requiredCapabilities"],
                json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } })
            );
        }
        // Each says it is not served and, for the earlier revision's methods, where their
        // answers went.
        for (method, says) in [
            ("tasks/result", "is in the tasks/get answer"),
            ("tasks/list", "asks tasks/get"),
            ("nope/nope", "does not serve `nope/nope`"),
        ] {
            let response = peer.rpc(method, json!({ "taskId": id }), TASKS).await;
            assert_eq!(error_code(&response), -32601, "{method}: {response}");
            let message = response["error"]["message"].as_str().unwrap();
            assert!(
                message.starts_with("Method not found") && message.contains(says),
                "{message}"
            );
        }
    }
}

/// §3.1, §3.6: `server/discover` advertises exactly `{}` for the extension when the server has
/// task tools, and nothing when it has none.
#[tokio::test]
async fn discover_advertises_the_extension_only_with_task_tools() {
    let fx = Fixture::new();
    let mut peers = both(|| fx.server()).await;
    for peer in &mut peers {
        let response = peer.rpc("server/discover", json!({}), PLAIN).await;
        assert_eq!(
            response["result"]["capabilities"]["extensions"],
            json!({ "io.modelcontextprotocol/tasks": {} }),
            "{response}"
        );
    }
    let inline_only = || TaskServer::new(toolkit![plain].expect("one tool"));
    for mut peer in both(inline_only).await {
        let response = peer.rpc("server/discover", json!({}), TASKS).await;
        assert!(
            response["result"]["capabilities"]
                .get("extensions")
                .is_none(),
            "{response}"
        );
        let call = peer.call("plain", json!({}), TASKS).await;
        assert_eq!(first_text(&call["result"]), "plain");
    }
}

/// At capacity a new task gets a clear JSON-RPC error; no live task is evicted.
#[tokio::test]
async fn store_capacity_is_a_clear_error() {
    let fx = Fixture::new();
    let make = || {
        TaskServer::from_engine(
            mcp_tasks::Engine::builder(fx.toolkit())
                .with_store(MemoryStore::new().with_max_tasks(2))
                .build(),
        )
    };
    for mut peer in both(make).await {
        let a = task_id(&peer.call("cancellable", json!({}), TASKS).await);
        let b = task_id(&peer.call("cancellable", json!({}), TASKS).await);
        let third = peer.call("cancellable", json!({}), TASKS).await;
        assert_eq!(error_code(&third), -32603);
        assert!(
            third["error"]["message"].as_str().unwrap().contains("full"),
            "{third}"
        );
        assert_eq!(third["error"]["data"]["maxTasks"], 2);
        for id in [&a, &b] {
            assert_eq!(peer.get(id).await["result"]["status"], "working");
        }
    }
}

/// R49, R13: a task created by one owner reads as unknown (-32602) to another.
#[tokio::test]
async fn another_owner_sees_nothing() {
    let fx = Fixture::new();
    let router = mcp_tasks::http_router(fx.server(), mcp_tasks::HttpOptions::new()).layer(
        axum::middleware::from_fn(
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
        ),
    );
    let mut alice = Http::start_router(router.clone()).await;
    alice.extra = vec![("x-user", "alice".to_owned())];
    let mut mallory = Http {
        url: alice.url.clone(),
        client: reqwest::Client::new(),
        extra: vec![("x-user", "mallory".to_owned())],
        next_id: 100,
    };
    drop(router);
    let (_, created) = alice
        .rpc(
            "tools/call",
            json!({ "name": "ask_name", "arguments": {} }),
            TASKS,
        )
        .await;
    let id = task_id(&created);
    let mut patience = Patience::new("alice's task to ask its question");
    let key = loop {
        let (_, mine) = alice.rpc("tasks/get", json!({ "taskId": id }), TASKS).await;
        if mine["result"]["status"] == "input_required" {
            break first_input_key(&mine["result"]);
        }
        patience.wait().await;
    };
    // Mallory answers the real key with a well-formed answer, and cancels.
    for (method, params) in [
        ("tasks/get", json!({ "taskId": id })),
        (
            "tasks/update",
            json!({ "taskId": id, "inputResponses": {
                key.clone(): { "action": "accept", "content": { "name": "Mallory" } } } }),
        ),
        ("tasks/cancel", json!({ "taskId": id })),
    ] {
        let (_, response) = mallory.rpc(method, params, TASKS).await;
        assert_eq!(error_code(&response), -32602, "{method}: {response}");
    }
    // Her answer was not taken: the key is still outstanding.
    let (_, mine) = alice.rpc("tasks/get", json!({ "taskId": id }), TASKS).await;
    assert_eq!(mine["result"]["status"], "input_required", "{mine}");
    assert_eq!(first_input_key(&mine["result"]), key);
    // Her cancel did not reach the work: it was acknowledged to no one before Alice's answer
    // was sent, so had it worked the question would have ended cancelled. Alice's answer
    // completes the task with her name.
    let (_, ack) = alice
        .rpc(
            "tasks/update",
            json!({ "taskId": id, "inputResponses": {
                key.clone(): { "action": "accept", "content": { "name": "Alice" } } } }),
            TASKS,
        )
        .await;
    assert_ack(&ack);
    patience = Patience::new("alice's task to end");
    let done = loop {
        let (_, mine) = alice.rpc("tasks/get", json!({ "taskId": id }), TASKS).await;
        if matches!(
            mine["result"]["status"].as_str(),
            Some("completed" | "failed" | "cancelled")
        ) {
            break mine["result"].clone();
        }
        patience.wait().await;
    };
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(first_text(&done["result"]), "hi Alice");
}

/// R20, R17: on paused time, a task past its TTL becomes `failed` ("task expired"), its work
/// is told to stop, and after the retention for expired tasks its id answers -32602.
#[tokio::test(start_paused = true)]
async fn ttl_expiry_on_paused_time() {
    let fx = Fixture::new();
    let mut peer = Peer::Stdio(Stdio::start(fx.server()));
    let created = peer.call("forever", json!({}), TASKS).await;
    assert_eq!(created["result"]["ttlMs"], 10_000);
    let id = task_id(&created);
    tokio::time::advance(Duration::from_secs(9)).await;
    assert_eq!(peer.get(&id).await["result"]["status"], "working");
    tokio::time::advance(Duration::from_secs(2)).await;
    let expired = peer.get(&id).await["result"].clone();
    assert_eq!(expired["status"], "failed", "{expired}");
    assert_eq!(expired["error"]["message"], "task expired");
    assert!(
        expired["statusMessage"]
            .as_str()
            .unwrap()
            .contains("expired")
    );
    // The sweep stops the work; its late outcome does not change the terminal state (R56).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(peer.get(&id).await["result"]["status"], "failed");
    tokio::time::advance(mcp_tasks::store::memory::DEFAULT_EXPIRED_RETENTION).await;
    assert_eq!(error_code(&peer.get(&id).await), -32602);
}

/// R53: a legacy (initialize, 2025-11-25) client gets ordinary results from optional tools,
/// even when it declared the extension at initialize and on the request; required tools
/// answer -32021. Over stdio and over HTTP sessions.
#[tokio::test]
async fn legacy_sessions_never_see_tasks() {
    let fx = Fixture::new();
    let initialize = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": { "elicitation": {}, "extensions": { "io.modelcontextprotocol/tasks": {} } },
        "clientInfo": { "name": "legacy", "version": "1" }
    } });
    let declaring_meta = json!({ "io.modelcontextprotocol/clientCapabilities": {
        "extensions": { "io.modelcontextprotocol/tasks": {} } } });
    let call = |id: u64, name: &str| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": { "name": name, "arguments": { "text": "old" }, "_meta": declaring_meta } })
    };

    // stdio
    let mut stdio = Stdio::start(fx.server());
    let init = stdio.request(initialize.clone()).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    stdio
        .send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
        .await;
    let echo = stdio.request(call(2, "echo")).await;
    assert_eq!(first_text(&echo["result"]), "echo: old", "{echo}");
    assert!(echo["result"].get("taskId").is_none());
    assert_eq!(
        error_code(&stdio.request(call(3, "only_task")).await),
        -32021
    );
    let get = stdio
        .request(json!({ "jsonrpc": "2.0", "id": 4, "method": "tasks/get",
        "params": { "taskId": "0123456789abcdef0123456789abcdef", "_meta": declaring_meta } }))
        .await;
    assert_eq!(
        error_code(&get),
        -32021,
        "no task methods on a legacy session: {get}"
    );
    assert_eq!(
        get["error"]["data"],
        json!({ "requiredCapabilities": { "extensions": { "io.modelcontextprotocol/tasks": {} } } })
    );

    // Streamable HTTP with a session
    let http = Http::start(fx.server()).await;
    let (_, init, headers) = http.post(&initialize, &[]).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    let session = headers
        .get("mcp-session-id")
        .expect("a legacy session id")
        .to_str()
        .unwrap()
        .to_owned();
    let legacy_headers = [
        ("mcp-session-id", session.clone()),
        ("mcp-protocol-version", "2025-11-25".to_owned()),
    ];
    http.post(
        &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        &legacy_headers,
    )
    .await;
    let (_, echo, _) = http.post(&call(2, "echo"), &legacy_headers).await;
    assert_eq!(first_text(&echo["result"]), "echo: old", "{echo}");
    assert!(echo["result"].get("taskId").is_none());
    let (_, required, _) = http.post(&call(3, "only_task"), &legacy_headers).await;
    assert_eq!(error_code(&required), -32021, "{required}");
}

/// C18: a task never asks for input of a kind the creating request did not declare; the
/// tool's request fails with -32021 naming the capability, and the task ends `failed`.
#[tokio::test]
async fn undeclared_input_kind_is_refused() {
    let fx = Fixture::new();
    let no_elicitation = Caps {
        tasks: true,
        elicitation: false,
    };
    for mut peer in both(|| fx.server()).await {
        let id = task_id(&peer.call("two_questions", json!({}), no_elicitation).await);
        let done = peer.wait_terminal(&id).await;
        assert_eq!(done["status"], "failed", "{done}");
        assert_eq!(done["error"]["code"], -32021);
        assert_eq!(
            done["error"]["data"],
            json!({ "requiredCapabilities": { "elicitation": {} } })
        );
    }
}

/// R48, C31, C33: over Streamable HTTP a `tasks/*` request whose `Mcp-Name` header is not its
/// `params.taskId` is rejected with HTTP 400 and -32020; the matching header is accepted.
#[tokio::test]
async fn mcp_name_must_match_the_task_id() {
    let fx = Fixture::new();
    let mut http = Http::start(fx.server()).await;
    let (_, created) = http
        .rpc(
            "tools/call",
            json!({ "name": "only_task", "arguments": {} }),
            TASKS,
        )
        .await;
    let id = task_id(&created);
    let body = json!({ "jsonrpc": "2.0", "id": 99, "method": "tasks/get",
        "params": { "taskId": id, "_meta": meta(TASKS) } });
    let headers = |name: &str| {
        [
            ("mcp-protocol-version", V2026.to_owned()),
            ("mcp-method", "tasks/get".to_owned()),
            ("mcp-name", name.to_owned()),
        ]
    };
    let (status, response, _) = http.post(&body, &headers("someone-elses-task")).await;
    assert_eq!(status, 400, "{response}");
    assert_eq!(error_code(&response), -32020);
    let (status, response, _) = http.post(&body, &headers(&id)).await;
    assert_eq!(status, 200, "{response}");
    assert_eq!(response["result"]["taskId"], id.as_str());
}

/// C17-C21: a call that cannot be a task (the client did not declare the extension) asks for
/// input by multi round-trip request: `input_required` with the request, then the retry with
/// `inputResponses` and a new id completes.
#[tokio::test]
async fn inline_call_asks_by_round_trip() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        let round1 = peer.call("ask_name", json!({}), PLAIN).await;
        let result = &round1["result"];
        assert_eq!(result["resultType"], "input_required", "{round1}");
        assert!(result.get("taskId").is_none());
        let requests = result["inputRequests"].as_object().unwrap();
        assert_eq!(requests.len(), 1);
        let (key, request) = requests.iter().next().unwrap();
        assert_eq!(request["method"], "elicitation/create");
        assert_eq!(request["params"]["message"], "Your name?");
        // An answer that does not fill in the form is not handed to the tool: the retry is
        // asked the same question again (C21).
        let misfit = peer
            .rpc(
                "tools/call",
                json!({ "name": "ask_name", "arguments": {}, "requestState": result["requestState"],
                    "inputResponses": { key.clone(): { "action": "accept", "content": { "name": 7 } } } }),
                PLAIN,
            )
            .await;
        let asked_again = &misfit["result"];
        assert_eq!(asked_again["resultType"], "input_required", "{misfit}");
        assert_eq!(
            asked_again["inputRequests"], result["inputRequests"],
            "{misfit}"
        );
        let round2 = peer
            .rpc(
                "tools/call",
                json!({ "name": "ask_name", "arguments": {}, "requestState": asked_again["requestState"],
                    "inputResponses": { key.clone(): { "action": "accept", "content": { "name": "Ada" } } } }),
                PLAIN,
            )
            .await;
        assert_eq!(round2["result"]["resultType"], "complete", "{round2}");
        assert_eq!(first_text(&round2["result"]), "hi Ada");
    }
}

/// R11, C18-C20: input before the task: each round answers `input_required` (no taskId),
/// `requestState` carries earlier answers so a retry sends only the new ones, and the last
/// round creates the task, whose result reflects every answer. The work past the questions
/// ran once.
#[tokio::test]
async fn input_before_the_task_by_round_trips() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        let before = fx.probes.runs.load(Ordering::SeqCst);
        let call = |responses: Value, state: Option<Value>| {
            let mut params =
                json!({ "name": "ask_then_work", "arguments": {}, "inputResponses": responses });
            if let Some(state) = state {
                params["requestState"] = state;
            }
            params
        };
        let round1 = peer.call("ask_then_work", json!({}), TASKS).await["result"].clone();
        assert_eq!(round1["resultType"], "input_required", "{round1}");
        assert!(round1.get("taskId").is_none() && round1["requestState"].is_string());
        let key1 = first_input_key(&round1);

        let round2 = peer
            .rpc(
                "tools/call",
                call(
                    json!({ key1.clone(): { "action": "accept", "content": { "name": "Ada" } } }),
                    Some(round1["requestState"].clone()),
                ),
                TASKS,
            )
            .await["result"]
            .clone();
        assert_eq!(round2["resultType"], "input_required", "{round2}");
        let requests = round2["inputRequests"].as_object().unwrap();
        let (key2, request) = requests.iter().next().unwrap();
        assert_ne!(key2, &key1, "C18: keys unique within the call");
        assert_eq!(request["params"]["message"], "Your city?");
        let state = round2["requestState"].clone();
        assert!(
            state.is_string(),
            "earlier answers travel in requestState: {round2}"
        );

        let round3 = peer
            .rpc(
                "tools/call",
                call(
                    json!({ key2.clone(): { "action": "accept", "content": { "city": "Turin" } } }),
                    Some(state),
                ),
                TASKS,
            )
            .await;
        let id = task_id(&round3);
        assert!(round3["result"].get("requestState").is_none());
        assert!(round3["result"].get("inputRequests").is_none());
        let done = peer.wait_terminal(&id).await;
        assert_eq!(first_text(&done["result"]), "Ada from Turin");
        assert_eq!(fx.probes.runs.load(Ordering::SeqCst) - before, 1);

        // C19: a requestState this server did not issue for this tool is refused.
        let forged = peer
            .rpc(
                "tools/call",
                call(json!({}), Some(json!("{\"tool\":\"echo\",\"answers\":{}}"))),
                TASKS,
            )
            .await;
        assert_eq!(error_code(&forged), -32602, "{forged}");
    }
}

/// A `tools/list` request: answered after every message sent before it was read.
fn barrier(id: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/list", "params": { "_meta": meta(PLAIN) } })
}

/// C27 (stdio): `notifications/cancelled` for an inline call reaches the running tool, and
/// no answer is sent for the cancelled request.
#[tokio::test]
async fn notifications_cancelled_reaches_an_inline_call() {
    let fx = Fixture::new();
    let mut stdio = Stdio::start(fx.server());
    let id = stdio
        .send_rpc(
            "tools/call",
            json!({ "name": "inline_waits", "arguments": {} }),
            TASKS,
        )
        .await;
    // The call is running (a ping behind it is answered) before it is cancelled.
    let (pong, _) = stdio.request_noting(barrier("ping-1")).await;
    assert!(pong.get("result").is_some(), "{pong}");
    assert!(!fx.probes.inline_saw_cancel.load(Ordering::SeqCst));
    stdio
        .send(
            &json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": { "requestId": id, "reason": "the user gave up" } }),
        )
        .await;
    let patience = Patience::new("the inline tool to see its cancellation");
    while !fx.probes.inline_saw_cancel.load(Ordering::SeqCst) {
        patience.wait().await;
    }
    let (after, before) = stdio.request_noting(barrier("ping-2")).await;
    assert!(after.get("result").is_some(), "{after}");
    assert!(
        before.iter().all(|message| message["id"] != id),
        "no answer for a cancelled request: {before:?}"
    );
}

/// C27 + the inline budget, on paused time: a declaring call to an optional tool whose
/// request is cancelled while it still runs within its budget is never promoted: its work
/// stops (dropped before its end), no task is created, and nothing is answered for it, even
/// once the budget and the work's own length have passed.
#[tokio::test(start_paused = true)]
async fn a_cancel_before_promotion_creates_no_task() {
    let fx = Fixture::new();
    let store = Arc::new(MemoryStore::new());
    let engine = mcp_tasks::Engine::builder(fx.toolkit())
        .with_shared_store(store.clone())
        .build();
    let mut stdio = Stdio::start(TaskServer::from_engine(engine));
    let id = stdio
        .send_rpc(
            "tools/call",
            json!({ "name": "slow_optional", "arguments": {} }),
            TASKS,
        )
        .await;
    let patience = Patience::new("slow_optional to start");
    while fx.probes.slow_started.load(Ordering::SeqCst) == 0 {
        patience.wait().await;
    }
    stdio
        .send(
            &json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": { "requestId": id } }),
        )
        .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (pong, before) = stdio.request_noting(barrier("ping")).await;
    assert!(pong.get("result").is_some(), "{pong}");
    assert!(
        before.iter().all(|message| message["id"] != id),
        "no answer (and no task handle) for a cancelled request: {before:?}"
    );
    assert!(store.is_empty(), "no task created");
    assert_eq!(fx.probes.slow_started.load(Ordering::SeqCst), 1);
    assert_eq!(
        fx.probes.slow_dropped.load(Ordering::SeqCst),
        1,
        "the work was stopped before its end"
    );
}

fn declaring(sampling: bool, roots: bool) -> Value {
    let mut capabilities = capabilities(TASKS);
    if sampling {
        capabilities["sampling"] = json!({});
    }
    if roots {
        capabilities["roots"] = json!({});
    }
    meta_declaring(capabilities)
}

/// Sampling and roots inside a task: each is an input request of its own method, outstanding
/// until `tasks/update` brings an answer of the right type; a malformed answer is refused
/// with -32602 naming the key and the expected result, and changes nothing. A request that
/// did not declare `sampling` gets no sampling request: the task fails with -32021 naming it
/// (C18).
#[tokio::test]
async fn sampling_and_roots_inside_a_task() {
    let fx = Fixture::new();
    for mut peer in both(|| fx.server()).await {
        let created = peer
            .rpc_meta(
                "tools/call",
                json!({ "name": "roots_then_sample", "arguments": {} }),
                declaring(true, true),
            )
            .await;
        let id = task_id(&created);
        let mut task = peer.wait_status(&id, "input_required").await;
        let key = first_input_key(&task);
        assert_eq!(
            task["inputRequests"][&key]["method"], "roots/list",
            "{task}"
        );

        for bad in [json!({ "roots": "none" }), json!({ "action": "accept" })] {
            let refused = peer
                .rpc(
                    "tasks/update",
                    json!({ "taskId": id, "inputResponses": { key.clone(): bad } }),
                    TASKS,
                )
                .await;
            assert_eq!(error_code(&refused), -32602, "{refused}");
            let message = refused["error"]["message"].as_str().unwrap();
            assert!(
                message.contains(&key) && message.contains("ListRootsResult"),
                "{message}"
            );
        }
        assert_eq!(
            peer.get(&id).await["result"]["inputRequests"],
            task["inputRequests"],
            "a refused answer changes nothing"
        );
        let ack = peer
            .rpc(
                "tasks/update",
                json!({ "taskId": id, "inputResponses": { key.clone():
                    { "roots": [{ "uri": "file:///work", "name": "work" }] } } }),
                TASKS,
            )
            .await;
        assert_ack(&ack);

        task = peer
            .wait_for(&id, "the sampling request", |task| {
                task["status"] == "input_required"
                    && task["inputRequests"].as_object().is_some_and(|r| {
                        r.values().any(|q| q["method"] == "sampling/createMessage")
                    })
            })
            .await;
        let key = first_input_key(&task);
        let request = &task["inputRequests"][&key];
        assert_eq!(request["params"]["maxTokens"], 10, "{request}");
        let refused = peer
            .rpc(
                "tasks/update",
                json!({ "taskId": id, "inputResponses": { key.clone(): { "role": "assistant" } } }),
                TASKS,
            )
            .await;
        assert_eq!(error_code(&refused), -32602, "{refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("CreateMessageResult"),
            "{refused}"
        );
        let ack = peer
            .rpc(
                "tasks/update",
                json!({ "taskId": id, "inputResponses": { key.clone(): {
                    "role": "assistant", "model": "tiny",
                    "content": { "type": "text", "text": "42" } } } }),
                TASKS,
            )
            .await;
        assert_ack(&ack);
        let done = peer.wait_terminal(&id).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(
            first_text(&done["result"]),
            "roots file:///work; tiny said 42"
        );

        // Roots declared, sampling not: the roots question is asked, sampling refused.
        let created = peer
            .rpc_meta(
                "tools/call",
                json!({ "name": "roots_then_sample", "arguments": {} }),
                declaring(false, true),
            )
            .await;
        let id = task_id(&created);
        let task = peer.wait_status(&id, "input_required").await;
        let key = first_input_key(&task);
        peer.rpc(
            "tasks/update",
            json!({ "taskId": id, "inputResponses": { key: { "roots": [] } } }),
            TASKS,
        )
        .await;
        let done = peer.wait_terminal(&id).await;
        assert_eq!(done["status"], "failed", "{done}");
        assert_eq!(done["error"]["code"], -32021);
        assert_eq!(
            done["error"]["data"],
            json!({ "requiredCapabilities": { "sampling": {} } })
        );
    }
}

/// An acknowledgement of `tasks/update` or `tasks/cancel` (R23, R35): `resultType`
/// `"complete"`, and in `_meta`, where this crate's transports put it, only the server's info.
#[track_caller]
fn assert_ack(ack: &Value) {
    let mut result = ack["result"].clone();
    let meta = result
        .as_object_mut()
        .and_then(|result| result.remove("_meta"));
    assert_eq!(result, json!({ "resultType": "complete" }), "{ack}");
    if let Some(meta) = meta {
        let keys: Vec<_> = meta
            .as_object()
            .into_iter()
            .flat_map(|m| m.keys())
            .collect();
        assert_eq!(keys, ["io.modelcontextprotocol/serverInfo"], "{ack}");
    }
}
