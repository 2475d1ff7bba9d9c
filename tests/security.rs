//! Security over real Streamable HTTP on 127.0.0.1: bearer tokens and owners (docs/protocol.md R49),
//! the sealed `requestState` of multi round-trip calls (C19-C21), `Origin` checks (C36).
//! Every server here is `serve_http` on a real socket; clients are plain reqwest.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use mcp_tasks::{
    Engine, HttpOptions, Owner, RequestStateKey, SqliteStore, State, StaticTokens, TaskContext,
    TaskServer, ToolError, Toolkit, task_tool, toolkit,
};
use rmcp::model::{ElicitResult, ElicitationSchema};
use serde_json::{Value, json};

const V2026: &str = "2026-07-28";
const TOKENS: &str = "alice:TOKEN_A,bob:TOKEN_B";

/// How many times a tool body ran.
#[derive(Clone, Default)]
struct Runs(Arc<AtomicUsize>);

fn form(field: &str) -> ElicitationSchema {
    ElicitationSchema::builder()
        .required_string(field)
        .build()
        .expect("a valid schema")
}

fn text(answer: &ElicitResult, field: &str) -> String {
    answer
        .content
        .as_ref()
        .and_then(|c| c[field].as_str())
        .unwrap_or("?")
        .to_owned()
}

/// Counts its runs; answers at once.
#[task_tool(mode = "inline")]
async fn counted(State(runs): State<Runs>) -> String {
    runs.0.fetch_add(1, Ordering::SeqCst);
    "ran".to_owned()
}

/// A task that asks one question and ends with the answer.
#[task_tool(mode = "required", poll_interval = "20ms")]
async fn hold(ctx: TaskContext) -> Result<String, ToolError> {
    let answer = ctx.elicit_form("Your word?", form("word")).await?;
    Ok(format!("word: {}", text(&answer, "word")))
}

/// The same, durable: replayed after a restart.
#[task_tool(mode = "required", restart = "resume", poll_interval = "20ms")]
async fn durable_hold(ctx: TaskContext) -> Result<String, ToolError> {
    let answer = ctx.elicit_form("Your word?", form("word")).await?;
    Ok(format!("word: {}", text(&answer, "word")))
}

/// Asks two questions, one round each, before answering inline.
#[task_tool(mode = "inline")]
async fn ask_twice(ctx: TaskContext, label: String) -> Result<String, ToolError> {
    let name = ctx.elicit_form("Your name?", form("name")).await?;
    let city = ctx.elicit_form("Your city?", form("city")).await?;
    Ok(format!(
        "{label}: {} from {}",
        text(&name, "name"),
        text(&city, "city")
    ))
}

/// The same questions under another name.
#[task_tool(mode = "inline")]
async fn ask_other(ctx: TaskContext, label: String) -> Result<String, ToolError> {
    let name = ctx.elicit_form("Your name?", form("name")).await?;
    let city = ctx.elicit_form("Your city?", form("city")).await?;
    Ok(format!(
        "{label} (other): {} from {}",
        text(&name, "name"),
        text(&city, "city")
    ))
}

fn tools(runs: &Runs) -> Toolkit {
    toolkit![counted, hold, durable_hold, ask_twice, ask_other]
        .expect("distinct tools")
        .with_state(runs.clone())
}

fn tokens() -> HttpOptions {
    HttpOptions::new().with_static_tokens(StaticTokens::parse(TOKENS).expect("a token list"))
}

/// Serves `server` with `options` on 127.0.0.1:0; the `/mcp` URL.
async fn start(server: TaskServer, options: HttpOptions) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(mcp_tasks::serve_http(listener, server, options));
    format!("http://{addr}/mcp")
}

/// One HTTP response: status, headers, body (JSON-RPC when it is JSON).
struct Reply {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
    text: String,
}

impl Reply {
    fn error(&self) -> (i64, String) {
        let error = &self.body["error"];
        assert!(
            error.is_object(),
            "expected a JSON-RPC error: {}",
            self.text
        );
        (
            error["code"].as_i64().unwrap_or_default(),
            error["message"].as_str().unwrap_or_default().to_owned(),
        )
    }

