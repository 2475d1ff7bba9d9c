//! Procedural macros for [`mcp-tasks`](https://docs.rs/mcp-tasks). Depend on `mcp-tasks`, not
//! on this crate: it re-exports everything here.
