use mcp_tasks::{TaskContext, task_tool};

#[task_tool]
async fn f(
    #[arg(descripton = "x")] a: u32,
    #[arg] ctx: TaskContext,
    #[arg(default = 3)] c: u32,
    #[arg(rename = "")] d: u32,
    #[arg] e: u32,
    #[args(all)] #[arg(rename = "g")] f: u32,
) {
    let _ = (a, ctx, c, d, e, f);
}

fn main() {}
