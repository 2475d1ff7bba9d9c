use mcp_tasks::task_tool;

#[task_tool(ttl = "10m", mode = "required", ttl = "20m")]
async fn slow() {}

fn main() {}
