//! The task client against real servers: our example server over Streamable HTTP
//! (127.0.0.1:0) and stdio (an in-process pipe, and a real child process), and hand-written
//! rmcp servers for what ours does not do (MRTR on tools/call, scripted poll intervals).
//! Each test names the docs/protocol.md rules it checks.

mod common;
#[path = "../examples/common/mod.rs"]
#[allow(dead_code, reason = "each user of the example tools takes a part")]
mod example;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::scripted::{Scripted, connect as scripted};
use futures::StreamExt;
use mcp_tasks::{
    TaskContext, TaskServer, ToolError,
    client::{
        Call, ClientError, Endpoint, InputContext, InputScope, TaskClient, TaskClientBuilder,
        TaskEnd, TaskReference,
    },
    task_tool, toolkit,
};
use rmcp::{
    ErrorData,
    model::{
        CallToolResult, DetailedTask, ElicitRequestParams, ElicitResult, ElicitationAction,
        ElicitationSchema, ErrorCode, TaskStatus,
    },
};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// Servers

/// Ends `failed` with a JSON-RPC error.
#[task_tool(mode = "required")]
async fn explode() -> Result<String, ToolError> {
    Err(ToolError::rpc(ErrorData::new(
        ErrorCode(-32050),
        "boom",
        Some(json!({ "why": "on purpose" })),
    )))
}

/// Ends `completed` with `isError: true`.
#[task_tool(mode = "required")]
async fn oops() -> Result<String, ToolError> {
    Err(ToolError::new("the tool says no"))
}

/// Ends `cancelled` by itself.
#[task_tool(mode = "required")]
async fn give_up() -> Result<String, ToolError> {
    Err(ToolError::cancelled())
}

/// Asks one question and answers with the action of the answer it got, as the server
/// received it.
#[task_tool(mode = "required", poll_interval = "20ms")]
async fn what_action(ctx: TaskContext) -> Result<String, ToolError> {
    let schema = ElicitationSchema::builder()
        .required_bool("ok")
        .build()
        .map_err(|e| ToolError::new(e.to_string()))?;
    let answer = ctx.elicit_form("OK?", schema).await?;
    Ok(format!("{:?} {:?}", answer.action, answer.content))
}

/// Asks the client's model for a completion and answers with its text.
#[task_tool(mode = "required", poll_interval = "20ms")]
#[allow(deprecated, reason = "sampling is still part of the 2026-07-28 wire")]
async fn ask_model(ctx: TaskContext) -> Result<String, ToolError> {
    let params = serde_json::from_value(json!({
        "messages": [{ "role": "user", "content": { "type": "text", "text": "6 x 7?" } }],
        "maxTokens": 10
    }))
    .map_err(|e| ToolError::new(e.to_string()))?;
    let reply = ctx.sample(params).await?;
    let said = serde_json::to_value(&reply.message.content).unwrap_or_default();
    Ok(format!(
        "{} said {}",
        reply.model,
        said["text"].as_str().unwrap_or("?")
    ))
}

/// Ends by itself, a moment after it starts.
#[task_tool(mode = "required", poll_interval = "20ms")]
async fn nap() -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok("rested".to_owned())
}

