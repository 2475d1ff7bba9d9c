//! [`TaskClientBuilder`]: input handlers, polling bounds, client info, then a transport.

use std::{sync::Arc, time::Duration};

use futures::FutureExt;
use rmcp::{
    RoleClient,
    model::{
        ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
        ElicitResult, Implementation, JsonObject, ListRootsResult, ProtocolVersion,
        RequestMetaObject,
    },
    service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt},
    transport::IntoTransport,
};
use tokio::{process::Command, sync::Mutex};

use super::{
    ClientError, Endpoint, InputAnswer, InputContext, TaskClient, connection::Inner,
    followers::Followers, handler::Handler, input::InputHandlers,
};

/// The default lower bound of the pause between polls.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_millis(10);
/// The default limit of `input_required` rounds on one `tools/call`.
pub const MAX_INPUT_ROUNDS: usize = 10;
/// The default longest wait for the handlers to answer an input request before any task
/// exists (5 minutes).
pub const MAX_INPUT_WAIT: Duration = Duration::from_secs(300);

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
}

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
            default_poll_interval: crate::tool::DEFAULT_POLL_INTERVAL,
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
    /// `{"action":"cancel"}`, and so are those it fails to answer (an error) and those it
    /// accepts with content that does not fit the form (a field the form requires is missing,
    /// or one is not of its type, range, length, format or choices), with a warning logged.
    pub fn with_elicitation<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(ElicitRequestParams, InputContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = InputAnswer<ElicitResult>> + Send + 'static,
    {
        self.handlers.elicitation = Some(Arc::new(move |params, cx| handler(params, cx).boxed()));
        self
    }

    /// Answers `sampling/createMessage` requests, and declares `sampling`.
    pub fn with_sampling<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(CreateMessageRequestParams, InputContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = InputAnswer<CreateMessageResult>> + Send + 'static,
    {
        self.handlers.sampling = Some(Arc::new(move |params, cx| handler(params, cx).boxed()));
        self
    }

    /// Answers `roots/list` requests, and declares `roots`.
    pub fn with_roots<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(InputContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = InputAnswer<ListRootsResult>> + Send + 'static,
    {
        self.handlers.roots = Some(Arc::new(move |cx| handler(cx).boxed()));
        self
    }

    /// The shortest pause between two polls, whatever `pollIntervalMs` says (default 10 ms).
    pub fn with_min_poll_interval(mut self, interval: Duration) -> Self {
        self.min_poll_interval = interval;
        self
    }

    /// The pause between polls when the server suggests none (default
    /// [`DEFAULT_POLL_INTERVAL`](crate::tool::DEFAULT_POLL_INTERVAL), 1 s, the interval a tool
    /// of this crate suggests unless it sets its own).
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
        let reason = match endpoint {
            Endpoint::Http { url } => return self.connect_http(url).await,
            Endpoint::Stdio { command } if !command.is_empty() => {
                let mut cmd = Command::new(&command[0]);
                cmd.args(&command[1..]);
                return self.connect_command(cmd, endpoint.clone()).await;
            }
            Endpoint::Stdio { .. } => "the command is empty",
            Endpoint::Named { .. } => "a named endpoint is connected by the application (`serve`)",
        };
        Err(ClientError::InvalidTarget {
            target: endpoint.to_string(),
            reason,
        })
    }

    /// Connects to a Streamable HTTP endpoint.
    ///
    /// # Errors
    /// As for [`TaskClientBuilder::connect`].
    pub async fn connect_http(self, url: &str) -> Result<TaskClient, ClientError> {
        if url.starts_with("https://") && !cfg!(feature = "https") {
            return Err(ClientError::HttpsNotEnabled {
                endpoint: url.to_owned(),
            });
        }
        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.to_owned());
        self.serve(transport, Endpoint::http(url)).await
    }

    /// Starts `command` and speaks MCP on its stdin and stdout. The child gets its own
    /// process group, so a Ctrl-C in the terminal reaches the client (which can then send
    /// `tasks/cancel`) and not the server.
    ///
    /// # Errors
    /// As for [`TaskClientBuilder::connect`].
    pub async fn connect_stdio(self, command: Command) -> Result<TaskClient, ClientError> {
        let std = command.as_std();
        let endpoint = Endpoint::stdio(
            std.get_program().to_string_lossy(),
            std.get_args().map(|a| a.to_string_lossy().into_owned()),
        );
        self.connect_command(command, endpoint).await
    }

    async fn connect_command(
        self,
        mut command: Command,
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
    /// endpoint for [`TaskReference`](super::TaskReference)s.
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
        let followers = Arc::new(Followers::default());
        let handler = Handler {
            followers: followers.clone(),
            handlers: self.handlers.clone(),
            config: ClientConfig::new(self.handlers.capabilities(), self.client_info.clone()),
        };
        let preferred_versions = vec![ProtocolVersion::V_2026_07_28];
        let lifecycle = ClientLifecycleMode::Discover { preferred_versions };
        let served = handler.serve_with_lifecycle(transport, lifecycle).await;
        let service = served.map_err(|source| ClientError::Connect {
            endpoint: endpoint.to_string(),
            // rmcp's initialization error writes the transport's error into its text, with
            // the transport's type names, and ends the source chain there: the transport's
            // error is the cause a person can read ("error sending request for url ...").
            source: match source {
                ClientInitializeError::TransportError { error, .. } => Box::new(error),
                other => Box::new(other),
            },
        })?;
        let peer = service.peer().clone();
        let info = peer.peer_info();
        let protocol_version = info.as_ref().map_or(ProtocolVersion::V_2026_07_28, |i| {
            i.protocol_version.clone()
        });
        let server_tasks = info.is_some_and(|info| info.capabilities.supports_tasks());
        let mut capabilities = self.handlers.capabilities();
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(crate::EXTENSION_ID.to_owned(), JsonObject::new());
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
                followers,
                min_poll_interval: self.min_poll_interval,
                default_poll_interval: self.default_poll_interval,
                max_input_rounds: self.max_input_rounds,
                max_input_wait: self.max_input_wait,
            }),
        })
    }
}
