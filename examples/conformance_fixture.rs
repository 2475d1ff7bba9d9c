//! The fixture server of the official conformance suite's `tasks-*` scenarios (PEERS.md §1), on
//! Streamable HTTP: `cargo run --example conformance_fixture -- --port 3001`. Its tools are
//! written by hand until they move to `#[task_tool]`; `test_tool_with_task` (MRTR before a
//! task) and the `tools-*` fixtures are not here yet.
use mcp_tasks::{
    ArgumentError, Failure, Mode, TaskContext, TaskServer, TaskTool, ToolDefinition, ToolError,
    ToolFuture, Toolkit,
};
use rmcp::model::{CallToolResult, ContentBlock, ElicitationSchema, ErrorData, JsonObject};
use serde_json::{Value, json};
use std::time::Duration;

struct T {
    def: ToolDefinition,
    f: fn(TaskContext, JsonObject) -> Result<ToolFuture, ArgumentError>,
}
impl TaskTool for T {
    fn definition(&self) -> ToolDefinition {
        self.def.clone()
    }
    fn call(&self, ctx: TaskContext, a: JsonObject) -> Result<ToolFuture, ArgumentError> {
        (self.f)(ctx, a)
    }
}
fn d(name: &'static str, props: Value) -> ToolDefinition {
    ToolDefinition::new(
        name,
        json!({"type":"object","properties":props})
            .as_object()
            .unwrap()
            .clone(),
    )
}
fn txt(s: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(s)])
}
async fn confirm(ctx: &TaskContext, field: &str, msg: String) -> Result<bool, Failure> {
    let schema = ElicitationSchema::builder()
        .required_bool(field)
        .build()
        .unwrap();
    let r = ctx.elicit_form(msg, schema).await?;
    Ok(r.content
        .as_ref()
        .and_then(|c| c[field].as_bool())
        .unwrap_or(false))
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args()
        .nth(2)
        .and_then(|p| p.parse().ok())
        .unwrap_or(3001);
    let tk = Toolkit::new()
        .with_tool(T {
            def: d("greet", json!({"name":{"type":"string"}})).with_mode(Mode::Inline),
            f: |_, a| {
                let n = a
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                Ok(Box::pin(async move { Ok(txt(format!("Hello, {n}!"))) }))
            },
        })
        .unwrap()
        .with_tool(T {
            def: d(
                "slow_compute",
                json!({"seconds":{"type":"number"},"label":{"type":"string"}}),
            )
            .with_poll_interval(Duration::from_millis(200)),
            f: |ctx, a| {
                let s = a.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
                let l = a
                    .get("label")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                Ok(Box::pin(async move {
                    ctx.until_cancelled(tokio::time::sleep(Duration::from_secs_f64(s)))
                        .await?;
                    Ok(txt(format!("computed {l}")))
                }))
            },
        })
        .unwrap()
        .with_tool(T {
            def: d("failing_job", json!({})).with_mode(Mode::Required),
            f: |_, _| {
                Ok(Box::pin(async {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    ToolError::new("job failed").into_outcome()
                }))
            },
        })
        .unwrap()
        .with_tool(T {
            def: d("protocol_error_job", json!({})).with_mode(Mode::Required),
            f: |_, _| {
                Ok(Box::pin(async {
                    Err(Failure::Error(ErrorData::internal_error(
                        "simulated protocol error",
                        None,
                    )))
                }))
            },
        })
        .unwrap()
        .with_tool(T {
            def: d("confirm_delete", json!({"filename":{"type":"string"}}))
                .with_mode(Mode::Required),
            f: |ctx, a| {
                let f = a
                    .get("filename")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                Ok(Box::pin(async move {
                    let ok = confirm(&ctx, "confirm", format!("Delete {f}?")).await?;
                    Ok(txt(if ok {
                        format!("Deleted {f}")
                    } else {
                        format!("Kept {f}")
                    }))
                }))
            },
        })
        .unwrap()
        .with_tool(T {
            def: d("multi_input", json!({})).with_mode(Mode::Required),
            f: |ctx, _| {
                Ok(Box::pin(async move {
                    let (a, b) = tokio::try_join!(
                        confirm(&ctx, "first", "First?".into()),
                        confirm(&ctx, "second", "Second?".into())
                    )?;
                    Ok(txt(format!("first={a} second={b}")))
                }))
            },
        })
        .unwrap();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    mcp_tasks::serve_http(listener, TaskServer::new(tk)).await
}
