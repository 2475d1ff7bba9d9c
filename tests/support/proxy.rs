//! A TCP proxy on 127.0.0.1 between one client (an instance's Postgres store) and a server,
//! that a test can partition: [`Proxy::blackhole`] stops forwarding in both directions and
//! keeps every socket open (what a network partition looks like to both ends: no reset, no
//! answer; bytes already sent wait in the socket buffers), [`Proxy::heal`] forwards again,
//! held bytes first. [`Proxy::sever`] closes every connection at once (a server or network
//! that drops them); new ones are accepted and forwarded as before.
//!
//! Connections opened during a blackhole are accepted (the kernel completes the handshake)
//! and their first bytes wait like every other: a client's connect attempt hangs, as it does
//! across a partition, until it gives up or the proxy heals.
#![allow(
    dead_code,
    reason = "each test binary uses a different part of the support"
)]

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::watch,
};
use tokio_util::sync::CancellationToken;

/// A running proxy; it stops (closing every connection) on drop.
pub struct Proxy {
    addr: SocketAddr,
    /// `true` while blackholed.
    holding: watch::Sender<bool>,
    /// Cancelled and replaced by [`Proxy::sever`]: the connections of one generation.
    generation: Arc<std::sync::Mutex<CancellationToken>>,
    stop: CancellationToken,
    accepted: Arc<AtomicUsize>,
}

impl Proxy {
    /// A proxy on a free port of 127.0.0.1 to `upstream`, forwarding.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().unwrap();
        let (holding, _) = watch::channel(false);
        let proxy = Self {
            addr,
            holding,
            generation: Arc::new(std::sync::Mutex::new(CancellationToken::new())),
            stop: CancellationToken::new(),
            accepted: Arc::default(),
        };
        let (holding, generation, stop, accepted) = (
            proxy.holding.clone(),
            proxy.generation.clone(),
            proxy.stop.clone(),
            proxy.accepted.clone(),
        );
        tokio::spawn(async move {
            loop {
                let client = tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept() => match accepted {
                        Ok((client, _)) => client,
                        Err(_) => continue,
                    },
                };
                accepted.fetch_add(1, Ordering::SeqCst);
                let severed = generation.lock().unwrap().clone();
                let holding = holding.subscribe();
                tokio::spawn(connection(client, upstream, holding, severed));
            }
        });
        proxy
    }

    /// A proxy to the host and port of the Postgres URL `url`.
    pub async fn to_url(url: &str) -> Self {
        let config: tokio_postgres::Config = url.parse().expect("a Postgres URL");
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
            _ => "127.0.0.1".to_owned(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let upstream = tokio::net::lookup_host((host.as_str(), port))
            .await
            .expect("resolve the Postgres host")
            .next()
            .expect("an address for the Postgres host");
        Self::start(upstream).await
    }

    /// `url` with its host and port replaced by the proxy's.
    pub fn url(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("a URL");
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let user = authority
            .rsplit_once('@')
            .map(|(user, _)| format!("{user}@"))
            .unwrap_or_default();
        format!("{scheme}://{user}{}/{path}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Stops forwarding in both directions; every socket stays open.
    pub fn blackhole(&self) {
        self.holding.send_replace(true);
    }

    /// Forwards again, what was held first.
    pub fn heal(&self) {
        self.holding.send_replace(false);
    }

    /// Closes every connection open now.
    pub fn sever(&self) {
        let mut generation = self.generation.lock().unwrap();
        generation.cancel();
        *generation = CancellationToken::new();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
        self.generation.lock().unwrap().cancel();
    }
}

/// One proxied connection: connects upstream once forwarding is allowed, then pumps both
/// ways until either end closes or the connection is severed.
async fn connection(
    client: TcpStream,
    upstream: SocketAddr,
    mut holding: watch::Receiver<bool>,
    severed: CancellationToken,
) {
    let work = async move {
        if holding.wait_for(|held| !*held).await.is_err() {
            return;
        }
        let Ok(server) = TcpStream::connect(upstream).await else {
            return;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        let up = pump(client_read, server_write, holding.clone());
        let down = pump(server_read, client_write, holding);
        // Either direction ending ends the connection (both sockets close).
        tokio::select! {
            () = up => {}
            () = down => {}
        }
    };
    tokio::select! {
        () = severed.cancelled() => {}
        () = work => {}
    }
}

/// Copies `from` to `to`, holding every byte while the proxy is blackholed: nothing is read
/// then, and what was read just before waits to be written.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut holding: watch::Receiver<bool>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        if holding.wait_for(|held| !*held).await.is_err() {
            return;
        }
        let read = tokio::select! {
            read = from.read(&mut buffer) => read,
            // Blackholed while waiting: stop reading.
            _ = holding.wait_for(|held| *held) => continue,
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if holding.wait_for(|held| !*held).await.is_err() {
            return;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