/// Sleeps until cancelled.
#[task_tool(mode = "required", poll_interval = "20ms")]
async fn sleepy(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.status("sleeping until cancelled").await;
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// The example tools plus a few that end in every way a task can end.
fn server(step: Duration) -> TaskServer {
    let toolkit = toolkit![
        example::greet,
        example::workspace_report,
        explode,
        oops,
        give_up,
        sleepy,
        what_action,
        ask_model,
        common::two_questions
    ]
    .expect("valid test tools")
    .with_state(example::Pace(step));
    TaskServer::new(toolkit)
}

#[derive(Clone, Copy, Debug)]
enum Transport {
    Http,
    Stdio,
}

const BOTH: [Transport; 2] = [Transport::Http, Transport::Stdio];

/// A running server a client can (re)connect to.
enum Running {
    Http(String),
    Stdio(Box<TaskServer>),
}

impl Running {
    async fn start(transport: Transport, server: TaskServer) -> Self {
        match transport {
            Transport::Http => Self::Http(common::Http::start(server).await.url),
            Transport::Stdio => Self::Stdio(Box::new(server)),
        }
    }

    /// A new client connection (for stdio: a new pipe to the same server and store).
    async fn connect(&self, builder: TaskClientBuilder) -> TaskClient {
        match self {
            Self::Http(url) => builder.connect_http(url).await.expect("connect over HTTP"),
            Self::Stdio(server) => builder
                .serve(common::serve_duplex((**server).clone()), "pipe")
                .await
                .expect("connect over stdio"),
        }
    }
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

fn message(params: &ElicitRequestParams) -> String {
    match params {
        ElicitRequestParams::FormElicitationParams { message, .. }
        | ElicitRequestParams::UrlElicitationParams { message, .. } => message.clone(),
        _ => String::new(),
    }
}

/// Records every elicitation the handler saw, as (key, message).
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// A builder whose elicitation handler answers `{"include": true}` and records the calls.
fn accepting(seen: &Seen) -> TaskClientBuilder {
    let seen = seen.clone();
    TaskClient::builder().with_elicitation(move |params, cx: InputContext| {
        seen.lock()
            .unwrap()
            .push((cx.key.clone(), message(&params)));
        async move {
            Ok(Some(
                ElicitResult::new(ElicitationAction::Accept)
                    .with_content(json!({ "include": true })),
            ))
        }
    })
}

// ---------------------------------------------------------------------------------------
// Against our example server, over HTTP and stdio

/// R4: an inline answer resolves the call like a task would.
#[tokio::test]
async fn inline_answer_resolves_the_call_r4() {
    for transport in BOTH {
        let running = Running::start(transport, server(Duration::from_millis(10))).await;
        let client = running.connect(TaskClient::builder()).await;
        assert!(client.server_supports_tasks(), "{transport:?}");
        let args = json!({ "name": "Ada" }).as_object().cloned();
        let Call::Inline(result) = client.call("greet", args.clone()).await.unwrap() else {
            panic!("{transport:?}: greet is never a task");
        };
        assert_eq!(text(&result), "Hello, Ada!");
        assert_eq!(
            text(&client.call_tool("greet", args).await.unwrap()),
            "Hello, Ada!"
        );
        let tools = client.list_tools().await.unwrap();
        assert!(
            tools.iter().any(|t| t.name == "workspace_report"),
            "{transport:?}"
        );
    }
}

/// R4, R18, R30-R32: a task followed to completion; its input request is answered once;
/// the updates stream shows distinct snapshots, working → input_required → completed.
#[tokio::test]
async fn task_runs_to_completion_answering_its_question_r4_r30() {
    for transport in BOTH {
        let running = Running::start(transport, server(Duration::from_millis(10))).await;
        let seen = Seen::default();
        let client = running.connect(accepting(&seen)).await;
        let args = json!({ "workspace_id": "acme" }).as_object().cloned();
        let mut task = client
            .call("workspace_report", args.clone())
            .await
            .unwrap()
            .into_task()
            .expect("workspace_report runs as a task for a declaring client");
        assert_eq!(task.poll_interval(), Duration::from_millis(500));
        let snapshots: Vec<DetailedTask> = task.updates().map(|s| s.expect("poll")).collect().await;
        for pair in snapshots.windows(2) {
            assert_ne!(pair[0], pair[1], "{transport:?}: snapshots are distinct");
        }
        let statuses: Vec<TaskStatus> = snapshots.iter().map(DetailedTask::status).collect();
        assert_eq!(
            statuses.first(),
            Some(&TaskStatus::Working),
            "{transport:?}"
        );
        assert_eq!(
            statuses.last(),
            Some(&TaskStatus::Completed),
            "{transport:?}"
        );
        let Some(TaskEnd::Completed(result)) = task.outcome().unwrap() else {
            panic!("{transport:?}: completed");
        };
        assert_eq!(
            text(&result),
            "Report for acme: 42 accounts (archived included)"
        );
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen.len(),
            1,
            "{transport:?}: one question, answered once: {seen:?}"
        );
        assert_eq!(seen[0].1, "Include archived accounts?");

        // The same through call_tool, which resolves the task (R4).
        let result = client.call_tool("workspace_report", args).await.unwrap();
        assert_eq!(
            text(&result),
            "Report for acme: 42 accounts (archived included)"
        );
    }
}

/// R27, R32: the handler answers one of two outstanding questions now and the other on a
/// later poll; each key is answered once and the task gets both answers.
#[tokio::test]
async fn partial_answers_then_the_rest_r27_r32() {
    for transport in BOTH {
        let running = Running::start(transport, server(Duration::from_millis(10))).await;
        let calls = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = calls.clone();
        let builder = TaskClient::builder().with_elicitation(move |params, cx| {
            let msg = message(&params);
            let mut log = log.lock().unwrap();
            log.push(msg.clone());
            let city_asked = log.iter().filter(|m| *m == "Your city?").count();
            assert!(matches!(cx.scope, InputScope::Task { .. }));
            let answer = match msg.as_str() {
                "Your name?" => Some(json!({ "name": "Ada" })),
                // Not yet: leave `city` outstanding for the next poll.
                "Your city?" if city_asked == 1 => None,
                _ => Some(json!({ "city": "Paris" })),
            };
            async move {
                Ok(answer.map(|content| {
                    ElicitResult::new(ElicitationAction::Accept).with_content(content)
                }))
            }
        });
        let client = running.connect(builder).await;
        let result = client.call_tool("two_questions", ()).await.unwrap();
        assert_eq!(text(&result), "Ada from Paris", "{transport:?}");
        let calls = calls.lock().unwrap().clone();
        assert_eq!(
            calls.iter().filter(|m| *m == "Your name?").count(),
            1,
            "{transport:?}: name answered once: {calls:?}"
        );
        assert_eq!(
            calls.iter().filter(|m| *m == "Your city?").count(),
            2,
            "{transport:?}: city deferred once, then answered: {calls:?}"
        );
    }
}

/// R34, R37: cancel with tasks/cancel; the task ends cancelled.
#[tokio::test]
async fn cancel_ends_the_task_cancelled_r34() {
    for transport in BOTH {
        let running = Running::start(transport, server(Duration::from_millis(10))).await;
        let client = running.connect(TaskClient::builder()).await;
        let mut task = client
            .call("sleepy", ())
            .await
            .unwrap()
            .into_task()
            .unwrap();
        task.poll().await.unwrap();
        assert!(!task.status().is_terminal());
        task.cancel().await.unwrap();
        assert_eq!(
            task.wait().await.unwrap(),
            TaskEnd::Cancelled,
            "{transport:?}"
        );
        // Terminal snapshots stay terminal (R56), and a second cancel is acknowledged.
        assert_eq!(task.poll().await.unwrap().status(), TaskStatus::Cancelled);
        client.cancel_task(task.id()).await.unwrap();
    }
}

/// R45, R46: failed carries the JSON-RPC error; cancelled surfaces as such; isError:true is
/// a completed result, not an error.
#[tokio::test]
async fn failed_cancelled_and_tool_errors_surface_as_such_r45_r46() {
    for transport in BOTH {
        let running = Running::start(transport, server(Duration::from_millis(10))).await;
        let client = running.connect(TaskClient::builder()).await;

        let error = client.call_tool("explode", ()).await.unwrap_err();
        let ClientError::TaskFailed { error, task_id } = error else {
            panic!("{transport:?}: expected TaskFailed, got {error:?}");
        };
        assert!(!task_id.is_empty());
        assert_eq!(error.code, ErrorCode(-32050));
        assert_eq!(error.message, "boom");
        assert_eq!(error.data, Some(json!({ "why": "on purpose" })));

        let mut task = client
            .call("explode", ())
            .await
            .unwrap()
            .into_task()
            .unwrap();
        let TaskEnd::Failed(error) = task.wait().await.unwrap() else {
            panic!("{transport:?}: failed");
        };
        assert_eq!(error.code, ErrorCode(-32050));

        let error = client.call_tool("give_up", ()).await.unwrap_err();
        assert!(
            matches!(error, ClientError::TaskCancelled { .. }),
            "{transport:?}: {error:?}"
        );

        let result = client.call_tool("oops", ()).await.unwrap();
        assert_eq!(result.is_error, Some(true));
        assert_eq!(text(&result), "the tool says no");

        // An unknown task is the server's -32602 (R17), with its message.
        let error = client.task("no-such-task").await.unwrap_err();
        assert_eq!(
            error.rpc_error().map(|e| e.code),
            Some(ErrorCode::INVALID_PARAMS),
            "{transport:?}: {error:?}"
        );
    }
}

/// R19: the first client goes away mid-task; a new client resumes from the serialized
/// reference and follows the task to its end (answering the question the first never saw).
#[tokio::test]
async fn resume_with_a_new_client_after_the_first_is_dropped_r19() {
    for transport in BOTH {
        let running = Running::start(transport, server(Duration::from_millis(150))).await;
        let reference = {
            let first = running.connect(TaskClient::builder()).await;
            let args = json!({ "workspace_id": "acme" }).as_object().cloned();
            let task = first
                .call("workspace_report", args)
                .await
                .unwrap()
                .into_task()
                .unwrap();
            assert_eq!(task.status(), TaskStatus::Working);
            let reference = task.reference().to_json();
            drop(task);
            drop(first);
            reference
        };
        let reference = TaskReference::from_json(&reference).unwrap();
        let seen = Seen::default();
        let second = running.connect(accepting(&seen)).await;
        assert_eq!(&reference.endpoint, second.endpoint(), "{transport:?}");
        let mut task = second.resume(&reference).await.unwrap();
        let TaskEnd::Completed(result) = task.wait().await.unwrap() else {
            panic!("{transport:?}: completed");
        };
        assert_eq!(
            text(&result),
            "Report for acme: 42 accounts (archived included)"
        );
        assert_eq!(seen.lock().unwrap().len(), 1);

        let elsewhere =
            TaskReference::new(Endpoint::http("http://192.0.2.1/mcp"), &reference.task_id);
        assert!(matches!(
            second.resume(&elsewhere).await,
            Err(ClientError::EndpointMismatch { .. })
        ));
    }
}

/// A real child process over stdio: `connect_stdio` runs the example server binary.
#[tokio::test]
async fn child_process_over_stdio() {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-tasks-example-stdio"));
    command.env("MCP_TASKS_EXAMPLE_STEP_MS", "10");
    let seen = Seen::default();
    let client = accepting(&seen).connect_stdio(command).await.unwrap();
    assert!(matches!(client.endpoint(), Endpoint::Stdio { .. }));
    let args = json!({ "workspace_id": "zeta" }).as_object().cloned();
    let result = client.call_tool("workspace_report", args).await.unwrap();
    assert_eq!(
        text(&result),
        "Report for zeta: 42 accounts (archived included)"
    );
    client.close().await;
}

/// No handler: the elicitation is answered `{"action":"cancel"}` (not `decline`, not left
/// hanging); the tool reports the action the server received.
#[tokio::test]
async fn without_a_handler_elicitation_is_cancelled() {
    for transport in BOTH {
        let running = Running::start(transport, server(Duration::from_millis(10))).await;
        let client = running.connect(TaskClient::builder()).await;
        let result = tokio::time::timeout(common::PATIENCE, client.call_tool("what_action", ()))
            .await
            .expect("answered, not left hanging")
            .unwrap();
        assert_eq!(text(&result), "Cancel None", "{transport:?}");
        // The example tool reads the same answer as "not included".
        let args = json!({ "workspace_id": "acme" }).as_object().cloned();
        let result = client.call_tool("workspace_report", args).await.unwrap();
        assert_eq!(text(&result), "Report for acme: 40 accounts");
    }
}

/// A handler that accepts with content that does not fit the form (`ok` is a boolean) is
/// answered `cancel`, as a failing handler is: the server would refuse the answer, and the
/// tool never sees it; one that fits reaches the tool.
#[tokio::test]
async fn an_answer_that_does_not_fit_the_form_is_cancelled() {
    for transport in BOTH {
        let running = Running::start(transport, server(Duration::from_millis(10))).await;
        for (content, seen) in [
            (json!({ "ok": "yes" }), "Cancel None"),
            (json!({}), "Cancel None"),
            (
                json!({ "ok": true }),
                "Accept Some(Object {\"ok\": Bool(true)})",
            ),
        ] {
            let answer = content.clone();
            let builder = TaskClient::builder().with_elicitation(move |_params, _cx| {
                let answer = answer.clone();
                async move {
                    Ok(Some(
                        ElicitResult::new(ElicitationAction::Accept).with_content(answer),
                    ))
                }
            });
            let client = running.connect(builder).await;
            let call = client.call_tool("what_action", ());
            let result = tokio::time::timeout(common::PATIENCE, call)
                .await
                .expect("answered, not left hanging")
                .unwrap();
            assert_eq!(text(&result), seen, "{transport:?} {content}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// What goes on the wire over HTTP

/// C25: `wait` follows a task on a listen stream and closes that stream before it returns:
/// the `notifications/cancelled` for the listen is on the wire ahead of the client's next
/// request (a stream dropped instead would be cancelled in the background, after it).
#[tokio::test]
async fn wait_closes_its_listen_stream_before_it_returns_c25() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    // client <-> [the client's lines recorded, then passed on] <-> serve_io
    let (client_io, server_side) = tokio::io::duplex(1 << 20);
    let (from_client, server_writes) = tokio::io::split(server_side);
    let (mut to_server, server_reads) = tokio::io::duplex(1 << 20);
    let server = TaskServer::new(toolkit![nap].expect("a valid tool"));
    tokio::spawn(mcp_tasks::serve_io(server, server_reads, server_writes));
    let sent: Arc<Mutex<Vec<Value>>> = Arc::default();
    let recorder = sent.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(from_client).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            recorder
                .lock()
                .unwrap()
                .push(serde_json::from_str(&line).unwrap_or_default());
            let passed = to_server.write_all(format!("{line}\n").as_bytes()).await;
            passed.expect("the server reads");
        }
    });
    let client = TaskClient::builder()
        .serve(client_io, "pipe")
        .await
        .unwrap();
    let mut task = client.call("nap", ()).await.unwrap().into_task().unwrap();
    let end = task.wait().await.unwrap();
    assert!(matches!(end, TaskEnd::Completed(_)), "{end:?}");
    client
        .list_tools()
        .await
        .expect("tools/list after the wait");

    let sent = sent.lock().unwrap().clone();
    let position = |wanted: &dyn Fn(&Value) -> bool| sent.iter().position(wanted);
    let listen = position(&|m| m["method"] == "subscriptions/listen").expect("a listen was sent");
    let listen_id = sent[listen]["id"].clone();
    let closed = position(&|m| {
        m["method"] == "notifications/cancelled" && m["params"]["requestId"] == listen_id
    });
    let next = position(&|m| m["method"] == "tools/list").expect("tools/list was sent");
    assert!(
        closed.is_some_and(|closed| closed < next),
        "the listen is cancelled before wait returns: {sent:#?}"
    );
}

/// R1, C6: `_meta` with protocol version, client info and capabilities declaring the
/// extension on tools/call and every tasks/* request; R48, C30-C31: MCP-Protocol-Version,
/// Mcp-Method and Mcp-Name (= the task id on tasks/*); R34: no notifications/cancelled;
/// R30, R32: one tasks/update per snapshot.
#[tokio::test]
async fn meta_and_headers_on_tools_call_and_tasks_requests_r1_r48() {
    type Log = Arc<Mutex<Vec<(axum::http::HeaderMap, Value)>>>;
    let log: Log = Log::default();
    let recorder = log.clone();
    let router = mcp_tasks::http_router(
        server(Duration::from_millis(10)),
        mcp_tasks::HttpOptions::new(),
    )
    .layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let log = recorder.clone();
            async move {
                let (parts, body) = request.into_parts();
                let bytes = axum::body::to_bytes(body, 1 << 20)
                    .await
                    .unwrap_or_default();
                let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                log.lock().unwrap().push((parts.headers.clone(), value));
                next.run(axum::extract::Request::from_parts(
                    parts,
                    axum::body::Body::from(bytes),
                ))
                .await
            }
        },
    ));
    let http = common::Http::start_router(router).await;
    let seen = Seen::default();
    let client = accepting(&seen).connect_http(&http.url).await.unwrap();
    let args = json!({ "workspace_id": "acme" }).as_object().cloned();
    client.call_tool("workspace_report", args).await.unwrap();
    let mut task = client
        .call("sleepy", ())
        .await
        .unwrap()
        .into_task()
        .unwrap();
    task.cancel().await.unwrap();
    assert_eq!(task.wait().await.unwrap(), TaskEnd::Cancelled);

    let log = log.lock().unwrap().clone();
    let mut methods = Vec::new();
    for (headers, body) in &log {
        let method = body["method"].as_str().unwrap_or_default().to_owned();
        assert_ne!(method, "notifications/cancelled", "R34");
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        if method == "tools/call"
            || method.starts_with("tasks/")
            || method == "subscriptions/listen"
        {
            let meta = &body["params"]["_meta"];
            assert_eq!(
                meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
                "{body}"
            );
            assert_eq!(
                meta["io.modelcontextprotocol/clientCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
                json!({}),
                "{body}"
            );
            assert!(meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"].is_object());
            assert_eq!(
                meta["io.modelcontextprotocol/clientInfo"]["name"],
                "mcp-tasks"
            );
            assert_eq!(
                header("mcp-protocol-version").as_deref(),
                Some("2026-07-28")
            );
            assert_eq!(header("mcp-method").as_deref(), Some(method.as_str()));
            let name = if method == "tools/call" {
                &body["params"]["name"]
            } else {
                &body["params"]["taskId"]
            };
            assert_eq!(header("mcp-name").as_deref(), name.as_str(), "{method}");
        }
        methods.push(method);
    }
    let count = |m: &str| methods.iter().filter(|x| *x == m).count();
    assert_eq!(count("tools/call"), 2, "{methods:?}");
    assert_eq!(count("tasks/update"), 1, "{methods:?}");
    assert_eq!(count("tasks/cancel"), 1, "{methods:?}");
    // The client follows the tasks by listening (tests/push.rs), not by polling.
    assert!(count("subscriptions/listen") >= 2, "{methods:?}");
    let update = log
        .iter()
        .map(|(_, b)| b)
        .find(|b| b["method"] == "tasks/update")
        .unwrap();
    assert_eq!(
        update["params"]["inputResponses"]
            .as_object()
            .map(|m| m.len()),
        Some(1)
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
}

// ---------------------------------------------------------------------------------------
// The scripted rmcp server (tests/common/scripted.rs), for MRTR and for exact poll timing

fn naming(name: &'static str) -> TaskClientBuilder {
    TaskClient::builder().with_elicitation(move |_params, cx| {
        assert!(matches!(cx.scope, InputScope::Call { .. }), "{cx:?}");
        async move {
            Ok(Some(
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({ "name": name })),
            ))
        }
    })
}

/// C20: `input_required` on tools/call before any task: the client answers and retries with
/// inputResponses, the echoed requestState, and a new request id.
#[tokio::test]
async fn mrtr_before_the_task_c20() {
    let script = Scripted::default();
    let client = scripted(script.clone(), naming("Ada")).await;
    let result = client.call_tool("mrtr", ()).await.unwrap();
    assert_eq!(text(&result), "Hello, Ada!");
    {
        let script = script.0.lock().unwrap();
        assert_eq!(script.calls.len(), 2);
        let (first_id, first_responses, first_state) = &script.calls[0];
        let (second_id, second_responses, second_state) = &script.calls[1];
        assert_ne!(first_id, second_id, "a new request id for the retry");
        assert_eq!((first_responses, first_state), (&None, &None));
        assert_eq!(second_state.as_deref(), Some("state-1"));
        assert_eq!(
            second_responses.as_ref().unwrap(),
            &json!({ "name": { "action": "accept", "content": { "name": "Ada" } } })
        );
    }

    // An MRTR round may end in a task, which is then followed.
    let result = client.call_tool("mrtr_then_task", ()).await.unwrap();
    assert_eq!(text(&result), "done");

    // A server that keeps asking is stopped after the round limit.
    let limited = scripted(Scripted::default(), naming("Ada").with_max_input_rounds(3)).await;
    let error = limited.call_tool("mrtr_forever", ()).await.unwrap_err();
    assert!(
        matches!(error, ClientError::TooManyInputRounds { rounds: 3, .. }),
        "{error:?}"
    );
}

/// R18: the pause between polls is the latest pollIntervalMs (it changes from snapshot to
/// snapshot), clamped below at the client's minimum. Measured on paused tokio time.
#[tokio::test(start_paused = true)]
async fn poll_interval_is_followed_and_clamped_r18() {
    let script = Scripted::default();
    let client = scripted(script.clone(), TaskClient::builder()).await;
    let start = tokio::time::Instant::now();
    let mut handle = client.call("paced", ()).await.unwrap().into_task().unwrap();
    let created = tokio::time::Instant::now();
    assert_eq!(handle.poll_interval(), Duration::from_millis(1000));
    let TaskEnd::Completed(result) = handle.wait().await.unwrap() else {
        panic!("completed");
    };
    assert_eq!(text(&result), "done");
    let gets = script.0.lock().unwrap().gets.clone();
    assert_eq!(gets.len(), 3);
    let gaps: Vec<Duration> = std::iter::once(gets[0] - created)
        .chain(gets.windows(2).map(|w| w[1] - w[0]))
        .collect();
    // creation said 1000 ms; the first snapshot 3000 ms; the second 5 ms, clamped to 10 ms.
    assert_eq!(
        gaps,
        [
            Duration::from_millis(1000),
            Duration::from_millis(3000),
            Duration::from_millis(10)
        ],
        "(started {:?} before creation)",
        created - start
    );
}

/// `updates()` where the server does not push (the scripted server does not serve
/// `subscriptions/listen`): it falls back to polling at the pace `wait` keeps, and yields
/// the snapshots up to the terminal one.
#[tokio::test(start_paused = true)]
async fn updates_poll_where_the_server_does_not_push() {
    let script = Scripted::default();
    let client = scripted(script.clone(), TaskClient::builder()).await;
    let mut handle = client.call("paced", ()).await.unwrap().into_task().unwrap();
    let created = tokio::time::Instant::now();
    let statuses: Vec<TaskStatus> = handle
        .updates()
        .map(|snapshot| snapshot.expect("a snapshot").status())
        .collect()
        .await;
    assert_eq!(statuses.first(), Some(&TaskStatus::Working), "{statuses:?}");
    assert_eq!(
        statuses.last(),
        Some(&TaskStatus::Completed),
        "{statuses:?}"
    );
    let gets = script.0.lock().unwrap().gets.clone();
    assert_eq!(gets.len(), 3, "polled to the end");
    assert_eq!(
        gets[0] - created,
        Duration::from_millis(1000),
        "the first poll after one interval"
    );
}

/// R30, R32: all answers of one snapshot go in one tasks/update; keys the server keeps
/// showing after the update are not answered again; a failed update leaves the keys
/// unanswered, so the next wait answers them again.
#[tokio::test]
async fn one_update_per_snapshot_and_each_key_answered_once_r32() {
    let script = Scripted::default();
    script.0.lock().unwrap().failing_updates = 1;
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let builder = TaskClient::builder().with_elicitation(move |_params, _cx| {
        counter.fetch_add(1, Ordering::SeqCst);
        async {
            Ok(Some(
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({ "name": "x" })),
            ))
        }
    });
    let client = scripted(script.clone(), builder).await;
    let mut handle = client
        .call("ask_twice", ())
        .await
        .unwrap()
        .into_task()
        .unwrap();
    let bounded = Duration::from_secs(10);
    let error = tokio::time::timeout(bounded, handle.wait())
        .await
        .expect("bounded")
        .unwrap_err();
    assert_eq!(
        error.rpc_error().map(|e| e.message.to_string()).as_deref(),
        Some("store unavailable"),
        "{error:?}"
    );
    assert_eq!(asked.load(Ordering::SeqCst), 2, "both keys asked once");
    let outcome = tokio::time::timeout(bounded, handle.wait()).await;
    let Ok(Ok(TaskEnd::Completed(_))) = outcome else {
        panic!("completed within the bound: {outcome:?}");
    };
    let script = script.0.lock().unwrap();
    assert_eq!(
        asked.load(Ordering::SeqCst),
        4,
        "asked again after the failed update only"
    );
    assert_eq!(
        script.updates.len(),
        1,
        "one accepted update: {:?}",
        script.updates
    );
    let keys: Vec<&String> = script.updates[0].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["q1", "q2"], "both answers in one update");
    let answered_at = script.answered_at.unwrap();
    assert_eq!(
        script.gets.len(),
        answered_at + 4,
        "the keys stayed visible for three polls"
    );
}

