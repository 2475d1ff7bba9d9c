//! The listen limits of `Limits` (issue 22, "Limits"): task ids per `subscriptions/listen`
//! (`with_max_listen_task_ids`, `-32602` beyond) and open listen streams per owner
//! (`with_max_listen_streams_per_owner`, `-32603` beyond, a closed stream gives its place
//! back), set below their defaults and hit over Streamable HTTP on 127.0.0.1. The stream
//! limit is per owner: two owners with bearer tokens each reach it on their own, and one at
//! its cap does not hold another back.

mod common;

use std::time::Duration;

use common::{Http, Patience, TASKS};
use mcp_tasks::{
    Engine, HttpOptions, Limits, StaticTokens, TaskContext, TaskServer, ToolError, task_tool,
    toolkit,
};
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
        UpdateTaskParams,
    },
    service::RequestContext,
};
use serde_json::{Value, json};

/// Runs until cancelled.
#[task_tool(mode = "required", poll_interval = "20ms", ttl = "10m")]
async fn idle(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Ok("cancelled".into())
}

async fn server(limits: Limits) -> Http {
    let engine = Engine::builder(toolkit![idle].expect("a toolkit"))
        .with_limits(limits)
        .build();
    Http::start(TaskServer::from_engine(engine)).await
}

/// A listen for `ids`: `Ok` with the open response (an SSE stream), or `Err` with the
/// JSON-RPC error body.
async fn listen(server: &Http, id: u64, ids: &[String]) -> Result<reqwest::Response, Value> {
    opened(server.open_listen(json!(id), ids).await).await
}

/// [`listen`] as the owner of bearer `token`.
async fn listen_as(
    server: &Http,
    token: &str,
    id: u64,
    ids: &[String],
) -> Result<reqwest::Response, Value> {
    let body = json!({ "jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
        "params": { "_meta": common::meta(TASKS), "notifications": { "taskIds": ids } } });
    let response = server
        .client
        .post(&server.url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", common::V2026)
        .header("mcp-method", "subscriptions/listen")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    opened(response).await
}

async fn opened(response: reqwest::Response) -> Result<reqwest::Response, Value> {
    let sse = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if sse {
        Ok(response)
    } else {
        Err(serde_json::from_str(&response.text().await.unwrap()).unwrap())
    }
}

#[tokio::test]
async fn the_task_ids_per_listen_limit_is_set_and_hit() {
    let mut server = server(Limits::default().with_max_listen_task_ids(2)).await;
    let ids = vec![
        server.call_task("idle", json!({})).await,
        server.call_task("idle", json!({})).await,
    ];
    listen(&server, 1, &ids)
        .await
        .expect("two ids are within the limit");
    // A repeated id counts once.
    let repeated = vec![ids[0].clone(), ids[1].clone(), ids[0].clone()];
    listen(&server, 2, &repeated)
        .await
        .expect("a repeat is not one more id");
    let three = vec![ids[0].clone(), ids[1].clone(), "another".to_owned()];
    let refused = listen(&server, 3, &three).await.expect_err("three ids");
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(refused["error"]["data"]["maxTaskIds"], 2, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("names 3 tasks, more than the 2")
            && message.contains("split them over several streams"),
        "{message}"
    );
}

#[tokio::test]
async fn the_streams_per_owner_limit_is_set_and_hit() {
    let mut server = server(Limits::default().with_max_listen_streams_per_owner(2)).await;
    let task = vec![server.call_task("idle", json!({})).await];
    let first = listen(&server, 1, &task).await.expect("stream 1");
    let _second = listen(&server, 2, &task).await.expect("stream 2");
    let refused = listen(&server, 3, &task).await.expect_err("a third stream");
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert_eq!(refused["error"]["data"]["maxListenStreams"], 2, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("has 2 task listen streams open") && message.contains("listen again"),
        "{message}"
    );
    // A closed stream gives its place back, once the server notices: at its next write,
    // here the task's end.
    drop(first);
    let (_, cancelled) = server
        .rpc("tasks/cancel", json!({ "taskId": task[0] }), TASKS)
        .await;
    assert!(cancelled.get("result").is_some(), "{cancelled}");
    let patience = Patience::with_bound(
        "a place given back by the closed stream",
        Duration::from_secs(10),
    );
    loop {
        match listen(&server, 4, &task).await {
            Ok(_) => break,
            Err(refused) => {
                assert_eq!(refused["error"]["code"], -32603, "{refused}");
                patience.wait().await;
            }
        }
    }
}

/// The limit counts each owner's streams apart: with two owners (bearer tokens) and a limit
/// of 2, one owner at its cap is refused while the other still opens both of its own, and
/// then reaches its own cap; the refusal names the owner refused.
#[tokio::test]
async fn the_streams_per_owner_limit_is_per_owner() {
    let tokens = StaticTokens::parse("alice:TOKEN_A,bob:TOKEN_B").unwrap();
    let engine = Engine::builder(toolkit![idle].expect("a toolkit"))
        .with_limits(Limits::default().with_max_listen_streams_per_owner(2))
        .build();
    let mut server = Http::start_router(mcp_tasks::http_router(
        TaskServer::from_engine(engine),
        HttpOptions::new().with_static_tokens(tokens),
    ))
    .await;
    server.extra = vec![("authorization", "Bearer TOKEN_A".to_owned())];
    let alice_task = vec![server.call_task("idle", json!({})).await];
    server.extra = vec![("authorization", "Bearer TOKEN_B".to_owned())];
    let bob_task = vec![server.call_task("idle", json!({})).await];

    let mut open = Vec::new();
    for id in 1..=2 {
        open.push(
            listen_as(&server, "TOKEN_A", id, &alice_task)
                .await
                .unwrap_or_else(|e| panic!("alice's stream {id}: {e}")),
        );
    }
    let refused = listen_as(&server, "TOKEN_A", 3, &alice_task)
        .await
        .expect_err("alice's third stream");
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert_eq!(refused["error"]["data"]["maxListenStreams"], 2, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("owner `alice`"), "{message}");
    // Alice at her cap (her two streams still open) does not hold Bob back.
    for id in 1..=2 {
        open.push(
            listen_as(&server, "TOKEN_B", id, &bob_task)
                .await
                .unwrap_or_else(|e| panic!("bob's stream {id}, alice at her cap: {e}")),
        );
    }
    let refused = listen_as(&server, "TOKEN_B", 3, &bob_task)
        .await
        .expect_err("bob's third stream");
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("owner `bob`"), "{message}");
    assert_eq!(open.len(), 4, "two streams of each owner open at once");
}

