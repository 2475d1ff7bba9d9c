use mcp_tasks::{TaskContext, task_tool};

// `#[arg]` makes a parameter an argument, whatever its type.
#[task_tool]
async fn f(#[arg(description = "the context")] ctx: TaskContext) {
    let _ = ctx;
}

fn main() {}
