//! Who is calling over Streamable HTTP: the bearer-token guard in front of `/mcp` (what it
//! answers: [`HttpOptions::with_bearer`](super::HttpOptions::with_bearer)), which puts the
//! validator's [`Owner`] in the request's extensions, where the engine reads it; and the
//! OAuth protected resource metadata (OAuth 2.1 validation: see [`TokenValidator`]).

use std::{collections::HashMap, sync::Arc};

use axum::{
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use sha2::{Digest, Sha256};

use super::{Owner, guard::JSON};

/// Why a bearer token was refused. The HTTP answer follows RFC 6750 §3.1.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The token is unknown, expired, revoked or not meant for this server: HTTP 401,
    /// `error="invalid_token"`.
    #[error("the bearer token is not valid")]
    InvalidToken,
    /// The token is valid but does not grant `scope`: HTTP 403,
    /// `error="insufficient_scope"`.
    #[error("the bearer token does not grant the scope `{scope}`")]
    InsufficientScope {
        /// The scope the request needs.
        scope: String,
    },
    /// The validator could not decide (an unreachable key set, a database error): HTTP
    /// 503; the client may retry.
    #[error("the bearer token could not be checked: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Decides who a bearer token belongs to.
///
/// Any `Fn(String) -> impl Future<Output = Result<Owner, AuthError>>` is one; so is
/// [`StaticTokens`].
///
/// # OAuth 2.1 (the MCP authorization spec)
///
/// An MCP server is an OAuth 2.1 *resource server*: it validates the access token an
/// authorization server issued (signature, expiry, issuer, and an audience naming this
/// server, RFC 8707) and points clients to that authorization server with
/// `WWW-Authenticate: Bearer resource_metadata="<url of its RFC 9728 metadata>"`
/// ([`HttpOptions::with_resource_metadata`](crate::HttpOptions::with_resource_metadata)).
/// A validator over a well-kept JWT crate does the checking, here [`jsonwebtoken`]; the
/// token's `sub` becomes the owner:
///
/// ```rust,ignore
/// use mcp_tasks::{AuthError, HttpOptions, Owner};
/// use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode};
///
/// #[derive(serde::Deserialize)]
/// struct Claims { sub: String, scope: Option<String> }
///
/// let key = DecodingKey::from_rsa_pem(include_bytes!("issuer-public-key.pem"))?;
/// let mut validation = Validation::new(Algorithm::RS256);
/// validation.set_issuer(&["https://auth.example.com"]);
/// validation.set_audience(&["https://mcp.example.com/mcp"]); // this server (RFC 8707)
/// let options = HttpOptions::new()
///     .with_protected_resource("https://mcp.example.com/mcp", ["https://auth.example.com"])?
///     .with_bearer(move |token: String| {
///         let (key, validation) = (key.clone(), validation.clone());
///         async move {
///             let claims = decode::<Claims>(&token, &key, &validation)
///                 .map_err(|_| AuthError::InvalidToken)?
///                 .claims;
///             if !claims.scope.unwrap_or_default().split(' ').any(|s| s == "tasks") {
///                 return Err(AuthError::InsufficientScope { scope: "tasks".into() });
///             }
///             Ok(Owner::new(claims.sub))
///         }
///     });
/// ```
///
/// Fetch the issuer's keys (JWKS) before serving, or in the validator with a cache; a
/// validator that cannot decide answers [`AuthError::Unavailable`] (HTTP 503).
/// [`HttpOptions::with_protected_resource`](crate::HttpOptions::with_protected_resource)
/// serves the protected resource metadata document and names it in every 401.
///
/// [`jsonwebtoken`]: https://docs.rs/jsonwebtoken
#[async_trait::async_trait]
pub trait TokenValidator: Send + Sync + 'static {
    /// The owner of `token` (the text after `Bearer `), or why it is refused.
    async fn validate(&self, token: &str) -> Result<Owner, AuthError>;
}

