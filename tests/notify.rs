//! Progress (`TaskContext::progress`) and log messages (`TaskContext::log`) over Streamable
//! HTTP on 127.0.0.1:0 and stdio framing: sent for the `tools/call` request while it is open
//! (docs/protocol.md C29: over HTTP the answer becomes SSE, the notifications first, the
//! result last), progress only for a request with a `progressToken` and only increasing, log
//! messages only at or above the request's `logLevel` and none without one (§5.2), and
//! neither once the call is a task (R42).

#![allow(
    deprecated,
    reason = "logging is deprecated by SEP-2577 yet still on the 2026-07-28 wire"
)]

mod common;

use std::time::Duration;

use common::*;
use mcp_tasks::{TaskContext, TaskServer, ToolError, task_tool, toolkit};
use rmcp::model::LoggingLevel;
use serde_json::{Value, json};

/// Reports `steps` steps of progress, out of `steps`.
#[task_tool(mode = "inline")]
async fn counting(ctx: TaskContext, steps: u32) -> Result<String, ToolError> {
    for step in 1..=steps {
        let message = format!("step {step}");
        ctx.progress(f64::from(step), Some(f64::from(steps)), Some(&message))
            .await?;
    }
    Ok(format!("{steps} steps"))
}

/// Reports progress that does not increase, and values JSON cannot carry.
#[task_tool(mode = "inline")]
async fn backwards(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.progress(2.0, None, None).await?;
    let refused = [
        ctx.progress(1.0, None, None).await,
        ctx.progress(2.0, None, None).await,
        ctx.progress(f64::NAN, None, None).await,
        ctx.progress(3.0, Some(f64::INFINITY), None).await,
    ];
    ctx.progress(2.5, Some(10.0), None).await?;
    let texts: Vec<String> = refused
        .iter()
        .map(|r| {
            r.as_ref()
                .map_or_else(ToString::to_string, |()| "sent".to_owned())
        })
        .collect();
    Ok(texts.join(" | "))
}

/// Reports a decreasing value with `?`.
#[task_tool(mode = "inline")]
async fn backwards_question_mark(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.progress(5.0, None, None).await?;
    ctx.progress(4.0, None, None).await?;
    Ok("unreachable".to_owned())
}

/// Logs at four levels, one with a logger name.
#[task_tool(mode = "inline")]
async fn logs(ctx: TaskContext) -> String {
    ctx.log(LoggingLevel::Debug, "d").await;
    ctx.log(LoggingLevel::Info, "i").await;
    ctx.log_as("db", LoggingLevel::Warning, json!({ "w": 1 }))
        .await;
    ctx.log(LoggingLevel::Error, "e").await;
    "logged".to_owned()
}

/// Becomes a task (it waits first), then reports progress and logs, which go nowhere, and
/// waits for a go-ahead (so the test can read the status message while it runs).
#[task_tool(mode = "required", poll_interval = "20ms")]
async fn task_reports(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.status("started").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    for step in 1..=3 {
        ctx.progress(f64::from(step), Some(3.0), Some("as a task"))
            .await?;
        ctx.log(LoggingLevel::Emergency, "as a task").await;
    }
    let schema = rmcp::model::ElicitationSchema::builder()
        .required_bool("go")
        .build()
        .map_err(|e| ToolError::new(e.to_string()))?;
    ctx.keyed("go").elicit_form("Go on?", schema).await?;
    Ok("reported".to_owned())
}

fn server() -> TaskServer {
    TaskServer::new(
        toolkit![
            counting,
            backwards,
            backwards_question_mark,
            logs,
            task_reports
        ]
        .unwrap(),
    )
}

/// Modern `_meta` with `caps` plus `extra` keys.
fn meta_with(caps: Caps, extra: Value) -> Value {
    let mut meta = meta(caps);
    for (key, value) in extra.as_object().unwrap() {
        meta[key] = value.clone();
    }
    meta
}

/// Posts `tools/call` of `tool` with `_meta` and returns the response's content type and
/// every JSON-RPC message of its body, in order (one for a JSON body; the SSE events).
async fn call_http(http: &Http, tool: &str, arguments: Value, meta: Value) -> (String, Vec<Value>) {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": tool, "arguments": arguments, "_meta": meta },
    });
    let response = http
        .client
        .post(&http.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", V2026)
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    let text = response.text().await.unwrap();
    let messages = match serde_json::from_str::<Value>(&text) {
        Ok(one) => vec![one],
        Err(_) => text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .collect(),
    };
    (content_type, messages)
}

