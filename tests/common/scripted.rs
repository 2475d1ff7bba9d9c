//! A scripted rmcp server, for what our server does not do: multi round-trip requests on
//! `tools/call` (C20), poll intervals that change from snapshot to snapshot (R18), input
//! requests that stay visible after they were answered (R24, R32), failing `tasks/update`s.

use std::sync::{Arc, Mutex};

use mcp_tasks::client::{TaskClient, TaskClientBuilder};
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
        CreateTaskResult, DetailedTask, GetTaskParams, GetTaskResult, InputRequest, InputRequests,
        InputRequiredResult, JsonObject, ServerCapabilities, ServerConfig, Task, TaskPayload,
        TaskStatus, ToolsCapability, UpdateTaskParams,
    },
    service::RequestContext,
};
use serde_json::{Value, json};

/// What the scripted server saw.
#[derive(Default)]
pub struct Script {
    /// (request id, inputResponses, requestState) of each tools/call.
    pub calls: Vec<(String, Option<Value>, Option<String>)>,
    /// Times of each tasks/get (paused tokio time).
    pub gets: Vec<tokio::time::Instant>,
    /// inputResponses of each tasks/update.
    pub updates: Vec<Value>,
    /// Fail this many tasks/update before accepting.
    pub failing_updates: usize,
    /// The tasks/get count when the answers were accepted.
    pub answered_at: Option<usize>,
    /// Which task the last tools/call made.
    pub mode: ScriptMode,
}

#[derive(Clone, Copy, Default, PartialEq)]
pub enum ScriptMode {
    #[default]
    Done,
    Paced,
    AskTwice,
    /// The task asks for a completion (`sampling/createMessage`) until answered.
    AskSampling,
    /// The task asks for the client's roots (`roots/list`) until answered.
    AskRoots,
}

#[derive(Clone, Default)]
pub struct Scripted(pub Arc<Mutex<Script>>);

pub fn elicitation(message: &str) -> InputRequest {
    serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": { "type": "object", "properties": { "name": { "type": "string" } }, "required": ["name"] }
        }
    }))
    .unwrap()
}

pub fn task(status: TaskStatus, poll_ms: u64) -> Task {
    Task::new(
        "t-1",
        status,
        "2026-11-29T00:00:00Z",
        "2026-11-29T00:00:00Z",
    )
    .with_poll_interval_ms(poll_ms)
}

pub fn result_text(s: &str) -> JsonObject {
    match serde_json::to_value(CallToolResult::success(vec![ContentBlock::text(s)])).unwrap() {
        Value::Object(map) => map,
        _ => unreachable!(),
    }
}

