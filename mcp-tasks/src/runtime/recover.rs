//! What a starting process does with the tasks a previous process left unfinished in a
//! durable store.
//!
//! # Invariants
//!
//! 1. **Every unfinished task is dealt with once**, before the process serves: it is
//!    replayed (its work runs again here), ends `failed`, or (recorded by another version of
//!    its tool) waits for a server that runs that version (`versions.rs`); never left
//!    `working` with no work behind it and nothing that says why. One whose cancel was asked
//!    for and whose code does not run here ends `cancelled` without running.
//! 2. **A task is replayed only by the code that started it**: the same tool name and the same
//!    [`ToolDefinition::version`](crate::ToolDefinition::version), and only when its tool's
//!    [`RestartPolicy`] is `Resume`. A task whose tool is gone or whose stored arguments no
//!    longer decode ends `failed` with a `statusMessage` that says which, as does every task
//!    of a `Fail` tool; a task of another version waits, its `statusMessage` naming the
//!    version it waits for.
//! 3. **A replay repeats nothing that finished**: the tool runs again from the top, and every
//!    step stored before returns its stored result without running, every question answered
//!    before returns its stored answer without being asked (the [`Replay`] data).
//! 4. A store failure stops recovery with that error; the tasks dealt with before it keep
//!    their new state, and the rest are dealt with by the next start.
//! 5. **In a cluster** (`runtime/cluster.rs`) the same decision is made, one task at a time,
//!    for a task this instance claimed ([`Cause::Lapsed`]: its instance stopped; `fail`
//!    tools end with a message that says so) or took from the queue ([`Cause::Queued`]: not
//!    a restart, so every tool runs it); the replay runs under the claimed lease and the
//!    failure is written fenced with it. A starting instance never replays the tasks other
//!    live instances are running ([`TaskStore::recoverable`](crate::TaskStore::recoverable)
//!    is for single-process stores).

// Invariant 2's status messages: docs/protocol.md R21.

use std::sync::Arc;

use rmcp::model::RequestMetaObject;
use tokio_util::sync::CancellationToken;

use super::{
    Runtime,
    call::{CallParts, CallState, Replay, run_caught},
    capacity::{Entry, GatePass, Held},
};
use crate::{
    errors,
    metrics::Run,
    store::{Lease, Outcome, Recovery, StoreError, Transition},
    tool::RestartPolicy,
    toolkit::Registered,
};

/// What [`Engine::recover`](crate::Engine::recover) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// Tasks replayed.
    pub resumed: usize,
    /// Tasks ended `failed`.
    pub failed: usize,
    /// Tasks left for a server that runs the version of their tool that recorded them.
    pub waiting: usize,
    /// Tasks whose cancel was asked for and whose code does not run here (their tool is
    /// gone, or another version of it recorded them): ended `cancelled` without running.
    pub cancelled: usize,
}

/// Why a task whose work runs nowhere is dealt with here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// This process started after a previous one left the task running.
    Restart,
    /// In a cluster: the lease of the instance running it lapsed (it died or stalled), and
    /// this instance claimed the task.
    Lapsed,
    /// In a cluster: the task was recorded with no runner (queued), and this instance or
    /// worker claimed it. Not a restart: its tool's restart policy does not apply.
    Queued,
    /// The task was parked (`park.rs`) and is woken: its work goes on, by replay. Not a
    /// restart: no status message of its own.
    Woken,
    /// The task waited for another version of its tool, and an operator moved it to this
    /// server's (`versions.rs`): replayed through this version.
    #[cfg_attr(
        not(feature = "admin"),
        allow(dead_code, reason = "the admin API moves tasks")
    )]
    Reversioned,
    /// A new task, an operator's retry or fork of one that failed or was cancelled
    /// (`retry.rs`): its first run. Not a restart: every tool runs it.
    #[cfg_attr(
        not(feature = "admin"),
        allow(dead_code, reason = "the admin API retries")
    )]
    Retried,
}

impl Cause {
    /// The `statusMessage` of a task of a `fail` tool, dealt with for this cause.
    fn failure(self) -> &'static str {
        match self {
            Self::Restart => "the server restarted while the task was running",
            Self::Lapsed | Self::Queued | Self::Retried => {
                "the server instance running the task stopped (its lease lapsed); the task is not \
                 resumed"
            }
            Self::Woken | Self::Reversioned => {
                "the task waited, and its tool no longer resumes (restart policy `fail`); call \
                 the tool again"
            }
        }
    }

    /// The `statusMessage` of a task replayed for this cause.
    fn resumed(self) -> Option<&'static str> {
        match self {
            Self::Restart => Some("resumed after a server restart"),
            Self::Lapsed => Some("resumed on another server instance after its server stopped"),
            Self::Reversioned => Some("moved to this server's version of its tool by an operator"),
            Self::Queued | Self::Woken | Self::Retried => None,
        }
    }
}

/// Deals with every task the store reports as left running (see the module docs).
pub(crate) async fn recover(runtime: &Arc<Runtime>) -> Result<RecoveryReport, StoreError> {
    let mut report = RecoveryReport::default();
    for task in runtime.store.recoverable().await? {
        take(runtime, task, None, Cause::Restart, &mut report, None).await?;
    }
    Ok(report)
}

