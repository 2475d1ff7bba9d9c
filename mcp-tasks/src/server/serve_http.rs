//! Serving over Streamable HTTP.

use std::{io, sync::Arc};

use axum::serve::ListenerExt;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tokio::net::TcpListener;

use rmcp::ServerHandler;

use super::{
    TaskServer,
    auth::{Bearer, ProtectedResource, ProtectedResourceError, StaticTokens, TokenValidator},
};
use crate::Limits;

/// The path [`serve_http`] answers on.
pub const MCP_PATH: &str = "/mcp";

/// rmcp's Streamable HTTP service for `server`: the modern (stateless) wire, plus legacy
/// `initialize` sessions for older clients. A modern request's answer is one
/// `application/json` body unless the handler sends something before it (then SSE).
///
/// Only localhost origins and hosts are accepted ([`HttpOptions::default`]), with the body
/// limit of [`TaskServer::limits`]; see [`http_service_with`]. Starts the server's engine
/// ([`start_engine`]).
#[must_use]
pub fn http_service(server: TaskServer) -> StreamableHttpService<TaskServer, LocalSessionManager> {
    start_engine(&server);
    let options = HttpOptions::default().with_limits(server.limits().clone());
    http_service_with(server, &options)
}

/// [`http_service`] for any rmcp handler (a [`TaskServer`], or a handler of your own that
/// routes to an [`Engine`](crate::Engine)), with the `Origin` and `Host` checks and the body
/// limit of `options` (its bearer guard and request guard are layers: see
/// [`http_router_with`]).
#[must_use]
pub fn http_service_with<S>(
    server: S,
    options: &HttpOptions,
) -> StreamableHttpService<S, LocalSessionManager>
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    let config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .with_max_request_body_bytes(options.limits.max_request_bytes());
    StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        options.config(config),
    )
}

/// An axum router serving `server` at `/mcp`. Add your own layers to it, for example one
/// that authenticates the caller and inserts an [`Owner`](crate::Owner) into the request's
/// extensions.
///
/// In front of rmcp sits the [request guard](crate::server::guard): malformed requests and
/// bodies over [`Limits::max_request_bytes`](crate::Limits::max_request_bytes) (of
/// [`TaskServer::limits`]) are answered with a JSON-RPC error before rmcp parses them
/// ([`http_service`] alone has no guard). Starts the server's engine ([`start_engine`]).
pub fn http_router(server: TaskServer) -> axum::Router {
    start_engine(&server);
    let options = HttpOptions::default().with_limits(server.limits().clone());
    http_router_with(server, options)
}

/// An axum router serving any rmcp handler at `/mcp` with `options`: behind the bearer guard
/// when one is set, with the request guard (limits of `options`) and the `Origin` and `Host`
/// checks always.
pub fn http_router_with<S>(server: S, options: HttpOptions) -> axum::Router
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    let guard =
        axum::middleware::from_fn_with_state(options.limits.clone(), super::guard::http_guard);
    let router = axum::Router::new()
        .nest_service(MCP_PATH, http_service_with(server, &options))
        .layer(guard);
    let router = match &options.bearer {
        Some(bearer) => bearer.protect(router),
        None => router,
    };
    // Added after the guard: the metadata is what a client reads before it has a token.
    match &options.protected_resource {
        Some(resource) => resource.serve(router),
        None => router,
    }
}

/// Serves `server` at `/mcp` on `listener` until the process ends, after starting its
/// engine ([`Engine::start`](crate::Engine::start)).
///
/// Every accepted connection gets `TCP_NODELAY`: without it, SSE responses on keep-alive
/// connections stall about 40 ms each (Nagle against delayed ACK).
///
/// # Errors
/// An I/O error of the listener; the engine's [`StartError`](crate::StartError) (it was
/// shut down) as [`io::ErrorKind::Other`].
pub async fn serve_http(listener: TcpListener, server: TaskServer) -> io::Result<()> {
    server.engine().start().map_err(io::Error::other)?;
    let options = HttpOptions::default().with_limits(server.limits().clone());
    serve_http_with(listener, server, options).await
}

