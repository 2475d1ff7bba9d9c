use mcp_tasks::task_tool;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[task_tool]
async fn f(#[args] input: Input, #[arg(description = "more")] extra: u32, #[args] again: Input) {
    let _ = (input, extra, again);
}

fn main() {}
