//! Input requests under keys the tool chooses (`TaskContext::keyed`), over Streamable HTTP on
//! 127.0.0.1:0 and stdio framing: the key is the one on the wire, by multi round-trip request
//! (docs/protocol.md §5.4) and through a task (R14, R15); a key names one request for the
//! whole life of a task (R28), so a reused key, a generated key's form and a malformed key
//! fail the call with an error that names the key. The replay of keyed questions after a
//! restart is in `tests/durable.rs`.

#![allow(
    deprecated,
    reason = "sampling and roots are still part of the 2026-07-28 wire"
)]

mod common;

use common::*;
use mcp_tasks::{TaskContext, TaskServer, ToolError, task_tool, toolkit};
use rmcp::model::{CreateMessageRequestParams, ElicitationSchema, SamplingMessage};
use serde_json::{Value, json};

fn name_schema() -> ElicitationSchema {
    ElicitationSchema::builder()
        .required_string("name")
        .build()
        .expect("schema")
}

fn name_of(answer: &rmcp::model::ElicitResult) -> String {
    answer
        .content
        .as_ref()
        .and_then(|c| c["name"].as_str())
        .unwrap_or("?")
        .to_owned()
}

/// Asks by multi round-trip request (or through the task) under `user_name`.
#[task_tool]
async fn keyed_hello(ctx: TaskContext) -> Result<String, ToolError> {
    let answer = ctx
        .keyed("user_name")
        .elicit_form("Your name?", name_schema())
        .await?;
    Ok(format!("Hello, {}!", name_of(&answer)))
}

/// A keyed question beside a generated one, and a keyed sampling request.
#[task_tool(mode = "required", poll_interval = "20ms")]
async fn keyed_mix(ctx: TaskContext) -> Result<String, ToolError> {
    let params = CreateMessageRequestParams::new(vec![SamplingMessage::user_text("Hi")], 10);
    let (named, generated, sampled) = tokio::try_join!(
        ctx.keyed("who").elicit_form("Who?", name_schema()),
        ctx.elicit_form("And you?", name_schema()),
        ctx.keyed("model.greeting").sample(params),
    )?;
    let text = sampled
        .message
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default();
    Ok(format!(
        "{} and {}: {text}",
        name_of(&named),
        name_of(&generated)
    ))
}

/// Asks twice under one key: the second request is refused.
#[task_tool(mode = "required", poll_interval = "20ms")]
async fn key_twice(ctx: TaskContext) -> Result<String, ToolError> {
    let first = ctx
        .keyed("same")
        .elicit_form("First?", name_schema())
        .await?;
    let second = ctx
        .keyed("same")
        .elicit_form("Second?", name_schema())
        .await?;
    Ok(format!("{} {}", name_of(&first), name_of(&second)))
}

/// Asks under the key `key` (an argument, to try bad ones).
#[task_tool(mode = "inline")]
async fn key_given(ctx: TaskContext, key: String) -> Result<String, ToolError> {
    let answer = ctx.keyed(key).elicit_form("?", name_schema()).await?;
    Ok(name_of(&answer))
}

fn server() -> TaskServer {
    TaskServer::new(toolkit![keyed_hello, keyed_mix, key_twice, key_given].unwrap())
}

fn declaring_sampling() -> Value {
    meta_declaring(json!({
        "elicitation": { "form": {} },
        "sampling": {},
        "extensions": { "io.modelcontextprotocol/tasks": {} },
    }))
}

