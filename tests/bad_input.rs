//! Every malformed request gets the right answer (issue 12, item 1; docs/protocol.md R17, §2.8, C7, C8):
//! malformed params of `tools/call` and `tasks/*` answer `-32602` naming the field (`-32021`
//! first for a `tasks/*` request that does not declare the extension), unparseable bodies
//! `-32700`, oversized requests `-32600`; over Streamable HTTP on 127.0.0.1:0 (with the HTTP
//! status) and over stdio framing (an in-process pipe through `serve_io`, and the example
//! server as a child process), where each bad line gets one error line and the stream goes
//! on. No rejected request reaches a tool.

mod common;

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use common::{Http, PLAIN, Stdio, TASKS, meta};
use mcp_tasks::{Limits, State, TaskServer, task_tool, toolkit};
use serde_json::{Value, json};

/// Counts the starts of `count`'s work.
#[derive(Clone, Default)]
struct Runs(Arc<AtomicUsize>);

/// Counts its runs and answers `n + 1`.
#[task_tool]
async fn count(State(runs): State<Runs>, n: u32) -> u32 {
    runs.0.fetch_add(1, Ordering::SeqCst);
    n + 1
}

fn server(runs: &Runs, limits: Limits) -> TaskServer {
    TaskServer::from_engine(
        mcp_tasks::Engine::builder(toolkit![count].unwrap().with_state(runs.clone()))
            .with_limits(limits)
            .build(),
    )
}

/// One malformed request, what it must answer and the text the message must contain.
struct Case {
    what: &'static str,
    method: &'static str,
    params: Value,
    code: i64,
    names: &'static str,
}

fn declaring(mut params: Value) -> Value {
    params["_meta"] = meta(TASKS);
    params
}

fn cases() -> Vec<Case> {
    let case = |what, method, params, code, names| Case {
        what,
        method,
        params,
        code,
        names,
    };
    let mut cases = vec![
        case(
            "arguments as a JSON string",
            "tools/call",
            declaring(json!({ "name": "count", "arguments": "{\"n\": 1}" })),
            -32602,
            "tools/call: params.arguments must be an object",
        ),
        case(
            "arguments as an array",
            "tools/call",
            declaring(json!({ "name": "count", "arguments": [1] })),
            -32602,
            "tools/call: params.arguments must be an object",
        ),
        case(
            "tools/call without name",
            "tools/call",
            declaring(json!({ "arguments": { "n": 1 } })),
            -32602,
            "tools/call: params.name is required",
        ),
        case(
            "tools/call with a number as name",
            "tools/call",
            declaring(json!({ "name": 7, "arguments": { "n": 1 } })),
            -32602,
            "tools/call: params.name must be a string",
        ),
        case(
            "tasks/update without inputResponses",
            "tasks/update",
            declaring(json!({ "taskId": "t" })),
            -32602,
            "tasks/update: params.inputResponses is required",
        ),
        case(
            "tasks/update with an array as inputResponses",
            "tasks/update",
            declaring(json!({ "taskId": "t", "inputResponses": [] })),
            -32602,
            "tasks/update: params.inputResponses must be an object",
        ),
        case(
            "tasks/get malformed, not declaring the extension",
            "tasks/get",
            json!({ "taskId": 5, "_meta": meta(PLAIN) }),
            -32021,
            "",
        ),
        case(
            "tasks/update malformed, not declaring the extension",
            "tasks/update",
            json!({ "taskId": "t", "_meta": meta(PLAIN) }),
            -32021,
            "",
        ),
    ];
    for method in ["tasks/get", "tasks/cancel"] {
        let names_missing = if method == "tasks/get" {
            "tasks/get: params.taskId is required"
        } else {
            "tasks/cancel: params.taskId is required"
        };
        let names_type = if method == "tasks/get" {
            "tasks/get: params.taskId must be a string"
        } else {
            "tasks/cancel: params.taskId must be a string"
        };
        cases.push(case(
            "taskId missing",
            method,
            declaring(json!({})),
            -32602,
            names_missing,
        ));
        cases.push(case(
            "taskId a number",
            method,
            declaring(json!({ "taskId": 42 })),
            -32602,
            names_type,
        ));
        cases.push(case(
            "taskId null",
            method,
            declaring(json!({ "taskId": null })),
            -32602,
            names_type,
        ));
    }
    cases
}