/// [`serve_http`] for any rmcp handler, with `options`: authentication, the allowed
/// origins and the request limits ([`HttpOptions::with_limits`]; [`TaskServer::limits`] only
/// applies to [`serve_http`] and stdio).
///
/// ```no_run
/// # async fn run(toolkit: mcp_tasks::Toolkit) -> std::io::Result<()> {
/// use mcp_tasks::{HttpOptions, StaticTokens, TaskServer};
/// let tokens = StaticTokens::parse("alice:TOKEN_A,bob:TOKEN_B").map_err(std::io::Error::other)?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// let server = TaskServer::new(toolkit);
/// // The `*_with` functions serve any handler, so they start no engine: start it first.
/// server.engine().start().map_err(std::io::Error::other)?;
/// mcp_tasks::serve_http_with(listener, server, HttpOptions::new().with_static_tokens(tokens)).await
/// # }
/// ```
///
/// # Errors
/// An I/O error of the listener.
pub async fn serve_http_with<S>(
    listener: TcpListener,
    server: S,
    options: HttpOptions,
) -> io::Result<()>
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::warn!(%error, "could not set TCP_NODELAY");
        }
    });
    axum::serve(listener, http_router_with(server, options)).await
}

/// Starts the engine of a server about to be served by a function that cannot return an
/// error ([`http_router`], [`http_service`]): called from a tokio runtime, a failure means
/// the engine was shut down, whose calls are refused anyway; it is logged. The functions
/// that take any handler (`*_with`) start nothing: start the engine of your handler with
/// [`Engine::start`](crate::Engine::start) before serving it.
fn start_engine(server: &TaskServer) {
    if let Err(error) = server.engine().start() {
        tracing::error!(%error, "the engine of the served TaskServer did not start");
    }
}

/// The origins [`HttpOptions::default`] accepts: `http` and `https` on `localhost`,
/// `127.0.0.1` and `[::1]`, any port. A request without `Origin` (not from a browser) passes.
pub const LOCALHOST_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// How [`serve_http_with`] guards `/mcp`: who may call (a bearer token) and from which
/// browser origins (docs/protocol.md R49, C36).
///
/// The default authenticates nobody (every request is
/// [`DEFAULT_OWNER`](crate::DEFAULT_OWNER)), answers 403 to a request whose `Origin` is not
/// one of [`LOCALHOST_ORIGINS`], and accepts only the hosts `localhost`, `127.0.0.1` and
/// `::1` in `Host` (rmcp's DNS-rebinding defaults).
///
/// ```
/// use mcp_tasks::{HttpOptions, StaticTokens};
/// let options = HttpOptions::new()
///     .with_static_tokens(StaticTokens::parse("alice:TOKEN_A,bob:TOKEN_B")?)
///     .with_allowed_origins(["https://app.example.com"])
///     .with_allowed_hosts(["mcp.example.com"]);
/// # let _ = options;
/// # Ok::<(), mcp_tasks::TokenListError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct HttpOptions {
    bearer: Option<Bearer>,
    resource_metadata: Option<Arc<str>>,
    protected_resource: Option<ProtectedResource>,
    origins: Option<Vec<String>>,
    hosts: Option<Vec<String>>,
    limits: Limits,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            bearer: None,
            resource_metadata: None,
            protected_resource: None,
            origins: Some(LOCALHOST_ORIGINS.iter().map(|&o| o.to_owned()).collect()),
            hosts: None,
            limits: Limits::default(),
        }
    }
}

