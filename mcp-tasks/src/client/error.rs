//! What can go wrong when following a task from the client side.

use rmcp::{ErrorData, service::ServiceError};

/// The error an input handler reports.
pub type InputError = Box<dyn std::error::Error + Send + Sync>;

/// An error of the task client.
///
/// A tool that ran and reported a problem is not an error here: that is a completed call
/// whose `CallToolResult` has `isError: true`. These are the protocol, transport and
/// lifecycle failures around it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with a JSON-RPC error.
    #[error("the server answered {method} with error {}: {}", .error.code.0, .error.message)]
    Rpc {
        /// The request method.
        method: &'static str,
        /// The error as received (code, message, data).
        error: ErrorData,
    },
    /// The task ended `failed`; `error` is the JSON-RPC error it carried.
    #[error("task {task_id} failed with error {}: {}", .error.code.0, .error.message)]
    TaskFailed {
        /// The task.
        task_id: String,
        /// The error the task carried (code, message, data).
        error: ErrorData,
    },
    /// The task ended `cancelled`.
    #[error("task {task_id} was cancelled")]
    TaskCancelled {
        /// The task.
        task_id: String,
    },
    /// The server answered with something that is not a valid answer to the request,
    /// e.g. a task (`resultType: "task"`) in answer to a request other than `tools/call`, or a
    /// `resultType` this client does not know. The server does not follow the protocol:
    /// `reason` says how.
    #[error("invalid response to {method}: {reason}")]
    InvalidResponse {
        /// The request method.
        method: &'static str,
        /// What was wrong with it.
        reason: String,
    },
    /// The connection to the server failed or closed.
    #[error("transport failure during {method}")]
    Transport {
        /// The request method.
        method: &'static str,
        /// What the rmcp service reported.
        #[source]
        source: ServiceError,
    },
    /// Connecting to the server failed.
    #[error("cannot connect to {endpoint}")]
    Connect {
        /// The server endpoint.
        endpoint: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The server does not advertise the tasks extension, so it cannot hold the task that is
    /// being resumed.
    #[error("{endpoint} does not advertise the io.modelcontextprotocol/tasks extension")]
    TasksNotSupported {
        /// The server endpoint.
        endpoint: String,
    },
    /// A task reference names another server than this client is connected to.
    #[error("task reference is for {reference}, but this client is connected to {connected}")]
    EndpointMismatch {
        /// The endpoint in the reference.
        reference: String,
        /// The endpoint of this client.
        connected: String,
    },
    /// The server asked for input of a kind no handler was registered for, and that kind
    /// cannot be declined (sampling, roots).
    #[error("the server asks for `{method}` input (key `{key}`), but no handler is registered")]
    NoHandler {
        /// The input request key.
        key: String,
        /// The input request method.
        method: &'static str,
    },
    /// An input handler failed.
    #[error("the `{method}` handler failed for key `{key}`")]
    Handler {
        /// The input request key.
        key: String,
        /// The input request method.
        method: &'static str,
        /// What the handler reported.
        #[source]
        source: InputError,
    },
    /// `tools/call` kept asking for input before starting a task (`input_required` answers)
    /// for more rounds than
    /// [`TaskClientBuilder::with_max_input_rounds`](crate::client::TaskClientBuilder::with_max_input_rounds)
    /// allows, or repeated a round without progress.
    #[error("tools/call {tool} still needs input after {rounds} rounds")]
    TooManyInputRounds {
        /// The tool.
        tool: String,
        /// The rounds answered.
        rounds: usize,
    },
    /// Before any task existed, the server asked for input (an `input_required` answer to
    /// `tools/call`) and the handlers kept answering "later" (`Ok(None)`) for longer than
    /// [`TaskClientBuilder::with_max_input_wait`](crate::client::TaskClientBuilder::with_max_input_wait)
    /// allows. There is no task to come back to: answer, or call the tool again later.
    #[error(
        "tools/call {tool}: no input handler answered {keys:?} within {waited:?}; a call that \
         has no task yet cannot wait longer (raise TaskClientBuilder::with_max_input_wait)"
    )]
    InputNotAnswered {
        /// The tool.
        tool: String,
        /// The keys of the unanswered input requests.
        keys: Vec<String>,
        /// How long the client waited.
        waited: std::time::Duration,
    },
    /// The arguments of a `tools/call` do not serialize to a JSON object (or to nothing).
    #[error("the arguments of tools/call {tool} must serialize to a JSON object: {reason}")]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// What they serialized to, or why they did not serialize.
        reason: String,
    },
    /// A task reference could not be read.
    #[error("invalid task reference")]
    InvalidReference(#[source] serde_json::Error),
    /// An `https://` endpoint, but the crate was built without the `https` feature.
    #[error("{endpoint}: https needs the `https` cargo feature of mcp-tasks")]
    HttpsNotEnabled {
        /// The endpoint.
        endpoint: String,
    },
    /// A target that is neither an `http(s)://` URL nor a command line.
    #[error("invalid target `{target}`: {reason}")]
    InvalidTarget {
        /// The target as given.
        target: String,
        /// Why it is not valid.
        reason: &'static str,
    },
}

impl ClientError {
    /// The service failure of `method` as a client error: a JSON-RPC error keeps its code,
    /// message and data.
    pub(crate) fn service(method: &'static str, source: ServiceError) -> Self {
        match source {
            ServiceError::McpError(error) => Self::Rpc { method, error },
            ServiceError::UnexpectedResponse => Self::InvalidResponse {
                method,
                reason: "the result does not have the shape of this request's result".to_owned(),
            },
            source => Self::Transport { method, source },
        }
    }

    /// The JSON-RPC error, for [`ClientError::Rpc`] and [`ClientError::TaskFailed`].
    #[must_use]
    pub fn rpc_error(&self) -> Option<&ErrorData> {
        match self {
            Self::Rpc { error, .. } | Self::TaskFailed { error, .. } => Some(error),
            _ => None,
        }
    }
}