/// The shape of `examples/delegate.rs`: a handler of the application's own that routes the
/// five methods to an engine it holds, and names it with `AsRef<Engine>`.
#[derive(Clone)]
struct Delegating {
    tasks: Engine,
}

impl AsRef<Engine> for Delegating {
    fn as_ref(&self) -> &Engine {
        &self.tasks
    }
}

impl ServerHandler for Delegating {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(self.tasks.capabilities(ServerCapabilities::default()))
    }
    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(self.tasks.list_tools())
    }
    async fn call_tool(
        &self,
        p: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.tasks.call_tool(p, &cx).await
    }
    async fn get_task(
        &self,
        p: GetTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.tasks.get_task(p, &cx).await
    }
    async fn update_task(
        &self,
        p: UpdateTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.update_task(p, &cx).await
    }
    async fn cancel_task(
        &self,
        p: CancelTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel_task(p, &cx).await
    }
}

/// A wrapped engine served over HTTP is the engine served: it is started, its task listens
/// are served (push), and its limits bound the listens and the requests.
#[tokio::test]
async fn a_delegating_handler_gets_push_and_its_engines_limits() {
    let engine = Engine::builder(toolkit![idle].expect("a toolkit"))
        .with_limits(
            Limits::default()
                .with_max_listen_task_ids(2)
                .with_max_arguments_bytes(64),
        )
        .build();
    let handler = Delegating {
        tasks: engine.clone(),
    };
    let mut server = Http::start_router(mcp_tasks::http_router(
        handler,
        mcp_tasks::HttpOptions::new(),
    ))
    .await;
    assert!(
        engine.is_running(),
        "serving the handler started its engine"
    );
    let ids = vec![
        server.call_task("idle", json!({})).await,
        server.call_task("idle", json!({})).await,
    ];
    let mut stream = listen(&server, 1, &ids)
        .await
        .expect("a task listen is served");
    let cancelled = server
        .rpc("tasks/cancel", json!({ "taskId": ids[0] }), TASKS)
        .await;
    assert_eq!(cancelled.0, 200, "{cancelled:?}");
    let patience = Patience::new("the listen stream pushes the cancelled task");
    let mut seen = String::new();
    while !seen.contains(&ids[0]) || !seen.contains("cancelled") {
        assert!(!patience.expired(), "{seen}");
        match tokio::time::timeout(Duration::from_millis(200), stream.chunk()).await {
            Ok(Ok(Some(chunk))) => seen.push_str(&String::from_utf8_lossy(&chunk)),
            Ok(other) => panic!("the stream ended: {other:?} after {seen}"),
            Err(_) => {}
        }
    }
    let three = vec![ids[0].clone(), ids[1].clone(), "another".to_owned()];
    let refused = listen(&server, 2, &three).await.expect_err("three ids");
    assert_eq!(refused["error"]["data"]["maxTaskIds"], 2, "{refused}");
    let (status, large) = server
        .rpc(
            "tools/call",
            json!({ "name": "idle", "arguments": { "a": "x".repeat(100) } }),
            TASKS,
        )
        .await;
    assert_eq!(
        (status, large["error"]["code"].as_i64()),
        (400, Some(-32602))
    );
    let message = large["error"]["message"].as_str().unwrap();
    assert!(message.contains("more than the limit of 64"), "{message}");
}
