use mcp_tasks::task_tool;

struct Opaque;

#[task_tool]
async fn gives() -> Opaque {
    Opaque
}

#[task_tool]
async fn gives_result() -> Result<Opaque, String> {
    Ok(Opaque)
}

fn main() {}
