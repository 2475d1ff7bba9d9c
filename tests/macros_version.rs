//! The default tool version (`#[task_tool]` without `version = ".."`) is a digest of the
//! tool itself: its wire name, input and output schemas, and the code of the fn. A new
//! release that leaves the tool unchanged resumes its `restart = "resume"` tasks; one that
//! changed the tool fails them instead of replaying them with other code. An explicit
//! `version` is the author's promise and wins over the digest.
//!
//! Each "release" is a second server on the same SQLite file, with another fn that defines
//! the tool `job`.

mod common;

use common::{Peer, Stdio, TASKS};
use mcp_tasks::{SqliteStore, TaskContext, TaskServer, TaskTool, ToolError, task_tool, toolkit};
use serde_json::{Value, json};

/// Waits for a cancellation (or a restart).
#[task_tool(name = "job", mode = "required", restart = "resume")]
async fn job_release_1(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// The next release, in which this tool did not change (another fn name, another doc
/// comment, another layout).
#[task_tool(name = "job", mode = "required", restart = "resume")]
pub async fn job_release_2(ctx: TaskContext) -> Result<String, ToolError> {
    // Nothing changed here.
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// A release whose code changed.
#[task_tool(name = "job", mode = "required", restart = "resume")]
async fn job_code_changed(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.status("waiting").await;
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// A release that takes a new argument (the input schema changed).
#[task_tool(name = "job", mode = "required", restart = "resume")]
async fn job_schema_changed(ctx: TaskContext, label: Option<String>) -> Result<String, ToolError> {
    let _ = label;
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// A release whose output type changed (the output schema changed).
#[task_tool(name = "job", mode = "required", restart = "resume")]
async fn job_output_changed(ctx: TaskContext) -> Result<u32, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// Pinned by its author.
#[task_tool(name = "job", mode = "required", restart = "resume", version = "7")]
async fn pinned_before(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// Changed, and its author promises that tasks of version 7 may resume.
#[task_tool(name = "job", mode = "required", restart = "resume", version = "7")]
async fn pinned_after(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.status("resumed with the new code").await;
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

fn version(tool: &impl TaskTool) -> String {
    tool.definition().version().to_owned()
}

#[test]
fn the_default_version_is_a_digest_of_the_tool() {
    let released = version(&job_release_1 {});
    assert_eq!(released.len(), 16, "{released}");
    assert!(
        released.bytes().all(|b| b.is_ascii_hexdigit()),
        "{released}"
    );
    assert_ne!(released, env!("CARGO_PKG_VERSION"));
    assert_eq!(
        released,
        version(&job_release_2 {}),
        "the same tool, the same version"
    );
    for (what, changed) in [
        ("code", version(&job_code_changed {})),
        ("input schema", version(&job_schema_changed {})),
        ("output schema", version(&job_output_changed {})),
    ] {
        assert_ne!(released, changed, "a changed {what} changes the version");
    }
    assert_eq!(version(&pinned_before {}), "7");
    assert_eq!(version(&pinned_after {}), "7");
}

struct Db(std::path::PathBuf);

impl Db {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "mcp-tasks-version-{name}-{}.db",
            std::process::id()
        ));
        let db = Self(path);
        db.clean();
        db
    }
    fn clean(&self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
    fn server(&self, toolkit: mcp_tasks::Toolkit) -> TaskServer {
        TaskServer::from_engine(
            mcp_tasks::Engine::builder(toolkit)
                .with_store(SqliteStore::open(&self.0).expect("open the database"))
                .build(),
        )
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.clean();
    }
}

/// Starts `job` on `before`, then restarts on `after` (recovering) and returns the task as
/// the restarted server shows it, and how many tasks recovery resumed.
async fn release(
    name: &str,
    before: mcp_tasks::Toolkit,
    after: mcp_tasks::Toolkit,
) -> (Value, usize) {
    let db = Db::new(name);
    let mut first = Peer::Stdio(Stdio::start(db.server(before)));
    let created = first.call("job", json!({}), TASKS).await;
    let id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {created}"))
        .to_owned();
    let restarted = db.server(after);
    let report = restarted.recover().await.expect("recover");
    let mut second = Peer::Stdio(Stdio::start(restarted));
    let task = second.get(&id).await["result"].clone();
    (task, report.resumed)
}

#[tokio::test]
async fn an_unchanged_tool_resumes_across_a_release() {
    let (task, resumed) = release(
        "same",
        toolkit![job_release_1].unwrap(),
        toolkit![job_release_2].unwrap(),
    )
    .await;
    assert_eq!(resumed, 1);
    assert_eq!(task["status"], "working", "{task}");
    assert_eq!(task["statusMessage"], "resumed after a server restart");
}

#[tokio::test]
async fn a_changed_tool_leaves_its_tasks_waiting_across_a_release() {
    let (task, resumed) = release(
        "changed",
        toolkit![job_release_1].unwrap(),
        toolkit![job_code_changed].unwrap(),
    )
    .await;
    assert_eq!(resumed, 0);
    assert_eq!(task["status"], "working", "{task}");
    let message = task["statusMessage"].as_str().unwrap();
    let (from, to) = (version(&job_release_1 {}), version(&job_code_changed {}));
    assert!(
        message.contains(&format!(
            "runs version `{from}` of tool `job` (this one runs `{to}`)"
        )),
        "{message}"
    );
}

#[tokio::test]
async fn an_explicit_version_resumes_changed_code() {
    let (task, resumed) = release(
        "pinned",
        toolkit![pinned_before].unwrap(),
        toolkit![pinned_after].unwrap(),
    )
    .await;
    assert_eq!(resumed, 1);
    assert_eq!(task["status"], "working", "{task}");
}