#[async_trait::async_trait]
impl<F, Fut> TokenValidator for F
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Owner, AuthError>> + Send,
{
    async fn validate(&self, token: &str) -> Result<Owner, AuthError> {
        self(token.to_owned()).await
    }
}

/// A fixed table of tokens and their owners, e.g. from `--tokens alice:TOKEN_A,bob:TOKEN_B`.
///
/// Tokens are kept as SHA-256 digests and looked up by digest, so neither `Debug` output
/// nor the time a lookup takes tells anything about the tokens.
///
/// ```
/// let tokens = mcp_tasks::StaticTokens::parse("alice:TOKEN_A,bob:TOKEN_B")?;
/// assert_eq!(tokens.len(), 2);
/// # Ok::<(), mcp_tasks::TokenListError>(())
/// ```
#[derive(Clone, Default)]
pub struct StaticTokens {
    by_digest: HashMap<[u8; 32], Owner>,
}

impl std::fmt::Debug for StaticTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut owners: Vec<&str> = self.by_digest.values().map(|o| &*o.0).collect();
        owners.sort_unstable();
        f.debug_struct("StaticTokens")
            .field("owners", &owners)
            .finish_non_exhaustive()
    }
}

/// Why a token list could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenListError {
    /// The list has no entry.
    #[error("the token list is empty; expected `owner:token[,owner:token...]`")]
    Empty,
    /// An entry is not `owner:token` with both parts non-empty (the entry is not quoted:
    /// it holds a secret).
    #[error(
        "entry {position} of the token list is not `owner:token`; expected e.g. \
         `alice:TOKEN_A,bob:TOKEN_B`"
    )]
    Malformed {
        /// The entry's position, from 1.
        position: usize,
    },
    /// Two entries have the same token.
    #[error("entry {position} of the token list repeats an earlier token; give each owner its own")]
    Duplicate {
        /// The later entry's position, from 1.
        position: usize,
    },
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

impl StaticTokens {
    /// An empty table: every token is refused.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `token`, owned by `owner` (replacing an earlier entry of the same token).
    #[must_use]
    pub fn with_token(mut self, token: impl AsRef<[u8]>, owner: Owner) -> Self {
        self.by_digest.insert(digest(token.as_ref()), owner);
        self
    }

    /// A table from `owner:token` entries separated by commas, e.g.
    /// `alice:TOKEN_A,bob:TOKEN_B` (an owner has no `:`; a token may).
    ///
    /// # Errors
    /// An empty list, an entry without both parts, or a token given twice.
    pub fn parse(list: &str) -> Result<Self, TokenListError> {
        let mut tokens = Self::new();
        for (index, entry) in list.split(',').map(str::trim).enumerate() {
            let position = index + 1;
            if entry.is_empty() && list.trim().is_empty() {
                return Err(TokenListError::Empty);
            }
            let Some((owner, token)) = entry
                .split_once(':')
                .filter(|(owner, token)| !owner.is_empty() && !token.is_empty())
            else {
                return Err(TokenListError::Malformed { position });
            };
            let key = digest(token.as_bytes());
            if tokens.by_digest.insert(key, Owner::new(owner)).is_some() {
                return Err(TokenListError::Duplicate { position });
            }
        }
        Ok(tokens)
    }

    /// How many tokens the table has.
    #[must_use]
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// Whether the table has no token.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }
}

#[async_trait::async_trait]
impl TokenValidator for StaticTokens {
    async fn validate(&self, token: &str) -> Result<Owner, AuthError> {
        let owner = self.by_digest.get(&digest(token.as_bytes()));
        owner.cloned().ok_or(AuthError::InvalidToken)
    }
}

/// Why a protected resource could not be described.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtectedResourceError {
    /// The resource is not an absolute `https://` or `http://` URL.
    #[error(
        "the protected resource `{resource}` is not an absolute http(s) URL; expected e.g. \
         `https://mcp.example.com/mcp`"
    )]
    NotAbsolute {
        /// The resource given.
        resource: String,
    },
}