fn request(id: u64, case: &Case) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": case.method, "params": case.params })
}

fn check_error(response: &Value, id: Option<u64>, code: i64, names: &str, what: &str) {
    assert_eq!(response["jsonrpc"], "2.0", "{what}: {response}");
    assert_eq!(response["error"]["code"], code, "{what}: {response}");
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(names),
        "{what}: message {message:?} does not name {names:?}"
    );
    match id {
        Some(id) => assert_eq!(response["id"], id, "{what}: {response}"),
        None => assert!(
            response.get("id").is_none_or(Value::is_null),
            "{what}: {response}"
        ),
    }
}

/// Posts raw bytes as a JSON-RPC body; returns the status and the parsed JSON body.
async fn post_raw(http: &Http, body: Vec<u8>, method: &str) -> (u16, Value) {
    let response = http
        .client
        .post(&http.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", common::V2026)
        .header("mcp-method", method)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the answer is not one JSON body ({e}): {text:?}"));
    (status, body)
}

fn deep_json() -> Vec<u8> {
    let depth = 200;
    let mut text = String::from(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count","arguments":{"n":"#,
    );
    text.push_str(&"[".repeat(depth));
    text.push_str(&"]".repeat(depth));
    text.push_str("}}}");
    text.into_bytes()
}

/// The unparseable bodies, each with the text its message must contain.
fn unparseable() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    vec![
        ("not JSON", b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\":".to_vec(), "not valid JSON"),
        ("plain text", b"hello".to_vec(), "not valid JSON"),
        (
            "not UTF-8",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"x\":\"\xff\xfe\"}}"
                .to_vec(),
            "not valid UTF-8",
        ),
        ("nested too deep", deep_json(), "nests deeper than 128"),
    ]
}

#[tokio::test]
async fn http_malformed_params_answer_32602_naming_the_field() {
    let runs = Runs::default();
    let http = Http::start(server(&runs, Limits::default())).await;
    for (i, case) in cases().iter().enumerate() {
        let id = 100 + i as u64;
        let (status, body) = post_raw(
            &http,
            request(id, case).to_string().into_bytes(),
            case.method,
        )
        .await;
        assert_eq!(status, 400, "{}: HTTP status ({body})", case.what);
        check_error(&body, Some(id), case.code, case.names, case.what);
    }
    // A well-formed call still works, and no rejected request ran the tool.
    let mut http = http;
    let (status, ok) = http
        .rpc(
            "tools/call",
            json!({ "name": "count", "arguments": { "n": 1 } }),
            PLAIN,
        )
        .await;
    assert_eq!(status, 200, "{ok}");
    assert_eq!(ok["result"]["structuredContent"]["result"], 2, "{ok}");
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
}

/// A malformed idempotency key answers `-32602` saying what a key must be, and runs nothing:
/// a control character among them (a NUL would fail the create on Postgres instead).
#[tokio::test]
async fn http_malformed_idempotency_keys_answer_32602() {
    let runs = Runs::default();
    let mut http = Http::start(server(&runs, Limits::default())).await;
    for (what, key) in [
        ("an empty key", json!("")),
        ("a key of 201 characters", json!("k".repeat(201))),
        ("a key with a NUL character", json!("charge\u{0}1")),
        ("a key with a line feed", json!("charge\n1")),
        ("a key as a number", json!(7)),
    ] {
        let mut with_key = meta(TASKS);
        with_key["mcp-tasks/idempotencyKey"] = key;
        let params = json!({ "name": "count", "arguments": { "n": 1 } });
        let (_, body) = http.rpc_meta("tools/call", params, with_key).await;
        assert_eq!(body["error"]["code"], -32602, "{what}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("at most 200 characters, none of them a control character"),
            "{what}: {message}"
        );
    }
    let mut with_key = meta(TASKS);
    with_key["mcp-tasks/idempotencyKey"] = json!("charge-1 (a retry, 2nd)");
    let params = json!({ "name": "count", "arguments": { "n": 1 } });
    let (_, ok) = http.rpc_meta("tools/call", params, with_key).await;
    assert!(ok.get("result").is_some(), "a well-formed key: {ok}");
    assert_eq!(
        runs.0.load(Ordering::SeqCst),
        1,
        "only the well-formed call ran"
    );
}