impl HttpOptions {
    /// The defaults: no authentication, localhost origins and hosts only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every request needs `Authorization: Bearer <token>` that `validator` accepts; the
    /// [`Owner`](crate::Owner) it answers owns the request's tasks. A missing or refused
    /// token answers HTTP 401 with `WWW-Authenticate: Bearer ...` before anything runs.
    pub fn with_bearer(mut self, validator: impl TokenValidator) -> Self {
        let mut bearer = Bearer::new(Arc::new(validator));
        if let Some(url) = &self.resource_metadata {
            bearer = bearer.with_resource_metadata(url.clone());
        }
        self.bearer = Some(bearer);
        self
    }

    /// [`with_bearer`](Self::with_bearer) over a fixed token table.
    pub fn with_static_tokens(self, tokens: StaticTokens) -> Self {
        self.with_bearer(tokens)
    }

    /// Names the server's OAuth protected resource metadata (RFC 9728) in every 401's
    /// `WWW-Authenticate` (`resource_metadata="<url>"`), as the MCP authorization spec asks.
    pub fn with_resource_metadata(mut self, url: impl Into<String>) -> Self {
        let url: Arc<str> = Arc::from(url.into());
        self.bearer = self
            .bearer
            .map(|bearer| bearer.with_resource_metadata(url.clone()));
        self.resource_metadata = Some(url);
        self
    }

    /// Serves this server's OAuth protected resource metadata (RFC 9728) without a token, at
    /// `/.well-known/oauth-protected-resource` followed by the resource's path (and at the
    /// root well-known path), naming `authorization_servers` as the issuers of its tokens,
    /// and names that URL in every 401 ([`with_resource_metadata`](Self::with_resource_metadata)).
    /// `resource` is the server's public URL, e.g. `https://mcp.example.com/mcp`: the
    /// audience its tokens must name (RFC 8707).
    ///
    /// ```
    /// let options = mcp_tasks::HttpOptions::new()
    ///     .with_protected_resource("https://mcp.example.com/mcp", ["https://auth.example.com"])?;
    /// # let _ = options;
    /// # Ok::<(), mcp_tasks::ProtectedResourceError>(())
    /// ```
    ///
    /// # Errors
    /// [`ProtectedResourceError::NotAbsolute`] when `resource` is not an absolute http(s) URL.
    pub fn with_protected_resource(
        self,
        resource: &str,
        authorization_servers: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, ProtectedResourceError> {
        let metadata = ProtectedResource::new(
            resource,
            authorization_servers.into_iter().map(Into::into).collect(),
        )?;
        let mut options = self.with_resource_metadata(metadata.url.to_string());
        options.protected_resource = Some(metadata);
        Ok(options)
    }

    /// Accepts browser requests from exactly these origins (`scheme://host[:port]`, `:*`
    /// for any port, `null` for `Origin: null`); any other `Origin` answers 403. Requests
    /// without `Origin` pass. Replaces [`LOCALHOST_ORIGINS`]: list them too to keep them.
    pub fn with_allowed_origins(
        mut self,
        origins: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.origins = Some(origins.into_iter().map(Into::into).collect());
        self
    }

    /// Accepts any `Origin`: only for a server no browser can reach, or one behind a proxy
    /// that checks origins itself.
    pub fn with_any_origin(mut self) -> Self {
        self.origins = None;
        self
    }

    /// Accepts these `Host` values (`host` or `host:port`) instead of the loopback names:
    /// for a server reached by a public name.
    pub fn with_allowed_hosts(
        mut self,
        hosts: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.hosts = Some(hosts.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the request limits: the body size rmcp accepts and the request guard's checks
    /// (default [`Limits::default`]).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// `config` with these checks.
    fn config(&self, config: StreamableHttpServerConfig) -> StreamableHttpServerConfig {
        let config = match &self.origins {
            // An empty list still checks: every present Origin is refused.
            Some(origins) => config
                .with_allowed_origins(origins.clone())
                .enforce_origin_validation(),
            None => config.disable_allowed_origins(),
        };
        match &self.hosts {
            Some(hosts) => config.with_allowed_hosts(hosts.clone()),
            None => config,
        }
    }
}
