//! How the calls a [`TaskContext`](super::TaskContext) offers fail: [`Failure`] for the calls
//! that wait on the client or the task, [`ProgressError`] for a refused progress report,
//! [`StepError`] for a fallible step.

use rmcp::model::ErrorData;

/// How a tool's work ends other than with a [`CallToolResult`](rmcp::model::CallToolResult),
/// and how the [`TaskContext`](super::TaskContext) calls that wait on the client fail.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Failure {
    /// The tool honoured a cancellation: the task ends `cancelled`.
    #[error("cancelled")]
    Cancelled,
    /// A JSON-RPC error during execution: the task ends `failed` with it.
    #[error("JSON-RPC error {}: {}", .0.code.0, .0.message)]
    Error(ErrorData),
}

impl From<ErrorData> for Failure {
    fn from(error: ErrorData) -> Self {
        Self::Error(error)
    }
}

/// Why [`TaskContext::progress`](super::TaskContext::progress) refused a report. Nothing was
/// sent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProgressError {
    /// The progress did not increase: each report must be greater than the one before it
    /// (MCP progress: "the progress value MUST increase with each notification").
    #[error(
        "progress {given} does not increase on the last report ({last}): each report must be greater than the one before"
    )]
    NotIncreasing {
        /// The last progress accepted.
        last: f64,
        /// The progress refused.
        given: f64,
    },
    /// A progress or total that is NaN or infinite, which JSON cannot carry.
    #[error("progress values must be finite numbers, not {value}")]
    NotFinite {
        /// The value refused.
        value: f64,
    },
}

/// Why a [`TaskContext::try_step`](super::TaskContext::try_step) did not return a value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StepError<E> {
    /// The work returned this error; nothing was stored.
    #[error("{0}")]
    Work(E),
    /// The step itself failed or the task was cancelled, as for
    /// [`TaskContext::step`](super::TaskContext::step).
    #[error("{0}")]
    Failure(Failure),
}
