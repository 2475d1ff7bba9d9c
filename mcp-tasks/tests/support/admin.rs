//! A server for the admin tests: task tools that end in every state, served over Streamable
//! HTTP on 127.0.0.1:0 with the admin router beside the MCP one.
#![allow(dead_code, reason = "each admin test binary uses a different part")]

use std::time::Duration;

use mcp_tasks::{
    TaskContext, TaskServer, ToolError,
    admin::{self, AdminCredential},
    client::{Call, TaskClient, TaskHandle},
    task_tool, toolkit,
};
use rmcp::model::{ElicitationSchema, ErrorData, TaskStatus};
use serde_json::{Value, json};

pub const ADMIN_SECRET: &str = "admin-secret-0123456789";
/// A status message that is also markup: every page must show it as text.
pub const SCRIPT_MESSAGE: &str = "<script>document.title='pwned'</script> spinning & waiting";

/// Runs until cancelled, with a status message that is markup.
#[task_tool(mode = "required", poll_interval = "100ms")]
pub async fn spin(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.status(SCRIPT_MESSAGE).await;
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// Asks a question and waits for its answer.
#[task_tool(mode = "required", poll_interval = "100ms")]
pub async fn ask(ctx: TaskContext) -> Result<String, ToolError> {
    let schema = ElicitationSchema::builder()
        .required_bool("go")
        .build()
        .map_err(|e| ToolError::rpc(ErrorData::internal_error(e.to_string(), None)))?;
    ctx.elicit_form("Go on?", schema).await?;
    Ok("went on".into())
}

/// Completes at once.
#[task_tool(mode = "required", poll_interval = "100ms")]
pub async fn quick(n: u32) -> String {
    format!("done {n}")
}

/// Fails with a JSON-RPC error.
#[task_tool(mode = "required", poll_interval = "100ms")]
pub async fn boom() -> Result<String, ToolError> {
    Err(ToolError::rpc(ErrorData::invalid_request(
        "the upstream API refused the job",
        None,
    )))
}

pub struct Served {
    pub base: String,
    pub client: TaskClient,
    pub server: TaskServer,
}

/// The server, its MCP client, and the admin router at `/admin`.
pub async fn serve() -> Served {
    let server = TaskServer::new(toolkit![spin, ask, quick, boom].expect("toolkit"));
    let app =
        mcp_tasks::http_router(server.clone(), mcp_tasks::HttpOptions::new()).merge(admin::router(
            server.engine(),
            AdminCredential::new(ADMIN_SECRET).expect("long enough"),
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = TaskClient::connect(&mcp_tasks::client::Endpoint::http(format!("{base}/mcp")))
        .await
        .expect("connect");
    Served {
        base,
        client,
        server,
    }
}

/// Starts `tool` as a task and returns its handle.
pub async fn start(client: &TaskClient, tool: &str, arguments: Value) -> TaskHandle {
    match client.call(tool, arguments).await.expect("tools/call") {
        Call::Task(task) => task,
        other => panic!("{tool} did not start a task: {other:?}"),
    }
}

/// Polls task `id` over MCP (`tasks/get`) until it has `status` (bounded, real time).
pub async fn until_status(client: &TaskClient, id: &str, status: TaskStatus) {
    let mut task = client.task(id).await.expect("tasks/get");
    for _ in 0..200 {
        if task.status() == status {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        task.poll().await.expect("tasks/get");
    }
    panic!("task {id} never became {status:?}: {:?}", task.snapshot());
}

/// Tasks in every state: two `spin` (working), one `ask` (input_required), two `quick`
/// (completed), one `boom` (failed); returns the ids by tool.
pub async fn tasks_in_every_state(client: &TaskClient) -> Ids {
    let spin = [
        start(client, "spin", json!({})).await.id().to_owned(),
        start(client, "spin", json!({})).await.id().to_owned(),
    ];
    let ask = start(client, "ask", json!({})).await.id().to_owned();
    let quick = [
        start(client, "quick", json!({ "n": 1 }))
            .await
            .id()
            .to_owned(),
        start(client, "quick", json!({ "n": 2 }))
            .await
            .id()
            .to_owned(),
    ];
    let boom = start(client, "boom", json!({})).await.id().to_owned();
    for id in &spin {
        until_status(client, id, TaskStatus::Working).await;
    }
    until_status(client, &ask, TaskStatus::InputRequired).await;
    for id in &quick {
        until_status(client, id, TaskStatus::Completed).await;
    }
    until_status(client, &boom, TaskStatus::Failed).await;
    // The spinning tasks have set their status message once their snapshots show it.
    for id in &spin {
        for _ in 0..200 {
            let task = client.task(id).await.expect("tasks/get");
            if task.snapshot().task.status_message.as_deref() == Some(SCRIPT_MESSAGE) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
    Ids {
        spin,
        ask,
        quick,
        boom,
    }
}

pub struct Ids {
    pub spin: [String; 2],
    pub ask: String,
    pub quick: [String; 2],
    pub boom: String,
}
