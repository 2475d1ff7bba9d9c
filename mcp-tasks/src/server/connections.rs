//! The connections of [`serve_http`](super::serve_http): accepted here rather than by
//! `axum::serve`, which arms no deadline on a request's headers and holds any number of
//! connections.
//!
//! Each accepted connection is held as [`serve_http`](super::serve_http) documents
//! (`TCP_NODELAY`, the header-read deadline, at most `max` open) and served as HTTP/1.1 by
//! hyper, with the client's address in every request's extensions
//! (`ConnectInfo<SocketAddr>`, what the admin router's throttle keys on).
//!
//! The deadline runs on one tokio timer per connection ([`ConnectionTimer`]): hyper asks for
//! a new sleep for every request's headers and drops it once they are in, and a fresh tokio
//! sleep would add a timer-wheel entry and remove it again on every request; here each
//! request moves the connection's one entry later, which tokio does without touching the
//! wheel while the entry is in it.
//!
//! The graceful stop is `axum::serve`'s: no new connection is accepted, each open one
//! finishes the request it serves and then closes, and the stop resolves when all are
//! closed.

use std::{
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use axum::{body::Body, extract::ConnectInfo};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::{net::TcpListener, sync::Semaphore};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

/// How [`serve`] holds its connections.
#[derive(Clone, Copy, Debug)]
pub(super) struct Bounds {
    pub(super) header_read_timeout: Duration,
    pub(super) max: usize,
}

/// Serves `app` on `listener` until `stop` is cancelled, then stops gracefully (see the
/// module docs).
pub(super) async fn serve(
    listener: TcpListener,
    app: axum::Router,
    bounds: Bounds,
    stop: CancellationToken,
) {
    let open = Arc::new(Semaphore::new(bounds.max));
    // The stop waits until every connection task has ended.
    let connections = TaskTracker::new();
    loop {
        let (tcp, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(error).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            tracing::warn!(
                %remote,
                max_connections = bounds.max,
                "connection closed at once: the server holds its maximum of open connections"
            );
            drop(tcp);
            continue;
        };
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::warn!(%error, "could not set TCP_NODELAY");
        }
        let app = app.clone();
        let stop = stop.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let mut request = request.map(Body::new);
                request.extensions_mut().insert(ConnectInfo(remote));
                let mut app = app.clone();
                async move { tower_service::Service::call(&mut app, request).await }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(ConnectionTimer::new())
                .header_read_timeout(bounds.header_read_timeout)
                .serve_connection(TokioIo::new(tcp), service)
                .with_upgrades();
            let mut connection = std::pin::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = served {
                tracing::debug!(%remote, %error, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// hyper's timer for one connection: every sleep it hands out is a deadline on the
/// connection's one tokio sleep (see the module docs). hyper holds at most one at a time
/// (the header-read deadline), so they never move each other's deadline.
#[derive(Clone)]
struct ConnectionTimer(Arc<parking_lot::Mutex<Pin<Box<tokio::time::Sleep>>>>);

impl ConnectionTimer {
    /// A timer whose sleep is not armed until a deadline is polled.
    fn new() -> Self {
        let idle = tokio::time::sleep_until(tokio::time::Instant::now());
        Self(Arc::new(parking_lot::Mutex::new(Box::pin(idle))))
    }
}

impl hyper::rt::Timer for ConnectionTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(Instant::now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(Deadline {
            timer: self.clone(),
            deadline: deadline.into(),
        })
    }
}

/// A deadline on a [`ConnectionTimer`]'s sleep: polled, it moves the sleep to its instant
/// (unless the sleep is set there already) and is ready once that instant has passed.
struct Deadline {
    timer: ConnectionTimer,
    deadline: tokio::time::Instant,
}

impl Future for Deadline {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut sleep = self.timer.0.lock();
        if sleep.deadline() != self.deadline {
            sleep.as_mut().reset(self.deadline);
        }
        sleep.as_mut().poll(cx)
    }
}

impl hyper::rt::Sleep for Deadline {}

/// An accept that failed: a connection that went away before it was accepted is nothing;
/// anything else (out of file descriptors, most often) is logged and the loop pauses a
/// second, as `axum::serve` does.
async fn accept_failed(error: io::Error) {
    if matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(%error, "accepting a connection failed; retrying in a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Whether `addr` is a loopback address (`127.0.0.0/8`, `::1`, or `127.x` mapped in IPv6).
pub(super) fn is_loopback(addr: SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_addresses_are_told_apart() {
        for (addr, loopback) in [
            ("127.0.0.1:80", true),
            ("127.9.9.9:80", true),
            ("[::1]:80", true),
            ("[::ffff:127.0.0.1]:80", true),
            ("0.0.0.0:80", false),
            ("[::]:80", false),
            ("10.0.0.1:80", false),
            ("[::ffff:10.0.0.1]:80", false),
        ] {
            assert_eq!(
                super::is_loopback(addr.parse().unwrap()),
                loopback,
                "{addr}"
            );
        }
    }
}