    fn result(&self) -> &Value {
        assert!(
            self.body["result"].is_object(),
            "expected a result: {} {}",
            self.status,
            self.text
        );
        &self.body["result"]
    }
}

/// A caller: its bearer token and `Origin`, if any.
#[derive(Clone)]
struct Caller {
    url: String,
    token: Option<&'static str>,
    origin: Option<&'static str>,
}

impl Caller {
    fn new(url: &str, token: Option<&'static str>) -> Self {
        Self {
            url: url.to_owned(),
            token,
            origin: None,
        }
    }

    fn with_origin(mut self, origin: &'static str) -> Self {
        self.origin = Some(origin);
        self
    }

    /// One request with modern `_meta` (declaring the tasks extension and elicitation).
    async fn rpc(&self, method: &str, mut params: Value) -> Reply {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": V2026,
            "io.modelcontextprotocol/clientInfo": { "name": "security-tests", "version": "0" },
            "io.modelcontextprotocol/clientCapabilities": {
                "elicitation": { "form": {} },
                "extensions": { "io.modelcontextprotocol/tasks": {} },
            },
        });
        let mut request = reqwest::Client::new()
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", V2026)
            .header("mcp-method", method);
        if let Some(name) = params["name"].as_str().or(params["taskId"].as_str()) {
            request = request.header("mcp-name", name);
        }
        if let Some(token) = self.token {
            request = request.bearer_auth(token);
        }
        if let Some(origin) = self.origin {
            request = request.header("origin", origin);
        }
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        let response = request.body(body.to_string()).send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or_else(|_| {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m.get("id").is_some())
                .unwrap_or(Value::Null)
        });
        Reply {
            status,
            headers,
            body,
            text,
        }
    }

    async fn call(&self, tool: &str, params: Value) -> Reply {
        let mut params = params;
        params["name"] = json!(tool);
        self.rpc("tools/call", params).await
    }

    async fn get(&self, id: &str) -> Reply {
        self.rpc("tasks/get", json!({ "taskId": id })).await
    }

    async fn wait_status(&self, id: &str, status: &str) -> Value {
        for _ in 0..500 {
            let reply = self.get(id).await;
            if reply.result()["status"] == status {
                return reply.result().clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("task {id} never reached {status}");
    }
}

fn first_key(result: &Value) -> String {
    result["inputRequests"]
        .as_object()
        .and_then(|r| r.keys().next().cloned())
        .unwrap_or_else(|| panic!("no input request in {result}"))
}

fn word(value: &str) -> Value {
    json!({ "action": "accept", "content": { "word": value } })
}

/// R49: owner B gets exactly the unknown-id answer for A's task on get, update and cancel,
/// and A's task is unchanged afterwards (still waiting on the same question, not cancelled,
/// and completing with A's answer, not B's).
#[tokio::test]
async fn another_owners_task_is_an_unknown_id() {
    let runs = Runs::default();
    let url = start(TaskServer::new(tools(&runs)), tokens()).await;
    let (alice, bob) = (
        Caller::new(&url, Some("TOKEN_A")),
        Caller::new(&url, Some("TOKEN_B")),
    );
    let created = alice.call("hold", json!({ "arguments": {} })).await;
    let id = created.result()["taskId"].as_str().unwrap().to_owned();
    let before = alice.wait_status(&id, "input_required").await;
    let key = first_key(&before);
    let unknown = "0".repeat(44); // a task id: 12 hex digits of time + 128 bits in hex

    for (method, params) in [
        ("tasks/get", json!({})),
        (
            "tasks/update",
            json!({ "inputResponses": { key.clone(): word("bob's") } }),
        ),
        ("tasks/cancel", json!({})),
    ] {
        let mut foreign = params.clone();
        foreign["taskId"] = json!(id);
        let mut missing = params;
        missing["taskId"] = json!(unknown);
        let theirs = bob.rpc(method, foreign).await;
        let nobodys = bob.rpc(method, missing).await;
        assert_eq!(theirs.status, nobodys.status, "{method}");
        assert_eq!(theirs.error(), nobodys.error(), "{method}: {}", theirs.text);
        assert_eq!(theirs.error().0, -32602, "{method}");
        assert!(
            theirs
                .error()
                .1
                .starts_with(&format!("{method}: task not found. "))
        );
    }

    let after = alice.get(&id).await;
    let after = after.result();
    assert_eq!(after["status"], "input_required", "{after}");
    assert_eq!(after["inputRequests"], before["inputRequests"]);
    assert_eq!(after["lastUpdatedAt"], before["lastUpdatedAt"]);
    let answered = alice
        .rpc(
            "tasks/update",
            json!({ "taskId": id, "inputResponses": { key: word("alice's") } }),
        )
        .await;
    assert!(answered.body.get("error").is_none(), "{}", answered.text);
    let done = alice.wait_status(&id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "word: alice's");
    assert_eq!(runs.0.load(Ordering::SeqCst), 0, "`counted` never ran");
}

/// R49 across a restart: the task a replayed server recovers from the SQLite file keeps
/// its owner; the other owner still gets the unknown-id answer.
#[tokio::test]
async fn owners_survive_a_restart() {
    let path = std::env::temp_dir().join(format!("mcp-tasks-security-{}.db", std::process::id()));
    let clean = || {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    };
    clean();
    let runs = Runs::default();
    let first = TaskServer::from_engine(
        Engine::builder(tools(&runs))
            .with_store(SqliteStore::open(&path).unwrap())
            .build(),
    );
    let url = start(first, tokens()).await;
    let alice = Caller::new(&url, Some("TOKEN_A"));
    let created = alice.call("durable_hold", json!({ "arguments": {} })).await;
    let id = created.result()["taskId"].as_str().unwrap().to_owned();
    alice.wait_status(&id, "input_required").await;

    // The restarted process: a second server on the same file.
    let second = TaskServer::from_engine(
        Engine::builder(tools(&runs))
            .with_store(SqliteStore::open(&path).unwrap())
            .build(),
    );
    let report = second.recover().await.unwrap();
    assert_eq!(report.resumed, 1, "{report:?}");
    let url = start(second, tokens()).await;
    let (alice, bob) = (
        Caller::new(&url, Some("TOKEN_A")),
        Caller::new(&url, Some("TOKEN_B")),
    );
    let task = alice.wait_status(&id, "input_required").await;
    let key = first_key(&task);
    for method in ["tasks/get", "tasks/cancel"] {
        let reply = bob.rpc(method, json!({ "taskId": id })).await;
        assert_eq!(reply.error().0, -32602);
        assert!(
            reply
                .error()
                .1
                .starts_with(&format!("{method}: task not found. "))
        );
    }
    let reply = bob
        .rpc(
            "tasks/update",
            json!({ "taskId": id, "inputResponses": { key.clone(): word("bob's") } }),
        )
        .await;
    assert_eq!(reply.error().0, -32602);
    assert!(
        reply
            .error()
            .1
            .starts_with("tasks/update: task not found. ")
    );
    alice
        .rpc(
            "tasks/update",
            json!({ "taskId": id, "inputResponses": { key: word("alice's") } }),
        )
        .await;
    let done = alice.wait_status(&id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "word: alice's");
    clean();
}

/// No token, a wrong one, or another scheme: HTTP 401 with `WWW-Authenticate: Bearer`
/// (naming the resource metadata), and the tool never runs; the right token runs it.
#[tokio::test]
async fn no_or_wrong_token_is_refused_before_any_tool_runs() {
    let runs = Runs::default();
    let metadata = "https://mcp.example.com/.well-known/oauth-protected-resource";
    let url = start(
        TaskServer::new(tools(&runs)),
        tokens().with_resource_metadata(metadata),
    )
    .await;
    let call = json!({ "arguments": {} });

    let missing = Caller::new(&url, None).call("counted", call.clone()).await;
    assert_eq!(missing.status, 401, "{}", missing.text);
    assert_eq!(
        missing.headers["www-authenticate"],
        format!("Bearer resource_metadata=\"{metadata}\"")
    );
    assert!(
        missing.text.contains("Authorization: Bearer"),
        "{}",
        missing.text
    );

    let wrong = Caller::new(&url, Some("TOKEN_C"))
        .call("counted", call.clone())
        .await;
    assert_eq!(wrong.status, 401, "{}", wrong.text);
    assert_eq!(
        wrong.headers["www-authenticate"],
        format!("Bearer resource_metadata=\"{metadata}\", error=\"invalid_token\"")
    );

    let basic = reqwest::Client::new()
        .post(&url)
        .header("authorization", "Basic YWxpY2U6VE9LRU5fQQ==")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status().as_u16(), 401);
    assert_eq!(
        runs.0.load(Ordering::SeqCst),
        0,
        "no tool ran without a token"
    );

    let right = Caller::new(&url, Some("TOKEN_B"))
        .call("counted", call)
        .await;
    assert_eq!(right.status, 200, "{}", right.text);
    assert_eq!(right.result()["content"][0]["text"], "ran");
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
}

