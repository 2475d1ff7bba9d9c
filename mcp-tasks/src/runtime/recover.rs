//! What a starting process does with the tasks a previous process left unfinished in a
//! durable store.
//!
//! # Invariants
//!
//! 1. **Every unfinished task is dealt with once**, before the process serves: it is either
//!    replayed (its work runs again here) or ends `failed`, never left `working` with no work
//!    behind it.
//! 2. **A task is replayed only by the code that started it**: the same tool name and the same
//!    [`ToolDefinition::version`](crate::ToolDefinition::version), and only when its tool's
//!    [`RestartPolicy`] is `Resume`. A task whose tool is gone, whose version changed, or whose
//!    stored arguments no longer decode ends `failed` with a `statusMessage` that says which
//!    (protocol R21), as does every task of a `Fail` tool.
//! 3. **A replay repeats nothing that finished**: the tool runs again from the top, and every
//!    step stored before returns its stored result without running, every question answered
//!    before returns its stored answer without being asked (the [`Replay`] data).
//! 4. A store failure stops recovery with that error; the tasks dealt with before it keep
//!    their new state, and the rest are dealt with by the next start.

use std::sync::Arc;

use rmcp::model::RequestMetaObject;
use tokio_util::sync::CancellationToken;

use super::{
    Runtime,
    call::{CallParts, CallState, Replay, run_caught},
};
use crate::{
    errors,
    store::{Outcome, Recovery, StoreError},
    tool::RestartPolicy,
    toolkit::{Registered, StateMap, Toolkit},
};

/// What [`Engine::recover`](crate::Engine::recover) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// Tasks replayed.
    pub resumed: usize,
    /// Tasks ended `failed`.
    pub failed: usize,
}

/// Deals with every task the store reports as left running (see the module docs).
pub(crate) async fn recover(
    runtime: &Arc<Runtime>,
    toolkit: &Toolkit,
    state: &Arc<StateMap>,
) -> Result<RecoveryReport, StoreError> {
    let mut report = RecoveryReport::default();
    let store = &runtime.store;
    for task in store.recoverable().await? {
        let failure = match toolkit.get(&task.tool) {
            None => Some(format!(
                "the server restarted and no longer offers tool `{}`",
                task.tool
            )),
            Some(registered) if registered.definition.version() != &*task.tool_version => {
                Some(format!(
                    "tool `{}` changed from version `{}` to `{}` while the task ran; it is not \
                     replayed against different code",
                    task.tool,
                    task.tool_version,
                    registered.definition.version()
                ))
            }
            Some(registered) if registered.definition.restart() == RestartPolicy::Fail => {
                Some("the server restarted while the task was running".to_owned())
            }
            Some(registered) => resume(runtime, registered, state, task.clone()).await.err(),
        };
        match failure {
            None => report.resumed += 1,
            Some(message) => {
                report.failed += 1;
                tracing::info!(task_id = %task.id, tool = %task.tool, %message, "task not resumed");
                // The store gives the failed task the error's message as its statusMessage.
                let error = errors::not_resumed(message);
                match store
                    .finish(&task.id, Outcome::Failed(errors::to_object(&error)))
                    .await
                {
                    Ok(()) | Err(StoreError::Terminal(_) | StoreError::NotFound) => {}
                    Err(error) => return Err(error),
                }
            }
        }
    }
    Ok(report)
}

/// Replays a task: the tool runs again with its arguments, stored steps and answers.
async fn resume(
    runtime: &Arc<Runtime>,
    registered: &Registered,
    state: &Arc<StateMap>,
    task: Recovery,
) -> Result<(), String> {
    let tool: Arc<str> = Arc::from(registered.definition.name());
    let meta: RequestMetaObject =
        serde_json::from_value(serde_json::Value::Object(task.request_meta)).unwrap_or_default();
    let cancel = CancellationToken::new();
    let call = CallState::task(CallParts {
        id: task.id.clone(),
        tool: tool.clone(),
        owner: task.owner.clone(),
        cancel: cancel.clone(),
        client_capabilities: meta.client_capabilities().unwrap_or_default(),
        state: state.clone(),
        runtime: runtime.clone(),
        mrtr: None,
        replay: Some(Replay {
            answers: task.answers,
            steps: task.steps.into_iter().map(|s| (s.seq, s)).collect(),
        }),
    });
    let work = registered
        .tool
        .call(call.context(), task.arguments)
        .map_err(|e| format!("the stored arguments no longer decode: {e}"))?;
    let _ = runtime
        .store
        .set_status_message(&task.id, Some("resumed after a server restart".to_owned()))
        .await;
    // A task taken back counts against its owner's quota but is never refused by it.
    let slot = runtime
        .reserve(&task.owner, false)
        .map_err(|error| error.message.into_owned())?;
    runtime.register(task.id.clone(), cancel, slot);
    runtime.spawn(task.id, tool, &task.owner, run_caught(work));
    Ok(())
}