#[tokio::test]
async fn http_unparseable_bodies_answer_400_with_32700() {
    let runs = Runs::default();
    let mut http = Http::start(server(&runs, Limits::default())).await;
    for (what, body, names) in unparseable() {
        let (status, answer) = post_raw(&http, body, "tools/call").await;
        assert_eq!(status, 400, "{what}: {answer}");
        check_error(&answer, None, -32700, names, what);
    }
    let (status, answer) = post_raw(&http, b"[1, 2]".to_vec(), "tools/call").await;
    assert_eq!(status, 400, "{answer}");
    check_error(
        &answer,
        None,
        -32600,
        "one JSON-RPC message object",
        "a JSON array",
    );
    let (status, ok) = http.rpc("tools/list", json!({}), PLAIN).await;
    assert_eq!(status, 200, "{ok}");
    assert_eq!(ok["result"]["tools"][0]["name"], "count");
    assert_eq!(runs.0.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn http_size_limits() {
    let runs = Runs::default();
    let limits = Limits::default()
        .with_max_request_bytes(4096)
        .with_max_arguments_bytes(512);
    let mut http = Http::start(server(&runs, limits)).await;
    let big = "x".repeat(5000);
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "count", "arguments": { "n": 1, "pad": big }, "_meta": meta(TASKS) } });
    let (status, answer) = post_raw(&http, body.to_string().into_bytes(), "tools/call").await;
    assert_eq!(status, 413, "{answer}");
    check_error(
        &answer,
        None,
        -32600,
        "larger than the limit of 4096 bytes",
        "request too large",
    );
    let pad = "x".repeat(600);
    let body = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "count", "arguments": { "n": 1, "pad": pad }, "_meta": meta(TASKS) } });
    let (status, answer) = post_raw(&http, body.to_string().into_bytes(), "tools/call").await;
    assert_eq!(status, 400, "{answer}");
    check_error(
        &answer,
        Some(2),
        -32602,
        "params.arguments is 616 bytes, more than the limit of 512",
        "arguments too large",
    );
    let (_, ok) = http
        .rpc(
            "tools/call",
            json!({ "name": "count", "arguments": { "n": 1 } }),
            PLAIN,
        )
        .await;
    assert_eq!(ok["result"]["structuredContent"]["result"], 2, "{ok}");
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
}

/// Every malformed request and unparseable line over one stdio stream: one error line each,
/// and the stream keeps going.
async fn stdio_rejects_every_bad_line(lines: &mut Stdio, tool_args: Value) {
    for (i, case) in cases().iter().enumerate() {
        let id = 100 + i as u64;
        lines
            .send_line(request(id, case).to_string().as_bytes())
            .await;
        let answer = lines.answer().await;
        check_error(&answer, Some(id), case.code, case.names, case.what);
    }
    for (what, body, names) in unparseable() {
        lines.send_line(&body).await;
        check_error(&lines.answer().await, None, -32700, names, what);
    }
    let good = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": { "name": tool_args["name"], "arguments": tool_args["arguments"], "_meta": meta(PLAIN) } });
    lines.send_line(good.to_string().as_bytes()).await;
    let ok = lines.answer().await;
    assert_eq!(ok["id"], 7, "{ok}");
    assert!(ok.get("result").is_some(), "{ok}");
}

