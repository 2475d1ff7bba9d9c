use mcp_tasks::{task_tool, toolkit};

#[task_tool(name = "search")]
async fn search_web() {}

#[task_tool(name = "search")]
async fn search_docs() {}

fn main() {
    let _ = toolkit![search_web, search_docs];
}
