use mcp_tasks::task_tool;

#[task_tool]
async unsafe fn danger(a: u32) -> u32 {
    a
}

#[task_tool]
async extern "C" fn foreign(a: u32) -> u32 {
    a
}

#[task_tool]
async fn bounded(a: u32) -> u32
where
    u32: Copy,
{
    a
}

fn main() {}
