use mcp_tasks::task_tool;

struct Opaque;

#[task_tool]
async fn takes(count: u32, opaque: Opaque) -> u32 {
    let _ = opaque;
    count
}

fn main() {}
