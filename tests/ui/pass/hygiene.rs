//! Hygiene: the macros' output compiles with decoys of prelude names in scope, with the
//! runtime crate reachable only under another name (`crate = ".."`), under
//! `#![deny(missing_docs, warnings)]`.
#![deny(missing_docs, warnings)]
#![allow(non_upper_case_globals, non_snake_case, reason = "decoys spelled like prelude items")]

// The runtime under another name, and `::mcp_tasks` poisoned: a path that forgets the
// override resolves into `core` and fails.
extern crate core as mcp_tasks;
extern crate mcp_tasks as mcp_tasks_renamed;

use mcp_tasks_renamed::{State, TaskContext, ToolError, task_tool};

/// Decoy.
pub struct Result;
/// Decoy.
pub struct Option;
/// Decoy.
pub struct Vec;
/// Decoy.
pub struct Box;
/// Decoy.
pub struct String;
/// Decoy.
pub const Ok: u8 = 0;
/// Decoy.
pub const Err: u8 = 1;
/// Decoy.
pub const Some: u8 = 2;
/// Decoy.
pub const None: u8 = 3;
/// Decoy.
pub const value: u8 = 7;
/// Decoy.
pub const error: u8 = 8;
/// Decoy.
pub const schema: u8 = 9;
/// Decoy.
pub const self_: u8 = 10;
/// Decoy.
pub trait Default {}
/// Decoy.
pub trait Into {}
/// Decoy.
pub trait Display {}

/// The user's own types, derived away from the decoys (schemars' derive is not hygienic
/// against a `const schema`).
pub mod types {
    /// A point.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    pub struct Point {
        /// Horizontal.
        pub x: i32,
        /// Vertical.
        pub y: i32,
    }

    /// Shared state.
    #[derive(Clone)]
    pub struct Scale(pub i32);
}

use types::{Point, Scale};

/// Moves a point.
#[task_tool(crate = "mcp_tasks_renamed", ttl = "10m", poll_interval = "1s", read_only)]
pub async fn shift(
    ctx: TaskContext,
    State(scale): State<Scale>,
    #[arg(description = "the point")] point: Point,
    #[arg(rename = "by", default)] amount: i32,
    label: core::option::Option<std::string::String>,
) -> core::result::Result<Point, ToolError> {
    ctx.status("shifting").await;
    let _ = label;
    core::result::Result::Ok(Point { x: point.x + amount * scale.0, y: point.y })
}

/// Echoes a whole argument object.
#[task_tool(crate = "mcp_tasks_renamed", mode = "inline")]
async fn whole(#[args] point: Point) -> std::vec::Vec<i32> {
    std::vec![point.x, point.y]
}

/// Fails with text.
#[task_tool(crate = "mcp_tasks_renamed", mode = "required", ttl = "unlimited")]
pub async fn fails() -> core::result::Result<(), std::string::String> {
    core::result::Result::Err("no".into())
}

/// Passes a ready result through.
#[task_tool(crate = "mcp_tasks_renamed", mode = "optional", inline_budget = "250ms")]
pub async fn ready() -> rmcp::model::CallToolResult {
    rmcp::model::CallToolResult::success(std::vec::Vec::new())
}

/// Nothing at all.
#[task_tool(crate = "mcp_tasks_renamed")]
pub async fn nothing() {}

fn main() {
    let toolkit = mcp_tasks_renamed::toolkit![shift, whole, fails, ready, nothing]
        .map(|toolkit| toolkit.with_state(Scale(2)));
    assert!(toolkit.is_ok());
    let _ = (Result, Option, Vec, Box, String, Ok, Err, Some, None);
    let _ = (value, error, schema, self_);
}
