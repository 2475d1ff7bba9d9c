//! [`Host`]: the engine side of one call, the seam between the tool author's API and the
//! runtime that drives the call.

use std::any::{Any, TypeId};

use futures::future::BoxFuture;
use rmcp::model::{ClientCapabilities, InputRequest, LoggingLevel};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Failure, ProgressError};

// The capability check is docs/protocol.md C18.
/// Which kind of input a request is, for the check that the client declared its capability
/// and the key it is asked under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InputKind {
    Elicitation,
    Sampling,
    Roots,
}

impl InputKind {
    /// The capability a client declares to be asked input of this kind, and whether `caps`
    /// declares it.
    pub(super) fn capability(self, caps: &ClientCapabilities) -> (&'static str, bool) {
        match self {
            Self::Elicitation => ("elicitation", caps.elicitation.is_some()),
            Self::Sampling => ("sampling", caps.sampling.is_some()),
            Self::Roots => ("roots", caps.roots.is_some()),
        }
    }

    /// The prefix of the input-request keys of this kind (`elicit-1`, `sample-2`, ...).
    pub(crate) fn key_prefix(self) -> &'static str {
        match self {
            Self::Elicitation => "elicit",
            Self::Sampling => "sample",
            Self::Roots => "roots",
        }
    }

    /// Every prefix of generated keys, for the check that a chosen key is not one of them.
    pub(super) const ALL: [Self; 3] = [Self::Elicitation, Self::Sampling, Self::Roots];
}

/// One input request of a tool, as [`Host::input`] takes it.
pub(crate) struct Ask {
    pub(crate) kind: InputKind,
    pub(crate) request: InputRequest,
    /// Whether it may go by round trip while the call has no task yet.
    pub(crate) before_task: bool,
    /// The key the tool chose; `None`: a generated one.
    pub(crate) key: Option<String>,
}

impl Ask {
    pub(crate) fn new(
        kind: InputKind,
        request: InputRequest,
        before_task: bool,
        key: Option<String>,
    ) -> Self {
        Self {
            kind,
            request,
            before_task,
            key,
        }
    }
}

/// One progress report, as `notifications/progress` carries it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Progress {
    pub(crate) progress: f64,
    pub(crate) total: Option<f64>,
    pub(crate) message: Option<String>,
}

/// The engine side of one call, as [`TaskContext`](super::TaskContext) drives it. The runtime's lifecycle
/// (`runtime/call/`) implements it; its module docs say what each method guarantees.
pub(crate) trait Host: Send + Sync + 'static {
    /// The task id: `Some` once a task record exists for the call.
    fn task_id(&self) -> Option<&str>;
    /// The owner of the call.
    fn owner(&self) -> &str;
    /// The tool's wire name.
    fn tool(&self) -> &str;
    /// Fires when the call is cancelled (tasks/cancel, expiry, a dropped inline request).
    fn cancel_token(&self) -> &CancellationToken;
    /// What the creating request declared.
    fn client_capabilities(&self) -> &ClientCapabilities;
    /// Registered application state of the given type.
    fn state(&self, type_id: TypeId) -> Option<&(dyn Any + Send + Sync)>;
    /// Sets the status message (kept until a task exists when the call is still pending).
    fn status(&self, message: String) -> BoxFuture<'_, ()>;
    /// Asks the client for input, by the route the call's phase allows, and waits: under
    /// `key` when the tool chose one (already checked by [`check_key`](super::input::check_key)), else under a
    /// generated key.
    fn input(&self, ask: Ask) -> BoxFuture<'_, Result<Value, Failure>>;
    /// Reports progress: refused unless it is finite and greater than the last value; sent as
    /// `notifications/progress` only while the creating request is open and has a
    /// `progressToken`.
    fn progress(&self, progress: Progress) -> BoxFuture<'_, Result<(), ProgressError>>;
    /// Sends a log message, only while the creating request is open and asked for this level
    /// (or a less severe one) in its `_meta`.
    fn log(&self, level: LoggingLevel, logger: Option<String>, data: Value) -> BoxFuture<'_, ()>;
    /// Numbers the next step, with what a replay has for it: the step as stored before a
    /// restart, or `None` for a step that runs now.
    fn next_step(&self) -> (u64, Option<crate::store::Step>);
    /// The stored name of the next step, when a replay has it, without taking its number.
    fn peek_step(&self) -> Option<String>;
    /// Whether the call is inline for good (no task, none to come): steps just run.
    fn is_inline(&self) -> bool;
    /// Makes sure a task record exists before a step's side effects.
    fn ensure_task(&self) -> BoxFuture<'_, Result<(), Failure>>;
    /// Stores a completed step durably.
    fn save_step(&self, seq: u64, name: &str, value: Value) -> BoxFuture<'_, Result<(), Failure>>;
    /// Parks the task once it waited its tool's park time (`runtime/park.rs`): waits the
    /// time, stores the park, and never resolves (the work is dropped once the park is
    /// stored). Never resolves without parking either: for a call that cannot park, a wait
    /// too short to be worth it, or a park the store refused (what it waits for came).
    fn park(&self, wait: crate::store::Wait) -> BoxFuture<'_, ()>;
    /// Takes one start of `limiter` (`runtime/mod.rs`, `Runtime::take_rate`): `None` when
    /// taken, else how long until its window has room.
    fn take_rate<'a>(
        &'a self,
        limiter: &'a crate::rate::Limiter,
    ) -> BoxFuture<'a, Result<Option<std::time::Duration>, Failure>>;
}
