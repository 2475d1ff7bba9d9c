//! Shared bits of the benchmark binaries (issue 7): argument parsing and a loopback listener
//! that sets `TCP_NODELAY` on every connection.
//!
//! - `bench-load`: the load generator (Streamable HTTP, 2026-07-28 wire, keep-alive).
//! - `bench-ours`: mcp-tasks (`#[task_tool]`, memory store) serving `noop_task(sleep_ms)`.
//! - `bench-rmcp`: the same tool on rmcp 3.11's `TaskManager`, written as rmcp documents it.
//! - `bench-echo`: a bare HTTP+JSON echo, the transport ceiling.

use std::{collections::HashMap, io};

use axum::serve::ListenerExt;
use tokio::net::TcpListener;

/// The tool every server exposes.
pub const TOOL: &str = "noop_task";

/// `--name value` pairs and bare `--flag`s from the command line.
#[derive(Debug, Default)]
pub struct Args {
    values: HashMap<String, String>,
}

impl Args {
    /// Parses `std::env::args()`; every option is `--name value`.
    ///
    /// # Errors
    /// An argument that is not `--name value`.
    pub fn parse() -> io::Result<Self> {
        let mut values = HashMap::new();
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let Some(name) = arg.strip_prefix("--") else {
                return Err(io::Error::other(format!(
                    "unexpected argument `{arg}`: options are `--name value`"
                )));
            };
            let value = args
                .next()
                .ok_or_else(|| io::Error::other(format!("--{name} needs a value")))?;
            values.insert(name.to_owned(), value);
        }
        Ok(Self { values })
    }

    /// The string value of `--name`, if given.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The value of `--name` parsed, or `default`.
    ///
    /// # Errors
    /// A value that does not parse.
    pub fn parsed<T: std::str::FromStr>(&self, name: &str, default: T) -> io::Result<T> {
        match self.values.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| io::Error::other(format!("--{name}: cannot parse `{v}`"))),
        }
    }

    /// Fails on any option not in `known`.
    ///
    /// # Errors
    /// An unknown option.
    pub fn only(&self, known: &[&str]) -> io::Result<()> {
        for name in self.values.keys() {
            if !known.contains(&name.as_str()) {
                return Err(io::Error::other(format!(
                    "unknown option --{name}; known: --{}",
                    known.join(", --")
                )));
            }
        }
        Ok(())
    }
}

/// Binds `127.0.0.1:port` (only loopback) and says so on stderr.
///
/// # Errors
/// The bind error.
pub async fn listen(port: u16, what: &str) -> io::Result<TcpListener> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!("{what} listening on http://{}/mcp", listener.local_addr()?);
    Ok(listener)
}

/// Serves `router` on `listener` with `TCP_NODELAY` on every accepted connection.
///
/// # Errors
/// An I/O error of the listener.
pub async fn serve_nodelay(listener: TcpListener, router: axum::Router) -> io::Result<()> {
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            eprintln!("could not set TCP_NODELAY: {error}");
        }
    });
    axum::serve(listener, router).await
}
