use mcp_tasks::toolkit;

struct Handwritten;

fn main() {
    let _ = toolkit![Handwritten];
}
