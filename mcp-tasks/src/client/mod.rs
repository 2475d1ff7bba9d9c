//! The client half of the Tasks extension: call a tool and follow it to its end, whether the
//! server answers inline or with a task (feature `client`).
//!
//! [`TaskClient`] sits on an rmcp client peer (the modern `2026-07-28` wire, started with
//! `server/discover`). It sends `tools/call` and `tasks/*` on rmcp's raw request path, because
//! rmcp's high-level `call_tool` rejects task results, and stamps on each of them the
//! protocol version, the client info and the client capabilities with
//! `extensions["io.modelcontextprotocol/tasks"] = {}` (docs/protocol.md R1, C6). On Streamable HTTP,
//! rmcp's transport derives `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` (the tool
//! name, or the task id for `tasks/*`) from that request (R48, C30-C31), and copies the
//! arguments a tool's schema annotates with `x-mcp-header` into `Mcp-Param-*` headers (C35)
//! once it has seen that schema in a `tools/list` answer. [`TaskClient::call`] needs no
//! listing first: when a server refuses a call for a missing `Mcp-Param-*` header (`-32020`,
//! C33, before anything runs), it lists the tools once and sends the call again.
//!
//! ```no_run
//! # async fn run() -> Result<(), mcp_tasks::client::ClientError> {
//! use mcp_tasks::client::{TaskEnd, TaskClient};
//! use rmcp::model::{ElicitResult, ElicitationAction};
//!
//! let client = TaskClient::builder()
//!     .with_elicitation(|_request, _cx| async {
//!         Ok(Some(ElicitResult::new(ElicitationAction::Accept)
//!             .with_content(serde_json::json!({ "include": true }))))
//!     })
//!     .connect_http("http://127.0.0.1:8080/mcp")
//!     .await?;
//!
//! // Inline or task, the final result (R4):
//! let args = serde_json::json!({ "workspace_id": "acme" });
//! let result = client.call_tool("workspace_report", args.as_object().cloned()).await?;
//!
//! // Or keep the task handle: watch, persist its reference, cancel.
//! if let Some(mut task) = client.call("workspace_report", args.as_object().cloned()).await?.into_task() {
//!     let reference = task.reference().to_json();   // store it to resume later
//!     match task.wait().await? {
//!         TaskEnd::Completed(result) => println!("{result:?}"),
//!         TaskEnd::Failed(error) => eprintln!("failed: {}", error.message),
//!         TaskEnd::Cancelled => eprintln!("cancelled"),
//!         _ => {}
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # Following a task
//!
//! [`TaskHandle::wait`] polls `tasks/get`, sleeping the latest `pollIntervalMs` between polls
//! (the value may change from one snapshot to the next; it is clamped below by
//! [`TaskClientBuilder::with_min_poll_interval`], 10 ms by default) until the task is
//! terminal (R18, R19). [`TaskHandle::updates`] is the same loop as a stream of the distinct
//! snapshots. A `completed` task yields its `CallToolResult`, also when `isError` is true
//! (R46); `failed` yields the JSON-RPC error it carries; `cancelled` yields
//! [`TaskEnd::Cancelled`]. [`TaskHandle::cancel`] sends `tasks/cancel` and nothing else, never
//! `notifications/cancelled` (R34); cancellation is cooperative, so the task may still end
//! otherwise (R37).
//!
//! # Input
//!
//! When a snapshot is `input_required`, each key of `inputRequests` not answered yet goes to
//! the handler of its kind (see [`input`](self#input) and [`InputContext`]); all answers of
//! that snapshot go in one `tasks/update`, and a key counts as answered only once that update
//! succeeded, so the same request is never answered twice across polls (R30-R32). An
//! `input_required` answer to `tools/call` itself (before a task) is answered with the same
//! handlers and the call retried with `inputResponses`, the echoed `requestState` and a new
//! request id, at most [`TaskClientBuilder::with_max_input_rounds`] times (10 by default; C20).
//!
//! # Resuming
//!
//! A [`TaskReference`] (endpoint, task id, and the input keys already answered) serializes
//! to JSON. A new process connects to the same endpoint and calls [`TaskClient::resume`] to
//! get a [`TaskHandle`] again (R19); the keys it lists are not asked again, so a person never
//! sees the same question twice (R32). Save the reference again after a poll that answered
//! input ([`TaskHandle::reference`] is cheap).
//!
//! Before a task exists, a handler may answer "later" (`Ok(None)`): the client then asks the
//! handlers again every default poll interval, without re-sending the call, for at most
//! [`TaskClientBuilder::with_max_input_wait`] (5 minutes by default), then fails with
//! [`ClientError::InputNotAnswered`].

