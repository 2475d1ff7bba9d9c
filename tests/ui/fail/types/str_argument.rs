use mcp_tasks::task_tool;

// An argument is decoded from the call's JSON and lives as long as the task: owned.
#[task_tool]
async fn greet(name: &str, tags: &[String]) -> String {
    format!("{name} {tags:?}")
}

fn main() {}
