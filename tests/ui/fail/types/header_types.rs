use std::collections::HashMap;

use mcp_tasks::task_tool;

#[task_tool]
async fn f(
    #[arg(header = "Ratio")] ratio: f64,
    #[arg(header = "Limit")] limit: Option<f32>,
    #[arg(header = "Tags")] tags: Vec<String>,
    #[arg(header = "Labels")] labels: HashMap<String, String>,
    #[arg(header = "Region")] region: String,
) {
    let _ = (ratio, limit, tags, labels, region);
}

fn main() {}
