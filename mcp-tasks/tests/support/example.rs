//! The example tools the CLI tests call (`greet`, `workspace_report`), kept inside this
//! package so that its tests build from the published crate too. The same tools serve the
//! workspace's examples (`examples/common/mod.rs`).

use std::time::Duration;

use mcp_tasks::{State, TaskContext, ToolError, Toolkit, task_tool, toolkit};
use rmcp::model::{ElicitationAction, ElicitationSchema, ErrorData};

/// Say hello.
#[task_tool(mode = "inline", read_only)]
pub async fn greet(#[arg(description = "Who to greet")] name: String) -> String {
    format!("Hello, {name}!")
}

/// How long each of the report's three scanning steps takes.
#[derive(Clone, Copy)]
pub struct Pace(pub Duration);

/// Build the monthly report for a workspace.
#[task_tool(ttl = "10m", poll_interval = "500ms")]
pub async fn workspace_report(
    ctx: TaskContext,
    State(Pace(step)): State<Pace>,
    #[arg(description = "The workspace to report on")] workspace_id: String,
) -> Result<String, ToolError> {
    for i in 1..=3 {
        ctx.status(format!("scanning {workspace_id}: step {i} of 3"))
            .await;
        ctx.until_cancelled(tokio::time::sleep(step)).await?;
    }
    ctx.status("waiting for your answer").await;
    let schema = ElicitationSchema::builder()
        .required_bool("include")
        .build()
        .map_err(|e| ToolError::rpc(ErrorData::internal_error(e.to_string(), None)))?;
    let answer = ctx
        .elicit_form("Include archived accounts?", schema)
        .await?;
    let include = answer.action == ElicitationAction::Accept
        && answer.content.as_ref().and_then(|c| c["include"].as_bool()) == Some(true);
    ctx.status("writing the report").await;
    let accounts = if include { 42 } else { 40 };
    Ok(format!(
        "Report for {workspace_id}: {accounts} accounts{}",
        if include { " (archived included)" } else { "" }
    ))
}

/// The toolkit of the CLI tests; `step` paces `workspace_report`.
pub fn toolkit(step: Duration) -> Toolkit {
    toolkit![greet, workspace_report]
        .expect("the example tools have distinct, valid definitions")
        .with_state(Pace(step))
}