#![allow(
    deprecated,
    reason = "sampling and roots are deprecated by SEP-2577 yet still part of the 2026-07-28 wire"
)]

mod endpoint;
mod error;
pub mod input;
mod task;

use std::{sync::Arc, time::Duration};

use rmcp::{
    ClientHandler, ErrorData, RoleClient,
    model::{
        CallToolRequest, CallToolRequestParams, CallToolResult, CancelTaskParams,
        CancelTaskRequest, ClientCapabilities, ClientConfig, ClientRequest,
        CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
        ErrorCode, GetTaskParams, GetTaskRequest, Implementation, InputRequests, InputResponses,
        JsonObject, ListRootsResult, ListToolsRequest, PaginatedRequestParams, ProtocolVersion,
        RequestMetaObject, ServerResult, Tool, UpdateTaskParams, UpdateTaskRequest,
    },
    service::{
        ClientLifecycleMode, ClientServiceExt, Peer, PeerRequestOptions, RequestContext,
        RunningService,
    },
    transport::IntoTransport,
};
use serde_json::Value;
use tokio::sync::Mutex;

pub use endpoint::{Endpoint, TaskReference};
pub use error::ClientError;
pub use input::{InputAnswer, InputContext, InputError, InputScope};
pub use task::{TaskEnd, TaskHandle};

use input::InputHandlers;

/// The default pause between polls when the server gives no `pollIntervalMs`.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// The default lower bound of the pause between polls.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_millis(10);
/// How many times a `tools/call` whose answer was lost to a transport failure is sent again
/// (with the same idempotency key, so the server answers the task it created).
pub const CALL_RETRIES: usize = 2;

/// A fresh idempotency key for one logical call: 128 random bits in hex.
fn idempotency_key() -> String {
    let id = crate::id::new_task_id();
    format!("call-{}", &id[id.len() - 32..])
}

/// The default limit of `input_required` rounds on one `tools/call` (C20).
pub const MAX_INPUT_ROUNDS: usize = 10;
/// The default longest wait for the handlers to answer an input request before any task
/// exists (5 minutes).
pub const MAX_INPUT_WAIT: Duration = Duration::from_secs(300);

/// Builds a [`TaskClient`]: input handlers, polling bounds, then a transport.
#[must_use]
#[derive(Debug)]
pub struct TaskClientBuilder {
    handlers: InputHandlers,
    client_info: Implementation,
    min_poll_interval: Duration,
    default_poll_interval: Duration,
    max_input_rounds: usize,
    max_input_wait: Duration,
}

impl Default for TaskClientBuilder {
    fn default() -> Self {
        Self {
            handlers: InputHandlers::default(),
            client_info: Implementation::new("mcp-tasks", env!("CARGO_PKG_VERSION")),
            min_poll_interval: MIN_POLL_INTERVAL,
            default_poll_interval: DEFAULT_POLL_INTERVAL,
            max_input_rounds: MAX_INPUT_ROUNDS,
            max_input_wait: MAX_INPUT_WAIT,
        }
    }
}

