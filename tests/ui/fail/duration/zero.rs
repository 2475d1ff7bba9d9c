use mcp_tasks::task_tool;

#[task_tool(poll_interval = "0s")]
async fn slow() {}

fn main() {}
