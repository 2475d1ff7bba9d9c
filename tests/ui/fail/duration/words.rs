use mcp_tasks::task_tool;

#[task_tool(ttl = "10 minutes")]
async fn slow() {}

#[task_tool(poll_interval = "2secs")]
async fn slower() {}

fn main() {}
