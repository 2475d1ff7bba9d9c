use mcp_tasks::task_tool;

#[task_tool(ttl = 10, mode, read_only = "yes", name = "has space", crate = "not a path")]
async fn values() {}

fn main() {}