/// Sends `tools/call` on stdio and returns the response and the messages before it.
async fn call_stdio(
    stdio: &mut Stdio,
    tool: &str,
    arguments: Value,
    meta: Value,
) -> (Value, Vec<Value>) {
    let id = stdio.next_id();
    // Keep the harness's ids in step: `send_rpc` would add its own `_meta`.
    stdio
        .request_noting(json!({
            "jsonrpc": "2.0", "id": format!("call-{id}"), "method": "tools/call",
            "params": { "name": tool, "arguments": arguments, "_meta": meta },
        }))
        .await
}

fn with_method<'a>(messages: &'a [Value], method: &str) -> Vec<&'a Value> {
    messages.iter().filter(|m| m["method"] == method).collect()
}

/// C29, §5.2: with a `progressToken`, each report is a `notifications/progress` for that
/// token before the result (over HTTP as SSE); without one, nothing but the result (a JSON
/// body on HTTP).
#[tokio::test]
async fn progress_for_the_requests_token() {
    let http = Http::start(server()).await;
    let token = json!({ "progressToken": "p-1" });
    let (content_type, messages) = call_http(
        &http,
        "counting",
        json!({ "steps": 3 }),
        meta_with(PLAIN, token),
    )
    .await;
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    assert_eq!(messages.len(), 4, "{messages:?}");
    for (i, message) in messages[..3].iter().enumerate() {
        let step = i as f64 + 1.0;
        assert_eq!(message["method"], "notifications/progress", "{message}");
        assert_eq!(
            message["params"],
            json!({ "progressToken": "p-1", "progress": step, "total": 3.0, "message": format!("step {}", i + 1) })
        );
    }
    assert_eq!(first_text(&messages[3]["result"]), "3 steps");

    let (content_type, messages) =
        call_http(&http, "counting", json!({ "steps": 3 }), meta(PLAIN)).await;
    assert_eq!(content_type, "application/json");
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(first_text(&messages[0]["result"]), "3 steps");

    let mut stdio = Stdio::start(server());
    let (response, before) = call_stdio(
        &mut stdio,
        "counting",
        json!({ "steps": 2 }),
        meta_with(PLAIN, json!({ "progressToken": 7 })),
    )
    .await;
    assert_eq!(first_text(&response["result"]), "2 steps");
    let progress = with_method(&before, "notifications/progress");
    assert_eq!(progress.len(), 2, "{before:?}");
    assert_eq!(progress[0]["params"]["progressToken"], 7);
    assert_eq!(progress[1]["params"]["progress"], 2.0);
    let (response, before) =
        call_stdio(&mut stdio, "counting", json!({ "steps": 2 }), meta(PLAIN)).await;
    assert_eq!(first_text(&response["result"]), "2 steps");
    assert!(before.is_empty(), "{before:?}");
}

/// Progress must increase: a lower or equal value, NaN or an infinite total is refused with
/// an error that says why, and is not sent; `?` on a refusal fails the call with -32603.
#[tokio::test]
async fn progress_only_increases() {
    let http = Http::start(server()).await;
    let (_, messages) = call_http(
        &http,
        "backwards",
        json!({}),
        meta_with(PLAIN, json!({ "progressToken": "b" })),
    )
    .await;
    let sent: Vec<&Value> = with_method(&messages, "notifications/progress")
        .into_iter()
        .map(|m| &m["params"]["progress"])
        .collect();
    assert_eq!(sent, [&json!(2.0), &json!(2.5)], "{messages:?}");
    let result = &messages.last().unwrap()["result"];
    assert_eq!(
        first_text(result),
        "progress 1 does not increase on the last report (2): each report must be greater than the one before \
         | progress 2 does not increase on the last report (2): each report must be greater than the one before \
         | progress values must be finite numbers, not NaN \
         | progress values must be finite numbers, not inf",
        "{result}"
    );

    let (_, messages) = call_http(
        &http,
        "backwards_question_mark",
        json!({}),
        meta_with(PLAIN, json!({ "progressToken": "q" })),
    )
    .await;
    let error = &messages.last().unwrap()["error"];
    assert_eq!(error["code"], -32603, "{messages:?}");
    assert_eq!(
        error["message"],
        "progress refused: progress 4 does not increase on the last report (5): each report must be greater than the one before"
    );
}

