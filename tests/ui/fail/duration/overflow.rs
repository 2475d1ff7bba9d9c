use mcp_tasks::task_tool;

#[task_tool(ttl = "99999999999999999999h")]
async fn forever() {}

fn main() {}
