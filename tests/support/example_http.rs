//! The example HTTP server (`examples/server_http.rs`) as a binary the crash test can start
//! and kill (`CARGO_BIN_EXE_mcp-tasks-example-http`); cargo builds it before the tests.

#[path = "../../examples/common/mod.rs"]
mod common;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    common::main_http(std::env::args().skip(1)).await
}
