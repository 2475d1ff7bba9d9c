//! The errors of a tool: [`ToolError`], how a tool function ends when it does not return its
//! output, and [`DefinitionError`], what is wrong with a definition a toolkit registers.

use std::{fmt, time::Duration};

use rmcp::model::{CallToolResult, ContentBlock, ErrorData};

use super::settings::{Mode, name_problem};
use crate::context::{Failure, ProgressError, StepError};

/// What is wrong with a [`ToolDefinition`](super::ToolDefinition), found when a toolkit
/// registers it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DefinitionError {
    /// The wire name breaks the MCP rule for tool names, 1 to
    /// [`MAX_TOOL_NAME_LEN`](super::MAX_TOOL_NAME_LEN) characters of ASCII letters,
    /// digits, `_`, `-` and `.` (the rule `#[task_tool]` checks at compile time).
    #[error(
        "invalid tool name: {}; use 1 to 128 characters of `A-Z`, `a-z`, `0-9`, `_`, `-`, `.`",
        name_problem(name).unwrap_or("it breaks the tool name rule")
    )]
    InvalidName {
        /// The name as given.
        name: String,
    },
    /// The input schema's root is not `"type": "object"` (e.g. an `#[args]` enum).
    #[error("the input schema's root must be `\"type\": \"object\"`")]
    InputSchemaNotObject,
    /// An inline budget on a tool that is not [`Mode::Optional`].
    #[error("an inline budget only applies to `Mode::Optional` tools, and this one is `{mode:?}`")]
    InlineBudgetNotOptional {
        /// The tool's mode.
        mode: Mode,
    },
    /// A concurrency or rate limit on a tool that is not [`Mode::Required`]: a call over
    /// the limit waits as a queued task, and only a task can wait.
    #[error(
        "{limit} only applies to `Mode::Required` tools (a call over the limit waits as a queued task), and this one is `{mode:?}`"
    )]
    LimitNotRequired {
        /// Which limit: `"a concurrency limit"`, `"a rate limit"`, `"a per-key
        /// concurrency limit"` or `"a per-key rate limit"`.
        limit: &'static str,
        /// The tool's mode.
        mode: Mode,
    },
    /// A per-key limit keyed by an argument the input schema does not declare
    /// ([`ToolDefinition::with_key_concurrency`](crate::ToolDefinition::with_key_concurrency),
    /// [`ToolDefinition::with_key_rate`](crate::ToolDefinition::with_key_rate)).
    #[error(
        "the per-key limit is keyed by the argument `{argument}`, which the input schema does not declare: key it by one of the tool's arguments, or by `LimitKey::Owner`"
    )]
    UnknownLimitKey {
        /// The argument named.
        argument: String,
    },
    /// A per-key concurrency limit and a per-key rate keyed differently: a task has one
    /// key, which both count it by.
    #[error(
        "the per-key concurrency limit counts by `{concurrency}` and the per-key rate by `{rate}`: a tool's tasks have one key, so give both the same one"
    )]
    TwoLimitKeys {
        /// The concurrency limit's key (`owner`, or an argument's name).
        concurrency: String,
        /// The rate's key.
        rate: String,
    },
    /// An `x-mcp-header` annotation that is not on a property reached through `properties`
    /// from the root ([`tool::headers`](super::headers) rule 1).
    #[error(
        "an `x-mcp-header` annotation must sit on a property (through `properties` from the root), not at {location}"
    )]
    HeaderOutsideProperties {
        /// Where it is: `the schema root`, or a path such as `properties/list/items`.
        location: String,
    },
    /// An `x-mcp-header` value that is not a non-empty HTTP token (rule 2).
    #[error(
        "property `{property}`: `x-mcp-header` {header} is not a valid HTTP header name (a non-empty token: ASCII letters, digits and ! # $ % & ' * + - . ^ _ ` | ~)"
    )]
    InvalidHeaderName {
        /// The property, its path dotted.
        property: String,
        /// The annotation's value, as JSON.
        header: String,
    },
    /// Two properties annotated with one header name, without regard to case (rule 3).
    #[error(
        "the properties `{other}` and `{property}` are both sent as the header `Mcp-Param-{header}` (header names compare without case)"
    )]
    DuplicateHeader {
        /// The second property.
        property: String,
        /// The first one.
        other: String,
        /// The second one's annotation.
        header: String,
    },
    /// An annotated property whose `type` is not `string`, `integer` or `boolean` (rule 4).
    #[error(
        "property `{property}` is sent as the header `Mcp-Param-{header}`, so its schema `type` must be \"string\", \"integer\" or \"boolean\"; found {found}"
    )]
    HeaderNotPrimitive {
        /// The property, its path dotted.
        property: String,
        /// The annotation.
        header: String,
        /// The `type` it has, as JSON, or `no \`type\``.
        found: String,
    },
    /// A zero poll interval.
    #[error("the poll interval must be positive")]
    ZeroPollInterval,
    /// A zero ttl.
    #[error("the ttl must be positive")]
    ZeroTtl,
    /// A poll interval longer than the ttl: the task would expire before a client polls it.
    #[error("the poll interval ({poll_interval:?}) is longer than the ttl ({ttl:?})")]
    PollIntervalLongerThanTtl {
        /// The poll interval.
        poll_interval: Duration,
        /// The ttl.
        ttl: Duration,
    },
}

