//! Task status pushed over `subscriptions/listen` with `notifications.taskIds`
//! (docs/protocol.md R39-R44, C22-C26), over Streamable HTTP on 127.0.0.1:0 and over the
//! stdio framing of `serve_io` on an in-process pipe: the acknowledgement first, naming only
//! the caller's tasks (R44, C23); `-32021` without the extension (R43); the subscription id on
//! every message (C24); one `notifications/tasks` per change carrying what `tasks/get`
//! answers at that moment (R40), the terminal one with the result and nothing after it; no
//! progress or log messages on the stream (R42, C26); the stream ended by the client (C25,
//! C27) and by the server's stop (the graceful result first); a core filter beside `taskIds`
//! (C22); two owners on one server (R49); the limits; a dispatcher that falls behind the
//! change feed, which still pushes every end.

#![allow(
    deprecated,
    reason = "logging is deprecated by SEP-2577 yet still on the 2026-07-28 wire"
)]

mod common;
#[path = "support/read_hook.rs"]
mod read_hook;

use std::{sync::Arc, time::Duration};

use common::{Caps, PLAIN, Patience, TASKS, V2026, first_input_key, gate, meta, pass};
use mcp_tasks::{
    Engine, HttpOptions, StaticTokens, TaskContext, TaskServer, ToolError, task_tool, toolkit,
};
use rmcp::model::LoggingLevel;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// Tools paced by the test: each step waits for one permit of its gate.

/// Lets the tool behind gate `name` take one step.
fn step(name: &str) {
    gate(name).add_permits(1);
}

/// Sets its status message to "step 1" .. "step `steps`", one per permit, reporting progress
/// and logging at each (neither may reach a listen stream), then ends after one more permit.
#[task_tool(mode = "required", poll_interval = "20ms", ttl = "10m")]
async fn stepper(ctx: TaskContext, gate: String, steps: u32) -> Result<String, ToolError> {
    for n in 1..=steps {
        pass(&gate).await;
        ctx.status(format!("step {n}")).await;
        let _ = ctx
            .progress(f64::from(n), Some(f64::from(steps)), Some("progress"))
            .await;
        ctx.log(LoggingLevel::Error, "a log message").await;
    }
    pass(&gate).await;
    Ok(format!("done after {steps} steps"))
}

/// After one permit asks for a name, then after one more answers "hello <name>".
#[task_tool(mode = "required", poll_interval = "20ms", ttl = "10m")]
async fn asker(ctx: TaskContext, gate: String) -> Result<String, ToolError> {
    pass(&gate).await;
    let name = common::ask_name(&ctx).await?;
    pass(&gate).await;
    Ok(format!("hello {name}"))
}

/// `asker` with a 10 s poll interval: a client that polls learns of its question and of
/// its end 10 s late at best.
#[task_tool(mode = "required", poll_interval = "10s", ttl = "10m")]
async fn slow_asker(ctx: TaskContext, gate: String) -> Result<String, ToolError> {
    asker(ctx, gate).await
}

/// Status changes made by [`flood`]s, in this process.
static FLOODED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Sets its status message as fast as it can ("change 1", "change 2", ...) until its gate
/// has a permit, then ends with the count.
#[task_tool(mode = "required", poll_interval = "20ms", ttl = "10m")]
async fn flood(ctx: TaskContext, gate: String) -> Result<String, ToolError> {
    let gate = common::gate(&gate);
    let mut changes: u64 = 0;
    while gate.available_permits() == 0 {
        changes += 1;
        ctx.status(format!("change {changes}")).await;
        FLOODED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if changes.is_multiple_of(64) {
            tokio::task::yield_now().await;
        }
    }
    Ok(format!("{changes} changes"))
}

fn engine() -> Engine {
    Engine::new(toolkit![stepper, asker, slow_asker].expect("a toolkit"))
}

/// A gate name of its own for each use.
fn fresh_gate(test: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{test}-{n}")
}

/// What a notification's params and a `tasks/get` result have in common: the
/// `DetailedTask`, without the subscription's or the result's `_meta` and `resultType`.
fn detailed(mut object: Value) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.remove("_meta");
        map.remove("resultType");
    }
    object
}

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

// ---------------------------------------------------------------------------------------
// The two transports, as one interface.

/// A client of one server: requests, and listen streams.
enum Client {
    Http {
        url: String,
        client: reqwest::Client,
        token: Option<String>,
        next_id: u64,
    },
    Stdio(Stdio),
}

/// A `subscriptions/listen` stream as the client sees it.
enum Stream {
    Http {
        response: reqwest::Response,
        buffer: String,
        queued: std::collections::VecDeque<Value>,
    },
    /// stdio: the messages are read from the connection, demultiplexed by subscription id.
    Stdio { id: Value },
}

