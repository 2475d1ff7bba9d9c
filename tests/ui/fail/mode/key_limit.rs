#![allow(unused_variables)]

use mcp_tasks::task_tool;

// A call over a per-key limit waits as a queued task: the limit needs a task.
#[task_tool(key_concurrency = 1, concurrency_key = "owner")]
async fn optional_sync() {}

#[task_tool(mode = "required", key_concurrency = 1)]
async fn no_key(workspace: String) {}

#[task_tool(mode = "required", concurrency_key = "workspace")]
async fn no_limit(workspace: String) {}

#[task_tool(mode = "required", key_concurrency = 1, concurrency_key = "workspace_id")]
async fn not_an_argument(workspace: String, shard: u32) {}

#[task_tool(mode = "required", key_concurrency = 0, concurrency_key = "owner")]
async fn zero() {}

#[task_tool(mode = "required", key_concurrency = 1, concurrency_key = "")]
async fn empty() {}

fn main() {}
