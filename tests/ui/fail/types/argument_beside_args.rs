use mcp_tasks::{TaskContext, task_tool};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

// Beside `#[args]`, the context is fine and an argument is not.
#[task_tool]
async fn f(ctx: TaskContext, #[args] input: Input, extra: u32) {
    let _ = (ctx, input, extra);
}

fn main() {}
