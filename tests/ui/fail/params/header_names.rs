use mcp_tasks::task_tool;

#[task_tool]
async fn f(
    #[arg(header = "Region Name")] a: String,
    #[arg(header = "")] b: String,
    #[arg(header = "Mcp-Param-Zone")] c: String,
    #[arg(header = "Tenant")] d: String,
    #[arg(header = "TENANT")] e: String,
    #[arg(header = 3)] g: String,
) {
    let _ = (a, b, c, d, e, g);
}

fn main() {}
