//! The example HTTP server (`examples/server_http.rs`) as a binary the crash and cluster
//! tests can start and kill (`CARGO_BIN_EXE_mcp-tasks-example-http`); cargo builds it before
//! the tests.
//!
//! With `--store postgres://...` it runs as one instance of a cluster:
//!
//! | flag | meaning |
//! | --- | --- |
//! | `--store postgres://URL` | the shared store |
//! | `--schema NAME` | its Postgres schema (default `mcp_tasks`) |
//! | `--instance ID` | the instance id (default random) |
//! | `--lease-ms N`, `--renew-ms N`, `--claim-ms N`, `--reread-ms N` | cluster timing |
//! | `--pace-ms N` | each step of `workspace_report` (default 1000) |
//! | `--journal PATH` | the side-effect journal of `import_rows` |
//! | `--queued-calls` | calls only record their task (workers run them) |
//! | `--no-execution` | this instance runs no claimed work |
//! | `--worker` | serve no HTTP: run as a [`mcp_tasks::Worker`] |
//! | `--port N` | the HTTP port (0 picks one; the address is printed on stderr) |
//!

#[path = "../../examples/common/mod.rs"]
mod common;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Print the error's message: a `main` that returns it would print its Debug form.
    if let Err(error) = common::main_http(std::env::args().skip(1)).await {
        eprintln!("error: {error}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}
