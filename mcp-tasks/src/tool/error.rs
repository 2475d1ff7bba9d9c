//! [`ToolError`]: how a tool function ends when it does not return its output.

use std::fmt;

use rmcp::model::{CallToolResult, ContentBlock, ErrorData};

use crate::context::{Failure, ProgressError, StepError};

/// The error a tool function returns.
///
/// - [`ToolError::new`] (or any `E: Display` a `#[task_tool]` fn returns): the tool ran and
///   failed; the caller sees the text in a result with `isError: true`, and the task ends
///   `completed`.
/// - [`ToolError::rpc`]: a JSON-RPC error; the task ends `failed` with it.
/// - [`ToolError::cancelled`] (also what `?` makes of a [`Failure::Cancelled`] from a
///   [`TaskContext`](crate::TaskContext) call): the task ends `cancelled`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError(Repr);

#[derive(Debug, Clone, PartialEq)]
enum Repr {
    Message(String),
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

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Message(m) => f.write_str(m),
            Repr::Failure(failure) => failure.fmt(f),
        }
    }
}

impl std::error::Error for ToolError {}

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
