//! Restart behaviour on the SQLite store, in process: a second server on the same file plays
//! the restarted process. What a tool's restart policy and version decide, and that expiry
//! keeps working across a restart (WIRE.md R20).

mod common;

use std::time::Duration;

use common::{Peer, Stdio, TASKS};
use mcp_tasks::{SqliteStore, TaskContext, TaskServer, ToolError, task_tool, toolkit};
use serde_json::{Value, json};

/// Waits for a cancellation (or a restart).
#[task_tool(
    name = "job",
    mode = "required",
    restart = "resume",
    version = "1",
    ttl = "2s",
    poll_interval = "100ms"
)]
async fn job_v1(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// The same tool, changed.
#[task_tool(
    name = "job",
    mode = "required",
    restart = "resume",
    version = "2",
    ttl = "2s",
    poll_interval = "100ms"
)]
async fn job_v2(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// Fails on restart (the default policy).
#[task_tool(mode = "required")]
async fn fragile(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

struct Db(std::path::PathBuf);

impl Db {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "mcp-tasks-durable-{name}-{}.db",
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
        TaskServer::new(toolkit).with_store(SqliteStore::open(&self.0).expect("open the database"))
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.clean();
    }
}

fn task_id(response: &Value) -> String {
    response["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {response}"))
        .to_owned()
}

/// A task is only replayed by the tool version that started it; the default policy fails
/// the task with a message that says the server restarted.
#[tokio::test]
async fn restart_policy_and_tool_version() {
    let db = Db::new("policy");
    let mut before = Peer::Stdio(Stdio::start(db.server(toolkit![job_v1, fragile].unwrap())));
    let job = task_id(&before.call("job", json!({}), TASKS).await);
    let fragile = task_id(&before.call("fragile", json!({}), TASKS).await);

    let restarted = db.server(toolkit![job_v2, fragile].unwrap());
    let report = restarted.recover().await.unwrap();
    assert_eq!((report.resumed, report.failed), (0, 2), "{report:?}");
    let mut after = Peer::Stdio(Stdio::start(restarted));
    let job = after.get(&job).await["result"].clone();
    assert_eq!(job["status"], "failed", "{job}");
    let message = job["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("changed from version `1` to `2`"),
        "{message}"
    );
    assert_eq!(job["statusMessage"].as_str().unwrap(), message);
    let fragile = after.get(&fragile).await["result"].clone();
    assert_eq!(fragile["status"], "failed");
    assert_eq!(fragile["error"]["code"], -32603);
    assert_eq!(
        fragile["error"]["message"],
        "the server restarted while the task was running"
    );
}

/// A resumed task keeps its deadline from creation: past its TTL after the restart, it is
/// `failed` with "task expired" (R20).
#[tokio::test]
async fn expiry_across_a_restart() {
    let db = Db::new("expiry");
    let mut before = Peer::Stdio(Stdio::start(db.server(toolkit![job_v1].unwrap())));
    let created = before.call("job", json!({}), TASKS).await;
    assert_eq!(created["result"]["ttlMs"], 2000);
    let job = task_id(&created);

    let restarted = db.server(toolkit![job_v1].unwrap());
    assert_eq!(restarted.recover().await.unwrap().resumed, 1);
    let mut after = Peer::Stdio(Stdio::start(restarted));
    let resumed = after.get(&job).await["result"].clone();
    assert_eq!(resumed["status"], "working");
    assert_eq!(resumed["statusMessage"], "resumed after a server restart");
    assert_eq!(resumed["createdAt"], created["result"]["createdAt"], "R57");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let expired = after.get(&job).await["result"].clone();
    assert_eq!(expired["status"], "failed", "{expired}");
    assert_eq!(expired["error"]["message"], "task expired");
}
