//! A task end to end, on the in-memory default, no services to start:
//! `cargo run --example demo`.
//!
//! Starts the example server on 127.0.0.1 (a free port), then plays the client over raw
//! Streamable HTTP so every message is visible: `tools/call` declaring the extension → a task
//! handle; `tasks/get` polls honouring `pollIntervalMs` and showing `statusMessage`; the task
//! asks a question (`input_required`); `tasks/update` answers it; the task completes.

mod common;

use std::time::Duration;

use mcp_tasks::TaskServer;
use serde_json::{Value, json};

struct Client {
    http: reqwest::Client,
    url: String,
    next_id: u64,
}

impl Client {
    async fn rpc(&mut self, method: &str, mut params: Value, name: Option<&str>) -> Value {
        self.next_id += 1;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "demo", "version": "1" },
            "io.modelcontextprotocol/clientCapabilities": {
                "elicitation": { "form": {} },
                "extensions": { "io.modelcontextprotocol/tasks": {} }
            }
        });
        let body =
            json!({ "jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params });
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method);
        if let Some(name) = name {
            request = request.header("mcp-name", name);
        }
        let text = request
            .body(body.to_string())
            .send()
            .await
            .expect("server reachable")
            .text()
            .await
            .expect("a body");
        let response: Value = serde_json::from_str(&text).unwrap_or_else(|_| {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m.get("id").is_some())
                .unwrap_or(Value::Null)
        });
        println!(
            "→ {method}\n← {}",
            serde_json::to_string(&response).unwrap_or_default()
        );
        response
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Print the error's message: a `main` that returns it would print its Debug form.
    if let Err(error) = run().await {
        eprintln!("error: {error}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}

async fn run() -> std::io::Result<()> {
    let server = TaskServer::new(common::toolkit(Duration::from_millis(400)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    tokio::spawn(mcp_tasks::serve_http(
        listener,
        server,
        mcp_tasks::HttpOptions::new(),
    ));
    println!("server on {url}\n");

    let mut client = Client {
        http: reqwest::Client::new(),
        url,
        next_id: 0,
    };
    let created = client
        .rpc(
            "tools/call",
            json!({ "name": "workspace_report", "arguments": { "workspace_id": "acme" } }),
            Some("workspace_report"),
        )
        .await;
    let task_id = created["result"]["taskId"]
        .as_str()
        .expect("a task handle")
        .to_owned();
    let mut poll =
        Duration::from_millis(created["result"]["pollIntervalMs"].as_u64().unwrap_or(1000));
    let mut answered = Vec::new();
    loop {
        tokio::time::sleep(poll).await;
        let snapshot = client
            .rpc("tasks/get", json!({ "taskId": task_id }), Some(&task_id))
            .await["result"]
            .clone();
        if let Some(ms) = snapshot["pollIntervalMs"].as_u64() {
            poll = Duration::from_millis(ms.max(10));
        }
        println!(
            "   status: {} — {}\n",
            snapshot["status"], snapshot["statusMessage"]
        );
        match snapshot["status"].as_str() {
            Some("input_required") => {
                let mut responses = serde_json::Map::new();
                for (key, request) in snapshot["inputRequests"].as_object().into_iter().flatten() {
                    if answered.contains(key) {
                        continue;
                    }
                    println!(
                        "   the server asks: {}  (answering yes)",
                        request["params"]["message"]
                    );
                    responses.insert(
                        key.clone(),
                        json!({ "action": "accept", "content": { "include": true } }),
                    );
                    answered.push(key.clone());
                }
                if !responses.is_empty() {
                    client
                        .rpc(
                            "tasks/update",
                            json!({ "taskId": task_id, "inputResponses": responses }),
                            Some(&task_id),
                        )
                        .await;
                }
            }
            Some("completed") => {
                println!("done: {}", snapshot["result"]["content"][0]["text"]);
                return Ok(());
            }
            Some("failed" | "cancelled") => {
                return Err(std::io::Error::other(format!(
                    "task ended {}",
                    snapshot["status"]
                )));
            }
            _ => {}
        }
    }
}
