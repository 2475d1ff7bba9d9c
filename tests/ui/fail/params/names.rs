use mcp_tasks::task_tool;

#[task_tool]
async fn f(a: u32, #[arg(rename = "a")] b: u32, #[arg(description = "a pair")] (c, d): (u32, u32)) {
    let _ = (a, b, c, d);
}

fn main() {}
