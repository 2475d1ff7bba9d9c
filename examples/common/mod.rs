//! The tools the example servers share.
//!
//! `greet` is an ordinary tool; `workspace_report` runs as a task when the client declares
//! the extension: it reports progress in `statusMessage`, honours `tasks/cancel`, and asks the
//! user a question through `tasks/update`.

use std::time::Duration;

use mcp_tasks::{
    ArgumentError, Failure, Mode, TaskContext, TaskTool, ToolDefinition, ToolFuture, Toolkit, Ttl,
};
use rmcp::model::{CallToolResult, ContentBlock, ElicitationAction, ElicitationSchema, JsonObject};
use serde_json::{Value, json};

fn schema(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

fn string_arg(args: &JsonObject, name: &str) -> Result<String, ArgumentError> {
    match args.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(ArgumentError::new(format!(
            "`{name}`: invalid type: {other}, expected a string"
        ))),
        None => Err(ArgumentError::new(format!("`{name}`: missing field"))),
    }
}

/// Says hello. Never a task.
pub struct Greet;

impl TaskTool for Greet {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "greet",
            schema(json!({
                "type": "object",
                "properties": { "name": { "type": "string", "description": "Who to greet" } },
                "required": ["name"]
            })),
        )
        .with_description("Say hello.")
        .with_mode(Mode::Inline)
    }

    fn call(&self, _ctx: TaskContext, args: JsonObject) -> Result<ToolFuture, ArgumentError> {
        let name = string_arg(&args, "name")?;
        Ok(Box::pin(async move {
            Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                "Hello, {name}!"
            ))]))
        }))
    }
}

/// Builds the monthly report of a workspace: slow, reports progress, asks a question.
pub struct WorkspaceReport {
    /// How long each of the three scanning steps takes.
    pub step: Duration,
}

impl TaskTool for WorkspaceReport {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "workspace_report",
            schema(json!({
                "type": "object",
                "properties": { "workspace_id": { "type": "string" } },
                "required": ["workspace_id"]
            })),
        )
        .with_description("Build the monthly report for a workspace.")
        .with_ttl(Ttl::After(Duration::from_secs(600)))
        .with_poll_interval(Duration::from_millis(500))
    }

    fn call(&self, ctx: TaskContext, args: JsonObject) -> Result<ToolFuture, ArgumentError> {
        let workspace = string_arg(&args, "workspace_id")?;
        let step = self.step;
        Ok(Box::pin(async move {
            for i in 1..=3 {
                ctx.status(format!("scanning {workspace}: step {i} of 3"))
                    .await;
                ctx.until_cancelled(tokio::time::sleep(step)).await?;
            }
            ctx.status("waiting for your answer").await;
            let schema = ElicitationSchema::builder()
                .required_bool("include")
                .build()
                .map_err(|e| {
                    Failure::Error(rmcp::ErrorData::internal_error(e.to_string(), None))
                })?;
            let answer = ctx
                .elicit_form("Include archived accounts?", schema)
                .await?;
            let include = answer.action == ElicitationAction::Accept
                && answer.content.as_ref().and_then(|c| c["include"].as_bool()) == Some(true);
            ctx.status("writing the report").await;
            let accounts = if include { 42 } else { 40 };
            Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                "Report for {workspace}: {accounts} accounts{}",
                if include { " (archived included)" } else { "" }
            ))]))
        }))
    }
}

/// The example toolkit.
pub fn toolkit(step: Duration) -> Toolkit {
    Toolkit::new()
        .with_tool(Greet)
        .and_then(|t| t.with_tool(WorkspaceReport { step }))
        .expect("the example tools have distinct, valid definitions")
}