/// An owner whose name has a NUL character (the application's authentication named it; a
/// Postgres store cannot keep it) gets a clear `-32603` for a task call on every store, before
/// any work starts; its inline calls, which store nothing, are answered.
#[tokio::test]
async fn an_owner_named_with_a_nul_is_refused_tasks() {
    let runs = Runs::default();
    let tokens = StaticTokens::new().with_token("TOKEN_N", Owner::new("ev\u{0}e"));
    let options = HttpOptions::new().with_static_tokens(tokens);
    let url = start(TaskServer::new(tools(&runs)), options).await;
    let caller = Caller::new(&url, Some("TOKEN_N"));
    let refused = caller.call("hold", json!({ "arguments": {} })).await;
    let (code, message) = refused.error();
    assert_eq!(code, -32603, "{}", refused.text);
    assert!(
        message.contains(r#"owner "ev\0e" has a NUL character"#),
        "{message}"
    );
    let inline = caller.call("counted", json!({ "arguments": {} })).await;
    assert_eq!(inline.result()["content"][0]["text"], "ran");
}

/// The MCP authorization spec: the protected resource metadata (RFC 9728) is served without a
/// token, at the path-inserted and the root well-known URI, and every 401 names it.
#[tokio::test]
async fn protected_resource_metadata_is_served_without_a_token() {
    let runs = Runs::default();
    let options = tokens()
        .with_protected_resource("https://mcp.example.com/mcp", ["https://auth.example.com"])
        .unwrap();
    let url = start(TaskServer::new(tools(&runs)), options).await;
    let base = url.trim_end_matches("/mcp");
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let response = reqwest::get(format!("{base}{path}")).await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
        assert_eq!(response.headers()["content-type"], "application/json");
        let document: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
        assert_eq!(
            document,
            json!({
                "resource": "https://mcp.example.com/mcp",
                "authorization_servers": ["https://auth.example.com"],
                "bearer_methods_supported": ["header"],
            })
        );
    }
    let missing = Caller::new(&url, None)
        .call("counted", json!({ "arguments": {} }))
        .await;
    assert_eq!(missing.status, 401);
    assert_eq!(
        missing.headers["www-authenticate"],
        "Bearer resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\""
    );
    let error = HttpOptions::new()
        .with_protected_resource("/mcp", ["https://auth.example.com"])
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the protected resource `/mcp` is not an absolute http(s) URL; expected e.g. \
         `https://mcp.example.com/mcp`"
    );
}

