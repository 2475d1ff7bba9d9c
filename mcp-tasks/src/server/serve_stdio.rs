//! Serving over stdio.

use std::io;

use rmcp::ServiceExt;

use super::TaskServer;

/// Serves `server` on this process's stdin and stdout until the client closes stdin.
///
/// # Errors
/// An I/O or protocol error that ends the connection.
pub async fn serve_stdio(server: TaskServer) -> io::Result<()> {
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(io::Error::other)?;
    running.waiting().await.map_err(io::Error::other)?;
    Ok(())
}
