//! Serving over stdio, and over any other newline-delimited byte stream.
//!
//! The [request guard](super::guard) reads the input: each line is parsed once, checked
//! against the server's [`Limits`](crate::Limits) and the request shapes of the methods this
//! crate owns, and handed to rmcp as the message it decoded to (with the guard's verdict in
//! its extensions), through a [`Transport`] of its own; a line it rejects is answered with
//! one JSON-RPC error line and never reaches rmcp. rmcp's messages and the filter's error
//! lines go to the output through one writer, a whole line at a time, so they never
//! interleave.
//!
//! ```text
//! read --lines--> filter --messages--> rmcp --messages--\
//!                   \--error lines---------------------------> writer --> write
//! ```

use std::io;

use rmcp::{
    RoleServer, ServiceExt,
    model::{
        ClientJsonRpcMessage, ClientNotification, GetExtensions, JsonRpcMessage, MetaObject,
        ServerJsonRpcMessage, ServerResult,
    },
    transport::Transport,
};
use tokio::{
    io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader},
    sync::mpsc,
};

use super::{Engine, TaskServer, push, shape};

/// How many decoded messages wait for rmcp, and how many lines for the writer.
const QUEUE: usize = 64;

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
/// JSON-RPC error line each by the [request guard](crate::server#malformed-requests) in
/// front of rmcp, and the stream goes on. Starts the server's engine
/// ([`Engine::start`](super::Engine::start)) first.
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
    let engine = server.engine().clone();
    let (lines, queue) = mpsc::channel::<Vec<u8>>(QUEUE);
    let writer = tokio::spawn(write_lines(write, queue));
    let (to_rmcp, from_filter) = mpsc::channel::<ClientJsonRpcMessage>(QUEUE);
    let transport = Filtered {
        incoming: from_filter,
        output: lines.clone(),
        engine: engine.clone(),
    };
    let service = async move {
        let running = server.serve(transport).await.map_err(io::Error::other)?;
        running.waiting().await.map(drop).map_err(io::Error::other)
    };
    let filter = async move {
        if let Err(error) = filter_input(BufReader::new(read), to_rmcp, lines, engine).await {
            tracing::debug!(%error, "stdio input ended with an error");
        }
        std::future::pending().await
    };
    // The service is gone: the filter is dropped with the select (reading stops), then every
    // answered line reaches the output.
    let result = tokio::select! {
        result = service => result,
        never = filter => never,
    };
    result.and(writer.await.map_err(io::Error::other)?)
}

/// rmcp's side of the stdio connection: the messages the filter decoded in, rmcp's
/// messages out as lines to the writer.
struct Filtered {
    incoming: mpsc::Receiver<ClientJsonRpcMessage>,
    output: mpsc::Sender<Vec<u8>>,
    /// Puts the server's info into the acknowledgements rmcp builds for `tasks/update` and
    /// `tasks/cancel` (a handler returns `()` for those, so the engine cannot).
    engine: Engine,
}

impl Transport<RoleServer> for Filtered {
    type Error = io::Error;

