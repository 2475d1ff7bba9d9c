use mcp_tasks::task_tool;

#[task_tool(ttl = 10, mode, read_only = "yes", name = "has space", crate = "not a path")]
async fn values() {}

fn main() {}

#[task_tool(restart = "retry")]
async fn bad_restart() {}

#[task_tool(version = "")]
async fn empty_version() {}
