//! `#[arg(header = "..")]` on every type a header can carry.

use std::borrow::Cow;

use mcp_tasks::{task_tool, toolkit};

#[derive(serde::Deserialize, schemars::JsonSchema)]
enum Zone {
    Eu,
    Us,
}

#[task_tool]
async fn route(
    #[arg(header = "Region")] region: String,
    #[arg(header = "Tenant", rename = "tenantId", description = "who")] tenant: Cow<'static, str>,
    #[arg(header = "Shard")] shard: u64,
    #[arg(header = "Offset")] offset: Option<i32>,
    #[arg(header = "Dry-Run", default)] dry_run: bool,
    #[arg(header = "Zone")] zone: Option<Zone>,
    #[arg(header = "x.y_z~1!")] odd: String,
) {
    let _ = (region, tenant, shard, offset, dry_run, zone, odd);
}

fn main() {
    let toolkit = toolkit![route].expect("every annotation is valid");
    assert!(toolkit.contains("route"));
}
