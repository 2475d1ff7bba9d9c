use mcp_tasks::task_tool;

// Both mistakes of one attribute are reported in one build, each at its token.
#[task_tool(ttl = "10 m", mode = "requried")]
async fn slow() {}

fn main() {}
