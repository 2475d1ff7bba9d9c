//! Procedural macros for [`mcp-tasks`](https://docs.rs/mcp-tasks). Depend on `mcp-tasks`, not
//! on this crate: it re-exports everything here, with the documentation.
//!
//! The pipeline is parse (`attr.rs`, into the model of `model.rs`) -> check (`check.rs`) ->
//! generate (`expand.rs`); parse and check both write to one error sink (`sink.rs`), so one
//! build reports every mistake.

#![forbid(unsafe_code)]

mod attr;
mod check;
mod digest;
mod duration;
mod expand;
#[cfg(test)]
mod golden;
mod model;
mod sink;
mod suggest;

use proc_macro::TokenStream;

/// Turns an `async fn` into a task tool; see `mcp_tasks::task_tool`.
#[proc_macro_attribute]
pub fn task_tool(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::task_tool(args.into(), item.into()).into()
}

/// Builds a toolkit; called by `mcp_tasks::toolkit!` with `$crate; tool, ...`.
#[doc(hidden)]
#[proc_macro]
pub fn toolkit(input: TokenStream) -> TokenStream {
    expand::toolkit(input.into()).into()
}