/// §5.2: log messages at or above the request's `logLevel` arrive, in order, before the
/// result; less severe ones do not; without `logLevel` none does (HTTP: a JSON body).
#[tokio::test]
async fn log_messages_honour_the_log_level() {
    let http = Http::start(server()).await;
    let level = json!({ "io.modelcontextprotocol/logLevel": "warning" });
    let (content_type, messages) =
        call_http(&http, "logs", json!({}), meta_with(PLAIN, level)).await;
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let logged: Vec<&Value> = with_method(&messages, "notifications/message")
        .into_iter()
        .map(|m| &m["params"])
        .collect();
    assert_eq!(
        logged,
        [
            &json!({ "level": "warning", "logger": "db", "data": { "w": 1 } }),
            &json!({ "level": "error", "data": "e" }),
        ],
        "{messages:?}"
    );
    assert_eq!(first_text(&messages.last().unwrap()["result"]), "logged");

    let (content_type, messages) = call_http(&http, "logs", json!({}), meta(PLAIN)).await;
    assert_eq!(content_type, "application/json");
    assert_eq!(messages.len(), 1, "{messages:?}");

    let mut stdio = Stdio::start(server());
    let level = json!({ "io.modelcontextprotocol/logLevel": "debug" });
    let (response, before) =
        call_stdio(&mut stdio, "logs", json!({}), meta_with(PLAIN, level)).await;
    assert_eq!(first_text(&response["result"]), "logged");
    let levels: Vec<&Value> = with_method(&before, "notifications/message")
        .into_iter()
        .map(|m| &m["params"]["level"])
        .collect();
    assert_eq!(levels, ["debug", "info", "warning", "error"], "{before:?}");
    let (_, before) = call_stdio(&mut stdio, "logs", json!({}), meta(PLAIN)).await;
    assert!(before.is_empty(), "{before:?}");
}

/// R42: once the call is a task (its request answered with the task), progress and log
/// messages are not sent, even with a `progressToken` and a `logLevel`, and the task's
/// `statusMessage` stays what the tool set. On stdio anything sent later would arrive
/// between the answers to `tasks/get`.
#[tokio::test]
async fn nothing_once_the_call_is_a_task() {
    let extra = json!({
        "progressToken": "t",
        "io.modelcontextprotocol/logLevel": "debug",
    });
    let mut stdio = Stdio::start(server());
    let (created, mut seen) = call_stdio(
        &mut stdio,
        "task_reports",
        json!({}),
        meta_with(TASKS, extra.clone()),
    )
    .await;
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let mut polls = 0;
    let mut poll = async |stdio: &mut Stdio, seen: &mut Vec<Value>, status: &str| {
        let patience = Patience::new(format!("the task to be {status}"));
        loop {
            polls += 1;
            let (got, before) = stdio
                .request_noting(json!({
                    "jsonrpc": "2.0", "id": format!("get-{polls}"), "method": "tasks/get",
                    "params": { "taskId": id, "_meta": meta(TASKS) },
                }))
                .await;
            seen.extend(before);
            if got["result"]["status"] == status {
                return got["result"].clone();
            }
            patience.wait().await;
        }
    };
    // The reports are behind it: the status message is still the tool's own.
    let waiting = poll(&mut stdio, &mut seen, "input_required").await;
    assert_eq!(waiting["statusMessage"], "started", "{waiting}");
    let (_, before) = stdio
        .request_noting(json!({
            "jsonrpc": "2.0", "id": "go", "method": "tasks/update",
            "params": { "taskId": id, "inputResponses": { "go": { "action": "accept", "content": { "go": true } } }, "_meta": meta(TASKS) },
        }))
        .await;
    seen.extend(before);
    let done = poll(&mut stdio, &mut seen, "completed").await;
    assert_eq!(first_text(&done["result"]), "reported", "{done}");
    // Round trips after the end, for anything still queued to come out.
    for n in 0..3 {
        let (_, before) = stdio
            .request_noting(json!({
                "jsonrpc": "2.0", "id": format!("after-{n}"), "method": "tasks/get",
                "params": { "taskId": id, "_meta": meta(TASKS) },
            }))
            .await;
        seen.extend(before);
    }
    assert!(seen.is_empty(), "{seen:?}");

    // HTTP: the answer is the task, as one JSON body.
    let http = Http::start(server()).await;
    let (content_type, messages) =
        call_http(&http, "task_reports", json!({}), meta_with(TASKS, extra)).await;
    assert_eq!(content_type, "application/json");
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["result"]["resultType"], "task");
}
