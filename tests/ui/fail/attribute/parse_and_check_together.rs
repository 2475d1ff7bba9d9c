use mcp_tasks::task_tool;

struct Server;

// One build reports the bad `ttl` (a parse error) together with the missing `async` and the
// `self` receiver (check errors), each at its own token.
impl Server {
    #[task_tool(ttl = "10 m", mode = "inline")]
    fn search(&self, query: String) -> Vec<String> {
        vec![query]
    }
}

fn main() {}
