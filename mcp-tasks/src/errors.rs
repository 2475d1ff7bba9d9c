//! Every JSON-RPC error this crate answers with, chosen in one place.
//!
//! A protocol error is returned to the caller as a JSON-RPC error; a tool failure is data
//! (`completed` with `isError: true`); `failed` is only for JSON-RPC errors during execution
//! (docs/protocol.md R45-R47).

use rmcp::model::{ClientCapabilities, ErrorCode, ErrorData, JsonObject};
use serde_json::json;

/// `-32021` with `data.requiredCapabilities.extensions["io.modelcontextprotocol/tasks"] = {}`
/// (docs/protocol.md R6, R43, §3.4).
#[must_use]
pub fn tasks_capability_required() -> ErrorData {
    let mut extensions = rmcp::model::ExtensionCapabilities::new();
    extensions.insert(
        rmcp::model::TASKS_EXTENSION_ID.to_owned(),
        JsonObject::new(),
    );
    let mut caps = ClientCapabilities::default();
    caps.extensions = Some(extensions);
    ErrorData::missing_required_client_capability(caps)
}

/// `-32021` naming the client capability an input request needs (docs/protocol.md C8, C18).
#[must_use]
pub fn client_capability_required(capability: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        "Missing required client capability",
        Some(json!({ "requiredCapabilities": { capability: {} } })),
    )
}

/// `-32602` for an id that is unknown, purged, or owned by someone else (docs/protocol.md R17, R49).
/// The three cases answer the same, so a caller learns nothing about other owners' tasks.
#[must_use]
pub fn task_not_found(method: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "{method}: task not found. Common causes: the server builds a new engine for each \
             request (so every request sees an empty task store), the server restarted or \
             another instance answered without a shared durable store, the task expired, or \
             it belongs to another caller (docs/guide/08-troubleshooting.md)"
        ),
        None,
    )
}

/// `-32602` for a `tools/call` naming no tool of this server (docs/protocol.md §5.8).
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

/// `-32602` for a `requestState` refused on a retry (docs/protocol.md C19): `reason` says why
/// ("has expired", "was issued to another principal", ...).
#[must_use]
pub fn bad_request_state(reason: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("requestState {reason}; retry the call without requestState and inputResponses"),
        None,
    )
}

/// `-32601` for a method this server does not serve; `tasks/result` and `tasks/list`, methods
/// of the tasks extension's earlier revision, say where their answers went.
#[must_use]
pub fn method_not_found(method: &str) -> ErrorData {
    let hint = match method {
        "tasks/result" => {
            ": a task's result (or error) is in the tasks/get answer once the task has ended"
        }
        "tasks/list" => ": a client keeps the ids of the tasks it started and asks tasks/get",
        _ => "",
    };
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("Method not found: this server does not serve `{method}`{hint}"),
        None,
    )
}

/// `-32603` when the store cannot take another task.
#[must_use]
pub fn store_full(max_tasks: usize) -> ErrorData {
    ErrorData::internal_error(
        format!("the task store is full ({max_tasks} tasks); retry once tasks finish or expire"),
        Some(json!({ "maxTasks": max_tasks })),
    )
}

/// `-32603` for a failure of the task store itself. A backend's own words (which can name
/// tables, hosts or values) go to the server's log, not to the client: the client learns
/// whether a retry may help (`data.retryable`) and the backend's error code, if any.
#[must_use]
pub fn store_failure(error: &crate::store::StoreError) -> ErrorData {
    use crate::store::StoreError;
    match error {
        // The cluster-wide quota, counted by the store: the same answer as the in-process one.
        StoreError::OwnerQuota { owner, quota } => owner_quota(owner, *quota),
        StoreError::Backend(backend) => {
            tracing::error!(error = %error_chain(backend), "task store failure");
            let retryable = backend.is_retryable();
            let message = if retryable {
                "task store failure: the task store is unavailable for the moment; retry the request"
            } else {
                "task store failure: the task store could not carry out the request; the server's log says why"
            };
            ErrorData::internal_error(
                message,
                Some(json!({ "retryable": retryable, "code": backend.code() })),
            )
        }
        other => {
            tracing::error!(error = %other, "task store failure");
            ErrorData::internal_error(
                format!("task store failure: {other}"),
                Some(json!({ "retryable": other.is_retryable() })),
            )
        }
    }
}