    fn send(
        &mut self,
        mut item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Response(response) = &mut item
            && let ServerResult::TaskAckResult(ack) = &mut response.result
        {
            self.engine
                .join_info(&mut ack.meta.get_or_insert_with(MetaObject::new).0);
        }
        let output = self.output.clone();
        async move {
            let mut line = serde_json::to_vec(&item).map_err(io::Error::other)?;
            line.push(b'\n');
            let sent = output.send(line).await;
            sent.map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        Ok(())
    }
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
    // `None` once the line is over the limit.
    let mut line = Some(Vec::new());
    loop {
        let available = read.fill_buf().await?;
        if available.is_empty() {
            return Ok(match line {
                Some(line) if line.is_empty() => Line::Eof,
                line => line.map_or(Line::TooLong, Line::Whole),
            });
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.unwrap_or(available.len());
        if let Some(bytes) = &mut line {
            if bytes.len().saturating_add(take) > limit {
                line = None;
            } else {
                bytes.extend_from_slice(&available[..take]);
            }
        }
        read.consume(newline.map_or(take, |n| n + 1));
        if newline.is_some() {
            return Ok(line.map_or(Line::TooLong, Line::Whole));
        }
    }
}

/// Reads `read` line by line: good lines go to rmcp decoded (`to_rmcp`), rejected ones are
/// answered with an error line (`lines`). Ends at EOF, which ends rmcp's input.
///
/// A `subscriptions/listen` with `taskIds` is `engine`'s push module's: its stream's lines go
/// to `lines` beside rmcp's, until a `notifications/cancelled` for it or the end of input.
async fn filter_input<R>(
    mut read: R,
    to_rmcp: mpsc::Sender<ClientJsonRpcMessage>,
    lines: mpsc::Sender<Vec<u8>>,
    engine: crate::Engine,
) -> io::Result<()>
where
    R: AsyncBufRead + Unpin,
{
    let mut legacy_session = false;
    let mut listens = push::Listens::default();
    let limits = engine.limits();
    let limit = limits.max_request_bytes();
    loop {
        let verdict = match read_line(&mut read, limit).await? {
            Line::Eof => break,
            Line::TooLong => Err((None, crate::errors::request_too_large(limit))),
            Line::Whole(line) => {
                let text = line.strip_suffix(b"\r").unwrap_or(&line);
                if text.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                // The authority judges the line; rmcp decodes what it lets through (a task
                // listen, the push module's, is read as a value).
                match shape::judge(text, limits, legacy_session) {
                    Err(refusal) => Err((refusal.id, refusal.error)),
                    Ok(shape::Verdict {
                        checked: Some(checked),
                        id,
                    }) if checked.task_listen => match shape::parse(text) {
                        Ok(message) => listens
                            .open(&engine, &message, &checked, lines.clone())
                            .await
                            .map(|()| None),
                        Err(error) => Err((id, error)),
                    },
                    Ok(verdict) => match decode(text, verdict) {
                        Ok(Some(message)) if cancels(&message, &mut listens) => Ok(None),
                        Ok(Some(ClientJsonRpcMessage::Request(request)))
                            if request.request.method() == "initialize" =>
                        {
                            legacy_session = true;
                            Ok(Some(ClientJsonRpcMessage::Request(request)))
                        }
                        decoded => decoded,
                    },
                }
            }
        };
        match verdict {
            Ok(Some(message)) => {
                if to_rmcp.send(message).await.is_err() {
                    break;
                }
            }
            Ok(None) => {}
            Err((id, error)) => {
                crate::metrics::request_refused(error.code.0);
                let mut answer = shape::error_response(id, error);
                answer.push(b'\n');
                if lines.send(answer).await.is_err() {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// The message rmcp dispatches, decoded from the line the authority let through, with its
/// verdict in its extensions. A request rmcp's types do not decode is answered `-32600`;
/// such a notification is dropped (nothing answers a notification).
type Decoded =
    Result<Option<ClientJsonRpcMessage>, (Option<rmcp::model::RequestId>, rmcp::ErrorData)>;

fn decode(text: &[u8], verdict: shape::Verdict) -> Decoded {
    match serde_json::from_slice::<ClientJsonRpcMessage>(text) {
        Ok(mut decoded) => {
            if let (ClientJsonRpcMessage::Request(request), Some(checked)) =
                (&mut decoded, verdict.checked)
            {
                request.request.extensions_mut().insert(checked);
            }
            Ok(Some(decoded))
        }
        Err(error) if verdict.id.is_some() => Err((
            verdict.id,
            crate::errors::undecodable_message(&error.to_string()),
        )),
        Err(error) => {
            tracing::debug!(%error, "dropped a notification rmcp does not decode");
            Ok(None)
        }
    }
}

/// Whether `message` is a `notifications/cancelled` of an open task listen, which it ends.
fn cancels(message: &ClientJsonRpcMessage, listens: &mut push::Listens) -> bool {
    if let ClientJsonRpcMessage::Notification(notification) = message
        && let ClientNotification::CancelledNotification(cancelled) = &notification.notification
        && let Some(id) = &cancelled.params.request_id
    {
        return listens.cancel(id);
    }
    false
}
