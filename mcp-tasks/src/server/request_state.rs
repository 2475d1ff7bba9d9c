//! Sealed `requestState` for multi round-trip requests.
//!
//! A call that asks for input before it has a task answers `input_required` with the
//! questions of the round and a `requestState` the client echoes on its retry. That string
//! comes back as attacker-controlled input, so it is sealed with rmcp's
//! [`RequestStateCodec`] (HMAC-SHA-256) and carries what it is valid for:
//!
//! | bound | checked on the retry | a mismatch answers (`-32602`) |
//! | --- | --- | --- |
//! | the tag over everything below | first | "failed verification" (forged, tampered, other key) |
//! | an expiry ([`EngineBuilder::with_request_state_ttl`]) | second | "has expired" |
//! | the owner of the request ([`Owner`]) | then | "was issued to another principal" |
//! | the tool | then | "was issued for tool `x`" |
//! | a SHA-256 digest of the arguments | then | "was issued for other arguments" |
//! | the input keys this round asked | — | answers for other keys are ignored |
//! | the answers of earlier rounds | — | carried, so a retry sends only the new ones |
//!
//! A retry without `requestState` proves nothing was asked: its `inputResponses` are ignored
//! and the call asks again (a new `input_required`, not an error). The payload is
//! signed, not encrypted: it holds the owner's name, the tool name and earlier answers in
//! base64url. A state may be retried by its owner until it expires (the same call with the
//! same answers); it is not single-use.
//!
//! [`EngineBuilder::with_request_state_ttl`]: super::EngineBuilder::with_request_state_ttl
//! [`Owner`]: super::Owner

use std::time::Duration;

use rmcp::model::{
    ErrorData, InputResponses, JsonObject, RequestStateCodec, RequestStateError, SealOptions,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::errors;

/// How long a sealed `requestState` is accepted by default: 15 minutes.
pub const DEFAULT_REQUEST_STATE_TTL: Duration = Duration::from_secs(15 * 60);

/// The secret that seals `requestState` (HMAC-SHA-256 via rmcp's [`RequestStateCodec`]).
///
/// Give every instance that serves the same clients the same key, so a retry may reach any
/// of them. Keep it out of clients' reach; 32 random bytes are enough.
///
/// ```
/// let key = mcp_tasks::RequestStateKey::new(*b"0123456789abcdef0123456789abcdef")?;
/// let engine = mcp_tasks::Engine::builder(mcp_tasks::Toolkit::new()).with_request_state_key(key).build();
/// # let _ = engine;
/// # Ok::<(), mcp_tasks::RequestStateKeyError>(())
/// ```
#[derive(Clone)]
pub struct RequestStateKey {
    codec: RequestStateCodec,
}

impl std::fmt::Debug for RequestStateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RequestStateKey(<redacted>)")
    }
}

/// Why a [`RequestStateKey`] could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestStateKeyError {
    /// The secret is shorter than [`RequestStateKey::MIN_LEN`].
    #[error("a requestState key needs at least {minimum} bytes, got {actual}; use 32 random bytes")]
    TooShort {
        /// The minimum length in bytes.
        minimum: usize,
        /// The length given.
        actual: usize,
    },
}

impl RequestStateKey {
    /// The shortest secret accepted, in bytes.
    pub const MIN_LEN: usize = RequestStateCodec::MIN_KEY_LENGTH;

    /// A key from `secret` (at least [`Self::MIN_LEN`] bytes of high-entropy material).
    ///
    /// # Errors
    /// [`RequestStateKeyError::TooShort`] for a shorter secret.
    pub fn new(secret: impl Into<Vec<u8>>) -> Result<Self, RequestStateKeyError> {
        let secret = secret.into();
        let actual = secret.len();
        RequestStateCodec::try_new(secret)
            .map(|codec| Self { codec })
            .map_err(|_| RequestStateKeyError::TooShort {
                minimum: Self::MIN_LEN,
                actual,
            })
    }

    /// A key of 32 bytes from the operating system's CSPRNG.
    ///
    /// # Panics
    /// Only if the operating system has no usable entropy source.
    #[must_use]
    pub fn generate() -> Self {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).expect("the operating system's CSPRNG is unavailable");
        Self {
            codec: RequestStateCodec::new_unchecked(secret.to_vec()),
        }
    }
}

/// What a state is bound to: the request it may continue.
pub(crate) struct Binding<'a> {
    pub(crate) owner: &'a str,
    pub(crate) tool: &'a str,
    pub(crate) arguments: &'a JsonObject,
}

#[derive(Serialize, Deserialize)]
struct Payload {
    owner: String,
    tool: String,
    /// Lowercase hex SHA-256 of the arguments in a canonical form.
    args: String,
    /// The keys the round asked for.
    issued: Vec<String>,
    /// Every answer of the earlier rounds.
    answers: InputResponses,
}

/// Seals and opens `requestState` for one engine.
#[derive(Clone, Debug)]
pub(crate) struct Sealer {
    key: RequestStateKey,
    ttl: Duration,
}