impl TaskClientBuilder {
    /// Sets the name and version the client reports (`clientInfo`).
    pub fn with_client_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.client_info = Implementation::new(name.into(), version.into());
        self
    }

    /// Answers `elicitation/create` requests. Without it they are declined with
    /// `{"action":"cancel"}`.
    pub fn with_elicitation<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(ElicitRequestParams, InputContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = InputAnswer<ElicitResult>> + Send + 'static,
    {
        self.handlers.set_elicitation(handler);
        self
    }

    /// Answers `sampling/createMessage` requests, and declares `sampling`.
    pub fn with_sampling<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(CreateMessageRequestParams, InputContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = InputAnswer<CreateMessageResult>> + Send + 'static,
    {
        self.handlers.set_sampling(handler);
        self
    }

    /// Answers `roots/list` requests, and declares `roots`.
    pub fn with_roots<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(InputContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = InputAnswer<ListRootsResult>> + Send + 'static,
    {
        self.handlers.set_roots(handler);
        self
    }

    /// The shortest pause between two polls, whatever `pollIntervalMs` says (default 10 ms).
    pub fn with_min_poll_interval(mut self, interval: Duration) -> Self {
        self.min_poll_interval = interval;
        self
    }

    /// The pause between polls when the server suggests none (default 1 s).
    pub fn with_default_poll_interval(mut self, interval: Duration) -> Self {
        self.default_poll_interval = interval;
        self
    }

    /// How many `input_required` rounds one `tools/call` may take (default 10).
    pub fn with_max_input_rounds(mut self, rounds: usize) -> Self {
        self.max_input_rounds = rounds;
        self
    }

    /// How long a call that has no task yet waits for its input handlers (default 5 min,
    /// [`MAX_INPUT_WAIT`]). While every handler of an `input_required` round answers "later"
    /// (`Ok(None)`), the handlers are asked again every default poll interval (without a
    /// request to the server, whose answer would be the same); past this wait the call ends
    /// with [`ClientError::InputNotAnswered`].
    pub fn with_max_input_wait(mut self, wait: Duration) -> Self {
        self.max_input_wait = wait;
        self
    }

    /// Connects to `endpoint`.
    ///
    /// # Errors
    /// [`ClientError::Connect`] when the server cannot be reached or `server/discover`
    /// fails; [`ClientError::HttpsNotEnabled`] for `https://` without the `https` feature;
    /// [`ClientError::InvalidTarget`] for a [`Endpoint::Named`] endpoint or an empty command.
    pub async fn connect(self, endpoint: &Endpoint) -> Result<TaskClient, ClientError> {
        match endpoint {
            Endpoint::Http { url } => self.connect_http(url).await,
            Endpoint::Stdio { command } => {
                let Some((program, args)) = command.split_first() else {
                    return Err(ClientError::InvalidTarget {
                        target: endpoint.to_string(),
                        reason: "the command is empty",
                    });
                };
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(args);
                self.connect_command(cmd, endpoint.clone()).await
            }
            Endpoint::Named { .. } => Err(ClientError::InvalidTarget {
                target: endpoint.to_string(),
                reason: "a named endpoint is connected by the application (`serve`)",
            }),
        }
    }

    /// Connects to a Streamable HTTP endpoint.
    ///
    /// # Errors
    /// As for [`TaskClientBuilder::connect`].
    pub async fn connect_http(self, url: &str) -> Result<TaskClient, ClientError> {
        let endpoint = Endpoint::http(url);
        if url.starts_with("https://") && !cfg!(feature = "https") {
            return Err(ClientError::HttpsNotEnabled {
                endpoint: url.to_owned(),
            });
        }
        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.to_owned());
        self.serve(transport, endpoint).await
    }

    /// Starts `command` and speaks MCP on its stdin and stdout. The child gets its own
    /// process group, so a Ctrl-C in the terminal reaches the client (which can then send
    /// `tasks/cancel`) and not the server.
    ///
    /// # Errors
    /// As for [`TaskClientBuilder::connect`].
    pub async fn connect_stdio(
        self,
        command: tokio::process::Command,
    ) -> Result<TaskClient, ClientError> {
        let std = command.as_std();
        let endpoint = Endpoint::stdio(
            std.get_program().to_string_lossy(),
            std.get_args().map(|a| a.to_string_lossy().into_owned()),
        );
        self.connect_command(command, endpoint).await
    }

    async fn connect_command(
        self,
        mut command: tokio::process::Command,
        endpoint: Endpoint,
    ) -> Result<TaskClient, ClientError> {
        #[cfg(unix)]
        command.process_group(0);
        command.kill_on_drop(true);
        let transport = rmcp::transport::TokioChildProcess::new(command).map_err(|source| {
            ClientError::Connect {
                endpoint: endpoint.to_string(),
                source: Box::new(source),
            }
        })?;
        self.serve(transport, endpoint).await
    }

    /// Connects over any rmcp client transport (e.g. an in-process pipe), naming the
    /// endpoint for [`TaskReference`]s.
    ///
    /// # Errors
    /// [`ClientError::Connect`] when `server/discover` fails.
    pub async fn serve<T, E, A>(
        self,
        transport: T,
        endpoint: impl Into<Endpoint>,
    ) -> Result<TaskClient, ClientError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let endpoint = endpoint.into();
        let handler = Handler {
            handlers: self.handlers.clone(),
            config: ClientConfig::new(self.handlers.capabilities(), self.client_info.clone()),
        };
        let service = handler
            .serve_with_lifecycle(
                transport,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .map_err(|source| ClientError::Connect {
                endpoint: endpoint.to_string(),
                source: Box::new(source),
            })?;
        let peer = service.peer().clone();
        let (protocol_version, server_tasks) = peer
            .peer_info()
            .map(|info| {
                (
                    info.protocol_version.clone(),
                    info.capabilities.supports_tasks(),
                )
            })
            .unwrap_or((ProtocolVersion::V_2026_07_28, false));
        let capabilities = self.handlers.capabilities().enable_tasks_extension();
        Ok(TaskClient {
            inner: Arc::new(Inner {
                service: Mutex::new(Some(service)),
                peer,
                endpoint,
                handlers: self.handlers,
                meta: RequestMetaObject::with_client_context(
                    protocol_version,
                    self.client_info,
                    capabilities,
                ),
                server_tasks,
                min_poll_interval: self.min_poll_interval,
                default_poll_interval: self.default_poll_interval,
                max_input_rounds: self.max_input_rounds,
                max_input_wait: self.max_input_wait,
            }),
        })
    }
}

impl From<&str> for Endpoint {
    fn from(name: &str) -> Self {
        Self::Named {
            name: name.to_owned(),
        }
    }
}

trait EnableTasks {
    fn enable_tasks_extension(self) -> Self;
}

impl EnableTasks for ClientCapabilities {
    fn enable_tasks_extension(mut self) -> Self {
        self.extensions
            .get_or_insert_with(Default::default)
            .insert(crate::EXTENSION_ID.to_owned(), JsonObject::new());
        self
    }
}

/// The rmcp client handler: forwards plain server→client requests to the input handlers.
struct Handler {
    handlers: InputHandlers,
    config: ClientConfig,
}

fn request_cx() -> InputContext {
    InputContext {
        key: String::new(),
        scope: InputScope::Request,
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(self
            .handlers
            .elicit(request, request_cx())
            .await
            .unwrap_or_else(input::elicitation_cancelled))
    }

    #[allow(deprecated, reason = "sampling still works on the 2026-07-28 wire")]
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        match self.handlers.sample(params, request_cx()).await {
            Ok(Some(result)) => Ok(result),
            Ok(None) => Err(ErrorData::internal_error(
                "no answer to the sampling request",
                None,
            )),
            Err(error) => Err(ErrorData::internal_error(error.to_string(), None)),
        }
    }

    #[allow(deprecated, reason = "roots still work on the 2026-07-28 wire")]
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        match self.handlers.list_roots(request_cx()).await {
            Ok(Some(result)) => Ok(result),
            Ok(None) => Err(ErrorData::internal_error("no answer to roots/list", None)),
            Err(error) => Err(ErrorData::internal_error(error.to_string(), None)),
        }
    }
}