/// The answer to round 1 of `ask_twice` for `caller`: `(requestState, key)`.
async fn round1(caller: &Caller, label: &str) -> (String, String) {
    let reply = caller
        .call("ask_twice", json!({ "arguments": { "label": label } }))
        .await;
    let result = reply.result();
    assert_eq!(result["resultType"], "input_required", "{}", reply.text);
    let state = result["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("round 1 carries a requestState: {result}"))
        .to_owned();
    (state, first_key(result))
}

fn name(value: &str) -> Value {
    json!({ "action": "accept", "content": { "name": value } })
}

/// C19-C21: a forged, tampered or replayed-elsewhere `requestState` answers -32602 with a
/// message saying which; answers for keys never issued are ignored; a genuine state works,
/// also on another instance with the same key (and not on one with another key).
#[tokio::test]
async fn request_state_is_sealed_and_bound() {
    let runs = Runs::default();
    let key = RequestStateKey::new(*b"a shared secret of 32 bytes, ok!").unwrap();
    let engine = Engine::builder(tools(&runs))
        .with_request_state_key(key.clone())
        .build();
    let url = start(TaskServer::from_engine(engine), tokens()).await;
    let (alice, bob) = (
        Caller::new(&url, Some("TOKEN_A")),
        Caller::new(&url, Some("TOKEN_B")),
    );
    let (state, key1) = round1(&alice, "L").await;
    let retry = |tool: &str, label: &str, state: &str, answers: Value| {
        (
            tool.to_owned(),
            json!({ "arguments": { "label": label }, "requestState": state, "inputResponses": answers }),
        )
    };
    let refused = |reason: &str| {
        (
            -32602,
            format!(
                "requestState {reason}; retry the call without requestState and inputResponses"
            ),
        )
    };
    let answers = json!({ key1.clone(): name("Ada") });

    // Forged: the plain JSON this server used to issue, and garbage.
    let forged = format!("{{\"tool\":\"ask_twice\",\"answers\":{answers}}}");
    // Tampered: one character of the signed body changed.
    let mut parts: Vec<String> = state.split('.').map(str::to_owned).collect();
    let mut body: Vec<char> = parts[1].chars().collect();
    let middle = body.len() / 2;
    body[middle] = if body[middle] == 'A' { 'B' } else { 'A' };
    parts[1] = body.into_iter().collect();
    let tampered = parts.join(".");
    let verification =
        refused("failed verification: this server did not issue it, or it was altered");
    for bad in [
        forged.as_str(),
        "rs1.e30.e30",
        tampered.as_str(),
        &format!("{state}x"),
    ] {
        let (tool, params) = retry("ask_twice", "L", bad, answers.clone());
        assert_eq!(
            alice.call(&tool, params).await.error(),
            verification,
            "{bad}"
        );
    }
    // Replayed elsewhere: another owner, another tool, other arguments.
    let (tool, params) = retry("ask_twice", "L", &state, answers.clone());
    assert_eq!(
        bob.call(&tool, params).await.error(),
        refused("was issued to another principal")
    );
    let (tool, params) = retry("ask_other", "L", &state, answers.clone());
    assert_eq!(
        alice.call(&tool, params).await.error(),
        refused("was issued for tool `ask_twice`, not `ask_other`")
    );
    let (tool, params) = retry("ask_twice", "M", &state, answers.clone());
    assert_eq!(
        alice.call(&tool, params).await.error(),
        refused("was issued for a call with other arguments")
    );

    // C21: an answer for a key round 1 never issued (the next question's) is ignored: the
    // call asks that question.
    let key2 = key1.replace("-1", "-2");
    let (tool, params) = retry(
        "ask_twice",
        "L",
        &state,
        json!({ key1.clone(): name("Ada"), key2.clone(): { "action": "accept", "content": { "city": "Nowhere" } } }),
    );
    let round2 = alice.call(&tool, params).await;
    let result = round2.result();
    assert_eq!(result["resultType"], "input_required", "{}", round2.text);
    assert_eq!(first_key(result), key2);
    assert_eq!(
        result["inputRequests"][&key2]["params"]["message"],
        "Your city?"
    );
    let state2 = result["requestState"].as_str().unwrap().to_owned();
    assert_ne!(state2, state);

    // A retry without requestState proves nothing was asked: asked again, not an error.
    let stateless = alice
        .call(
            "ask_twice",
            json!({ "arguments": { "label": "L" }, "inputResponses": answers }),
        )
        .await;
    let again = stateless.result();
    assert_eq!(again["resultType"], "input_required", "{}", stateless.text);
    assert_eq!(
        again["inputRequests"][&key1]["params"]["message"],
        "Your name?"
    );

    // Genuine: round 3 with the state of round 2 completes with both answers; on another
    // instance sharing the key too.
    let city = json!({ key2.clone(): { "action": "accept", "content": { "city": "Turin" } } });
    let (tool, params) = retry("ask_twice", "L", &state2, city.clone());
    let done = alice.call(&tool, params.clone()).await;
    assert_eq!(
        done.result()["content"][0]["text"],
        "L: Ada from Turin",
        "{}",
        done.text
    );

    let twin = Engine::builder(tools(&runs))
        .with_request_state_key(key)
        .build();
    let twin_url = start(TaskServer::from_engine(twin), tokens()).await;
    let done = Caller::new(&twin_url, Some("TOKEN_A"))
        .call(&tool, params.clone())
        .await;
    assert_eq!(
        done.result()["content"][0]["text"],
        "L: Ada from Turin",
        "{}",
        done.text
    );

    let stranger = start(TaskServer::new(tools(&runs)), tokens()).await;
    let refused_there = Caller::new(&stranger, Some("TOKEN_A"))
        .call(&tool, params)
        .await;
    assert_eq!(refused_there.error(), verification);
}

/// C19: a state past its expiry answers -32602 saying so.
#[tokio::test]
async fn expired_request_state_is_refused() {
    let runs = Runs::default();
    let engine = Engine::builder(tools(&runs))
        .with_request_state_ttl(Duration::from_millis(200))
        .build();
    let url = start(TaskServer::from_engine(engine), tokens()).await;
    let alice = Caller::new(&url, Some("TOKEN_A"));
    let (state, key1) = round1(&alice, "L").await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let reply = alice
        .call(
            "ask_twice",
            json!({ "arguments": { "label": "L" }, "requestState": state,
                "inputResponses": { key1: name("Ada") } }),
        )
        .await;
    assert_eq!(
        reply.error(),
        (
            -32602,
            "requestState has expired (a state is accepted for 200ms after it is issued); retry \
             the call without requestState and inputResponses"
                .to_owned()
        )
    );
}

/// C36: a foreign `Origin` gets 403 (even with a valid token); localhost origins and
/// requests without `Origin` pass; a configured list replaces the default.
#[tokio::test]
async fn foreign_origins_are_refused() {
    let runs = Runs::default();
    let url = start(TaskServer::new(tools(&runs)), tokens()).await;
    let alice = Caller::new(&url, Some("TOKEN_A"));
    let call = json!({ "arguments": {} });
    for origin in [
        "http://evil.example",
        "https://localhost.evil.example",
        "null",
    ] {
        let reply = alice
            .clone()
            .with_origin(origin)
            .call("counted", call.clone())
            .await;
        assert_eq!(reply.status, 403, "{origin}: {}", reply.text);
    }
    assert_eq!(runs.0.load(Ordering::SeqCst), 0);
    for origin in [
        "http://localhost:6274",
        "http://127.0.0.1",
        "http://[::1]:8080",
        "https://localhost",
    ] {
        let reply = alice
            .clone()
            .with_origin(origin)
            .call("counted", call.clone())
            .await;
        assert_eq!(reply.status, 200, "{origin}: {}", reply.text);
    }
    assert_eq!(alice.call("counted", call.clone()).await.status, 200);
    assert_eq!(runs.0.load(Ordering::SeqCst), 5);

    let listed = start(
        TaskServer::new(tools(&runs)),
        HttpOptions::new().with_allowed_origins(["https://app.example.com"]),
    )
    .await;
    let anyone = Caller::new(&listed, None);
    let app = anyone
        .clone()
        .with_origin("https://app.example.com")
        .call("counted", call.clone())
        .await;
    assert_eq!(app.status, 200, "{}", app.text);
    let local = anyone
        .with_origin("http://localhost:3000")
        .call("counted", call)
        .await;
    assert_eq!(local.status, 403, "{}", local.text);
}

/// Without a validator every request is the default owner; `Owner::process_user` names the
/// user a stdio server runs as.
#[test]
fn the_process_user_is_a_named_owner() {
    let owner = Owner::process_user();
    assert!(!owner.0.is_empty());
    if let Ok(user) = std::env::var("USER")
        && !user.is_empty()
    {
        assert_eq!(&*owner.0, user);
    }
}
