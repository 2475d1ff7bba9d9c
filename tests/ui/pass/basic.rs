use mcp_tasks::{State, TaskContext, ToolError, task_tool, toolkit};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, JsonSchema)]
struct Sum {
    total: u64,
}

#[derive(Clone)]
struct Config {
    scale: u64,
}

/// Adds numbers.
#[task_tool(ttl = "10m", poll_interval = "2s", mode = "optional", inline_budget = "250ms", read_only)]
async fn add(
    ctx: TaskContext,
    State(config): State<Config>,
    #[arg(description = "the left operand")] a: u64,
    #[arg(rename = "right")] b: Option<u64>,
) -> Result<Sum, ToolError> {
    ctx.status("adding").await;
    Ok(Sum { total: (a + b.unwrap_or(0)) * config.scale })
}

#[derive(Deserialize, JsonSchema)]
struct Input {
    /// The text.
    text: String,
}

/// Echoes.
#[task_tool(name = "echo", mode = "inline")]
async fn echo_tool(#[args] input: Input) -> String {
    input.text
}

#[task_tool]
async fn nothing() {}

#[task_tool(ttl = "unlimited", mode = "required")]
async fn fails(#[arg(default)] n: u32) -> Result<u32, String> {
    if n == 0 { Err("zero".into()) } else { Ok(n) }
}

fn main() {
    let toolkit = toolkit![add, echo_tool, nothing, fails].unwrap().with_state(Config { scale: 2 });
    assert_eq!(toolkit.len(), 4);
}