/// A stdio peer ([`common::Stdio`]) that keeps what it read while looking for other messages.
struct Stdio {
    peer: common::Stdio,
    /// Messages read while looking for others.
    seen: Vec<Value>,
    next_id: u64,
}

impl Stdio {
    async fn send(&mut self, message: &Value) {
        self.peer.send(message).await;
    }

    /// The next message matching `wanted`, from what was read already or from the pipe;
    /// `None` when `within` passes first.
    async fn find(&mut self, wanted: impl Fn(&Value) -> bool, within: Duration) -> Option<Value> {
        if let Some(at) = self.seen.iter().position(&wanted) {
            return Some(self.seen.remove(at));
        }
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let value = self.peer.next_before(deadline).await?;
            if wanted(&value) {
                return Some(value);
            }
            self.seen.push(value);
        }
    }
}

async fn http_server(server: TaskServer, options: HttpOptions) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { mcp_tasks::serve_http(listener, server, options).await });
    format!("http://{addr}/mcp")
}

impl Client {
    async fn http(server: TaskServer) -> Self {
        Self::http_as(http_server(server, HttpOptions::new()).await, None)
    }

    fn http_as(url: String, token: Option<&str>) -> Self {
        Self::Http {
            url,
            client: reqwest::Client::new(),
            token: token.map(str::to_owned),
            next_id: 0,
        }
    }

    fn stdio(server: TaskServer) -> Self {
        Self::Stdio(Stdio {
            peer: common::Stdio::framed(server),
            seen: Vec::new(),
            next_id: 0,
        })
    }

    fn next_id(&mut self) -> u64 {
        let next = match self {
            Self::Http { next_id, .. } => next_id,
            Self::Stdio(stdio) => &mut stdio.next_id,
        };
        *next += 1;
        *next
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let Self::Http {
            url, client, token, ..
        } = self
        else {
            unreachable!("HTTP only")
        };
        let method = body["method"].as_str().unwrap_or_default().to_owned();
        let mut request = client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", V2026)
            .header("mcp-method", method);
        if let Some(name) = body["params"]["name"]
            .as_str()
            .or(body["params"]["taskId"].as_str())
        {
            request = request.header("mcp-name", name);
        }
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.body(body.to_string())
    }

    /// A request with modern `_meta` declaring `caps`; its JSON-RPC response.
    async fn rpc(&mut self, method: &str, mut params: Value, caps: Caps) -> Value {
        params["_meta"] = meta(caps);
        let id = self.next_id();
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        match self {
            Self::Http { .. } => {
                let text = self.post(&body).send().await.unwrap().text().await.unwrap();
                common::parse_body(&text)
            }
            Self::Stdio(stdio) => {
                stdio.send(&body).await;
                stdio
                    .find(|m| m["id"] == json!(id), common::PATIENCE)
                    .await
                    .expect("an answer")
            }
        }
    }

    async fn call(&mut self, tool: &str, arguments: Value) -> String {
        let created = self
            .rpc(
                "tools/call",
                json!({ "name": tool, "arguments": arguments }),
                TASKS,
            )
            .await;
        created["result"]["task"]["taskId"]
            .as_str()
            .or(created["result"]["taskId"].as_str())
            .unwrap_or_else(|| panic!("a task: {created}"))
            .to_owned()
    }

    async fn get(&mut self, task_id: &str) -> Value {
        let got = self
            .rpc("tasks/get", json!({ "taskId": task_id }), TASKS)
            .await;
        assert!(got.get("result").is_some(), "tasks/get: {got}");
        got["result"].clone()
    }

    /// Opens a listen stream with request id `id` and `filter`; `Err` is the JSON-RPC error
    /// response (and, over HTTP, its status).
    async fn listen(
        &mut self,
        id: Value,
        filter: Value,
        caps: Caps,
    ) -> Result<Stream, (u16, Value)> {
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": { "_meta": meta(caps), "notifications": filter } });
        match self {
            Self::Http { .. } => {
                let response = self.post(&body).send().await.unwrap();
                let status = response.status().as_u16();
                let sse = response
                    .headers()
                    .get("content-type")
                    .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
                if !sse {
                    let text = response.text().await.unwrap();
                    return Err((status, serde_json::from_str(&text).unwrap_or(Value::Null)));
                }
                Ok(Stream::Http {
                    response,
                    buffer: String::new(),
                    queued: std::collections::VecDeque::new(),
                })
            }
            Self::Stdio(stdio) => {
                stdio.send(&body).await;
                // The first message naming this id: the acknowledgement, or the refusal.
                let first = stdio
                    .find(
                        |m| m["id"] == id || m["params"]["_meta"][SUBSCRIPTION_ID] == id,
                        common::PATIENCE,
                    )
                    .await
                    .expect("an answer to the listen");
                if first.get("error").is_some() {
                    return Err((0, first));
                }
                // Put it back: the stream reads it as its first message.
                stdio.seen.insert(0, first);
                Ok(Stream::Stdio { id })
            }
        }
    }

