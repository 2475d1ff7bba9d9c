//! The example HTTP server (`examples/server_http.rs`) as a binary the crash and cluster
//! tests can start and kill (`CARGO_BIN_EXE_mcp-tasks-example-http`); cargo builds it before
//! the tests.
//!
//! Its flags and their `MCP_TASKS_*` environment variables: `--help` (`common::HttpArgs`).

#[path = "../../examples/common/mod.rs"]
mod common;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Print the error's message: a `main` that returns it would print its Debug form.
    if let Err(error) = common::main_http().await {
        eprintln!("error: {error}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}
