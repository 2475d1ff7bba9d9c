//! [`HttpOptions`]: how the Streamable HTTP server guards `/mcp` (who may call, from which
//! browser origins and hosts, the health endpoints). What one request may carry is the
//! served engine's [`Limits`](crate::Limits).

use std::{sync::Arc, time::Duration};

use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;

use super::auth::{
    Bearer, ProtectedResource, ProtectedResourceError, StaticTokens, TokenValidator,
};

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

/// How [`serve_http`](crate::serve_http) guards `/mcp`: who may call (a bearer token) and from which
/// browser origins.
///
/// The default authenticates nobody (every request is
/// [`DEFAULT_OWNER`](crate::DEFAULT_OWNER)), answers 403 to a request whose `Origin` is not
/// one of [`LOCALHOST_ORIGINS`], and accepts only the hosts `localhost`, `127.0.0.1` and
/// `::1` in `Host` (rmcp's DNS-rebinding defaults). Without authentication,
/// [`serve_http`](crate::serve_http) serves only a loopback address: on any other it refuses
/// to start unless [`allow_anonymous`](Self::allow_anonymous) says so.
///
/// It also bounds what one connection may hold, each with a safe default (the operating
/// guide's limits table lists them all):
///
/// | bound | default | setter |
/// | --- | --- | --- |
/// | time to send a request's headers (also how long an idle keep-alive connection stays open) | 30 s | [`with_header_read_timeout`](Self::with_header_read_timeout) |
/// | time to send a request's body | 30 s | [`with_body_timeout`](Self::with_body_timeout) |
/// | open connections | 1024 | [`with_max_connections`](Self::with_max_connections) |
/// | a task listen stream with nothing to send | 10 min | [`with_listen_idle_timeout`](Self::with_listen_idle_timeout) |
/// | a task listen stream in all | 1 h | [`with_listen_max_lifetime`](Self::with_listen_max_lifetime) |
/// | how often a listen stream's bearer token is checked again | 60 s | [`with_listen_recheck_interval`](Self::with_listen_recheck_interval) |
///
/// The header deadline and the connection cap are [`serve_http`](crate::serve_http)'s own
/// (it accepts the connections); an application that serves [`http_router`](crate::http_router)
/// itself sets its server's. The body deadline and the listen bounds hold on both.
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
// docs/protocol.md R49, C36.
#[derive(Clone, Debug)]
#[must_use]
pub struct HttpOptions {
    pub(super) bearer: Option<Bearer>,
    resource_metadata: Option<Arc<str>>,
    pub(super) protected_resource: Option<ProtectedResource>,
    origins: Option<Vec<String>>,
    hosts: Option<Vec<String>>,
    /// No `Host` check at all ([`HttpOptions::with_any_host`]).
    any_host: bool,
    /// [`LIVENESS_PATH`](crate::LIVENESS_PATH) and [`READINESS_PATH`](crate::READINESS_PATH) are served.
    pub(super) health: bool,
    /// Serving a non-loopback address without authentication was asked for.
    pub(super) anonymous: bool,
    pub(super) body_timeout: Duration,
    pub(super) connections: super::connections::Bounds,
    pub(super) listen: ListenBounds,
}

/// How long a task listen stream may stay open, and how often its token is checked again.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ListenBounds {
    pub(crate) idle: Duration,
    pub(crate) max_lifetime: Duration,
    pub(crate) recheck: Duration,
}

impl HttpOptions {
    /// The default of [`with_header_read_timeout`](Self::with_header_read_timeout).
    pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default of [`with_body_timeout`](Self::with_body_timeout).
    pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default of [`with_max_connections`](Self::with_max_connections).
    pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
    /// The default of [`with_listen_idle_timeout`](Self::with_listen_idle_timeout).
    pub const DEFAULT_LISTEN_IDLE_TIMEOUT: Duration = Duration::from_secs(10 * 60);
    /// The default of [`with_listen_max_lifetime`](Self::with_listen_max_lifetime).
    pub const DEFAULT_LISTEN_MAX_LIFETIME: Duration = Duration::from_secs(60 * 60);
    /// The default of [`with_listen_recheck_interval`](Self::with_listen_recheck_interval).
    pub const DEFAULT_LISTEN_RECHECK_INTERVAL: Duration = Duration::from_secs(60);

    /// The defaults: no authentication, localhost origins and hosts only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves neither [`LIVENESS_PATH`](crate::LIVENESS_PATH) nor [`READINESS_PATH`](crate::READINESS_PATH): for an application whose
    /// own router answers those paths ([`http_router`](crate::http_router) merged into it would otherwise
    /// overlap them, which axum refuses).
    pub fn without_health_endpoints(mut self) -> Self {
        self.health = false;
        self
    }

    /// Every request needs `Authorization: Bearer <token>` that `validator` accepts; the
    /// [`Owner`](crate::Owner) it answers owns the request's tasks. A missing or refused
    /// token answers HTTP 401 with `WWW-Authenticate: Bearer ...` before anything runs.
    pub fn with_bearer(mut self, validator: impl TokenValidator) -> Self {
        self.bearer = Some(Bearer {
            validator: Arc::new(validator),
            resource_metadata: self.resource_metadata.clone(),
        });
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
        if let Some(bearer) = &mut self.bearer {
            bearer.resource_metadata = Some(url.clone());
        }
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
        let servers = authorization_servers.into_iter().map(Into::into).collect();
        let metadata = ProtectedResource::new(resource, servers)?;
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
        self.any_host = false;
        self
    }