    /// The next message of `stream`, `None` when it ended or nothing came `within`.
    async fn next(&mut self, stream: &mut Stream, within: Duration) -> Option<Value> {
        match stream {
            Stream::Http {
                response,
                buffer,
                queued,
            } => {
                let deadline = tokio::time::Instant::now() + within;
                loop {
                    if let Some(message) = queued.pop_front() {
                        return Some(message);
                    }
                    let chunk = tokio::time::timeout_at(deadline, response.chunk())
                        .await
                        .ok()?
                        .ok()??;
                    buffer.push_str(std::str::from_utf8(&chunk).unwrap());
                    while let Some(end) = buffer.find("\n\n") {
                        let event: String = buffer.drain(..end + 2).collect();
                        for line in event.lines() {
                            if let Some(data) = line.strip_prefix("data:") {
                                queued.push_back(serde_json::from_str(data.trim()).unwrap());
                            }
                        }
                    }
                }
            }
            Stream::Stdio { id } => {
                let Self::Stdio(stdio) = self else {
                    unreachable!()
                };
                let id = id.clone();
                stdio
                    .find(
                        move |m| m["id"] == id || m["params"]["_meta"][SUBSCRIPTION_ID] == id,
                        within,
                    )
                    .await
            }
        }
    }

    /// The next message of `stream`, which must come soon.
    async fn expect(&mut self, stream: &mut Stream) -> Value {
        self.next(stream, common::PATIENCE)
            .await
            .expect("a message on the listen stream")
    }

    /// The next `notifications/tasks` of `task_id` on `stream` (notifications of other tasks
    /// are skipped).
    async fn expect_task(&mut self, stream: &mut Stream, task_id: &str) -> Value {
        loop {
            let message = self.expect(stream).await;
            assert_eq!(message["method"], "notifications/tasks", "{message}");
            if message["params"]["taskId"] == task_id {
                return message;
            }
        }
    }

    /// The messages of `stream` before the notification of task `mark` whose status message
    /// is `message`, which must come soon (`mark`'s other notifications are skipped). The
    /// test makes that change after the ones whose messages it forbids, so a forbidden
    /// message had its chance to come first: the check is a sync point, not a pause.
    async fn until_mark(&mut self, stream: &mut Stream, mark: &str, message: &str) -> Vec<Value> {
        let mut before = Vec::new();
        loop {
            let next = self.expect(stream).await;
            if next["params"]["taskId"] == mark {
                if next["params"]["statusMessage"] == message {
                    return before;
                }
            } else {
                before.push(next);
            }
        }
    }

    /// Ends `stream` as a client does: closes it (HTTP) or sends `notifications/cancelled`.
    async fn close(&mut self, stream: Stream) {
        match stream {
            Stream::Http { response, .. } => drop(response),
            Stream::Stdio { id } => {
                let Self::Stdio(stdio) = self else {
                    unreachable!()
                };
                stdio
                    .send(
                        &json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": { "requestId": id, "reason": "done" } }),
                    )
                    .await;
            }
        }
    }
}

/// Both transports, each over its own server of [`engine`]'s tools; with the engine.
async fn both() -> Vec<(Client, Engine)> {
    let http_engine = engine();
    let stdio_engine = engine();
    vec![
        (
            Client::http(TaskServer::from_engine(http_engine.clone())).await,
            http_engine,
        ),
        (
            Client::stdio(TaskServer::from_engine(stdio_engine.clone())),
            stdio_engine,
        ),
    ]
}

// ---------------------------------------------------------------------------------------
// The tests.

/// R43: a listen for `taskIds` without the extension is `-32021` naming it (HTTP 400); so is
/// one in which `taskIds` is malformed (the capability check first); with the extension a
/// malformed `taskIds` is `-32602` naming the field.
#[tokio::test]
async fn without_the_extension_a_task_listen_is_32021() {
    for (mut client, _engine) in both().await {
        let http = matches!(client, Client::Http { .. });
        let Err((status, refused)) = client
            .listen(json!(1), json!({ "taskIds": ["x"] }), PLAIN)
            .await
        else {
            panic!("a listen without the extension was served");
        };
        assert_eq!(refused["error"]["code"], -32021, "{refused}");
        assert_eq!(refused["id"], 1);
        assert_eq!(
            refused["error"]["data"]["requiredCapabilities"],
            json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } })
        );
        if http {
            assert_eq!(status, 400);
        }
        let Err((_, refused)) = client
            .listen(json!(2), json!({ "taskIds": "x" }), PLAIN)
            .await
        else {
            panic!("served");
        };
        assert_eq!(refused["error"]["code"], -32021, "{refused}");
        let Err((_, refused)) = client
            .listen(json!(3), json!({ "taskIds": [1] }), TASKS)
            .await
        else {
            panic!("served");
        };
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("params.notifications.taskIds"),
            "{message}"
        );
    }
}

