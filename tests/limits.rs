//! Task-level limits over real HTTP: live tasks per owner, outstanding input requests per
//! task, `statusMessage` length (docs/protocol.md R22: informative errors).

mod common;

use std::time::Duration;

use common::{Http, Peer, TASKS, first_input_key};
use mcp_tasks::{Limits, TaskContext, TaskServer, ToolError, task_tool, toolkit};
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

/// Sets a long status once its task exists, then waits until cancelled.
#[task_tool(mode = "required", poll_interval = "100ms")]
async fn chatty(ctx: TaskContext, chars: usize) -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_millis(20)).await; // the task exists after this wait
    ctx.status("é".repeat(chars)).await;
    ctx.cancelled().await;
    Err(ToolError::cancelled())
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
