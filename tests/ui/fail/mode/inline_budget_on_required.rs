use mcp_tasks::task_tool;

#[task_tool(mode = "required", inline_budget = "250ms")]
async fn slow() {}

#[task_tool(mode = "inline", inline_budget = "250ms")]
async fn quick() {}

fn main() {}