/// C31-C36: a task listen whose `Mcp-Method` header names another method, or whose
/// `MCP-Protocol-Version` header is not the version of its `_meta`, is refused with HTTP 400
/// and `-32020` naming the header; with both headers right it is served.
#[tokio::test]
async fn a_task_listen_whose_headers_disagree_with_its_body_is_32020() {
    let url = http_server(TaskServer::from_engine(engine()), HttpOptions::new()).await;
    let client = reqwest::Client::new();
    let body = json!({ "jsonrpc": "2.0", "id": 4, "method": "subscriptions/listen",
        "params": { "_meta": meta(TASKS), "notifications": { "taskIds": ["x"] } } });
    for (method, version, named) in [
        ("tasks/get", V2026, Some("Mcp-Method")),
        (
            "subscriptions/listen",
            "2025-11-25",
            Some("MCP-Protocol-Version"),
        ),
        ("subscriptions/listen", V2026, None),
    ] {
        let response = client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", version)
            .header("mcp-method", method)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        // The status before the body: a served listen's body is a stream that stays open.
        let status = response.status().as_u16();
        let Some(named) = named else {
            assert_eq!(status, 200, "{method} {version}");
            continue;
        };
        assert_eq!(status, 400, "{method} {version}");
        let refused: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
        assert_eq!(refused["error"]["code"], -32020, "{refused}");
        assert_eq!(refused["id"], 4, "{refused}");
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{message}");
    }
}

/// R40, R44, C23, C24: the acknowledgement first, with the subscription id and only the
/// caller's known tasks; then the task's state at once, and one notification per status
/// message change, each equal to what `tasks/get` answers at that moment, each with the
/// subscription id; the terminal one with the result; nothing after it.
#[tokio::test]
async fn every_change_is_pushed_as_tasks_get_has_it() {
    for (mut client, _engine) in both().await {
        every_change_of_a_task(&mut client).await;
    }
}

/// The same over a SQLite file: the change feed is the runtime's, whatever the store.
#[tokio::test]
async fn every_change_is_pushed_over_sqlite_too() {
    let path = std::env::temp_dir().join(format!(
        "mcp-tasks-push-{}-{}.db",
        std::process::id(),
        fresh_gate("db")
    ));
    let store = mcp_tasks::SqliteStore::open(&path).expect("open the database");
    let engine = Engine::builder(toolkit![stepper, asker].expect("a toolkit"))
        .with_store(store)
        .build();
    let mut client = Client::http(TaskServer::from_engine(engine)).await;
    every_change_of_a_task(&mut client).await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

async fn every_change_of_a_task(client: &mut Client) {
    {
        let gate = fresh_gate("changes");
        let task = client
            .call("stepper", json!({ "gate": gate, "steps": 2 }))
            .await;
        // A second task on the stream: its change, made last, marks the end of the check.
        let mark_gate = fresh_gate("mark");
        let mark = client
            .call("stepper", json!({ "gate": mark_gate, "steps": 1 }))
            .await;
        let sub = json!("listen-7");
        let mut stream = client
            .listen(
                sub.clone(),
                json!({ "taskIds": [task, mark, "no-such-task"] }),
                TASKS,
            )
            .await
            .expect("a stream");
        let ack = client.expect(&mut stream).await;
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{ack}"
        );
        assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], sub);
        assert_eq!(
            ack["params"]["notifications"],
            json!({ "taskIds": [task, mark] })
        );

        let mut seen = Vec::new();
        let first = client.expect_task(&mut stream, &task).await;
        assert_eq!(first["params"]["status"], "working");
        assert_eq!(
            detailed(first["params"].clone()),
            detailed(client.get(&task).await)
        );
        seen.push(first);
        for n in 1..=2 {
            step(&gate);
            let pushed = client.expect_task(&mut stream, &task).await;
            assert_eq!(pushed["params"]["statusMessage"], format!("step {n}"));
            // The tool waits at its gate: tasks/get reads the same moment.
            assert_eq!(
                detailed(pushed["params"].clone()),
                detailed(client.get(&task).await),
                "the notification is what tasks/get answers"
            );
            seen.push(pushed);
        }
        step(&gate);
        let terminal = client.expect_task(&mut stream, &task).await;
        assert_eq!(terminal["params"]["status"], "completed", "{terminal}");
        assert_eq!(
            common::first_text(&terminal["params"]["result"]),
            "done after 2 steps"
        );
        assert_eq!(
            detailed(terminal["params"].clone()),
            detailed(client.get(&task).await)
        );
        seen.push(terminal);
        for message in &seen {
            assert_eq!(
                message["params"]["_meta"][SUBSCRIPTION_ID], sub,
                "{message}"
            );
            assert!(message.get("id").is_none(), "a notification: {message}");
        }
        // Nothing after the terminal state, while the stream stays open and reads are made:
        // nothing of the task before the mark's change, made after them.
        client.get(&task).await;
        let _ = client
            .rpc("tasks/cancel", json!({ "taskId": task }), TASKS)
            .await;
        step(&mark_gate);
        let after = client.until_mark(&mut stream, &mark, "step 1").await;
        assert!(
            after.is_empty(),
            "nothing after the terminal notification: {after:?}"
        );
    }
}