struct Inner {
    service: Mutex<Option<RunningService<RoleClient, Handler>>>,
    peer: Peer<RoleClient>,
    endpoint: Endpoint,
    handlers: InputHandlers,
    meta: RequestMetaObject,
    server_tasks: bool,
    min_poll_interval: Duration,
    default_poll_interval: Duration,
    max_input_rounds: usize,
    max_input_wait: Duration,
}

/// A connection to one MCP server that follows tool calls to their end. Cheap to clone.
#[derive(Clone)]
pub struct TaskClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for TaskClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskClient")
            .field("endpoint", &self.inner.endpoint)
            .field("handlers", &self.inner.handlers)
            .finish_non_exhaustive()
    }
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
    /// A builder.
    pub fn builder() -> TaskClientBuilder {
        TaskClientBuilder::default()
    }

    /// Connects with the default settings (no input handlers: elicitation is declined).
    ///
    /// # Errors
    /// As for [`TaskClientBuilder::connect`].
    pub async fn connect(endpoint: &Endpoint) -> Result<Self, ClientError> {
        Self::builder().connect(endpoint).await
    }

    /// The server endpoint.
    #[must_use]
    pub fn endpoint(&self) -> &Endpoint {
        &self.inner.endpoint
    }

    /// Whether the server advertises the tasks extension in `server/discover`.
    #[must_use]
    pub fn server_supports_tasks(&self) -> bool {
        self.inner.server_tasks
    }

    /// The rmcp peer, for requests this client does not wrap.
    #[must_use]
    pub fn peer(&self) -> &Peer<RoleClient> {
        &self.inner.peer
    }

    /// Closes the connection (and ends a stdio child process).
    pub async fn close(&self) {
        if let Some(service) = self.inner.service.lock().await.take() {
            let _ = service.cancel().await;
        }
    }

    /// Sends `request` with the extension's `_meta` and returns the raw result.
    async fn send(
        &self,
        method: &'static str,
        request: ClientRequest,
    ) -> Result<ServerResult, ClientError> {
        self.send_with(method, request, self.inner.meta.clone())
            .await
    }

    /// Sends `request` with `meta` as its `_meta`.
    async fn send_with(
        &self,
        method: &'static str,
        request: ClientRequest,
        meta: RequestMetaObject,
    ) -> Result<ServerResult, ClientError> {
        let options = PeerRequestOptions::no_options().with_meta(meta);
        let handle = self
            .inner
            .peer
            .send_request_with_option(request, options)
            .await
            .map_err(|source| ClientError::service(method, source))?;
        let result = handle
            .await_response()
            .await
            .map_err(|source| ClientError::service(method, source))?;
        if matches!(result, ServerResult::CreateTaskResult(_)) && method != "tools/call" {
            return Err(ClientError::InvalidResponse {
                method,
                reason: "resultType \"task\" is only valid for tools/call (R5)".to_owned(),
            });
        }
        Ok(result)
    }

    /// Every tool of the server (all pages of `tools/list`).
    ///
    /// # Errors
    /// [`ClientError::Rpc`], [`ClientError::Transport`], or [`ClientError::InvalidResponse`]
    /// (also for a `"task"` result, R5).
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ClientError> {
        let mut tools = Vec::new();
        let mut cursor = None;
        loop {
            let params = PaginatedRequestParams::default().with_cursor(cursor);
            let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
            match self.send("tools/list", request).await? {
                ServerResult::ListToolsResult(page) => {
                    tools.extend(page.tools);
                    match page.next_cursor {
                        Some(next) => cursor = Some(next),
                        None => return Ok(tools),
                    }
                }
                other => return Err(invalid("tools/list", &other)),
            }
        }
    }

    /// Calls `name` and follows it to the end: the final `CallToolResult` whether the server
    /// answers inline or with a task (R4). A result with `isError: true` is `Ok`. `arguments`
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
        arguments: impl serde::Serialize,
    ) -> Result<CallToolResult, ClientError> {
        match self.call(name, arguments).await? {
            Call::Inline(result) => Ok(result),
            Call::Task(mut task) => {
                let outcome = task.wait().await?;
                outcome.into_result(task.id())
            }
        }
    }

    /// Calls `name` and returns the first answer: inline result or task handle. Answers
    /// `input_required` rounds before the task (C20).
    ///
    /// # Errors
    /// [`ClientError::Rpc`] for a JSON-RPC error answer; [`ClientError::TooManyInputRounds`];
    /// input and transport errors; [`ClientError::InvalidResponse`].
    pub async fn call(
        &self,
        name: &str,
        arguments: impl serde::Serialize,
    ) -> Result<Call, ClientError> {
        let arguments = arguments_object(name, arguments)?;
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments;
        let mut rounds = 0usize;
        let mut previous_state: Option<Option<String>> = None;
        // One key for this logical call: every round and every retry carries it, so a
        // server never creates a second task for it (IDEMPOTENCY_KEY).
        let key = idempotency_key();
        loop {
            match self.call_round(params.clone(), &key).await? {
                Round::Complete(result) => return Ok(Call::Inline(result)),
                Round::Task(task) => {
                    let handle = TaskHandle::created(self.clone(), task).await?;
                    return Ok(Call::Task(handle));
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
        let started = tokio::time::Instant::now();
        loop {
            let mut responses = InputResponses::new();
            for (key, request) in requests {
                let scope = InputScope::Call {
                    tool: tool.to_owned(),
                };
                if let Some(answer) = self.inner.handlers.answer(key, request, scope).await? {
                    responses.insert(key.clone(), answer);
                }
            }
            if !responses.is_empty() || requests.is_empty() {
                return Ok(responses);
            }
            let waited = started.elapsed();
            let Some(left) = self
                .inner
                .max_input_wait
                .checked_sub(waited)
                .filter(|left| !left.is_zero())
            else {
                return Err(ClientError::InputNotAnswered {
                    tool: tool.to_owned(),
                    keys: requests.keys().cloned().collect(),
                    waited,
                });
            };
            let pause = self
                .inner
                .default_poll_interval
                .max(self.inner.min_poll_interval)
                .min(left);
            tokio::time::sleep(pause).await;
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
    ) -> Result<Round, ClientError> {
        const METHOD: &str = "tools/call";
        let mut meta = self.inner.meta.clone();
        meta.0.insert(
            crate::IDEMPOTENCY_KEY.to_owned(),
            Value::String(key.to_owned()),
        );
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
        match result {
            ServerResult::CreateTaskResult(created) if self.inner.server_tasks => {
                Ok(Round::Task(created.task))
            }
            ServerResult::CreateTaskResult(_) => Err(ClientError::InvalidResponse {
                method: METHOD,
                reason: "resultType \"task\" from a server that does not advertise the tasks \
                         extension (C5)"
                    .to_owned(),
            }),
            ServerResult::InputRequiredResult(required) => Ok(Round::InputRequired {
                requests: required.input_requests.unwrap_or_default(),
                state: required.request_state,
            }),
            ServerResult::CallToolResult(result) => match &result.result_type {
                Some(kind) if !kind.is_complete() => Err(ClientError::InvalidResponse {
                    method: METHOD,
                    reason: format!("unknown resultType {:?} (C5)", kind.as_str()),
                }),
                _ => Ok(Round::Complete(result)),
            },
            other => {
                // A result without `content` decodes as another variant; read it again.
                let value = serde_json::to_value(&other).unwrap_or(Value::Null);
                match value.get("resultType").and_then(Value::as_str) {
                    None | Some("complete") => serde_json::from_value::<CallToolResult>(value)
                        .map(Round::Complete)
                        .map_err(|error| ClientError::InvalidResponse {
                            method: METHOD,
                            reason: format!("not a CallToolResult: {error}"),
                        }),
                    Some(kind) => Err(ClientError::InvalidResponse {
                        method: METHOD,
                        reason: format!("unknown or malformed resultType {kind:?} (C5)"),
                    }),
                }
            }
        }
    }

    /// A handle on task `task_id` of this server, with its current snapshot (`tasks/get`).
    ///
    /// # Errors
    /// [`ClientError::Rpc`] with `-32602` for an unknown or expired task (R17).
    pub async fn task(&self, task_id: &str) -> Result<TaskHandle, ClientError> {
        let snapshot = self.get_task(task_id).await?;
        Ok(TaskHandle::from_snapshot(self.clone(), snapshot))
    }

    /// Continues following the task of `reference` (R19). The client must be connected to
    /// the reference's endpoint. Input keys the reference lists as answered are never asked
    /// again, even while a server's snapshots still show them (R32).
    ///
    /// # Errors
    /// [`ClientError::EndpointMismatch`]; otherwise as for [`TaskClient::task`].
    pub async fn resume(&self, reference: &TaskReference) -> Result<TaskHandle, ClientError> {
        if reference.endpoint != self.inner.endpoint {
            return Err(ClientError::EndpointMismatch {
                reference: reference.endpoint.to_string(),
                connected: self.inner.endpoint.to_string(),
            });
        }
        let snapshot = self.get_task(&reference.task_id).await?;
        Ok(TaskHandle::from_snapshot(self.clone(), snapshot)
            .with_answered(reference.answered_keys.iter().cloned()))
    }

    /// `tasks/get`.
    pub(crate) async fn get_task(
        &self,
        task_id: &str,
    ) -> Result<rmcp::model::DetailedTask, ClientError> {
        const METHOD: &str = "tasks/get";
        let request =
            ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(task_id)));
        match self.send(METHOD, request).await? {
            ServerResult::GetTaskResult(result) if result.result_type.is_complete() => {
                if result.task.task.task_id != task_id {
                    return Err(ClientError::InvalidResponse {
                        method: METHOD,
                        reason: format!(
                            "asked for task {task_id}, got task {}",
                            result.task.task.task_id
                        ),
                    });
                }
                Ok(result.task)
            }
            other => Err(invalid(METHOD, &other)),
        }
    }

    /// `tasks/update` with `responses`.
    pub(crate) async fn update_task(
        &self,
        task_id: &str,
        responses: InputResponses,
    ) -> Result<(), ClientError> {
        let request = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(
            UpdateTaskParams::new(task_id, responses),
        ));
        let result = self.send("tasks/update", request).await?;
        expect_ack("tasks/update", &result)
    }

    /// `tasks/cancel` of `task_id` (R34: never `notifications/cancelled`).
    ///
    /// # Errors
    /// [`ClientError::Rpc`] with `-32602` for an unknown task; transport errors.
    pub async fn cancel_task(&self, task_id: &str) -> Result<(), ClientError> {
        let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(
            CancelTaskParams::new(task_id),
        ));
        let result = self.send("tasks/cancel", request).await?;
        expect_ack("tasks/cancel", &result)
    }

    pub(crate) fn min_poll_interval(&self) -> Duration {
        self.inner.min_poll_interval
    }

    pub(crate) fn default_poll_interval(&self) -> Duration {
        self.inner.default_poll_interval
    }

    pub(crate) fn handlers(&self) -> &InputHandlers {
        &self.inner.handlers
    }
}