impl Sealer {
    pub(crate) fn new(key: RequestStateKey, ttl: Duration) -> Self {
        Self { key, ttl }
    }

    /// The `requestState` of a round that asked for `issued`, after `answers`.
    pub(crate) fn seal<'k>(
        &self,
        binding: &Binding<'_>,
        issued: impl IntoIterator<Item = &'k String>,
        answers: &InputResponses,
    ) -> String {
        let payload = Payload {
            owner: binding.owner.to_owned(),
            tool: binding.tool.to_owned(),
            args: arguments_digest(binding.arguments),
            issued: issued.into_iter().cloned().collect(),
            answers: answers.clone(),
        };
        // Serializing strings and JSON values cannot fail.
        let bytes = serde_json::to_vec(&payload).unwrap_or_default();
        self.key
            .codec
            .seal_with(&bytes, &SealOptions::new().ttl(self.ttl))
    }

    /// Every answer a retry brings: the earlier rounds' from a verified `state`, and this
    /// round's `responses` for the keys that round asked (others are ignored).
    ///
    /// # Errors
    /// `-32602` saying why the state is refused (see the module docs).
    // docs/protocol.md C21.
    pub(crate) fn open(
        &self,
        binding: &Binding<'_>,
        state: Option<&str>,
        responses: Option<InputResponses>,
    ) -> Result<InputResponses, ErrorData> {
        let Some(state) = state else {
            // Nothing proves a question was asked: every answer is for a key never issued.
            return Ok(InputResponses::new());
        };
        let payload: Payload = match self.key.codec.open_json(state) {
            Ok(payload) => payload,
            Err(RequestStateError::Expired) => {
                return Err(errors::bad_request_state(&format!(
                    "has expired (a state is accepted for {} after it is issued)",
                    crate::duration::format(crate::clock::millis(self.ttl))
                )));
            }
            Err(error) => {
                tracing::debug!(%error, "requestState refused");
                return Err(errors::bad_request_state(
                    "failed verification: this server did not issue it, or it was altered",
                ));
            }
        };
        if payload.owner != binding.owner {
            return Err(errors::bad_request_state("was issued to another principal"));
        }
        if payload.tool != binding.tool {
            return Err(errors::bad_request_state(&format!(
                "was issued for tool `{}`, not `{}`",
                payload.tool, binding.tool
            )));
        }
        if payload.args != arguments_digest(binding.arguments) {
            return Err(errors::bad_request_state(
                "was issued for a call with other arguments",
            ));
        }
        let mut answers = payload.answers;
        let responses = responses.unwrap_or_default().into_iter();
        answers.extend(responses.filter(|(key, _)| payload.issued.contains(key)));
        Ok(answers)
    }
}

/// Lowercase hex SHA-256 of `arguments` in a canonical form: object keys sorted, every
/// element length-prefixed, so equal JSON values digest equally whatever their key order.
fn arguments_digest(arguments: &JsonObject) -> String {
    let mut hasher = Sha256::new();
    digest_object(&mut hasher, arguments);
    let digest = hasher.finalize();
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn digest_bytes(hasher: &mut Sha256, tag: u8, bytes: &[u8]) {
    hasher.update([tag]);
    hasher.update((bytes.len() as u64).to_be_bytes());
    hasher.update(bytes);
}

fn digest_object(hasher: &mut Sha256, object: &JsonObject) {
    let mut keys: Vec<&String> = object.keys().collect();
    keys.sort();
    hasher.update([b'{']);
    hasher.update((keys.len() as u64).to_be_bytes());
    for key in keys {
        digest_bytes(hasher, b'k', key.as_bytes());
        digest_value(hasher, &object[key]);
    }
}

fn digest_value(hasher: &mut Sha256, value: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(object) => digest_object(hasher, object),
        Value::Array(items) => {
            hasher.update([b'[']);
            hasher.update((items.len() as u64).to_be_bytes());
            for item in items {
                digest_value(hasher, item);
            }
        }
        Value::String(s) => digest_bytes(hasher, b's', s.as_bytes()),
        // Null, booleans and numbers: their JSON text.
        other => digest_bytes(hasher, b'v', other.to_string().as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: serde_json::Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn digest_ignores_key_order_and_tells_values_apart() {
        let a = object(json!({ "a": 1, "b": { "x": [1, "2"], "y": null } }));
        let b = object(json!({ "b": { "y": null, "x": [1, "2"] }, "a": 1 }));
        assert_eq!(arguments_digest(&a), arguments_digest(&b));
        let c = object(json!({ "a": 1, "b": { "x": [1, 2], "y": null } }));
        assert_ne!(arguments_digest(&a), arguments_digest(&c));
        let d = object(json!({ "a": "1" }));
        let e = object(json!({ "a": 1 }));
        assert_ne!(arguments_digest(&d), arguments_digest(&e));
    }

    #[test]
    fn a_short_key_is_refused() {
        let error = RequestStateKey::new(vec![7u8; 31]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "a requestState key needs at least 32 bytes, got 31; use 32 random bytes"
        );
    }
}