#[tokio::test]
async fn stdio_malformed_requests_get_one_error_line_each() {
    let runs = Runs::default();
    let mut lines = Stdio::framed(server(&runs, Limits::default()));
    stdio_rejects_every_bad_line(
        &mut lines,
        json!({ "name": "count", "arguments": { "n": 1 } }),
    )
    .await;
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn stdio_child_process_rejects_bad_lines() {
    let (mut lines, mut child) = Stdio::child(env!("CARGO_BIN_EXE_mcp-tasks-example-stdio"));
    stdio_rejects_every_bad_line(
        &mut lines,
        json!({ "name": "greet", "arguments": { "name": "Ada" } }),
    )
    .await;
    drop(lines);
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait())
        .await
        .expect("the server did not exit after stdin closed")
        .unwrap();
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn stdio_size_limits() {
    let runs = Runs::default();
    let limits = Limits::default()
        .with_max_request_bytes(4096)
        .with_max_arguments_bytes(512);
    let mut lines = Stdio::framed(server(&runs, limits));
    // A line over the request limit: one -32600 line, without an id (it was never read).
    let big = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "count", "arguments": { "n": 1, "pad": "x".repeat(100_000) }, "_meta": meta(TASKS) } });
    lines.send_line(big.to_string().as_bytes()).await;
    check_error(
        &lines.answer().await,
        None,
        -32600,
        "larger than the limit of 4096 bytes",
        "request too large",
    );
    // Arguments over their limit.
    let body = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "count", "arguments": { "n": 1, "pad": "x".repeat(600) }, "_meta": meta(TASKS) } });
    lines.send_line(body.to_string().as_bytes()).await;
    check_error(
        &lines.answer().await,
        Some(2),
        -32602,
        "params.arguments is 616 bytes",
        "arguments too large",
    );
    // Exactly at the request limit is accepted.
    let mut call = json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": { "name": "count", "arguments": { "n": 1 }, "_meta": meta(PLAIN), "pad": "" } });
    let short = call.to_string().len();
    call["params"]["pad"] = json!("y".repeat(4096 - short));
    assert_eq!(call.to_string().len(), 4096);
    lines.send_line(call.to_string().as_bytes()).await;
    let ok = lines.answer().await;
    assert_eq!(ok["id"], 3, "{ok}");
    assert_eq!(ok["result"]["structuredContent"]["result"], 2, "{ok}");
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
}

/// Over stdio the guard hands rmcp the message it decoded (one parse per line): a request
/// that rmcp's message types do not decode is answered `-32600` with its id, as over HTTP; such
/// a notification gets no answer (nothing answers a notification); the stream goes on.
#[tokio::test]
async fn stdio_undecodable_messages() {
    let runs = Runs::default();
    let mut lines = Stdio::framed(server(&runs, Limits::default()));
    let first = json!({ "jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": { "name": "count", "arguments": { "n": 1 }, "_meta": meta(PLAIN) } });
    lines.send_line(first.to_string().as_bytes()).await;
    assert_eq!(lines.answer().await["id"], 8);
    // `_meta` that is not an object: the guard checks only the params of the methods this
    // crate owns, and rmcp's types decode neither message.
    lines
        .send_line(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"_meta":5}}"#)
        .await;
    lines
        .send_line(br#"{"jsonrpc":"2.0","id":9,"method":"ping","params":{"_meta":5}}"#)
        .await;
    let answer = lines.answer().await;
    assert_eq!(answer["id"], 9, "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("not a JSON-RPC 2.0 message"), "{answer}");
    let good = json!({ "jsonrpc": "2.0", "id": 10, "method": "tools/call",
        "params": { "name": "count", "arguments": { "n": 1 }, "_meta": meta(PLAIN) } });
    lines.send_line(good.to_string().as_bytes()).await;
    let ok = lines.answer().await;
    assert_eq!(ok["id"], 10, "{ok}");
    assert!(ok.get("result").is_some(), "{ok}");
}
