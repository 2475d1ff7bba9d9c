use mcp_tasks::task_tool;

#[task_tool(ttl = "10m", poll_interval = "1h")]
async fn slow() {}

fn main() {}
