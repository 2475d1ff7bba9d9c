use mcp_tasks::task_tool;

#[task_tool(ttl = "10m", poll_interval = "1h")]
async fn slow() {}

#[task_tool(poll_interval = "2h")]
async fn slow_default_ttl() {}

#[task_tool(ttl = "500ms")]
async fn short_default_poll() {}

fn main() {}
