use mcp_tasks::task_tool;

#[task_tool(ttl = "5x")]
async fn slow() {}

#[task_tool(inline_budget = "5")]
async fn slower() {}

fn main() {}
