//! Every JSON-RPC error this crate answers with, chosen in one place.
//!
//! A protocol error is returned to the caller as a JSON-RPC error; a tool failure is data
//! (`completed` with `isError: true`); `failed` is only for JSON-RPC errors during execution
//! (WIRE.md R45-R47).

use rmcp::model::{ClientCapabilities, ErrorCode, ErrorData, JsonObject};
use serde_json::json;

use crate::EXTENSION_ID;

/// `-32021` with `data.requiredCapabilities.extensions["io.modelcontextprotocol/tasks"] = {}`
/// (WIRE.md R6, R43, §3.4).
#[must_use]
pub fn tasks_capability_required() -> ErrorData {
    let mut extensions = rmcp::model::ExtensionCapabilities::new();
    extensions.insert(EXTENSION_ID.to_owned(), JsonObject::new());
    let mut caps = ClientCapabilities::default();
    caps.extensions = Some(extensions);
    ErrorData::missing_required_client_capability(caps)
}

/// `-32021` naming the client capability an input request needs (WIRE.md C8, C18).
#[must_use]
pub fn client_capability_required(capability: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        "Missing required client capability",
        Some(json!({ "requiredCapabilities": { capability: {} } })),
    )
}

/// `-32602` for an id that is unknown, purged, or owned by someone else (WIRE.md R17, R49).
/// The three cases answer the same, so a caller learns nothing about other owners' tasks.
#[must_use]
pub fn task_not_found(method: &str) -> ErrorData {
    ErrorData::invalid_params(format!("{method}: task not found"), None)
}

/// `-32602` for a `tools/call` naming no tool of this server (WIRE.md §5.8).
#[must_use]
pub fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown tool `{name}`"), None)
}

/// `-32602` for a malformed `inputResponses` value.
#[must_use]
pub fn bad_input_response(key: &str, expected: &str, problem: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("inputResponses[\"{key}\"] is not a valid {expected}: {problem}"),
        None,
    )
}

/// `-32603` when the store cannot take another task.
#[must_use]
pub fn store_full(capacity: usize) -> ErrorData {
    ErrorData::internal_error(
        format!("the task store is full ({capacity} tasks); retry once tasks finish or expire"),
        Some(json!({ "capacity": capacity })),
    )
}

/// `-32603` for a failure of the task store itself.
#[must_use]
pub fn store_failure(error: &dyn std::error::Error) -> ErrorData {
    ErrorData::internal_error(format!("task store failure: {error}"), None)
}

/// `-32603` for a tool that panicked; the server keeps serving.
#[must_use]
pub fn tool_panicked(tool: &str, message: &str) -> ErrorData {
    ErrorData::internal_error(format!("tool `{tool}` panicked: {message}"), None)
}

/// `-32603` for a non-terminal task whose TTL elapsed (WIRE.md R20).
#[must_use]
pub fn task_expired() -> ErrorData {
    ErrorData::internal_error("task expired", None)
}

/// `-32603` for a call cancelled while it was still answered inline.
#[must_use]
pub fn request_cancelled() -> ErrorData {
    ErrorData::internal_error("the request was cancelled", None)
}

/// `-32021` for an inline call (no task, no multi round-trip) whose tool asks for input.
#[must_use]
pub fn input_needs_task(tool: &str) -> ErrorData {
    let mut error = tasks_capability_required();
    error.message = format!(
        "tool `{tool}` needs input from the client, which it can only ask for as a task: \
         declare the io.modelcontextprotocol/tasks extension on tools/call"
    )
    .into();
    error
}

/// `-32603` for a replayed step whose name differs from the one stored at its position.
#[must_use]
pub fn step_renamed(seq: u64, stored: &str, now: &str) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "step {seq} was `{stored}` when the task started and is `{now}` now: the tool's \
             code changed, so the task cannot be replayed"
        ),
        None,
    )
}

/// `-32603` for a step whose result does not serialize.
#[must_use]
pub fn step_unserializable(name: &str, error: &serde_json::Error) -> ErrorData {
    ErrorData::internal_error(
        format!("the result of step `{name}` does not serialize: {error}"),
        None,
    )
}

/// `-32602` for a client answer (or a stored one) that is not the type asked for.
#[must_use]
pub fn bad_client_answer(what: &str, error: &serde_json::Error) -> ErrorData {
    ErrorData::invalid_params(
        format!("the client's answer is not a valid {what}: {error}"),
        None,
    )
}

/// `-32602` for a `requestState` this server did not issue for the tool called.
#[must_use]
pub fn foreign_request_state(tool: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "requestState is not one this server issued for tool `{tool}`; retry the call \
             without requestState and inputResponses"
        ),
        None,
    )
}

/// `-32602` for an idempotency key in `_meta` that is not a short non-empty string.
#[must_use]
pub fn bad_idempotency_key(field: &str, max: usize) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "`_meta[\"{field}\"]` must be a non-empty string of at most {max} characters; send \
             one key per logical call and the same key when you retry it"
        ),
        None,
    )
}

/// `-32603` for a task that a restarted server does not replay; `message` says why.
#[must_use]
pub fn not_resumed(message: String) -> ErrorData {
    ErrorData::internal_error(message, None)
}

/// `-32603` in place of a tool result that does not serialize.
#[must_use]
pub fn unserializable_result() -> ErrorData {
    ErrorData::internal_error("the tool result could not be serialized", None)
}

/// The JSON object form of an error, as a failed task's `error` field carries it.
#[must_use]
pub fn to_object(error: &ErrorData) -> JsonObject {
    match serde_json::to_value(error) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => {
            let mut map = JsonObject::new();
            map.insert("code".into(), json!(error.code.0));
            map.insert("message".into(), json!(error.message));
            map
        }
    }
}
