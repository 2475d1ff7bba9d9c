use mcp_tasks::task_tool;

struct Server;

impl Server {
    #[task_tool]
    async fn add(&self, a: u32) -> u32 {
        a
    }
}

fn main() {}