/// The OAuth protected resource metadata (RFC 9728) of this server, and where it is
/// served.
#[derive(Clone, Debug)]
pub(crate) struct ProtectedResource {
    /// The JSON document.
    document: Arc<str>,
    /// Its absolute URL, for `WWW-Authenticate`.
    pub(crate) url: Arc<str>,
    /// The paths it is served on: the path-inserted well-known URI of RFC 9728 §3.1 and
    /// the root one.
    paths: Vec<String>,
}

const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

impl ProtectedResource {
    pub(crate) fn new(
        resource: &str,
        authorization_servers: Vec<String>,
    ) -> Result<Self, ProtectedResourceError> {
        let not_absolute = || ProtectedResourceError::NotAbsolute {
            resource: resource.to_owned(),
        };
        let uri: axum::http::Uri = resource.parse().map_err(|_| not_absolute())?;
        let (Some(scheme @ ("https" | "http")), Some(authority)) =
            (uri.scheme_str(), uri.authority())
        else {
            return Err(not_absolute());
        };
        let path = uri.path().trim_end_matches('/');
        let inserted = format!("{WELL_KNOWN}{path}");
        let document = serde_json::json!({
            "resource": resource,
            "authorization_servers": authorization_servers,
            "bearer_methods_supported": ["header"],
        });
        let mut paths = vec![inserted.clone()];
        if inserted != WELL_KNOWN {
            paths.push(WELL_KNOWN.to_owned());
        }
        Ok(Self {
            document: Arc::from(document.to_string()),
            url: Arc::from(format!("{scheme}://{authority}{inserted}")),
            paths,
        })
    }

    /// `router` plus the metadata routes (`GET`, no token needed).
    pub(crate) fn serve(&self, mut router: axum::Router) -> axum::Router {
        for path in &self.paths {
            let document = self.document.clone();
            router = router.route(
                path,
                axum::routing::get(move || async move {
                    ([(header::CONTENT_TYPE, JSON)], document.to_string())
                }),
            );
        }
        router
    }
}

/// The token a request was let in with, and the validator that accepted it: a long
/// task listen stream asks the validator again from time to time
/// ([`HttpOptions::with_listen_recheck_interval`](crate::HttpOptions::with_listen_recheck_interval)).
#[derive(Clone)]
pub(crate) struct Presented {
    validator: Arc<dyn TokenValidator>,
    token: Arc<str>,
}

impl Presented {
    /// Whether the validator still accepts the token: `false` only when it refuses it
    /// (an error of its own, such as an unreachable issuer, is not a refusal).
    pub(crate) async fn still_valid(&self) -> bool {
        match self.validator.validate(&self.token).await {
            Ok(_) => true,
            Err(AuthError::InvalidToken | AuthError::InsufficientScope { .. }) => false,
            Err(error) => {
                tracing::warn!(%error, "a listen stream's bearer token could not be checked again");
                true
            }
        }
    }
}

/// The bearer-token guard in front of `/mcp`.
#[derive(Clone)]
pub(crate) struct Bearer {
    pub(crate) validator: Arc<dyn TokenValidator>,
    /// Named in every refusal's `WWW-Authenticate`, when set.
    pub(crate) resource_metadata: Option<Arc<str>>,
}

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bearer")
            .field("resource_metadata", &self.resource_metadata)
            .finish_non_exhaustive()
    }
}

impl Bearer {
    /// `router` behind the guard: every request to one of its routes needs a token the
    /// validator accepts (a path it does not serve is `404`, with no challenge).
    pub(crate) fn protect(&self, router: axum::Router) -> axum::Router {
        router.route_layer(axum::middleware::from_fn_with_state(self.clone(), guard))
    }

