use mcp_tasks::{task_tool, toolkit};

#[task_tool]
async fn search() {}

fn main() {
    let _ = toolkit![search, search];
}
