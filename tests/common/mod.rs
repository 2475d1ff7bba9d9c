//! Shared test harness: hand-written tools and raw JSON-RPC peers over real transports
//! (Streamable HTTP on 127.0.0.1:0, and stdio framing over an in-process pipe), the one
//! polling helper ([`Patience`]), the one duplex-server helper ([`serve_duplex`]), and a
//! scripted rmcp server ([`scripted`]) for what our server does not do.
#![allow(
    dead_code,
    reason = "each test binary uses a different part of the harness"
)]

pub mod process;
pub mod restart;
pub mod scripted;

use std::time::Duration;

use mcp_tasks::{TaskContext, TaskServer, ToolError, task_tool};
use rmcp::model::ElicitationSchema;
use rmcp::{RoleServer, Service, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

pub const V2026: &str = "2026-07-28";

/// Named gates that pace a test's tools: [`pass`] waits for one permit of the gate it names,
/// and `gate(name).add_permits(n)` lets `n` passes through.
static GATES: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<tokio::sync::Semaphore>>>,
> = std::sync::LazyLock::new(Default::default);

/// The gate named `name` (made closed on first use).
pub fn gate(name: &str) -> std::sync::Arc<tokio::sync::Semaphore> {
    GATES
        .lock()
        .unwrap()
        .entry(name.to_owned())
        .or_insert_with(|| std::sync::Arc::new(tokio::sync::Semaphore::new(0)))
        .clone()
}

/// Waits for one permit of gate `name`, and uses it up.
pub async fn pass(name: &str) {
    gate(name).acquire().await.expect("gate").forget();
}

/// Asks "Your name?" (a form with a required string `name`); the name answered, `?` when
/// the answer has none.
pub async fn ask_name(ctx: &TaskContext) -> Result<String, ToolError> {
    ask_string(ctx, "Your name?", "name").await
}

/// Asks `message` (a form with one required string, `field`); the string answered, `?` when
/// the answer has none.
pub async fn ask_string(
    ctx: &TaskContext,
    message: impl Into<String>,
    field: &str,
) -> Result<String, ToolError> {
    let schema = ElicitationSchema::builder()
        .required_string(field)
        .build()
        .expect("schema");
    let answer = ctx.elicit_form(message, schema).await?;
    Ok(answer
        .content
        .as_ref()
        .and_then(|c| c[field].as_str())
        .unwrap_or("?")
        .to_owned())
}

/// How long a poll waits for something that should happen "soon" before the test fails: a
/// margin a loaded 2-core machine keeps. On paused tokio time the waits between polls
/// auto-advance, so the bound costs nothing there.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The pause between two polls.
pub const POLL: Duration = Duration::from_millis(10);

/// The one polling helper: a deadline for a condition a test polls for, and the pause
/// between polls.
///
/// ```ignore
/// let patience = Patience::new(format!("task {id} completed"));
/// let done = loop {
///     let snapshot = peer.get(&id).await;
///     if snapshot["result"]["status"] == "completed" { break snapshot; }
///     patience.wait().await;
/// };
/// ```
pub struct Patience {
    what: String,
    deadline: tokio::time::Instant,
}

impl Patience {
    /// Polling for `what` (named in the failure), for at most [`PATIENCE`].
    pub fn new(what: impl Into<String>) -> Self {
        Self::with_bound(what, PATIENCE)
    }

    /// Polling for `what` for at most `bound`.
    pub fn with_bound(what: impl Into<String>, bound: Duration) -> Self {
        Self {
            what: what.into(),
            deadline: tokio::time::Instant::now() + bound,
        }
    }

    /// Whether the bound has passed.
    pub fn expired(&self) -> bool {
        tokio::time::Instant::now() >= self.deadline
    }

    /// Fails the test once the bound has passed; else waits [`POLL`].
    pub async fn wait(&self) {
        assert!(!self.expired(), "gave up waiting: {}", self.what);
        tokio::time::sleep(POLL).await;
    }
}

/// The value of counter `name` (with its labels, if any, as the page shows them) on a
/// Prometheus page: the sum of the series whose name is exactly that.
pub fn counter(page: &str, name: &str) -> u64 {
    page.lines()
        .filter_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .map(|value| value.trim().parse::<f64>().expect("a counter's value"))
        .map(|value| value as u64)
        .sum()
}

/// The one duplex-server helper: serves `service` (our `TaskServer`, or any rmcp server) on
/// an in-process pipe, newline-delimited JSON as on stdio, and returns the client's end.
pub fn serve_duplex<S>(service: S) -> tokio::io::DuplexStream
where
    S: Service<RoleServer> + Send + 'static,
{
    let (client, server_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = service.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    client
}

/// What a request declares in `_meta.io.modelcontextprotocol/clientCapabilities`.
#[derive(Clone, Copy, Debug)]
pub struct Caps {
    pub tasks: bool,
    pub elicitation: bool,
}

pub const TASKS: Caps = Caps {
    tasks: true,
    elicitation: true,
};
pub const PLAIN: Caps = Caps {
    tasks: false,
    elicitation: true,
};

pub fn meta(caps: Caps) -> Value {
    meta_declaring(capabilities(caps))
}

/// The `clientCapabilities` object of `caps`.
pub fn capabilities(caps: Caps) -> Value {
    let mut capabilities = json!({});
    if caps.elicitation {
        capabilities["elicitation"] = json!({ "form": {} });
    }
    if caps.tasks {
        capabilities["extensions"] = json!({ "io.modelcontextprotocol/tasks": {} });
    }
    capabilities
}

/// Modern `_meta` declaring exactly `capabilities` (a `clientCapabilities` object).
pub fn meta_declaring(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V2026,
        "io.modelcontextprotocol/clientInfo": { "name": "mcp-tasks-tests", "version": "0" },
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

fn with_meta(mut params: Value, meta: Value) -> Value {
    if params.is_null() {
        params = json!({});
    }
    params["_meta"] = meta;
    params
}

/// A raw JSON-RPC peer of a running server.
pub enum Peer {
    Http(Http),
    Stdio(Stdio),
}

impl Peer {
    /// Sends one request with modern `_meta` and returns the whole response object.
    pub async fn rpc(&mut self, method: &str, params: Value, caps: Caps) -> Value {
        self.rpc_meta(method, params, meta(caps)).await
    }

    /// [`Peer::rpc`] with this `_meta`.
    pub async fn rpc_meta(&mut self, method: &str, params: Value, meta: Value) -> Value {
        match self {
            Self::Http(http) => http.rpc_meta(method, params, meta).await.1,
            Self::Stdio(stdio) => stdio.rpc_meta(method, params, meta).await,
        }
    }

    pub async fn call(&mut self, tool: &str, arguments: Value, caps: Caps) -> Value {
        self.rpc(
            "tools/call",
            json!({ "name": tool, "arguments": arguments }),
            caps,
        )
        .await
    }

    pub async fn get(&mut self, task_id: &str) -> Value {
        self.rpc("tasks/get", json!({ "taskId": task_id }), TASKS)
            .await
    }

    /// Polls `tasks/get` until the task is terminal ([`Patience`]).
    pub async fn wait_terminal(&mut self, task_id: &str) -> Value {
        let patience = Patience::new(format!("task {task_id} to end"));
        loop {
            let response = self.get(task_id).await;
            let status = response["result"]["status"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if matches!(status.as_str(), "completed" | "failed" | "cancelled") {
                return response["result"].clone();
            }
            assert!(
                response.get("error").is_none(),
                "tasks/get failed: {response}"
            );
            patience.wait().await;
        }
    }

    /// Polls until the task reaches `status` ([`Patience`]).
    pub async fn wait_status(&mut self, task_id: &str, status: &str) -> Value {
        self.wait_for(task_id, &format!("status {status}"), |task| {
            task["status"] == status
        })
        .await
    }

    /// Polls `tasks/get` until `done` holds for the task object ([`Patience`]); returns it.
    pub async fn wait_for(
        &mut self,
        task_id: &str,
        what: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let patience = Patience::new(format!("task {task_id}: {what}"));
        loop {
            let response = self.get(task_id).await;
            if done(&response["result"]) {
                return response["result"].clone();
            }
            patience.wait().await;
        }
    }
}

/// Streamable HTTP on 127.0.0.1:0.
pub struct Http {
    pub url: String,
    pub client: reqwest::Client,
    /// Headers added to every request of [`Http::rpc`].
    pub extra: Vec<(&'static str, String)>,
    pub next_id: u64,
}

impl Http {
    /// A client of the server at `url` (started elsewhere).
    pub fn to(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            client: reqwest::Client::new(),
            extra: Vec::new(),
            next_id: 0,
        }
    }

    /// The client, authenticated with the bearer token `token` on every request.
    pub fn bearing(mut self, token: &str) -> Self {
        self.extra
            .push(("authorization", format!("Bearer {token}")));
        self
    }

    pub async fn start(server: TaskServer) -> Self {
        Self::start_router(mcp_tasks::http_router(
            server,
            mcp_tasks::HttpOptions::new(),
        ))
        .await
    }

    /// Serves each engine over Streamable HTTP on 127.0.0.1: their urls.
    pub async fn serve_all(engines: Vec<mcp_tasks::Engine>) -> Vec<String> {
        let mut urls = Vec::new();
        for engine in engines {
            urls.push(Self::start(TaskServer::from_engine(engine)).await.url);
        }
        urls
    }

    pub async fn start_router(router: axum::Router) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        Self::to(&format!("http://{addr}/mcp"))
    }

    /// Posts a raw JSON-RPC message; returns the HTTP status, the JSON-RPC response (from a
    /// JSON body or the SSE stream), and the response headers.
    pub async fn post(
        &self,
        body: &Value,
        headers: &[(&str, String)],
    ) -> (u16, Value, reqwest::header::HeaderMap) {
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let response = request.body(body.to_string()).send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap();
        (status, parse_body(&text), headers)
    }

    /// Opens `subscriptions/listen` (request id `id`) for `task_ids`, declaring the
    /// extension; the response as it comes (an SSE stream when the listen was accepted).
    pub async fn open_listen(&self, id: Value, task_ids: &[String]) -> reqwest::Response {
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": { "_meta": meta(TASKS), "notifications": { "taskIds": task_ids } } });
        let mut request = self.client.post(&self.url);
        for (name, value) in &self.extra {
            request = request.header(*name, value);
        }
        request
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", V2026)
            .header("mcp-method", "subscriptions/listen")
            .body(body.to_string())
            .send()
            .await
            .unwrap()
    }

    pub async fn rpc(&mut self, method: &str, params: Value, caps: Caps) -> (u16, Value) {
        self.rpc_meta(method, params, meta(caps)).await
    }

    /// Calls `tool` with `arguments`, declaring the extension, and expects a task: its id.
    pub async fn call_task(&mut self, tool: &str, arguments: Value) -> String {
        let params = json!({ "name": tool, "arguments": arguments });
        let (status, created) = self.rpc("tools/call", params, TASKS).await;
        assert_eq!(status, 200, "{created}");
        created["result"]["taskId"]
            .as_str()
            .or(created["result"]["task"]["taskId"].as_str())
            .unwrap_or_else(|| panic!("a task: {created}"))
            .to_owned()
    }

    /// [`Http::rpc`] with this `_meta`.
    pub async fn rpc_meta(&mut self, method: &str, params: Value, meta: Value) -> (u16, Value) {
        self.next_id += 1;
        let params = with_meta(params, meta);
        let mut headers = vec![
            ("mcp-protocol-version", V2026.to_owned()),
            ("mcp-method", method.to_owned()),
        ];
        if let Some(name) = params["name"].as_str().or(params["taskId"].as_str()) {
            headers.push(("mcp-name", name.to_owned()));
        }
        headers.extend(self.extra.iter().cloned());
        let body =
            json!({ "jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params });
        let (status, value, _) = self.post(&body, &headers).await;
        (status, value)
    }
}

/// The JSON-RPC response in a body that is JSON or an SSE stream.
pub fn parse_body(text: &str) -> Value {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return value;
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message.get("id").is_some())
        .unwrap_or(Value::Null)
}

/// The writing half of a [`Stdio`] peer.
type LineWriter = Box<dyn tokio::io::AsyncWrite + Unpin + Send>;
/// The reading half of a [`Stdio`] peer, a line at a time.
type LineReader = tokio::io::Lines<BufReader<Box<dyn tokio::io::AsyncRead + Unpin + Send>>>;

/// stdio framing (newline-delimited JSON) to a served `TaskServer`, over an in-process pipe
/// or a child process's standard input and output. Every read is bounded by 10 s.
pub struct Stdio {
    writer: LineWriter,
    reader: LineReader,
    next_id: u64,
}

impl Stdio {
    fn over(
        read: impl tokio::io::AsyncRead + Unpin + Send + 'static,
        write: impl tokio::io::AsyncWrite + Unpin + Send + 'static,
    ) -> Self {
        let read: Box<dyn tokio::io::AsyncRead + Unpin + Send> = Box::new(read);
        Self {
            writer: Box::new(write),
            reader: BufReader::new(read).lines(),
            next_id: 0,
        }
    }

    /// Served by rmcp's own stdio transport.
    pub fn start(server: TaskServer) -> Self {
        let (read, write) = tokio::io::split(serve_duplex(server));
        Self::over(read, write)
    }

    /// The same over this crate's stdio layer (`serve_io`: the request guard in front of
    /// rmcp), not rmcp's own.
    pub fn framed(server: TaskServer) -> Self {
        let (client, server_io) = tokio::io::duplex(1 << 20);
        let (read, write) = tokio::io::split(server_io);
        tokio::spawn(mcp_tasks::serve_io(server, read, write));
        let (read, write) = tokio::io::split(client);
        Self::over(read, write)
    }

    /// The standard input and output of `program`, started now (and killed when the child
    /// is dropped).
    pub fn child(program: &str) -> (Self, tokio::process::Child) {
        let mut child = tokio::process::Command::new(program)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {program}: {e}"));
        let write = child.stdin.take().unwrap();
        let read = child.stdout.take().unwrap();
        (Self::over(read, write), child)
    }

    pub async fn send(&mut self, message: &Value) {
        self.send_line(message.to_string().as_bytes()).await;
    }

    /// Sends `bytes` as one line, as they are (they need not be JSON).
    pub async fn send_line(&mut self, bytes: &[u8]) {
        self.try_send_line(bytes).await.unwrap();
    }

    /// [`Stdio::send_line`], its failure as a message.
    pub async fn try_send_line(&mut self, bytes: &[u8]) -> Result<(), String> {
        let mut line = Vec::with_capacity(bytes.len() + 1);
        line.extend_from_slice(bytes);
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .await
            .map_err(|e| format!("stdio write: {e}"))?;
        self.writer
            .flush()
            .await
            .map_err(|e| format!("stdio flush: {e}"))
    }

    /// The next message the server sent, or what went wrong: no line within 10 s, the
    /// output closed, or a line that is not one JSON value.
    pub async fn try_next(&mut self) -> Result<Value, String> {
        let line = tokio::time::timeout(Duration::from_secs(10), self.reader.next_line())
            .await
            .map_err(|_| "no stdio answer within 10 s".to_owned())?
            .map_err(|e| format!("stdio read: {e}"))?
            .ok_or_else(|| "the server closed its output".to_owned())?;
        serde_json::from_str(&line).map_err(|e| format!("not one JSON line ({e}): {line:?}"))
    }

    /// The next message the server sent, `None` when `deadline` passes first or the server
    /// closed its output.
    pub async fn next_before(&mut self, deadline: tokio::time::Instant) -> Option<Value> {
        let line = tokio::time::timeout_at(deadline, self.reader.next_line())
            .await
            .ok()?
            .unwrap()?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}")))
    }

    /// The next response (skipping notifications), or what went wrong.
    pub async fn try_answer(&mut self) -> Result<Value, String> {
        loop {
            let value = self.try_next().await?;
            if value.get("result").is_some() || value.get("error").is_some() {
                return Ok(value);
            }
        }
    }

    /// The next response (skipping notifications).
    pub async fn answer(&mut self) -> Value {
        self.try_answer().await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// Sends a request and returns the response with its id (skipping notifications).
    pub async fn request(&mut self, message: Value) -> Value {
        self.request_noting(message).await.0
    }

    /// Sends a request; returns the response with its id and every other message the server
    /// sent before it (notifications, responses to earlier requests).
    pub async fn request_noting(&mut self, message: Value) -> (Value, Vec<Value>) {
        let id = message["id"].clone();
        self.send(&message).await;
        let mut before = Vec::new();
        loop {
            let value = self.try_next().await.unwrap_or_else(|e| panic!("{e}"));
            if value["id"] == id {
                return (value, before);
            }
            before.push(value);
        }
    }

    /// The id the next [`Stdio::rpc`] will use.
    pub fn next_id(&self) -> u64 {
        self.next_id + 1
    }

    /// Sends a request with modern `_meta` without waiting for its answer; returns its id.
    pub async fn send_rpc(&mut self, method: &str, params: Value, caps: Caps) -> u64 {
        self.next_id += 1;
        let params = with_meta(params, meta(caps));
        let id = self.next_id;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        id
    }

    pub async fn rpc(&mut self, method: &str, params: Value, caps: Caps) -> Value {
        self.rpc_meta(method, params, meta(caps)).await
    }

    /// [`Stdio::rpc`] with this `_meta`.
    pub async fn rpc_meta(&mut self, method: &str, params: Value, meta: Value) -> Value {
        self.next_id += 1;
        let params = with_meta(params, meta);
        self.request(
            json!({ "jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params }),
        )
        .await
    }
}

/// Both transports for one server factory: Streamable HTTP and stdio.
pub async fn both(make: impl Fn() -> TaskServer) -> [Peer; 2] {
    [
        Peer::Http(Http::start(make()).await),
        Peer::Stdio(Stdio::start(make())),
    ]
}

/// The text of the first content block of a `CallToolResult` object.
pub fn first_text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The key of the first input request of a result or task object (`inputRequests`).
pub fn first_input_key(object: &Value) -> String {
    object["inputRequests"]
        .as_object()
        .and_then(|requests| requests.keys().next())
        .unwrap_or_else(|| panic!("no input request in {object}"))
        .clone()
}

/// Asks two questions at once (two input requests outstanding together), then answers
/// "<name> from <city>".
#[task_tool(mode = "required", poll_interval = "20ms")]
pub async fn two_questions(ctx: TaskContext) -> Result<String, ToolError> {
    let (name, city) = tokio::try_join!(
        ask_string(&ctx, "Your name?", "name"),
        ask_string(&ctx, "Your city?", "city")
    )?;
    Ok(format!("{name} from {city}"))
}
