use mcp_tasks::task_tool;

// A call over a concurrency limit waits as a queued task: the limit needs a task.
#[task_tool(concurrency = 3)]
async fn optional_export() {}

#[task_tool(mode = "inline", concurrency = 2)]
async fn inline_export() {}

#[task_tool(mode = "required", concurrency = 0)]
async fn zero() {}

#[task_tool(mode = "required", concurrency = "3")]
async fn quoted() {}

fn main() {}