/// R5: `resultType: "task"` to anything but tools/call is an invalid response.
#[tokio::test]
async fn a_task_result_for_another_request_is_invalid_r5() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let (read, mut write) = tokio::io::split(server_io);
        let mut lines = BufReader::new(read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let request: Value = serde_json::from_str(&line).unwrap();
            let Some(id) = request.get("id").cloned() else {
                continue;
            };
            let result = match request["method"].as_str() {
                Some("server/discover") => json!({
                    "resultType": "complete", "supportedVersions": ["2026-07-28"],
                    "capabilities": { "tools": {}, "extensions": { "io.modelcontextprotocol/tasks": {} } },
                    "ttlMs": 0, "cacheScope": "private"
                }),
                _ => json!({
                    "resultType": "task", "taskId": "t", "status": "working",
                    "createdAt": "2026-11-29T00:00:00Z", "lastUpdatedAt": "2026-11-29T00:00:00Z",
                    "ttlMs": null
                }),
            };
            let mut out = json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string();
            out.push('\n');
            write.write_all(out.as_bytes()).await.unwrap();
        }
    });
    let client = TaskClient::builder()
        .serve(client_io, "fake")
        .await
        .unwrap();
    let error = client.list_tools().await.unwrap_err();
    let ClientError::InvalidResponse { method, reason } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(*method, "tools/list");
    // R5, in words a user can act on.
    assert!(
        reason.contains("only tools/call can start a task"),
        "{reason}"
    );
}

