//! Serving over stdio, and over any other newline-delimited byte stream.
//!
//! rmcp reads and writes the messages; in front of its reader sits a line filter (the
//! [request guard](super::guard)): each line is checked against the server's
//! [`Limits`](crate::Limits) and the request shapes of the methods this crate owns; a line it
//! rejects is answered with one JSON-RPC error line and never reaches rmcp, every other line
//! is passed on unchanged. rmcp's output and the filter's error lines go to the output
//! through one writer, a whole line at a time, so they never interleave.
//!
//! ```text
//! read --lines--> filter --good lines--> rmcp --lines--\
//!                   \--error lines------------------------> writer --> write
//! ```

use std::io;

use rmcp::{ServiceExt, transport::async_rw::AsyncRwTransport};
use tokio::{
    io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader},
    sync::mpsc,
};

use super::{TaskServer, guard};
use crate::Limits;

/// How many bytes rmcp's side of each internal pipe buffers.
const PIPE_BYTES: usize = 64 * 1024;

/// Serves `server` on this process's stdin and stdout until the client closes stdin.
///
/// A stdio server has one client, the process that started it: every request runs as
/// [`Owner::process_user`](super::Owner::process_user) (it becomes the engine's default
/// owner unless [`EngineBuilder::with_default_owner`](super::EngineBuilder::with_default_owner)
/// chose another), so tasks a durable store keeps are that user's. Starts the server's
/// engine ([`Engine::start`](super::Engine::start)) first.
///
/// # Errors
/// An I/O or protocol error that ends the connection; the engine's
/// [`StartError`](crate::StartError) (it was shut down) as [`io::ErrorKind::Other`].
pub async fn serve_stdio(mut server: TaskServer) -> io::Result<()> {
    if &*server.engine.default_owner == super::DEFAULT_OWNER {
        server.engine.default_owner = super::Owner::process_user().0;
    }
    let (read, write) = rmcp::transport::stdio();
    serve_io(server, read, write).await
}

/// Serves `server` on a newline-delimited JSON stream (the stdio framing) until `read`
/// ends: a pipe, a socket, a child's stdio. Malformed lines and lines over the server's
/// [`Limits::max_request_bytes`](crate::Limits::max_request_bytes) are answered with one
/// JSON-RPC error line each and the stream goes on. In front of rmcp's reader sits a line
/// filter, the [request guard](crate::server::guard); rmcp's output and the filter's error
/// lines reach `write` through one writer, a whole line at a time, so they never interleave.
/// Starts the server's engine ([`Engine::start`](super::Engine::start)) first.
///
/// # Errors
/// An I/O or protocol error that ends the connection; the engine's
/// [`StartError`](crate::StartError) (it was shut down) as [`io::ErrorKind::Other`].
pub async fn serve_io<R, W>(server: TaskServer, read: R, write: W) -> io::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    server.engine().start().map_err(io::Error::other)?;
    let limits = server.limits().clone();
    // Two pipes, each used in one direction; rmcp holds a whole end of each, so the other
    // end sees EOF (or a broken pipe) as soon as rmcp drops its transport.
    let (rmcp_read, filter_write) = tokio::io::duplex(PIPE_BYTES);
    let (output_read, rmcp_write) = tokio::io::duplex(PIPE_BYTES);
    let (lines, queue) = mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(write_lines(write, queue));
    let output = tokio::spawn(forward_output(BufReader::new(output_read), lines.clone()));
    // The filter bounds every line, so rmcp's own line limit must not drop one it passed.
    let transport =
        AsyncRwTransport::new_server(rmcp_read, rmcp_write).with_max_line_length(usize::MAX);
    let service = async move {
        let running = server.serve(transport).await.map_err(io::Error::other)?;
        running.waiting().await.map_err(io::Error::other)?;
        Ok::<(), io::Error>(())
    };
    let mut filter = Box::pin(filter_input(
        BufReader::new(read),
        filter_write,
        lines,
        limits,
    ));
    let mut service = std::pin::pin!(service);
    let mut filter_done = false;
    let result = loop {
        tokio::select! {
            result = &mut service => break result,
            result = &mut filter, if !filter_done => {
                filter_done = true;
                if let Err(error) = result {
                    tracing::debug!(%error, "stdio input ended with an error");
                }
            }
        }
    };
    // The service is gone: stop reading, then let every answered line reach the output.
    drop(filter);
    let _ = output.await;
    let written = writer.await.map_err(io::Error::other)?;
    result.and(written)
}

/// Writes each queued line, in order, until every sender is gone.
async fn write_lines<W: AsyncWrite + Unpin>(
    mut write: W,
    mut queue: mpsc::Receiver<Vec<u8>>,
) -> io::Result<()> {
    while let Some(line) = queue.recv().await {
        write.write_all(&line).await?;
        if queue.is_empty() {
            write.flush().await?;
        }
    }
    write.flush().await
}

/// Queues rmcp's output, one whole line at a time.
async fn forward_output<R: AsyncBufRead + Unpin>(mut read: R, lines: mpsc::Sender<Vec<u8>>) {
    loop {
        let mut line = Vec::new();
        match read.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if lines.send(line).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// One line of input, read with a bound.
enum Line {
    /// A whole line (its newline stripped, or the last bytes before EOF).
    Whole(Vec<u8>),
    /// A line longer than the limit; its bytes were dropped up to its newline.
    TooLong,
    Eof,
}

/// Reads one line without ever holding more than `limit` bytes of it.
async fn read_line<R: AsyncBufRead + Unpin>(read: &mut R, limit: usize) -> io::Result<Line> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let available = read.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::Eof,
                (false, false) => Line::Whole(line),
            });
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.unwrap_or(available.len());
        if !too_long {
            if line.len().saturating_add(take) > limit {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(&available[..take]);
            }
        }
        let consumed = newline.map_or(take, |n| n + 1);
        read.consume(consumed);
        if newline.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Whole(line)
            });
        }
    }
}

/// Reads `read` line by line: good lines go to rmcp (`to_rmcp`), rejected ones are answered
/// with an error line (`lines`). Ends at EOF, closing rmcp's input.
async fn filter_input<R, W>(
    mut read: R,
    mut to_rmcp: W,
    lines: mpsc::Sender<Vec<u8>>,
    limits: Limits,
) -> io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut legacy_session = false;
    loop {
        let verdict = match read_line(&mut read, limits.max_request_bytes()).await? {
            Line::Eof => break,
            Line::TooLong => Err((
                None,
                crate::errors::request_too_large(limits.max_request_bytes()),
            )),
            Line::Whole(line) => {
                let text = line.strip_suffix(b"\r").unwrap_or(&line);
                if text.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match guard::parse(text) {
                    Err(error) => Err((None, error)),
                    Ok(message) => match guard::check(&message, &limits, legacy_session) {
                        Err(error) => Err((guard::request_id(&message), error)),
                        Ok(()) => {
                            if message.get("method").and_then(|m| m.as_str()) == Some("initialize")
                            {
                                legacy_session = true;
                            }
                            Ok(line)
                        }
                    },
                }
            }
        };
        match verdict {
            Ok(mut line) => {
                line.push(b'\n');
                to_rmcp.write_all(&line).await?;
                to_rmcp.flush().await?;
            }
            Err((id, error)) => {
                let mut answer = guard::error_response(id, error);
                answer.push(b'\n');
                if lines.send(answer).await.is_err() {
                    break;
                }
            }
        }
    }
    to_rmcp.shutdown().await
}
