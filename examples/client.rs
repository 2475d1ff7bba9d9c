//! The task client: `cargo run --example client -- [http://127.0.0.1:8080/mcp]`.
//!
//! Without a URL it starts the example server on 127.0.0.1 (a free port) first. Then it
//! calls `workspace_report`, prints each distinct snapshot while it polls (honouring
//! `pollIntervalMs`), answers the task's question, prints the task reference (what to store
//! to resume after a crash), and the result.

mod common;

use std::time::Duration;

use futures::StreamExt;
use mcp_tasks::client::{Call, TaskClient, TaskEnd};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::json;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Print the error's message: a `main` that returns it would print its Debug form.
    if let Err(error) = run().await {
        eprintln!("error: {error}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let url = match std::env::args().nth(1) {
        Some(url) => url,
        None => {
            let server = mcp_tasks::TaskServer::new(common::toolkit(Duration::from_millis(300)));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let url = format!("http://{}/mcp", listener.local_addr()?);
            tokio::spawn(mcp_tasks::serve_http(
                listener,
                server,
                mcp_tasks::HttpOptions::new(),
            ));
            url
        }
    };
    let client = TaskClient::builder()
        .with_client_info("example-client", "1.0.0")
        .with_elicitation(|request, cx| async move {
            if let ElicitRequestParams::FormElicitationParams { message, .. } = &request {
                println!("  the server asks ({}): {message} → yes", cx.key);
            }
            Ok(Some(
                ElicitResult::new(ElicitationAction::Accept)
                    .with_content(json!({ "include": true })),
            ))
        })
        .connect_http(&url)
        .await?;
    println!("connected to {url}");

    let args = json!({ "workspace_id": "acme" }).as_object().cloned();
    let mut task = match client.call("workspace_report", args).await? {
        Call::Task(task) => task,
        Call::Inline(result) => {
            println!("inline result: {result:?}");
            return Ok(());
        }
        _ => return Err("unexpected answer".into()),
    };
    println!("task reference: {}", task.reference().to_json());
    {
        let mut updates = std::pin::pin!(task.updates());
        while let Some(snapshot) = updates.next().await {
            let snapshot = snapshot?;
            println!(
                "  {:?}: {}",
                snapshot.status(),
                snapshot.task.status_message.as_deref().unwrap_or("")
            );
        }
    }
    match task.outcome()? {
        Some(TaskEnd::Completed(result)) => {
            let text = result.content.first().and_then(|c| c.as_text());
            println!("done: {}", text.map(|t| t.text.as_str()).unwrap_or(""));
        }
        Some(TaskEnd::Failed(error)) => println!("failed: {} {}", error.code.0, error.message),
        Some(TaskEnd::Cancelled) => println!("cancelled"),
        _ => println!("unknown end"),
    }
    client.close().await;
    Ok(())
}
