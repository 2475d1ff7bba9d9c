use mcp_tasks::task_tool;

#[task_tool(tll = "10m")]
async fn slow() {}

#[task_tool(readonly)]
async fn reader() {}

fn main() {}
