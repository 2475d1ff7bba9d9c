//! [`HttpOptions`]: how the Streamable HTTP server guards `/mcp` (who may call, from which
//! browser origins and hosts, the health endpoints). What one request may carry is the
//! served engine's [`Limits`](crate::Limits).

use std::sync::Arc;

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
        }
    }
}

impl HttpOptions {
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