fn keys(object: &Value) -> Vec<String> {
    let mut keys: Vec<String> = object["inputRequests"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    keys.sort();
    keys
}

fn accept(name: &str) -> Value {
    json!({ "action": "accept", "content": { "name": name } })
}

/// §5.4: by multi round-trip request the chosen key is the key of `inputRequests`, and the
/// retry's answer under it completes the call.
#[tokio::test]
async fn chosen_key_by_round_trip() {
    for mut peer in both(server).await {
        let first = peer.call("keyed_hello", json!({}), PLAIN).await;
        let result = &first["result"];
        assert_eq!(result["resultType"], "input_required", "{first}");
        assert_eq!(keys(result), ["user_name"], "{first}");
        assert_eq!(
            result["inputRequests"]["user_name"]["method"],
            "elicitation/create"
        );
        let retry = peer
            .rpc(
                "tools/call",
                json!({
                    "name": "keyed_hello",
                    "arguments": {},
                    "inputResponses": { "user_name": accept("Ada") },
                    "requestState": result["requestState"],
                }),
                PLAIN,
            )
            .await;
        assert_eq!(first_text(&retry["result"]), "Hello, Ada!", "{retry}");
    }
}

/// R14, R15, R28: through a task, chosen keys (elicitation and sampling) stand beside a
/// generated one, each under its own key, and answers under them complete the task.
#[tokio::test]
async fn chosen_keys_through_a_task() {
    for mut peer in both(server).await {
        let created = peer
            .rpc_meta(
                "tools/call",
                json!({ "name": "keyed_mix", "arguments": {} }),
                declaring_sampling(),
            )
            .await;
        let id = created["result"]["taskId"].as_str().unwrap().to_owned();
        let snapshot = peer
            .wait_for(&id, "three input requests", |task| {
                task["inputRequests"]
                    .as_object()
                    .is_some_and(|m| m.len() == 3)
            })
            .await;
        assert_eq!(
            keys(&snapshot),
            ["elicit-1", "model.greeting", "who"],
            "{snapshot}"
        );
        assert_eq!(
            snapshot["inputRequests"]["model.greeting"]["method"],
            "sampling/createMessage"
        );
        assert_eq!(
            snapshot["inputRequests"]["who"]["params"]["message"],
            "Who?"
        );
        let ack = peer
            .rpc(
                "tasks/update",
                json!({ "taskId": id, "inputResponses": {
                    "who": accept("Ada"),
                    "elicit-1": accept("Grace"),
                    "model.greeting": {
                        "role": "assistant", "model": "m",
                        "content": { "type": "text", "text": "hello" }
                    },
                } }),
                TASKS,
            )
            .await;
        assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
        let done = peer.wait_terminal(&id).await;
        assert_eq!(
            first_text(&done["result"]),
            "Ada and Grace: hello",
            "{done}"
        );
    }
}

/// R28: a second request under a key the call used fails the task with an error naming the
/// key; the first request is not replaced.
#[tokio::test]
async fn reused_key_fails_naming_it() {
    for mut peer in both(server).await {
        let id = peer.call("key_twice", json!({}), TASKS).await["result"]["taskId"]
            .as_str()
            .unwrap()
            .to_owned();
        let asked = peer.wait_status(&id, "input_required").await;
        assert_eq!(keys(&asked), ["same"]);
        assert_eq!(
            asked["inputRequests"]["same"]["params"]["message"],
            "First?"
        );
        peer.rpc(
            "tasks/update",
            json!({ "taskId": id, "inputResponses": { "same": accept("Ada") } }),
            TASKS,
        )
        .await;
        let done = peer.wait_terminal(&id).await;
        assert_eq!(done["status"], "failed", "{done}");
        assert_eq!(done["error"]["code"], -32603, "{done}");
        let message = done["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("input key \"same\" was already used by this call"),
            "{message}"
        );
    }
}

/// A malformed key, or one of the generated form, fails the call at once with an error that
/// names the key and says why; nothing is asked.
#[tokio::test]
async fn invalid_keys_are_refused() {
    let long = "k".repeat(65);
    let cases = [
        ("", "it is empty"),
        ("user name", "it contains ' '"),
        ("naïve", "it contains 'ï'"),
        (long.as_str(), "it is 65 bytes long, more than 64"),
        ("elicit-1", "it has the form of a generated key"),
        ("roots-12", "it has the form of a generated key"),
    ];
    for mut peer in both(server).await {
        for (key, why) in &cases {
            let response = peer.call("key_given", json!({ "key": key }), PLAIN).await;
            let error = &response["error"];
            assert_eq!(error["code"], -32603, "{key:?}: {response}");
            let message = error["message"].as_str().unwrap();
            assert!(
                message.starts_with(&format!("input key {key:?} is not a valid key: {why}")),
                "{key:?}: {message}"
            );
        }
        // The accepted charset, at the longest length.
        let ok = format!("Ab9_-.{}", "x".repeat(58));
        let response = peer.call("key_given", json!({ "key": ok }), PLAIN).await;
        assert_eq!(keys(&response["result"]), [ok], "{response}");
        // `elicit-` without digits, or with letters after them, is not a generated form.
        for key in ["elicit-", "elicit-1a", "sample", "roots-x"] {
            let response = peer.call("key_given", json!({ "key": key }), PLAIN).await;
            assert_eq!(keys(&response["result"]), [key], "{response}");
        }
    }
}
