use mcp_tasks::{TaskContext, task_tool};

#[task_tool]
async fn f(ctx: &TaskContext, a: u32, #[arg(rename = "a")] b: u32, (c, d): (u32, u32)) {
    let _ = (ctx, a, b, c, d);
}

fn main() {}
