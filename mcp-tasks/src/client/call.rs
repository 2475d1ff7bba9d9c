//! [`TaskClient::call`] and [`TaskClient::call_tool`]: one logical `tools/call`, its
//! `input_required` rounds before a task, its retries after a lost answer, and what its
//! answer is.

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ErrorCode,
    InputRequests, InputResponses, JsonObject, ServerResult,
};
use serde::Serialize;
use serde_json::Value;

use super::{ClientError, InputScope, TaskClient, TaskHandle};

/// How many times a `tools/call` whose answer was lost to a transport failure is sent again
/// (with the same idempotency key, so the server answers the task it created).
pub const CALL_RETRIES: usize = 2;

/// A fresh idempotency key for one logical call: 128 random bits in hex.
fn idempotency_key() -> String {
    let id = crate::id::new_task_id();
    format!("call-{}", &id[id.len() - 32..])
}

/// The first answer to a `tools/call`: the result, or a task to follow.
#[derive(Debug)]
#[non_exhaustive]
pub enum Call {
    /// The server answered inline.
    Inline(CallToolResult),
    /// The server made a task.
    Task(TaskHandle),
}

impl Call {
    /// The task, if the server made one.
    #[must_use]
    pub fn into_task(self) -> Option<TaskHandle> {
        match self {
            Self::Task(task) => Some(task),
            Self::Inline(_) => None,
        }
    }
}

/// What one `tools/call` round answered.
enum Round {
    Complete(CallToolResult),
    Task(rmcp::model::Task),
    InputRequired {
        requests: InputRequests,
        state: Option<String>,
    },
}