/// An error with its sources, in one line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    std::iter::successors(Some(error), |error| error.source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

/// `-32603` for a tool that panicked; the server keeps serving.
#[must_use]
pub fn tool_panicked(tool: &str, message: &str) -> ErrorData {
    ErrorData::internal_error(format!("tool `{tool}` panicked: {message}"), None)
}

/// `-32603` for a non-terminal task whose TTL elapsed (docs/protocol.md R20).
#[must_use]
pub fn task_expired() -> ErrorData {
    ErrorData::internal_error("task expired", None)
}

/// `-32603` for a call that would start work on a server that is shutting down.
#[must_use]
pub fn shutting_down() -> ErrorData {
    ErrorData::internal_error(
        "the server is shutting down and starts no new work; retry on another instance",
        None,
    )
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

/// `-32603` for an input-request key a tool chose that is not a valid key (`problem` says
/// why; see `TaskContext::keyed`).
#[must_use]
pub fn bad_input_key(key: &str, problem: &str) -> ErrorData {
    ErrorData::internal_error(
        format!("input key {key:?} is not a valid key: {problem}"),
        None,
    )
}

/// `-32603` for an input-request key a tool chose a second time in one call: a key names one
/// request for the whole life of a task (docs/protocol.md R28), so it is never reused.
#[must_use]
pub fn input_key_reused(key: &str) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "input key {key:?} was already used by this call: a key names one input request \
             for the whole life of a task; choose a new key for each question"
        ),
        None,
    )
}

/// `-32603` for a progress report a tool sent that MCP does not allow (`?` on
/// `TaskContext::progress`).
#[must_use]
pub fn bad_progress(problem: &dyn std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(format!("progress refused: {problem}"), None)
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

/// `-32603` for a step whose name has a NUL character, which a Postgres store cannot keep.
#[must_use]
pub fn step_name_nul(name: &str) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "step name {name:?} has a NUL character, which a task store cannot keep: name the step without one"
        ),
        None,
    )
}

/// `-32603` for a call whose owner name has a NUL character, which a Postgres store cannot
/// keep: the application's authentication named it.
#[must_use]
pub fn owner_nul(owner: &str) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "the request's owner {owner:?} has a NUL character, which a task store cannot keep: the server's authentication must name owners without one"
        ),
        None,
    )
}

/// `-32603` for a replayed step whose stored result no longer reads as its type.
#[must_use]
pub fn step_retyped(seq: u64, name: &str, error: &serde_json::Error) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "the stored result of step {seq} `{name}` no longer reads as its type ({error}): \
             the tool's code changed, so the task cannot be replayed"
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

/// `-32603` for a step whose stored result would not read back as the step's type.
#[must_use]
pub fn step_unreadable(name: &str, error: &serde_json::Error) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "the result of step `{name}` does not read back as its type once stored as JSON \
             ({error}), so a replay could not use it: return a type that does (a NaN float, \
             for one, is stored as null)"
        ),
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

/// `-32602` for an idempotency key in `_meta` that is not a short non-empty string.
#[must_use]
pub fn bad_idempotency_key(field: &str, max: usize) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "`_meta[\"{field}\"]` must be a non-empty string of at most {max} characters, none \
             of them a control character; send one key per logical call and the same key when \
             you retry it"
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

/// `-32603` for a tool's `what` (its result, its error, a step) that nests deeper than
/// [`Limits::MAX_VALUE_DEPTH`](crate::Limits::MAX_VALUE_DEPTH).
#[must_use]
pub fn value_too_deep(tool: &str, what: &str) -> ErrorData {
    let levels = crate::Limits::MAX_VALUE_DEPTH;
    ErrorData::internal_error(
        format!(
            "the {what} of tool `{tool}` nests more than {levels} levels deep, which JSON readers \
             cannot read back: make it flatter (for example, encode the deep part as a string)"
        ),
        Some(json!({ "maxDepth": levels })),
    )
}