    /// Accepts any `Host`: only behind a proxy or balancer that checks the host itself (or
    /// for a server no browser can reach); the check guards against DNS rebinding.
    pub fn with_any_host(mut self) -> Self {
        self.hosts = None;
        self.any_host = true;
        self
    }

    /// Lets [`serve_http`](crate::serve_http) serve an address other than loopback without
    /// authentication: every caller is then [`DEFAULT_OWNER`](crate::DEFAULT_OWNER), sees
    /// every task and shares one owner's quotas. Only for a server that something else
    /// guards (a private network, a proxy that authenticates); without this, and without
    /// [`with_bearer`](Self::with_bearer) or [`with_static_tokens`](Self::with_static_tokens),
    /// such a bind refuses to start. A loopback address never needs it.
    pub fn allow_anonymous(mut self) -> Self {
        self.anonymous = true;
        self
    }

    /// How long a client has to send a request's headers, from the first byte it is
    /// awaited (default [`DEFAULT_HEADER_READ_TIMEOUT`](Self::DEFAULT_HEADER_READ_TIMEOUT)):
    /// after it the connection is closed. It also closes a keep-alive connection that sends
    /// no new request for that long. [`serve_http`](crate::serve_http) only (it accepts the
    /// connections). A zero duration is raised to 1 ms.
    pub fn with_header_read_timeout(mut self, timeout: Duration) -> Self {
        self.connections.header_read_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// How long a client has to send a whole request body to `/mcp` once its headers are in
    /// (default [`DEFAULT_BODY_TIMEOUT`](Self::DEFAULT_BODY_TIMEOUT)): a body still
    /// incomplete then is answered HTTP 408 with a JSON-RPC error, and nothing of it runs
    /// (no task is created). A zero duration is raised to 1 ms.
    pub fn with_body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// How many connections [`serve_http`](crate::serve_http) holds open at once (default
    /// [`DEFAULT_MAX_CONNECTIONS`](Self::DEFAULT_MAX_CONNECTIONS)); open listen streams
    /// count. A connection beyond it is closed as soon as it is accepted, before anything is
    /// read from it (the client sees the connection closed and may retry; a balancer tries
    /// another instance), and a warning is logged. At least 1.
    pub fn with_max_connections(mut self, max: usize) -> Self {
        self.connections.max = max.max(1);
        self
    }

    /// How long a task listen stream stays open with nothing to send (default
    /// [`DEFAULT_LISTEN_IDLE_TIMEOUT`](Self::DEFAULT_LISTEN_IDLE_TIMEOUT)); the keep-alive
    /// comments do not count. It then ends cleanly (its graceful result), and a client
    /// still following a task listens again. A zero duration is raised to 1 ms.
    pub fn with_listen_idle_timeout(mut self, timeout: Duration) -> Self {
        self.listen.idle = timeout.max(Duration::from_millis(1));
        self
    }

    /// How long a task listen stream stays open in all, busy or not (default
    /// [`DEFAULT_LISTEN_MAX_LIFETIME`](Self::DEFAULT_LISTEN_MAX_LIFETIME)); it then ends
    /// cleanly as on [`with_listen_idle_timeout`](Self::with_listen_idle_timeout). A zero
    /// duration is raised to 1 ms.
    pub fn with_listen_max_lifetime(mut self, lifetime: Duration) -> Self {
        self.listen.max_lifetime = lifetime.max(Duration::from_millis(1));
        self
    }

    /// How often the bearer token of an open task listen stream is checked again with the
    /// validator (default
    /// [`DEFAULT_LISTEN_RECHECK_INTERVAL`](Self::DEFAULT_LISTEN_RECHECK_INTERVAL)): a token it
    /// no longer accepts (expired, revoked) ends the stream cleanly at that check, and the
    /// client's next listen is refused with 401. A validator that cannot answer right now
    /// keeps the stream open until the next check. Without a bearer validator nothing is
    /// checked. A zero duration is raised to 1 ms.
    pub fn with_listen_recheck_interval(mut self, interval: Duration) -> Self {
        self.listen.recheck = interval.max(Duration::from_millis(1));
        self
    }

    /// `config` with these checks.
    pub(super) fn config(&self, config: StreamableHttpServerConfig) -> StreamableHttpServerConfig {
        let config = match &self.origins {
            // An empty list still checks: every present Origin is refused.
            Some(origins) => config
                .with_allowed_origins(origins.clone())
                .enforce_origin_validation(),
            None => config.disable_allowed_origins(),
        };
        match &self.hosts {
            _ if self.any_host => config.disable_allowed_hosts(),
            Some(hosts) => config.with_allowed_hosts(hosts.clone()),
            None => config,
        }
    }
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            bearer: None,
            resource_metadata: None,
            protected_resource: None,
            origins: Some(LOCALHOST_ORIGINS.iter().map(|&o| o.to_owned()).collect()),
            hosts: None,
            any_host: false,
            health: true,
            anonymous: false,
            body_timeout: Self::DEFAULT_BODY_TIMEOUT,
            connections: super::connections::Bounds {
                header_read_timeout: Self::DEFAULT_HEADER_READ_TIMEOUT,
                max: Self::DEFAULT_MAX_CONNECTIONS,
            },
            listen: ListenBounds {
                idle: Self::DEFAULT_LISTEN_IDLE_TIMEOUT,
                max_lifetime: Self::DEFAULT_LISTEN_MAX_LIFETIME,
                recheck: Self::DEFAULT_LISTEN_RECHECK_INTERVAL,
            },
        }
    }
}
