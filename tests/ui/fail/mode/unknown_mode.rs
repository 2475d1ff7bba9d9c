use mcp_tasks::task_tool;

#[task_tool(mode = "background")]
async fn slow() {}

#[task_tool(mode = "requird")]
async fn typo() {}

fn main() {}