/// Deals with one task whose work runs nowhere: replays it, or ends it `failed` (see the
/// module docs); in cluster mode under `lease`, the lease this instance claimed it with.
/// With `pass`, the task holds its places at its tool's gate (a held task started,
/// `held.rs`); without one, a task of a limited tool over a single-process store goes
/// through the gate, and is held back when it has no room.
pub(crate) async fn take(
    runtime: &Arc<Runtime>,
    task: Recovery,
    lease: Option<Lease>,
    cause: Cause,
    report: &mut RecoveryReport,
    pass: Option<GatePass>,
) -> Result<(), StoreError> {
    // A claim in a cluster takes woken parked tasks with the lapsed ones.
    let cause = if task.woken {
        crate::metrics::woken(task.woken_by_timer_ms);
        Cause::Woken
    } else {
        cause
    };
    if task.cancel_requested && !runtime.versions.runs(&task.tool, &task.origin.tool_version) {
        // Nothing here may run it, and nothing needs to: it ends as asked.
        if end_unrun(runtime, &task, lease.as_ref(), Outcome::Cancelled).await? {
            report.cancelled += 1;
            tracing::info!(task_id = %task.id, tool = %task.tool, "cancelled task ended unrun");
            runtime.changed(&task.id);
        }
        return Ok(());
    }
    let failure = match runtime.tools.toolkit.get(&task.tool) {
        None => {
            let who = match cause {
                Cause::Restart => "the server restarted and",
                _ => "this server instance",
            };
            Some(format!("{who} no longer offers tool `{}`", task.tool))
        }
        Some(registered)
            if !matches!(cause, Cause::Queued | Cause::Retried)
                && registered.definition.restart() == RestartPolicy::Fail =>
        {
            Some(cause.failure().to_owned())
        }
        Some(registered) if registered.definition.version() != &*task.origin.tool_version => {
            // Left for a server that runs its version (`versions.rs`).
            runtime
                .wait_for_version(&task, registered.definition.version(), lease.as_ref())
                .await?;
            report.waiting += 1;
            return Ok(());
        }
        Some(registered) => resume(
            runtime,
            registered,
            task.clone(),
            lease.clone(),
            cause,
            pass,
        )
        .await
        .err(),
    };
    let Some(message) = failure else {
        report.resumed += 1;
        return Ok(());
    };
    report.failed += 1;
    tracing::info!(task_id = %task.id, tool = %task.tool, %message, "task not resumed");
    // The store gives the failed task the error's message as its statusMessage.
    let outcome = Outcome::Failed(errors::to_object(&errors::not_resumed(message)));
    end_unrun(runtime, &task, lease.as_ref(), outcome).await?;
    Ok(())
}

/// Ends `task`, whose work does not run here, with `outcome` (under `lease` in a cluster):
/// whether this write ended it (not when it had ended, is gone, or the lease was lost).
async fn end_unrun(
    runtime: &Arc<Runtime>,
    task: &Recovery,
    lease: Option<&Lease>,
    outcome: Outcome,
) -> Result<bool, StoreError> {
    let status = outcome.status();
    let finished = runtime
        .store
        .apply(&task.id, lease, Transition::Finish(outcome));
    match finished.await {
        Ok(()) => {
            crate::metrics::task_finished(&task.id, &task.tool, status);
            Ok(true)
        }
        Err(error) if error.stops_work() => Ok(false),
        Err(error) => Err(error),
    }
}

/// Replays a task: the tool runs again with its arguments, stored steps and answers.
async fn resume(
    runtime: &Arc<Runtime>,
    registered: &Registered,
    task: Recovery,
    lease: Option<Lease>,
    cause: Cause,
    pass: Option<GatePass>,
) -> Result<(), String> {
    let tool: Arc<str> = Arc::from(registered.definition.name());
    let key = runtime
        .limited
        .key_of(&tool, &task.owner, &task.origin.arguments);
    let pass = match pass.map_or_else(|| runtime.enter(&tool, key.as_deref()), Entry::Pass) {
        Entry::Open => None,
        Entry::Pass(pass) => Some(pass),
        Entry::Held => {
            // Held back: its owner's count is held until it starts (`held.rs`).
            runtime.count_and_hold_back(Held {
                id: task.id,
                owner: task.owner,
                key,
                tool,
            });
            return Ok(());
        }
    };
    let meta: RequestMetaObject =
        serde_json::from_value(serde_json::Value::Object(task.origin.request_meta))
            .unwrap_or_default();
    let cancel = CancellationToken::new();
    if task.cancel_requested {
        // Cancelled before this run: the replay ends at its first wait.
        cancel.cancel();
    }
    let call = CallState::task(CallParts {
        id: task.id.clone(),
        tool: tool.clone(),
        owner: task.owner.clone(),
        cancel: cancel.clone(),
        client_capabilities: meta.client_capabilities().unwrap_or_default(),
        state: runtime.tools.state.clone(),
        runtime: runtime.clone(),
        mrtr: None,
        notifier: None,
        replay: Some(Replay {
            answers: task.answers,
            steps: task.steps.into_iter().map(|s| (s.seq, s)).collect(),
        }),
    });
    let work = registered
        .tool
        .call(call.context(), task.origin.arguments)
        .map_err(|e| format!("the stored arguments no longer decode: {e}"))?;
    let work = super::call::holding(work, pass);
    // A task taken back counts against its owner's quota but is never refused by it.
    let slot = runtime.reserve(&task.owner);
    let run = crate::trace::Run {
        instance: lease.as_ref().map(|lease| &*lease.instance),
        epoch: lease.as_ref().map(|lease| lease.epoch),
    };
    let trace = task.origin.trace_context.as_ref();
    let span = crate::trace::task_span(&task.id, &tool, &task.owner, run, trace);
    runtime.register(task.id.clone(), &tool, Run::Again, cancel, lease, slot);
    if let Some(message) = cause.resumed() {
        let _ = runtime.set_status(&task.id, Some(message.to_owned())).await;
    }
    runtime.spawn(task.id, tool, span, run_caught(work));
    Ok(())
}