impl TaskClient {
    /// Calls `name` and follows it to the end: the final `CallToolResult` whether the server
    /// answers inline or with a task. A result with `isError: true` is `Ok`. `arguments`
    /// is anything that serializes to a JSON object (a struct, a map, `json!({..})`), or `()`
    /// for none.
    ///
    /// # Errors
    /// [`ClientError::InvalidArguments`] when `arguments` is not an object;
    /// [`ClientError::TaskFailed`] with the task's JSON-RPC error; [`ClientError::TaskCancelled`];
    /// [`ClientError::Rpc`] for a JSON-RPC error answer; input and transport errors.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: impl Serialize,
    ) -> Result<CallToolResult, ClientError> {
        match self.call(name, arguments).await? {
            Call::Inline(result) => Ok(result),
            Call::Task(mut task) => task.wait().await?.into_result(task.id()),
        }
    }

    /// Calls `name` and returns the first answer: inline result or task handle. Answers
    /// the server's requests for input that come before the task exists (`input_required`
    /// answers to the call itself), with the builder's input handlers.
    ///
    /// # Errors
    /// [`ClientError::Rpc`] for a JSON-RPC error answer; [`ClientError::TooManyInputRounds`];
    /// input and transport errors; [`ClientError::InvalidResponse`].
    ///
    /// Under the `opentelemetry` feature the call carries the current span's trace context
    /// (`traceparent` in `_meta`), so the task's spans on the server continue this trace;
    /// [`TaskClient::call_traced`] sends a given one instead.
    pub async fn call(&self, name: &str, arguments: impl Serialize) -> Result<Call, ClientError> {
        #[cfg(feature = "opentelemetry")]
        let trace = crate::trace::TraceContext::current();
        #[cfg(not(feature = "opentelemetry"))]
        let trace = None;
        self.call_traced(name, arguments, trace.as_ref()).await
    }

    /// [`TaskClient::call`] with the W3C trace context `trace` in the call's `_meta`
    /// (`traceparent`, `tracestate`): a server keeps it with the task it creates and shows
    /// it in the task's spans. `None` sends none.
    ///
    /// # Errors
    /// As [`TaskClient::call`].
    pub async fn call_traced(
        &self,
        name: &str,
        arguments: impl Serialize,
        trace: Option<&crate::trace::TraceContext>,
    ) -> Result<Call, ClientError> {
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments_object(name, arguments)?;
        let mut rounds = 0usize;
        let mut previous_state: Option<Option<String>> = None;
        // One key for this logical call: every round and every retry carries it, so a
        // server never creates a second task for it (IDEMPOTENCY_KEY).
        let key = idempotency_key();
        loop {
            match self.call_round(params.clone(), &key, trace).await? {
                Round::Complete(result) => return Ok(Call::Inline(result)),
                Round::Task(task) => {
                    return Ok(Call::Task(TaskHandle::created(self.clone(), task).await?));
                }
                Round::InputRequired { requests, state } => {
                    rounds += 1;
                    let stuck = requests.is_empty() && previous_state.as_ref() == Some(&state);
                    if rounds > self.inner.max_input_rounds || stuck {
                        return Err(ClientError::TooManyInputRounds {
                            tool: name.to_owned(),
                            rounds: rounds - 1,
                        });
                    }
                    let responses = self.answer_before_task(name, &requests).await?;
                    params.input_responses = (!responses.is_empty()).then_some(responses);
                    params.request_state = state.clone();
                    previous_state = Some(state);
                }
            }
        }
    }

    /// The answers to one `input_required` round of a call without a task. While the
    /// handlers answer none of its requests ("later"), they are asked again every default
    /// poll interval, for at most the builder's `max_input_wait`: retrying the call at once
    /// would only get the same questions back, round after round in milliseconds.
    async fn answer_before_task(
        &self,
        tool: &str,
        requests: &InputRequests,
    ) -> Result<InputResponses, ClientError> {
        let inner = &self.inner;
        let started = tokio::time::Instant::now();
        loop {
            let mut responses = InputResponses::new();
            for (key, request) in requests {
                let scope = InputScope::Call {
                    tool: tool.to_owned(),
                };
                let answer = inner.handlers.answer(key, request, scope).await?;
                responses.extend(answer.map(|answer| (key.clone(), answer)));
            }
            if !responses.is_empty() || requests.is_empty() {
                return Ok(responses);
            }
            let waited = started.elapsed();
            let left = inner.max_input_wait.checked_sub(waited);
            let Some(left) = left.filter(|left| !left.is_zero()) else {
                return Err(ClientError::InputNotAnswered {
                    tool: tool.to_owned(),
                    keys: requests.keys().cloned().collect(),
                    waited,
                });
            };
            let pause = inner.default_poll_interval.max(inner.min_poll_interval);
            tokio::time::sleep(pause.min(left)).await;
        }
    }

    /// One `tools/call` request with the call's idempotency key in `_meta`; rmcp gives each
    /// a new request id. A transport failure (the answer may have been lost after the server
    /// created a task) is retried up to [`CALL_RETRIES`] times with the same key, which
    /// answers the task the first attempt created instead of starting another.
    async fn call_round(
        &self,
        params: CallToolRequestParams,
        key: &str,
        trace: Option<&crate::trace::TraceContext>,
    ) -> Result<Round, ClientError> {
        const METHOD: &str = "tools/call";
        let mut meta = self.inner.meta.clone();
        meta.0
            .insert(crate::IDEMPOTENCY_KEY.to_owned(), Value::from(key));
        if let Some(trace) = trace {
            trace.insert_into(&mut meta.0);
        }
        let mut attempt = 0;
        let mut listed = false;
        let result = loop {
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
            match self.send_with(METHOD, request, meta.clone()).await {
                Err(ClientError::Transport { .. }) if attempt < CALL_RETRIES => {
                    attempt += 1;
                    tokio::time::sleep(self.inner.min_poll_interval).await;
                }
                // rmcp's HTTP transport mirrors `x-mcp-header` arguments into `Mcp-Param-*`
                // headers for the tools it has seen in a `tools/list` answer (C35). A server
                // refuses a call without them before running anything (C33): list the tools
                // once, so that the transport knows the schema, and send the call again.
                Err(ClientError::Rpc { error, .. })
                    if !listed
                        && error.code == ErrorCode::HEADER_MISMATCH
                        && error.message.contains(crate::tool::headers::PREFIX) =>
                {
                    listed = true;
                    self.list_tools().await?;
                }
                other => break other?,
            }
        };
        let invalid = |reason: String| ClientError::InvalidResponse {
            method: METHOD,
            reason,
        };
        match result {
            ServerResult::CreateTaskResult(created) if self.inner.server_tasks => {
                Ok(Round::Task(created.task))
            }
            // C5: a resultType counts only from an extension the server advertises.
            ServerResult::CreateTaskResult(_) => Err(invalid(
                "it is a task (resultType \"task\"), but the server did not advertise the tasks \
                 extension when the client connected"
                    .to_owned(),
            )),
            ServerResult::InputRequiredResult(required) => Ok(Round::InputRequired {
                requests: required.input_requests.unwrap_or_default(),
                state: required.request_state,
            }),
            ServerResult::CallToolResult(result) => match &result.result_type {
                Some(kind) if !kind.is_complete() => Err(invalid(format!(
                    "a tool result with resultType {:?}, which this client cannot read (a final \
                     result has resultType \"complete\" or none)",
                    kind.as_str()
                ))),
                _ => Ok(Round::Complete(result)),
            },
            other => {
                // A result without `content` decodes as another variant; read it again.
                let value = serde_json::to_value(&other).unwrap_or(Value::Null);
                match value.get("resultType").and_then(Value::as_str) {
                    None | Some("complete") => serde_json::from_value::<CallToolResult>(value)
                        .map(Round::Complete)
                        .map_err(|error| invalid(format!("not a CallToolResult: {error}"))),
                    Some(kind) => Err(invalid(format!(
                        "resultType {kind:?} is unknown to this client, or its result is \
                         malformed (the client reads \"complete\", \"input_required\" and \
                         \"task\")"
                    ))),
                }
            }
        }
    }
}

/// `arguments` as the `arguments` object of a `tools/call`: a struct, a map, a
/// `serde_json::json!({..})` object, or `()` / `None` for none.
fn arguments_object(
    tool: &str,
    arguments: impl Serialize,
) -> Result<Option<JsonObject>, ClientError> {
    let invalid = |reason: String| ClientError::InvalidArguments {
        tool: tool.to_owned(),
        reason,
    };
    match serde_json::to_value(arguments) {
        Ok(serde_json::Value::Object(object)) => Ok(Some(object)),
        Ok(serde_json::Value::Null) => Ok(None),
        Ok(other) => Err(invalid(format!("got {other}"))),
        Err(error) => Err(invalid(error.to_string())),
    }
}
