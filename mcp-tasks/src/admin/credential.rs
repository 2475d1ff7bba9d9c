//! The admin API's own credential ([`AdminCredential`]) and how a request presents it.

use axum::http::{HeaderMap, header};
use base64::{Engine as _, engine::general_purpose::STANDARD_PAD_INDIFFERENT as BASE64};
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Shortest admin credential [`AdminCredential::new`] takes, in bytes.
pub const MIN_CREDENTIAL_LEN: usize = 16;

/// The admin API's own secret: `Authorization: Bearer <it>` on the JSON API, the password of
/// HTTP Basic (any user name) in a browser. Kept only as its SHA-256 digest, compared in
/// constant time.
#[derive(Clone)]
pub struct AdminCredential {
    digest: [u8; 32],
    /// Wrong credentials one client address may present within `failure_window`.
    pub(super) max_failures: u32,
    pub(super) failure_window: std::time::Duration,
}

impl std::fmt::Debug for AdminCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminCredential(..)")
    }
}

/// An admin credential that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialError {
    /// Too short to be a secret.
    #[error(
        "the admin credential has {0} bytes: give at least 16 random characters (for example \
         `openssl rand -hex 32`), never a user's token"
    )]
    TooShort(usize),
}

impl AdminCredential {
    /// The credential `secret` (at least [`MIN_CREDENTIAL_LEN`] bytes).
    ///
    /// # Errors
    /// [`CredentialError::TooShort`].
    pub fn new(secret: impl AsRef<str>) -> Result<Self, CredentialError> {
        let secret = secret.as_ref();
        if secret.len() < MIN_CREDENTIAL_LEN {
            return Err(CredentialError::TooShort(secret.len()));
        }
        Ok(Self {
            digest: Sha256::digest(secret.as_bytes()).into(),
            max_failures: Self::DEFAULT_MAX_FAILURES,
            failure_window: Self::DEFAULT_FAILURE_WINDOW,
        })
    }

    /// The default `max_failures` of [`with_throttle`](Self::with_throttle).
    pub const DEFAULT_MAX_FAILURES: u32 = 10;
    /// The default `window` of [`with_throttle`](Self::with_throttle).
    pub const DEFAULT_FAILURE_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

    /// After `max_failures` wrong credentials from one client address within `window`
    /// (counted from the first), the admin router answers that address `429` with
    /// `Retry-After` until the window is over, the right credential included (default 10
    /// in 60 s; see [`router`](super::router)). `max_failures` is at least 1.
    #[must_use]
    pub fn with_throttle(mut self, max_failures: u32, window: std::time::Duration) -> Self {
        self.max_failures = max_failures.max(1);
        self.failure_window = window;
        self
    }

    /// Whether `presented` is the credential, in constant time.
    pub(super) fn accepts(&self, presented: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        digest.ct_eq(&self.digest).into()
    }

    /// The token of the form that cancels a task in the web view: an HMAC of the task keyed
    /// by the credential, so another site cannot forge it.
    pub(super) fn form_token(&self, task_id: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.digest).expect("HMAC takes any key");
        mac.update(b"mcp-tasks admin cancel form\0");
        mac.update(task_id.as_bytes());
        let tag = mac.finalize().into_bytes();
        tag.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Whether `token` is the cancel form's token of task `task_id`, in constant time.
    pub(super) fn accepts_form_token(&self, task_id: &str, token: &str) -> bool {
        let expected = self.form_token(task_id);
        token.as_bytes().ct_eq(expected.as_bytes()).into()
    }
}

/// The credential of a request: a bearer token, or (when `basic` is allowed) the password of
/// HTTP Basic.
pub(super) fn presented(headers: &HeaderMap, basic: bool) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    if scheme.eq_ignore_ascii_case("bearer") {
        return Some(rest.trim().to_owned());
    }
    if basic && scheme.eq_ignore_ascii_case("basic") {
        let text = String::from_utf8(BASE64.decode(rest.trim()).ok()?).ok()?;
        return text
            .split_once(':')
            .map(|(_, password)| password.to_owned());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_decode() {
        let basic = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            presented(&headers, true)
        };
        assert_eq!(basic("Basic YWRtaW46c2VjcmV0").as_deref(), Some("secret"));
        // Padding is optional: `a:bc` is `YTpiYw==`.
        assert_eq!(basic("Basic YTpiYw==").as_deref(), Some("bc"));
        assert_eq!(basic("Basic YTpiYw").as_deref(), Some("bc"));
        assert_eq!(basic("Basic Y"), None);
        assert_eq!(basic("Basic a!b="), None);
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            "Basic YWRtaW46c2VjcmV0".parse().unwrap(),
        );
        assert_eq!(
            presented(&headers, false),
            None,
            "the API takes bearer only"
        );
    }

    #[test]
    fn a_credential_is_long_and_compared_whole() {
        assert_eq!(
            AdminCredential::new("short").unwrap_err(),
            CredentialError::TooShort(5)
        );
        let credential = AdminCredential::new("0123456789abcdef").unwrap();
        assert!(credential.accepts("0123456789abcdef"));
        assert!(!credential.accepts("0123456789abcdeF"));
        assert!(!credential.accepts("0123456789abcdef "));
        let token = credential.form_token("a");
        assert_ne!(token, credential.form_token("b"));
        assert!(credential.accepts_form_token("a", &token));
        assert!(!credential.accepts_form_token("b", &token));
        assert!(!credential.accepts_form_token("a", &token[1..]));
    }
}
