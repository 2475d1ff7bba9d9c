use mcp_tasks::task_tool;

#[task_tool(ttl = "10 m")]
async fn slow() {}

fn main() {}