/// Sampling without a handler: the client does not declare `sampling`, so our server never
/// asks and the task fails -32021 naming it (C18); with a handler it is declared, asked and
/// answered. Against a server that asks anyway (the scripted one), a sampling or roots
/// request without a handler is `ClientError::NoHandler` at once: an error, never a hang.
#[tokio::test]
#[allow(
    deprecated,
    reason = "sampling and roots are still part of the 2026-07-28 wire"
)]
async fn sampling_and_roots_without_a_handler_are_errors() {
    for transport in BOTH {
        let running = Running::start(transport, server(Duration::from_millis(10))).await;
        let client = running.connect(TaskClient::builder()).await;
        let error = tokio::time::timeout(common::PATIENCE, client.call_tool("ask_model", ()))
            .await
            .expect("an answer, not a hang")
            .unwrap_err();
        let ClientError::TaskFailed { error, .. } = &error else {
            panic!("{transport:?}: expected TaskFailed, got {error:?}");
        };
        assert_eq!(error.code, ErrorCode(-32021), "{transport:?}: {error:?}");
        assert_eq!(
            error.data,
            Some(json!({ "requiredCapabilities": { "sampling": {} } }))
        );

        let sampled = Arc::new(AtomicUsize::new(0));
        let count = sampled.clone();
        let builder = TaskClient::builder().with_sampling(move |params, _cx| {
            count.fetch_add(1, Ordering::SeqCst);
            let asked = serde_json::to_value(&params.messages).unwrap_or_default();
            async move {
                assert_eq!(asked[0]["content"]["text"], "6 x 7?");
                let reply = serde_json::from_value::<rmcp::model::CreateMessageResult>(json!({
                    "role": "assistant", "model": "tiny",
                    "content": { "type": "text", "text": "42" }
                }))?;
                Ok(Some(reply))
            }
        });
        let client = running.connect(builder).await;
        let result = client.call_tool("ask_model", ()).await.unwrap();
        assert_eq!(text(&result), "tiny said 42", "{transport:?}");
        assert_eq!(sampled.load(Ordering::SeqCst), 1);
    }

    for (tool, method) in [
        ("ask_sampling", "sampling/createMessage"),
        ("ask_roots", "roots/list"),
    ] {
        let script = Scripted::default();
        let client = scripted(script.clone(), TaskClient::builder()).await;
        let error = tokio::time::timeout(common::PATIENCE, client.call_tool(tool, ()))
            .await
            .expect("an answer, not a hang")
            .unwrap_err();
        assert!(
            matches!(&error, ClientError::NoHandler { key, method: m } if key == "q" && *m == method),
            "{tool}: {error:?}"
        );
        assert!(
            script.0.lock().unwrap().updates.is_empty(),
            "nothing answered"
        );
    }
}
