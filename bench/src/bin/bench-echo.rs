//! The transport ceiling: a bare HTTP+JSON server on axum that answers every JSON-RPC POST
//! with a `CallToolResult`-shaped result at once (the request is parsed, its id echoed).
//!
//! `bench-echo --port 8103`

use axum::{Json, Router, routing::post};
use mcp_tasks_bench::{Args, listen, serve_nodelay};
use serde_json::{Value, json};

async fn echo(Json(request): Json<Value>) -> Json<Value> {
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    Json(json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {
            "resultType": "complete",
            "content": [{"type": "text", "text": "done"}],
            "isError": false
        }
    }))
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse()?;
    args.only(&["port"])?;
    let port: u16 = args.parsed("port", 8103)?;
    let listener = listen(port, "echo").await?;
    serve_nodelay(listener, Router::new().route("/mcp", post(echo))).await
}
