//! A task server on Streamable HTTP:
//! `cargo run --example server_http -- --port 8080 [--store sqlite:tasks.db] [--journal PATH]
//! [--tokens alice:TOKEN_A,bob:TOKEN_B]`, then point a client at `http://127.0.0.1:8080/mcp`.
//! `--port 0` picks a free port; the address is printed on stderr. With `--tokens` every
//! request needs `Authorization: Bearer <token>` and each owner sees only its own tasks.
//! `--store postgres://USER@HOST:PORT/DATABASE` makes it one instance of a cluster (start
//! several on one schema); `--instance ID`, `--schema NAME`, `--lease-ms N`, `--worker` and
//! the other cluster flags are listed on `common::server`.
//!
//! Every flag can also be set by an `MCP_TASKS_*` environment variable (`common::SETTINGS`;
//! the README's "Deploying" lists them in one table): `--bind 0.0.0.0:8080`,
//! `--allowed-hosts`, `--allowed-origins`, `--request-state-key` (required on Postgres),
//! `--max-running`, `--shutdown-grace-ms`. `--help` lists them all. `--admin-bind ADDR:PORT`
//! serves the admin view and API (`/admin`, credential in `MCP_TASKS_ADMIN_TOKEN`) and the
//! Prometheus page (`/metrics`) on a listener of their own. SIGTERM or Ctrl-C drains it: readiness
//! (`/readyz`) turns false, new calls are refused with a retryable 503, running work gets
//! the grace period, then its tasks are handed over and the process exits.

mod common;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Print the error's message: a `main` that returns it would print its Debug form.
    if let Err(error) = run().await {
        eprintln!("error: {error}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}

async fn run() -> std::io::Result<()> {
    common::main_http(std::env::args().skip(1)).await
}