/// R40: an input request is pushed with its `inputRequests`, the answer's return to
/// `working` too, then the result.
#[tokio::test]
async fn input_requests_are_pushed() {
    for (mut client, _engine) in both().await {
        let gate = fresh_gate("input");
        let task = client.call("asker", json!({ "gate": gate })).await;
        let mut stream = client
            .listen(json!(10), json!({ "taskIds": [task] }), TASKS)
            .await
            .expect("a stream");
        client.expect(&mut stream).await; // the acknowledgement
        assert_eq!(
            client.expect_task(&mut stream, &task).await["params"]["status"],
            "working"
        );
        step(&gate);
        let asked = client.expect_task(&mut stream, &task).await;
        assert_eq!(asked["params"]["status"], "input_required", "{asked}");
        assert_eq!(
            detailed(asked["params"].clone()),
            detailed(client.get(&task).await)
        );
        let key = first_input_key(&asked["params"]);
        let answered = client
            .rpc(
                "tasks/update",
                json!({ "taskId": task, "inputResponses": {
                    key: { "action": "accept", "content": { "name": "Ada" } } } }),
                TASKS,
            )
            .await;
        assert!(answered.get("result").is_some(), "{answered}");
        // Back to working (the tool waits at its gate), then the result.
        let working = client.expect_task(&mut stream, &task).await;
        assert_eq!(working["params"]["status"], "working", "{working}");
        assert_eq!(
            detailed(working["params"].clone()),
            detailed(client.get(&task).await)
        );
        step(&gate);
        let next = client.expect_task(&mut stream, &task).await;
        assert_eq!(next["params"]["status"], "completed", "{next}");
        assert_eq!(common::first_text(&next["params"]["result"]), "hello Ada");
    }
}

/// R42, C26: the tool reports progress and logs at every step; none of it reaches the
/// stream, whose only messages are the acknowledgement and `notifications/tasks`.
#[tokio::test]
async fn no_progress_or_log_messages_on_the_stream() {
    for (mut client, _engine) in both().await {
        let gate = fresh_gate("quiet");
        let task = client
            .call("stepper", json!({ "gate": gate, "steps": 3 }))
            .await;
        // A second task on the stream: its change, made last, marks the end of the check.
        let mark_gate = fresh_gate("quiet-mark");
        let mark = client
            .call("stepper", json!({ "gate": mark_gate, "steps": 1 }))
            .await;
        let mut stream = client
            .listen(json!("q"), json!({ "taskIds": [task, mark] }), TASKS)
            .await
            .expect("a stream");
        let mut methods = Vec::new();
        for _ in 0..4 {
            step(&gate);
        }
        loop {
            let message = client.expect(&mut stream).await;
            methods.push(
                message["method"]
                    .as_str()
                    .unwrap_or("a response")
                    .to_owned(),
            );
            if message["params"]["status"] == "completed" {
                break;
            }
        }
        step(&mark_gate);
        let late = client.until_mark(&mut stream, &mark, "step 1").await;
        assert!(late.is_empty(), "nothing after the end: {late:?}");
        assert_eq!(methods[0], "notifications/subscriptions/acknowledged");
        assert!(
            methods[1..].iter().all(|m| m == "notifications/tasks"),
            "{methods:?}"
        );
    }
}

/// C22: a core filter beside `taskIds` is answered as a whole: this server advertises no
/// list changes, so the acknowledgement agrees to the tasks only, and only task
/// notifications follow.
#[tokio::test]
async fn a_core_filter_beside_task_ids() {
    for (mut client, _engine) in both().await {
        let gate = fresh_gate("combined");
        let task = client
            .call("stepper", json!({ "gate": gate, "steps": 1 }))
            .await;
        let mut stream = client
            .listen(
                json!(5),
                json!({ "toolsListChanged": true, "promptsListChanged": true, "taskIds": [task] }),
                TASKS,
            )
            .await
            .expect("a stream");
        let ack = client.expect(&mut stream).await;
        assert_eq!(ack["params"]["notifications"], json!({ "taskIds": [task] }));
        step(&gate);
        step(&gate);
        loop {
            let pushed = client.expect_task(&mut stream, &task).await;
            if pushed["params"]["status"] == "completed" {
                break;
            }
        }
    }
}

