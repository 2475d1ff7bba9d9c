//! What a request carries besides its params: the idempotency key, and the checks of
//! `tasks/update` answers.

use std::sync::Arc;

use rmcp::{ErrorData, model::InputResponses};

use crate::{context::answer, errors, store::TaskSnapshot};

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

/// Checks that each answer for an outstanding key answers its request: of the result type
/// its request asks for and, for an accepted form, filling in the form.
pub(super) fn validate_responses(
    snapshot: &TaskSnapshot,
    responses: &InputResponses,
) -> Result<(), ErrorData> {
    for (key, value) in responses {
        let Some(request) = snapshot.input_requests.get(key) else {
            continue;
        };
        if let Some((expected, problem)) = answer::problem(request, value) {
            return Err(errors::bad_input_response(key, expected, &problem));
        }
    }
    Ok(())
}