/// `-32603` for an input request past [`Limits::max_input_requests`](crate::Limits).
#[must_use]
pub fn too_many_input_requests(limit: usize) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "the task already has {limit} outstanding input requests, the most one task may \
             have: wait for answers before asking more, or raise Limits::with_max_input_requests"
        ),
        Some(json!({ "maxInputRequests": limit })),
    )
}

/// `-32603` for a `tools/call` whose owner has [`Limits::max_live_tasks_per_owner`] live
/// tasks already.
#[must_use]
pub fn owner_quota(owner: &str, quota: usize) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "owner `{owner}` has {quota} live tasks, the most one owner may have at once: retry once some finish, are cancelled or expire (the server's \
             Limits::with_max_live_tasks_per_owner sets the quota)"
        ),
        Some(json!({ "quota": quota })),
    )
}

/// `-32603` for a `subscriptions/listen` of an owner who has `limit` listen streams open
/// already on this server.
#[cfg(any(feature = "http", feature = "stdio"))]
#[must_use]
pub fn too_many_listen_streams(owner: &str, limit: usize) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "owner `{owner}` has {limit} task listen streams open, the most one owner may have \
             on this server: close one (or follow several tasks on one stream) and listen again"
        ),
        Some(json!({ "maxListenStreams": limit })),
    )
}

/// `-32602` for a `subscriptions/listen` naming more than `limit` task ids.
#[cfg(any(feature = "http", feature = "stdio"))]
#[must_use]
pub fn too_many_listen_task_ids(count: usize, limit: usize) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "subscriptions/listen: params.notifications.taskIds names {count} tasks, more than \
             the {limit} one listen stream may follow: split them over several streams"
        ),
        Some(json!({ "field": "params.notifications.taskIds", "maxTaskIds": limit })),
    )
}

/// The JSON object form of an error, as a failed task's `error` field carries it.
#[must_use]
pub fn to_object(error: &ErrorData) -> JsonObject {
    match serde_json::to_value(error) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => JsonObject::from_iter([
            ("code".to_owned(), json!(error.code.0)),
            ("message".to_owned(), json!(error.message)),
        ]),
    }
}

// The errors of the code `#[task_tool]` expands to (`extract/`).

/// `-32603` for a `State<T>` parameter whose `T` the toolkit does not have; the call ends
/// with it rather than panicking.
#[must_use]
pub fn state_not_registered(tool: &str, state_type: &str) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "tool `{tool}` needs state of type `{state_type}`, which the toolkit does not have: \
             register it with `Toolkit::with_state`"
        ),
        None,
    )
}

/// `-32603` for a tool output that does not serialize to JSON (a map with non-string keys,
/// a `Serialize` impl that fails).
#[must_use]
pub fn output_not_serializable(error: &serde_json::Error) -> ErrorData {
    ErrorData::internal_error(
        format!("the tool's output does not serialize to JSON: {error}"),
        None,
    )
}

// ---- Malformed requests and request limits (server::guard, issue 12) ----

/// `-32700` for a request body or stdio line that is not JSON, not UTF-8, or nests too deep.
/// `problem` says which, e.g. "the body is not valid UTF-8 (at byte 12)".
#[cfg(any(feature = "http", feature = "stdio"))]
#[must_use]
pub fn parse_error(problem: &str) -> ErrorData {
    ErrorData::parse_error(format!("Parse error: {problem}"), None)
}

/// `-32600` for JSON that is not one JSON-RPC message object.
#[cfg(any(feature = "http", feature = "stdio"))]
#[must_use]
pub fn not_a_message(found: &str) -> ErrorData {
    ErrorData::invalid_request(
        format!("Invalid request: expected one JSON-RPC message object, got {found}"),
        None,
    )
}

/// `-32600` for a request larger than [`Limits::max_request_bytes`](crate::Limits).
#[cfg(any(feature = "http", feature = "stdio"))]
#[must_use]
pub fn request_too_large(limit: usize) -> ErrorData {
    ErrorData::invalid_request(
        format!(
            "Invalid request: the request is larger than the limit of {limit} bytes; send less, \
             or raise it with Limits::with_max_request_bytes"
        ),
        Some(json!({ "maxRequestBytes": limit })),
    )
}

