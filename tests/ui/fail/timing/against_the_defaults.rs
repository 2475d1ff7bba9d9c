//! A `ttl` or `poll_interval` written alone is checked against the runtime's default of the
//! other, at the written value.
use mcp_tasks::task_tool;

#[task_tool(poll_interval = "2h")]
async fn slow_default_ttl() {}

#[task_tool(ttl = "500ms")]
async fn short_default_poll() {}

#[task_tool(poll_interval = "1h")]
async fn fits_the_default_ttl() {}

#[task_tool(ttl = "1s")]
async fn fits_the_default_poll() {}

fn main() {}
