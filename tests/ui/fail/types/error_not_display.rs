use mcp_tasks::task_tool;

#[derive(Debug)]
struct Oops;

#[task_tool]
async fn fails() -> Result<u32, Oops> {
    Err(Oops)
}

fn main() {}