    /// The refusal: `status`, `WWW-Authenticate` with `resource_metadata` (when set)
    /// and the RFC 6750 error attributes, and a text body that says what to fix.
    fn refuse(
        &self,
        status: StatusCode,
        error: Option<(&str, &str)>,
        body: impl IntoResponse,
    ) -> Response {
        let mut params = Vec::new();
        if let Some(url) = &self.resource_metadata {
            params.push(format!("resource_metadata=\"{url}\""));
        }
        if let Some((code, extra)) = error {
            params.push(format!("error=\"{code}\""));
            if !extra.is_empty() {
                params.push(extra.to_owned());
            }
        }
        // `Bearer` alone when there are no params.
        let challenge = format!("Bearer {}", params.join(", "));
        let mut response = (status, body).into_response();
        if let Ok(value) = HeaderValue::from_str(challenge.trim_end()) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// The token of `Authorization: Bearer <token>`: `Ok(None)` without the header,
/// `Err(())` for a header that is not a bearer credential.
fn bearer_token(headers: &HeaderMap) -> Result<Option<&str>, ()> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value.to_str().map_err(|_| ())?;
    let (scheme, token) = value.trim().split_once(' ').ok_or(())?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(());
    }
    Ok(Some(token))
}

async fn guard(State(bearer): State<Bearer>, mut request: Request, next: Next) -> Response {
    let token = match bearer_token(request.headers()) {
        Ok(Some(token)) => token,
        Ok(None) => {
            return bearer.refuse(
                StatusCode::UNAUTHORIZED,
                None,
                "this server needs a bearer token: send `Authorization: Bearer <token>`",
            );
        }
        Err(()) => {
            return bearer.refuse(
                StatusCode::UNAUTHORIZED,
                Some(("invalid_request", "")),
                "the Authorization header is not `Bearer <token>`",
            );
        }
    };
    match bearer.validator.validate(token).await {
        Ok(owner) => {
            let presented = Presented {
                validator: bearer.validator.clone(),
                token: Arc::from(token),
            };
            request.extensions_mut().insert(owner);
            request.extensions_mut().insert(presented);
            next.run(request).await
        }
        Err(AuthError::InvalidToken) => bearer.refuse(
            StatusCode::UNAUTHORIZED,
            Some(("invalid_token", "")),
            "the bearer token is not valid: send a token this server issued, or get a new one",
        ),
        Err(AuthError::InsufficientScope { scope }) => {
            let scope = scope.replace(['"', '\\'], "");
            bearer.refuse(
                StatusCode::FORBIDDEN,
                Some(("insufficient_scope", &format!("scope=\"{scope}\""))),
                format!("the bearer token does not grant the scope `{scope}`"),
            )
        }
        Err(error @ AuthError::Unavailable(_)) => {
            tracing::warn!(%error, "bearer token not checked");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "the bearer token could not be checked right now; retry later",
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_lists_parse_and_refuse_what_they_cannot_read() {
        let tokens = StaticTokens::parse("alice:A, bob:B:with:colons").unwrap();
        assert_eq!(tokens.len(), 2);
        assert_eq!(
            StaticTokens::parse("  ").unwrap_err(),
            TokenListError::Empty
        );
        assert_eq!(
            StaticTokens::parse("alice:A,bob").unwrap_err(),
            TokenListError::Malformed { position: 2 }
        );
        assert_eq!(
            StaticTokens::parse(":A").unwrap_err(),
            TokenListError::Malformed { position: 1 }
        );
        assert_eq!(
            StaticTokens::parse("alice:A,bob:A").unwrap_err(),
            TokenListError::Duplicate { position: 2 }
        );
        let shown = format!("{tokens:?}");
        assert!(
            shown.contains("alice") && !shown.contains("with:colons"),
            "{shown}"
        );
    }

    #[test]
    fn only_bearer_credentials_are_read() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer_token(&headers), Ok(None));
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer  abc "),
        );
        assert_eq!(bearer_token(&headers), Ok(Some("abc")));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer_token(&headers), Err(()));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer"));
        assert_eq!(bearer_token(&headers), Err(()));
    }
}