/// C25, C27: a client ends its stream (HTTP: closes it; stdio: `notifications/cancelled`);
/// the task goes on, nothing more reaches that subscription, and its slot is given back
/// (an owner at the limit of open streams can listen again).
#[tokio::test]
async fn the_client_ends_the_stream() {
    for (mut client, _engine) in both().await {
        let gate = fresh_gate("cancel");
        let task = client
            .call("stepper", json!({ "gate": gate, "steps": 50 }))
            .await;
        let mut streams = Vec::new();
        for n in 0..mcp_tasks::server::MAX_LISTEN_STREAMS_PER_OWNER {
            let stream = client
                .listen(json!(format!("s{n}")), json!({ "taskIds": [task] }), TASKS)
                .await
                .unwrap_or_else(|e| panic!("stream {n}: {e:?}"));
            streams.push(stream);
        }
        let Err((_, refused)) = client
            .listen(json!("over"), json!({ "taskIds": [task] }), TASKS)
            .await
        else {
            panic!("an owner opened more streams than the limit");
        };
        assert_eq!(refused["error"]["code"], -32603, "{refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("listen streams open"),
            "{refused}"
        );
        let mut first = streams.remove(0);
        client.expect(&mut first).await; // the acknowledgement
        client.close(first).await;
        // The task changes: what the server writes to a closed HTTP stream fails, which
        // drops it; stdio dropped it at the cancel.
        step(&gate);
        let mut permits = 1;
        let patience = Patience::new("a slot given back by the closed stream");
        let mut again = loop {
            match client
                .listen(json!("again"), json!({ "taskIds": [task] }), TASKS)
                .await
            {
                Ok(stream) => break stream,
                Err(_) => {
                    step(&gate);
                    permits += 1;
                    patience.wait().await;
                }
            }
        };
        assert_eq!(
            client.expect(&mut again).await["method"],
            "notifications/subscriptions/acknowledged"
        );
        // On stdio the cancelled subscription sends nothing more.
        if let Client::Stdio(stdio) = &mut client {
            // Lines are handled in order: what came for `s0` before the new stream's
            // acknowledgement was sent before the cancel took effect.
            stdio
                .seen
                .retain(|m| m["params"]["_meta"][SUBSCRIPTION_ID] != "s0");
            for _ in 0..4 {
                step(&gate);
            }
            permits += 4;
            // The new stream hears of the last of those changes: what the cancelled one
            // would have been sent of them came before it.
            let last = format!("step {permits}");
            stdio
                .find(
                    |m| {
                        m["params"]["_meta"][SUBSCRIPTION_ID] == "again"
                            && m["params"]["statusMessage"] == last.as_str()
                    },
                    common::PATIENCE,
                )
                .await
                .unwrap_or_else(|| panic!("the new stream hears of {last}"));
            let late: Vec<&Value> = stdio
                .seen
                .iter()
                .filter(|m| m["params"]["_meta"][SUBSCRIPTION_ID] == "s0" || m["id"] == "s0")
                .collect();
            assert!(
                late.is_empty(),
                "a message for the cancelled subscription: {late:?}"
            );
        }
    }
}

/// C25: at the server's stop, what is pending and then the graceful result, with the
/// subscription id; then the stream ends.
#[tokio::test]
async fn the_server_stop_ends_the_stream_gracefully() {
    for (mut client, engine) in both().await {
        let gate = fresh_gate("stop");
        let task = client
            .call("stepper", json!({ "gate": gate, "steps": 1 }))
            .await;
        let mut stream = client
            .listen(json!(42), json!({ "taskIds": [task] }), TASKS)
            .await
            .expect("a stream");
        client.expect(&mut stream).await;
        client.expect_task(&mut stream, &task).await;
        let stopping = tokio::spawn(async move { engine.shutdown(Duration::ZERO).await });
        let end = client.expect(&mut stream).await;
        assert_eq!(end["id"], 42, "{end}");
        assert_eq!(end["result"]["resultType"], "complete");
        assert_eq!(end["result"]["_meta"][SUBSCRIPTION_ID], 42);
        stopping.await.unwrap();
        if matches!(client, Client::Http { .. }) {
            assert_eq!(
                client.next(&mut stream, Duration::from_secs(5)).await,
                None,
                "the stream ends"
            );
        }
    }
}

