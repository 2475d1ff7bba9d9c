use mcp_tasks::task_tool;

#[task_tool]
struct Tool;

fn main() {}
