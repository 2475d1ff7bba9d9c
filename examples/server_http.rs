//! A task server on Streamable HTTP:
//! `cargo run --example server_http -- --port 8080 [--store sqlite:tasks.db] [--journal PATH]
//! [--tokens alice:TOKEN_A,bob:TOKEN_B]`, then point a client at `http://127.0.0.1:8080/mcp`.
//! `--port 0` picks a free port; the address is printed on stderr. With `--tokens` every
//! request needs `Authorization: Bearer <token>` and each owner sees only its own tasks.
//! `--store postgres://USER@HOST:PORT/DATABASE` makes it one instance of a cluster (start
//! several on one schema; `--request-state-key` is then required).
//!
//! `--help` lists every flag with the `MCP_TASKS_*` environment variable that sets it when
//! the flag is not given (`common::HttpArgs`, a `clap` parser; the README's "Deploying" and
//! the operating guide list them in one table). `--admin-bind ADDR:PORT` serves the admin
//! view and API (`/admin`, credential in `MCP_TASKS_ADMIN_TOKEN`) and the Prometheus page
//! (`/metrics`) on a listener of their own. SIGTERM or Ctrl-C drains it: readiness
//! (`/readyz`) turns false, new calls are refused with a retryable 503, running work gets
//! the grace period, then its tasks are handed over and the process exits. A usage mistake
//! exits with code 2, any other error with 1.

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