/// The error a tool function returns.
///
/// - [`ToolError::new`] (or any `E: Display` a `#[task_tool]` fn returns): the tool ran and
///   failed; the caller sees the text in a result with `isError: true`, and the task ends
///   `completed`.
/// - [`ToolError::rpc`]: a JSON-RPC error; the task ends `failed` with it.
/// - [`ToolError::cancelled`] (also what `?` makes of a [`Failure::Cancelled`] from a
///   [`TaskContext`](crate::TaskContext) call): the task ends `cancelled`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(transparent)]
pub struct ToolError(Repr);

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum Repr {
    #[error("{0}")]
    Message(String),
    #[error(transparent)]
    Failure(Failure),
}

impl ToolError {
    /// A tool-level failure with a message for the caller (`isError: true`).
    #[must_use]
    pub fn new(message: impl Into<String>) -> Self {
        Self(Repr::Message(message.into()))
    }

    /// A JSON-RPC error: the task ends `failed`.
    #[must_use]
    pub fn rpc(error: ErrorData) -> Self {
        Self(Repr::Failure(Failure::Error(error)))
    }

    /// The tool stopped because it was cancelled.
    #[must_use]
    pub fn cancelled() -> Self {
        Self(Repr::Failure(Failure::Cancelled))
    }

    /// An internal error of the tool (a bug, a broken invariant, a dependency that is down):
    /// a JSON-RPC `-32603` whose message is `message`; the task ends `failed`. Use
    /// [`ToolError::new`] instead for a failure the caller (or model) should read and act on.
    #[must_use]
    pub fn internal(message: impl Into<String>) -> Self {
        Self::rpc(ErrorData::internal_error(message.into(), None))
    }

    /// What the task's outcome is.
    ///
    /// # Errors
    /// The [`Failure`] for a JSON-RPC error or a cancellation.
    pub fn into_outcome(self) -> Result<CallToolResult, Failure> {
        match self.0 {
            Repr::Message(message) => Ok(CallToolResult::error(vec![ContentBlock::text(message)])),
            Repr::Failure(failure) => Err(failure),
        }
    }
}

impl From<Failure> for ToolError {
    fn from(failure: Failure) -> Self {
        Self(Repr::Failure(failure))
    }
}

impl<E: fmt::Display> From<StepError<E>> for ToolError {
    /// The work's error as a tool-level failure (`isError: true` with its text); the step's
    /// own failure as it is.
    fn from(error: StepError<E>) -> Self {
        match error {
            StepError::Work(error) => Self::new(error.to_string()),
            StepError::Failure(failure) => failure.into(),
        }
    }
}

impl From<ProgressError> for ToolError {
    /// A refused progress report is a bug of the tool: a `-32603` error (the task ends
    /// `failed`).
    fn from(error: ProgressError) -> Self {
        Self::rpc(crate::errors::bad_progress(&error))
    }
}

impl From<ErrorData> for ToolError {
    fn from(error: ErrorData) -> Self {
        Self::rpc(error)
    }
}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}