/// R49 over HTTP: two owners on one server. Each one's acknowledgement names only its own
/// task, though both ask for both, and each one's stream carries only its own task.
#[tokio::test]
async fn two_owners_on_one_server() {
    let tokens = StaticTokens::parse("alice:TOKEN_A,bob:TOKEN_B").unwrap();
    let url = http_server(
        TaskServer::from_engine(engine()),
        HttpOptions::new().with_static_tokens(tokens),
    )
    .await;
    let mut alice = Client::http_as(url.clone(), Some("TOKEN_A"));
    let mut bob = Client::http_as(url, Some("TOKEN_B"));
    let (gate_a, gate_b) = (fresh_gate("alice"), fresh_gate("bob"));
    let task_a = alice
        .call("stepper", json!({ "gate": gate_a, "steps": 1 }))
        .await;
    let task_b = bob
        .call("stepper", json!({ "gate": gate_b, "steps": 1 }))
        .await;
    let both_ids = json!({ "taskIds": [task_a, task_b] });
    let mut stream_a = alice
        .listen(json!(1), both_ids.clone(), TASKS)
        .await
        .unwrap();
    let mut stream_b = bob.listen(json!(1), both_ids, TASKS).await.unwrap();
    let ack_a = alice.expect(&mut stream_a).await;
    let ack_b = bob.expect(&mut stream_b).await;
    assert_eq!(
        ack_a["params"]["notifications"],
        json!({ "taskIds": [task_a] })
    );
    assert_eq!(
        ack_b["params"]["notifications"],
        json!({ "taskIds": [task_b] })
    );
    for _ in 0..2 {
        step(&gate_a);
        step(&gate_b);
    }
    for (client, stream, own) in [
        (&mut alice, &mut stream_a, &task_a),
        (&mut bob, &mut stream_b, &task_b),
    ] {
        loop {
            let message = client.expect(stream).await;
            assert_eq!(message["params"]["taskId"], **own, "{message}");
            if message["params"]["status"] == "completed" {
                break;
            }
        }
    }
}

/// Limits: one listen names at most MAX_TASK_IDS_PER_LISTEN tasks (`-32602` beyond).
#[tokio::test]
async fn too_many_task_ids() {
    for (mut client, _engine) in both().await {
        let ids: Vec<String> = (0..=mcp_tasks::server::MAX_TASK_IDS_PER_LISTEN)
            .map(|n| format!("t{n}"))
            .collect();
        let Err((_, refused)) = client
            .listen(json!(1), json!({ "taskIds": ids }), TASKS)
            .await
        else {
            panic!("served");
        };
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("split them over several streams"),
            "{refused}"
        );
    }
}

/// A listen without `taskIds` is still rmcp's (which does not serve core subscriptions for
/// this server: `-32601`).
#[tokio::test]
async fn a_core_only_listen_is_rmcps() {
    for (mut client, _engine) in both().await {
        let answer = client
            .rpc(
                "subscriptions/listen",
                json!({ "notifications": { "toolsListChanged": true } }),
                TASKS,
            )
            .await;
        assert_eq!(answer["error"]["code"], -32601, "{answer}");
    }
}

/// The client follows a task by listening: a task whose poll interval is 10 s asks a
/// question and completes within a fraction of that, with not one `tasks/get`; the pushed
/// question is answered at once.
#[tokio::test]
async fn the_client_follows_by_listening() {
    use mcp_tasks::client::{TaskClient, TaskEnd};
    use rmcp::model::{ElicitResult, ElicitationAction};
    use std::sync::atomic::{AtomicUsize, Ordering};

    async fn count_gets(
        axum::extract::State(gets): axum::extract::State<Arc<AtomicUsize>>,
        request: axum::extract::Request,
        next: axum::middleware::Next,
    ) -> axum::response::Response {
        if request
            .headers()
            .get("mcp-method")
            .is_some_and(|m| m == "tasks/get")
        {
            gets.fetch_add(1, Ordering::SeqCst);
        }
        next.run(request).await
    }

    let gets = Arc::new(AtomicUsize::new(0));
    let router =
        mcp_tasks::http_router(TaskServer::from_engine(engine()), HttpOptions::new()).layer(
            axum::middleware::from_fn_with_state(gets.clone(), count_gets),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });

    let client = TaskClient::builder()
        .with_elicitation(|_params, _cx| async {
            Ok(Some(
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({ "name": "Ada" })),
            ))
        })
        .connect_http(&url)
        .await
        .expect("connect");
    // More tasks, one after another, than one owner may hold streams open: each stream is
    // closed once its task ended, or the later listens would be refused (and the client
    // would poll, 10 s late).
    for round in 0..mcp_tasks::server::MAX_LISTEN_STREAMS_PER_OWNER + 6 {
        let gate = fresh_gate("client");
        let started = tokio::time::Instant::now();
        let args = json!({ "gate": gate }).as_object().cloned();
        let mut task = client
            .call("slow_asker", args)
            .await
            .expect("a call")
            .into_task()
            .expect("a task");
        step(&gate);
        step(&gate);
        let end = tokio::time::timeout(Duration::from_secs(8), task.wait())
            .await
            .unwrap_or_else(|_| panic!("round {round}: the end well before one poll interval"))
            .expect("the task's end");
        let TaskEnd::Completed(result) = end else {
            panic!("completed: {end:?}");
        };
        assert_eq!(
            result.content[0].as_text().map(|t| t.text.as_str()),
            Some("hello Ada")
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "round {round}: {:?}",
            started.elapsed()
        );
    }
    assert_eq!(
        gets.load(Ordering::SeqCst),
        0,
        "no tasks/get: the tasks were pushed"
    );
}

