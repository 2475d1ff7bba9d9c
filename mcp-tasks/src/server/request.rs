//! What a request carries besides its params: the idempotency key, and the checks of
//! `tasks/update` answers.

#![allow(
    deprecated,
    reason = "sampling and roots are deprecated by SEP-2577 yet still part of the 2026-07-28 wire"
)]

use std::sync::Arc;

use rmcp::{
    ErrorData,
    model::{ElicitResult, InputRequest, InputResponses, ListRootsResult},
};

use crate::{errors, store::TaskSnapshot};

/// The key of a `tools/call` request's `_meta` that carries the client's idempotency key (a
/// string of 1 to 200 characters): a retry of a call with the same owner, tool and key,
/// within the first task's TTL, answers with the task that call created and starts no
/// work. Only calls that run as tasks are deduplicated; the store must support keys
/// (`MemoryStore`, `PostgresStore`).
pub const IDEMPOTENCY_KEY: &str = "mcp-tasks/idempotencyKey";

const MAX_IDEMPOTENCY_KEY: usize = 200;

/// The client's idempotency key in the request's `_meta` ([`IDEMPOTENCY_KEY`]), if any.
pub(super) fn idempotency_key(
    meta: &rmcp::model::RequestMetaObject,
) -> Result<Option<Arc<str>>, ErrorData> {
    let Some(value) = meta.0.get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    let key = value.as_str().filter(|key| {
        !key.is_empty()
            && key.chars().count() <= MAX_IDEMPOTENCY_KEY
            && !key.chars().any(char::is_control)
    });
    key.map(|key| Some(Arc::from(key)))
        .ok_or_else(|| errors::bad_idempotency_key(IDEMPOTENCY_KEY, MAX_IDEMPOTENCY_KEY))
}

/// Checks that each answer for an outstanding key has the shape its request asks for.
pub(super) fn validate_responses(
    snapshot: &TaskSnapshot,
    responses: &InputResponses,
) -> Result<(), ErrorData> {
    /// Why `value` is not a `T`, if it is not.
    fn mismatch<T: serde::de::DeserializeOwned>(value: &serde_json::Value) -> Option<String> {
        T::deserialize(value).err().map(|error| error.to_string())
    }
    for (key, value) in responses {
        let (expected, error) = match snapshot.input_requests.get(key) {
            Some(InputRequest::Elicitation(_)) => ("ElicitResult", mismatch::<ElicitResult>(value)),
            Some(InputRequest::CreateMessage(_)) => (
                "CreateMessageResult",
                mismatch::<rmcp::model::CreateMessageResult>(value),
            ),
            Some(InputRequest::ListRoots(_)) => {
                ("ListRootsResult", mismatch::<ListRootsResult>(value))
            }
            _ => continue,
        };
        if let Some(error) = error {
            return Err(errors::bad_input_response(key, expected, &error));
        }
    }
    Ok(())
}
