use mcp_tasks::task_tool;

// A call over a rate limit waits as a queued task: the limit needs a task.
#[task_tool(rate = "10/1m")]
async fn optional_export() {}

#[task_tool(mode = "required", rate = "0/1m")]
async fn zero() {}

#[task_tool(mode = "required", rate = "10 a minute")]
async fn words() {}

#[task_tool(mode = "required", rate = "10/1 m")]
async fn spaced() {}

#[task_tool(mode = "required", rate = 10)]
async fn number() {}

fn main() {}
