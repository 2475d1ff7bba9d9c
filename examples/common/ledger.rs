//! `sync_ledger`, one tool in three builds, for a deploy that changes a tool while its tasks
//! run (`--ledger-build`, `MCP_TASKS_LEDGER_BUILD`):
//!
//! - build 1 fetches, posts the ledger (`post-v1`), then settles it in batches;
//! - build 2 (same version) posts another way (`post-v2`) and notifies the owner at the end,
//!   both behind the patch `ledger-v2`: tasks build 1 started keep build 1's path;
//! - build 3 is version `2`, changed without a patch: tasks of version `1` wait for an
//!   instance that runs it.
//!
//! Each step it runs is written to the journal (`--journal`): `<task id> <step>`.

use std::time::Duration;

use mcp_tasks::{State, TaskContext, ToolError, Toolkit, task_tool, toolkit};

use super::{Journal, Pace, greet, import_rows, workspace_report};

/// Which build of `sync_ledger` runs (build 2 takes the patched path for new tasks).
#[derive(Clone, Copy)]
pub struct LedgerBuild(pub u8);

/// Runs step `name` once: what it does is written to the journal.
async fn journaled(
    ctx: &TaskContext,
    journal: &Journal,
    name: &str,
    pace: Duration,
) -> Result<(), ToolError> {
    let (journal, step_ctx, step_name) = (journal.clone(), ctx.clone(), name.to_owned());
    ctx.step(name, || async move {
        tokio::time::sleep(pace).await;
        let task = step_ctx.task_id().unwrap_or("inline");
        journal.record(task, step_name).map_err(|e| e.to_string())
    })
    .await?
    .map_err(ToolError::new)
}

/// Syncs a ledger: fetch, post, settle in `batches` batches.
#[task_tool(restart = "resume", version = "1", poll_interval = "200ms")]
pub async fn sync_ledger(
    ctx: TaskContext,
    State(journal): State<Journal>,
    State(pace): State<Pace>,
    State(build): State<LedgerBuild>,
    #[arg(description = "How many batches settle the ledger")] batches: u32,
) -> Result<String, ToolError> {
    let pace = pace.0;
    journaled(&ctx, &journal, "fetch", pace).await?;
    let patched = build.0 >= 2 && ctx.patched("ledger-v2").await?;
    let post = if patched { "post-v2" } else { "post-v1" };
    journaled(&ctx, &journal, post, pace).await?;
    for batch in 1..=batches {
        ctx.status(format!("settling batch {batch} of {batches}"))
            .await;
        journaled(&ctx, &journal, &format!("batch-{batch}"), pace).await?;
    }
    if patched {
        journaled(&ctx, &journal, "notify", pace).await?;
    }
    Ok(format!("ledger synced by {post}"))
}

/// `sync_ledger` version 2 (build 3): posts a third way, without a patch.
#[task_tool(
    name = "sync_ledger",
    restart = "resume",
    version = "2",
    poll_interval = "200ms"
)]
pub async fn sync_ledger_v2(
    ctx: TaskContext,
    State(journal): State<Journal>,
    State(pace): State<Pace>,
    #[arg(description = "How many batches settle the ledger")] batches: u32,
) -> Result<String, ToolError> {
    let pace = pace.0;
    journaled(&ctx, &journal, "fetch", pace).await?;
    journaled(&ctx, &journal, "post-v3", pace).await?;
    for batch in 1..=batches {
        journaled(&ctx, &journal, &format!("batch-{batch}"), pace).await?;
    }
    Ok("ledger synced by post-v3".to_owned())
}

/// The example toolkit with `sync_ledger` of `build`; `step` paces `workspace_report` and
/// each step of `sync_ledger`.
pub fn toolkit(step: Duration, build: u8) -> Toolkit {
    let tools = match build {
        1 | 2 => toolkit![greet, workspace_report, import_rows, sync_ledger],
        _ => toolkit![greet, workspace_report, import_rows, sync_ledger_v2],
    };
    tools
        .expect("the example tools have distinct, valid definitions")
        .with_state(Pace(step))
        .with_state(Journal::default())
        .with_state(LedgerBuild(build))
}