/// An empty acknowledgement: `resultType` `"complete"` (or absent) and nothing but `_meta`
/// (R23, R35).
fn expect_ack(method: &'static str, result: &ServerResult) -> Result<(), ClientError> {
    let value = serde_json::to_value(result).unwrap_or(Value::Null);
    let Some(object) = value.as_object() else {
        return Err(invalid(method, result));
    };
    let complete = matches!(
        object.get("resultType").and_then(Value::as_str),
        None | Some("complete")
    );
    // rmcp may decode `{"resultType":"complete"}` as a CallToolResult with empty content.
    let only_ack = object.iter().all(|(key, value)| match key.as_str() {
        "resultType" | "_meta" => true,
        "content" => value.as_array().is_some_and(Vec::is_empty),
        _ => false,
    });
    if complete && only_ack {
        Ok(())
    } else {
        Err(invalid(method, result))
    }
}

fn invalid(method: &'static str, result: &ServerResult) -> ClientError {
    let shown = serde_json::to_string(result).unwrap_or_default();
    let shown: String = shown.chars().take(300).collect();
    ClientError::InvalidResponse {
        method,
        reason: format!("unexpected result {shown}"),
    }
}

/// `arguments` as the `arguments` object of a `tools/call`: a struct, a map, a
/// `serde_json::json!({..})` object, or `()` / `None` for none.
fn arguments_object(
    tool: &str,
    arguments: impl serde::Serialize,
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
