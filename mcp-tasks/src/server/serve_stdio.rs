//! Serving over stdio.

use std::io;

use rmcp::ServiceExt;

use super::TaskServer;

/// Serves `server` on this process's stdin and stdout until the client closes stdin.
///
/// A stdio server has one client, the process that started it: every request runs as
/// [`Owner::process_user`](super::Owner::process_user) (it becomes the engine's default
/// owner unless [`Engine::with_default_owner`](super::Engine::with_default_owner) chose
/// another), so tasks a durable store keeps are that user's.
///
/// # Errors
/// An I/O or protocol error that ends the connection.
pub async fn serve_stdio(mut server: TaskServer) -> io::Result<()> {
    if &*server.engine.default_owner == super::DEFAULT_OWNER {
        server.engine = server
            .engine
            .with_default_owner(super::Owner::process_user().0);
    }
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(io::Error::other)?;
    running.waiting().await.map_err(io::Error::other)?;
    Ok(())
}