impl ServerHandler for Scripted {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::default();
        capabilities.tools = Some(ToolsCapability::default());
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(mcp_tasks::EXTENSION_ID.to_owned(), JsonObject::new());
        ServerConfig::new(capabilities)
    }

    async fn call_tool(
        &self,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut script = self.0.lock().unwrap();
        let responses = params
            .input_responses
            .as_ref()
            .map(|r| serde_json::to_value(r).unwrap());
        script.calls.push((
            format!("{:?}", context.id),
            responses.clone(),
            params.request_state.clone(),
        ));
        let name_answer = responses
            .as_ref()
            .and_then(|r| r["name"]["content"]["name"].as_str())
            .map(str::to_owned);
        let ask = |state: &str| {
            let mut requests = InputRequests::new();
            requests.insert("name".to_owned(), elicitation("Your name?"));
            Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
                Some(requests),
                Some(state.to_owned()),
            )))
        };
        match (
            params.name.as_ref(),
            name_answer,
            params.request_state.as_deref(),
        ) {
            // Round 1 asks; the retry must carry the answer and the echoed state.
            ("mrtr", None, _) => ask("state-1"),
            ("mrtr", Some(name), Some("state-1")) => {
                Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                    ContentBlock::text(format!("Hello, {name}!")),
                ])))
            }
            ("mrtr_then_task", None, _) => ask("state-2"),
            ("mrtr_then_task", Some(_), Some("state-2")) => Ok(CallToolResponse::Task(
                CreateTaskResult::new(task(TaskStatus::Working, 10)),
            )),
            ("mrtr_forever", _, _) => ask("again"),
            ("paced", _, _) => {
                script.mode = ScriptMode::Paced;
                Ok(CallToolResponse::Task(CreateTaskResult::new(task(
                    TaskStatus::Working,
                    1000,
                ))))
            }
            ("ask_sampling" | "ask_roots", _, _) => {
                script.mode = if params.name == "ask_sampling" {
                    ScriptMode::AskSampling
                } else {
                    ScriptMode::AskRoots
                };
                Ok(CallToolResponse::Task(CreateTaskResult::new(task(
                    TaskStatus::Working,
                    10,
                ))))
            }
            ("ask_twice", _, _) => {
                script.mode = ScriptMode::AskTwice;
                Ok(CallToolResponse::Task(CreateTaskResult::new(task(
                    TaskStatus::Working,
                    10,
                ))))
            }
            (name, answer, state) => Err(ErrorData::invalid_params(
                format!("unexpected call {name} answer={answer:?} state={state:?}"),
                None,
            )),
        }
    }

    async fn get_task(
        &self,
        _params: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let mut script = self.0.lock().unwrap();
        script.gets.push(tokio::time::Instant::now());
        let n = script.gets.len();
        let done = DetailedTask::new(
            task(TaskStatus::Completed, 10),
            TaskPayload::Completed {
                result: result_text("done"),
            },
        );
        let detailed = match script.mode {
            // pollIntervalMs changes from snapshot to snapshot.
            ScriptMode::Paced => match n {
                1 => DetailedTask::new(task(TaskStatus::Working, 3000), TaskPayload::Working),
                2 => DetailedTask::new(task(TaskStatus::Working, 5), TaskPayload::Working),
                _ => done,
            },
            // Both questions stay in every snapshot for three polls after the answers
            // arrived (an eventually consistent server, R24), then the task is done.
            ScriptMode::AskTwice if script.answered_at.is_none_or(|at| n <= at + 3) => {
                let mut requests = InputRequests::new();
                requests.insert("q1".to_owned(), elicitation("First?"));
                requests.insert("q2".to_owned(), elicitation("Second?"));
                DetailedTask::new(
                    task(TaskStatus::InputRequired, 10),
                    TaskPayload::InputRequired {
                        input_requests: requests,
                    },
                )
            }
            // A sampling or roots question stays until an update arrives.
            ScriptMode::AskSampling | ScriptMode::AskRoots if script.answered_at.is_none() => {
                let request = if script.mode == ScriptMode::AskSampling {
                    json!({ "method": "sampling/createMessage", "params": {
                        "messages": [{ "role": "user", "content": { "type": "text", "text": "hi" } }],
                        "maxTokens": 5 } })
                } else {
                    json!({ "method": "roots/list" })
                };
                let mut requests = InputRequests::new();
                requests.insert("q".to_owned(), serde_json::from_value(request).unwrap());
                DetailedTask::new(
                    task(TaskStatus::InputRequired, 10),
                    TaskPayload::InputRequired {
                        input_requests: requests,
                    },
                )
            }
            _ => done,
        };
        Ok(GetTaskResult::new(detailed))
    }

    async fn update_task(
        &self,
        params: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let mut script = self.0.lock().unwrap();
        if script.failing_updates > 0 {
            script.failing_updates -= 1;
            return Err(ErrorData::internal_error("store unavailable", None));
        }
        script.answered_at = Some(script.gets.len());
        script
            .updates
            .push(serde_json::to_value(&params.input_responses).unwrap());
        Ok(())
    }

    async fn cancel_task(
        &self,
        _params: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }
}

/// A task client connected to `script` over an in-process pipe.
pub async fn connect(script: Scripted, builder: TaskClientBuilder) -> TaskClient {
    builder
        .serve(super::serve_duplex(script), "scripted")
        .await
        .expect("connect")
}
