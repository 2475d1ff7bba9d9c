use mcp_tasks::{State, task_tool};

struct Pool;

#[task_tool]
async fn query(State(pool): State<Pool>) -> u32 {
    let _ = pool;
    1
}

fn main() {}
