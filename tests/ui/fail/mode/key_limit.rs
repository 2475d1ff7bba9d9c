#![allow(unused_variables)]

use mcp_tasks::task_tool;

// A call over a per-key limit waits as a queued task: the limit needs a task.
#[task_tool(key_concurrency = 1, limit_key = "owner")]
async fn optional_sync() {}

#[task_tool(mode = "required", key_concurrency = 1)]
async fn no_key(workspace: String) {}

#[task_tool(mode = "required", limit_key = "workspace")]
async fn no_limit(workspace: String) {}

#[task_tool(mode = "required", key_concurrency = 1, limit_key = "workspace_id")]
async fn not_an_argument(workspace: String, shard: u32) {}

#[task_tool(mode = "required", key_concurrency = 0, limit_key = "owner")]
async fn zero() {}

#[task_tool(mode = "required", key_concurrency = 1, limit_key = "")]
async fn empty() {}

// The same rules hold for a per-key rate.
#[task_tool(key_rate = "10/1m", limit_key = "owner")]
async fn optional_export() {}

#[task_tool(mode = "required", key_rate = "10/1m")]
async fn rate_without_key(workspace: String) {}

#[task_tool(mode = "required", key_rate = "10 a minute", limit_key = "owner")]
async fn bad_rate() {}

#[task_tool(mode = "required", key_rate = "2/1h", key_concurrency = 1, limit_key = "shard")]
async fn rate_not_an_argument(workspace: String) {}

fn main() {}