/// `-32602` for a malformed field of a request's params: `"{method}: params.{field} must be
/// {expected}"`, plus what was found, e.g.
/// `"tasks/get: params.taskId must be a string, got a number"`.
#[cfg(any(feature = "http", feature = "stdio"))]
#[must_use]
pub fn malformed_param(method: &str, field: &str, expected: &str, found: &str) -> ErrorData {
    let path = if field.is_empty() {
        "params".to_owned()
    } else {
        format!("params.{field}")
    };
    ErrorData::invalid_params(
        format!("{method}: {path} must be {expected}, got {found}"),
        Some(json!({ "field": path })),
    )
}

/// `-32602` for a required field of a request's params that is missing, e.g.
/// `"tasks/update: params.inputResponses is required: an object ..."`.
#[cfg(any(feature = "http", feature = "stdio"))]
#[must_use]
pub fn missing_param(method: &str, field: &str, expected: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("{method}: params.{field} is required: {expected}"),
        Some(json!({ "field": format!("params.{field}") })),
    )
}

/// `-32602` for `tools/call` arguments larger than
/// [`Limits::max_arguments_bytes`](crate::Limits).
#[cfg(any(feature = "http", feature = "stdio"))]
#[must_use]
pub fn arguments_too_large(size: usize, limit: usize) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "tools/call: params.arguments is {size} bytes, more than the limit of {limit} bytes; \
             send less, or raise it with Limits::with_max_arguments_bytes"
        ),
        Some(json!({ "field": "params.arguments", "size": size, "maxArgumentsBytes": limit })),
    )
}

/// `-32602` for a request's `params._meta` larger than [`Limits::max_meta_bytes`](crate::Limits::max_meta_bytes)
/// (`size`: its compact serialization).
#[cfg(any(feature = "http", feature = "stdio"))]
#[must_use]
pub fn meta_too_large(method: &str, size: usize, limit: usize) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "{method}: params._meta is {size} bytes, more than the limit of {limit} bytes; \
             send less, or raise it with Limits::with_max_meta_bytes"
        ),
        Some(json!({ "field": "params._meta", "size": size, "maxMetaBytes": limit })),
    )
}

/// `-32602` for a request's `params._meta` nesting deeper than
/// [`Limits::max_meta_depth`](crate::Limits::max_meta_depth) levels.
#[cfg(any(feature = "http", feature = "stdio"))]
#[must_use]
pub fn meta_too_deep(method: &str, depth: usize, limit: usize) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "{method}: params._meta nests {depth} levels deep, more than the limit of {limit} \
             levels; send a flatter _meta, or raise it with Limits::with_max_meta_depth"
        ),
        Some(json!({ "field": "params._meta", "depth": depth, "maxMetaDepth": limit })),
    )
}

/// `-32600` for a JSON-RPC envelope field of the wrong type, e.g.
/// `"Invalid request: id must be a string or an integer, got an object"`.
#[cfg(any(feature = "http", feature = "stdio"))]
#[must_use]
pub fn malformed_envelope(field: &str, expected: &str, found: &str) -> ErrorData {
    ErrorData::invalid_request(
        format!("Invalid request: {field} must be {expected}, got {found}"),
        Some(json!({ "field": field })),
    )
}

/// `-32600` for a message the JSON-RPC decoder rejects; `problem` is its text.
#[cfg(any(feature = "http", feature = "stdio"))]
#[must_use]
pub fn undecodable_message(problem: &str) -> ErrorData {
    ErrorData::invalid_request(
        format!("Invalid request: not a JSON-RPC 2.0 message: {problem}"),
        None,
    )
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("the store failed")]
    struct Outer(#[source] Middle);

    #[derive(Debug, thiserror::Error)]
    #[error("the connection was lost")]
    struct Middle(#[source] std::fmt::Error);

    #[test]
    fn an_error_chain_names_each_source_after_a_colon() {
        let chain = super::error_chain(&Outer(Middle(std::fmt::Error)));
        let expected = "the store failed: the connection was lost: an error occurred when \
                        formatting an argument";
        assert_eq!(chain, expected);
        assert_eq!(
            super::error_chain(&std::fmt::Error),
            std::fmt::Error.to_string()
        );
    }
}
