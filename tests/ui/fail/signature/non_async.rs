use mcp_tasks::task_tool;

#[task_tool]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

fn main() {}