/// Held reads: while a task id is set here, every read of that task waits for the release.
#[derive(Default)]
struct Stall {
    task: std::sync::Mutex<Option<String>>,
    /// A read is waiting.
    held: std::sync::atomic::AtomicBool,
    release: tokio::sync::Notify,
}

impl Stall {
    /// A read hook that holds the reads of the task named here.
    fn hook(self: &Arc<Self>) -> read_hook::Hook {
        let stall = self.clone();
        Arc::new(move |id: &str| {
            let stall = stall.clone();
            let held = stall.task.lock().unwrap().as_deref() == Some(id);
            Box::pin(async move {
                let released = stall.release.notified();
                if held {
                    stall.held.store(true, std::sync::atomic::Ordering::SeqCst);
                    released.await;
                }
            })
        })
    }
}

/// A dispatcher that falls behind the change feed (more changes than the feed holds while it
/// pushes an earlier one) misses changes; it then reads every followed task again, so each
/// stream still gets its tasks' ends. The dispatcher is held in its read of a flooding task
/// (the store holds that read) while a quiet task ends and the flood makes twice the feed's
/// length of changes after that end: the end's change is certainly dropped, and only the
/// re-read can push it. That the dispatcher fell behind is checked
/// (`mcp_tasks_push_changes_missed_total`), not assumed. Each task's last notification is
/// what `tasks/get` answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatcher_that_falls_behind_still_pushes_every_end() {
    use std::sync::atomic::Ordering;
    const FEED: u64 = 4_096;
    let metrics = mcp_tasks::metrics::install_prometheus().expect("the process's recorder");
    let missed = || common::counter(&metrics.render(), mcp_tasks::metrics::PUSH_CHANGES_MISSED);
    let stall = Arc::new(Stall::default());
    let engine = Engine::builder(toolkit![stepper, flood].expect("a toolkit"))
        .with_store(read_hook::ReadHook {
            inner: mcp_tasks::MemoryStore::new(),
            before_get: stall.hook(),
        })
        .build();
    let mut client = Client::http(TaskServer::from_engine(engine)).await;

    let quiet_gate = fresh_gate("lag-quiet");
    let quiet = client
        .call("stepper", json!({ "gate": quiet_gate, "steps": 0 }))
        .await;
    let flood_gate = fresh_gate("lag-flood");
    let flooding = client.call("flood", json!({ "gate": flood_gate })).await;
    let ids = [quiet.clone(), flooding.clone()];
    let mut stream = client
        .listen(json!("lag"), json!({ "taskIds": ids }), TASKS)
        .await
        .expect("a stream");
    let ack = client.expect(&mut stream).await;
    assert_eq!(ack["params"]["notifications"], json!({ "taskIds": ids }));
    assert_eq!(missed(), 0);

    *stall.task.lock().unwrap() = Some(flooding.clone());
    let patience = Patience::new("the dispatcher reads the flooding task");
    while !stall.held.load(Ordering::SeqCst) {
        patience.wait().await;
    }
    step(&quiet_gate);
    let patience = Patience::new("the quiet task ended");
    while client.get(&quiet).await["status"] != "completed" {
        patience.wait().await;
    }
    let after_end = FLOODED.load(Ordering::SeqCst);
    let patience = Patience::new("the flood goes on");
    while FLOODED.load(Ordering::SeqCst) < after_end + 2 * FEED {
        patience.wait().await;
    }
    *stall.task.lock().unwrap() = None;
    stall.release.notify_waiters();
    let patience = Patience::new("the dispatcher misses changes");
    while missed() < FEED {
        patience.wait().await;
    }
    gate(&flood_gate).add_permits(1);

    // Every followed task's end reaches the stream, as tasks/get has it.
    let mut ends = std::collections::HashMap::new();
    while ends.len() < ids.len() {
        let message = client.expect(&mut stream).await;
        assert_eq!(message["method"], "notifications/tasks", "{message}");
        let params = &message["params"];
        if params["status"] != "working" {
            let id = params["taskId"].as_str().expect("a task id").to_owned();
            assert!(
                ends.insert(id, detailed(params.clone())).is_none(),
                "a second end: {message}"
            );
        }
    }
    for id in &ids {
        assert_eq!(ends[id], detailed(client.get(id).await), "task {id}");
    }
    assert_eq!(ends[&quiet]["status"], "completed");
}
