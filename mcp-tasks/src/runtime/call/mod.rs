//! The life of one call, from `tools/call` to its one terminal state.
//!
//! A call is in one phase at a time: **inline** (no task exists and none will),
//! **pending** (the work runs and a task may still be created around it), or **task** (a
//! task record exists). [`Call::inline`] and [`Call::task`] (this file) drive a call
//! through them; [`CallState`] (`state.rs`) is what the tool's
//! [`TaskContext`](crate::TaskContext) reaches through [`Host`](crate::context::Host).
//!
//! # Invariants
//!
//! 1. **The work starts once.** A call's work is started before any task exists and is never
//!    started twice: promotion wraps a task record around the running future.
//! 2. **Phases only move forward.** `inline` never changes; `pending → task` happens at most
//!    once; a replayed task (`runtime/recover.rs`) starts in `task`.
//! 3. **When a pending call becomes a task.** Once its work first waits on anything but a
//!    before-task question (a multi round-trip request, protocol R11), asks for input through
//!    the task, or starts a [step](TaskContext::step); or, with an inline budget, once the
//!    budget runs out. Work that ends within its inline budget is answered inline and no task
//!    ever exists; work that ends in its very first poll without a budget is a task born
//!    finished (the client asked for a task and gets one, R3).
//! 4. **Nothing reaches the store before the record.** A status set while pending is kept
//!    and written with the create (or right after it, if set during the create); input
//!    requests and steps wait until the record exists (`bound`).
//! 5. **One ending.** A task's work ends exactly once, as an [`Ended`], and that is stored as
//!    the task's one terminal state ([`Runtime::finish`]). When the store already holds a
//!    terminal state (expiry got there first) it keeps it.
//! 6. **The runtime forgets a task when its work ends**, never before: its cancellation
//!    token and input waiters live in [`Runtime`] from the create until the outcome is stored.
//! 7. **Multi round-trip input (protocol §5.4).** A call without a task that asks for input
//!    answers `input_required` with this round's questions and every earlier answer; its
//!    work is cancelled and dropped with the round, and the retry runs the tool again.
//! 8. **Cancellation** (`tasks/cancel`, expiry found by the reaper or by a read, a dropped
//!    inline request) cancels the work's token; the status changes only when the work ends.
//! 9. **Retries create nothing** (`_meta["mcp-tasks/idempotencyKey"]`, [`IDEMPOTENCY_KEY`]).
//!    A task call carrying the key of an earlier call of the same owner and tool, within
//!    that task's TTL, answers that task ([`Created::Existing`]); its own work is dropped
//!    before its first step or input request (they wait for the record, invariant 4), so no
//!    step runs twice. Calls answered inline create no task and are not deduplicated. In
//!    cluster mode a keyed call is recorded first ([`Call::recorded`]): two instances that
//!    receive the same key at the same moment both create, one create wins, and only the
//!    winner starts the work, so even the code before the first step runs once; as with
//!    queued calls, its questions before the task are asked through the task and an inline
//!    budget does not apply.
//! 10. **Request notifications only while the request is open.** `notifications/progress`
//!     and `notifications/message` of a call go to its `tools/call` request ([`Notifier`])
//!     while the call is inline or pending, never once it is a task: the request was then
//!     answered with the task, and tasks have neither (docs/protocol.md R42). Progress is
//!     refused unless it increases; a message is sent only at or above the request's
//!     `logLevel`, and never without one.
//! 11. **Chosen input keys are used once per call** (R28): a second request under a key the
//!     tool chose is refused, naming the key; generated keys (`elicit-N`, ...) have a
//!     reserved form a chosen key cannot take. A replay asks the same keys in the same order,
//!     and finds the ones answered before the restart in its [`Replay`].
//! 12. **Cluster mode** (`runtime/cluster.rs`): a call's task is created with this instance
//!     as its runner and its work runs under that lease; with queued calls the record is
//!     created first, with no runner, and no work starts here ([`Call::recorded`]).
//! 13. **No answer is lost to a replay.** A replay that asks a question its [`Replay`] has no
//!     answer for registers its waiter first, then reads the answers the store holds now:
//!     an answer stored before the waiter existed (after recovery read the replay data) is
//!     found by the read, every later one reaches the waiter.
//! 14. **A replay's questions get their own answers.** Generated keys are numbered by one
//!     sequence per run, whichever route a question takes (multi round-trip before the task,
//!     or through the task), so a replay, which asks every question through the task, gives
//!     each question the key it had in the original run, and no before-task question shares
//!     a key with a task-phase one. The answers a call took by multi round-trip are stored
//!     with its task when it is created ([`NewTask::answers`](crate::store::NewTask)): a
//!     replay finds them in its [`Replay`] and does not ask those questions again (R32).
//!
//! [`IDEMPOTENCY_KEY`]: crate::IDEMPOTENCY_KEY

use std::{pin::Pin, sync::Arc, time::Duration};

use futures::FutureExt;
use rmcp::model::{CallToolResult, ClientCapabilities, ErrorData, InputResponses, JsonObject};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{
    OwnerSlot, Runtime,
    capacity::{Entry, GatePass, Held},
};
use crate::{
    context::Failure,
    errors,
    id::new_task_id,
    metrics::Run,
    store::{Created, Lease, NewTask, StoreError},
    tool::ToolFuture,
    toolkit::{Registered, StateMap},
    trace::{self, TraceContext},
};

mod state;

pub(crate) use state::{Answer, CallParts, CallState, Mrtr, Notifier, Replay};

/// How a call's work ended, panics included.
#[derive(Debug, Clone)]
pub(crate) enum Ended {
    /// With a result (`isError` or not): the task is `completed` (R46).
    Completed(CallToolResult),
    /// With a JSON-RPC error: the task is `failed` (R45).
    Failed(ErrorData),
    /// It honoured a cancellation: the task is `cancelled`.
    Cancelled,
    /// It panicked, with this message: the task is `failed` with `-32603`.
    Panicked(String),
}

impl From<Result<CallToolResult, Failure>> for Ended {
    fn from(result: Result<CallToolResult, Failure>) -> Self {
        match result {
            Ok(result) => Self::Completed(result),
            Err(Failure::Error(error)) => Self::Failed(error),
            Err(Failure::Cancelled) => Self::Cancelled,
        }
    }
}

/// Runs work, turning a panic into [`Ended::Panicked`].
pub(crate) async fn run_caught(work: ToolFuture) -> Ended {
    match std::panic::AssertUnwindSafe(work).catch_unwind().await {
        Ok(result) => result.into(),
        Err(panic) => Ended::Panicked(
            panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned()),
        ),
    }
}

/// One `tools/call` being answered.
pub(crate) struct Call<'a> {
    pub(crate) runtime: &'a Arc<Runtime>,
    pub(crate) registered: &'a Registered,
    pub(crate) state: &'a Arc<StateMap>,
    pub(crate) tool: Arc<str>,
    pub(crate) owner: Arc<str>,
    pub(crate) client_capabilities: ClientCapabilities,
    pub(crate) arguments: &'a JsonObject,
    /// The request's `_meta`, copied into a task's record (an inline call copies nothing).
    pub(crate) request_meta: &'a JsonObject,
    /// `Some` on the modern wire, with the answers the client sent.
    pub(crate) mrtr: Option<InputResponses>,
    /// The client's idempotency key (`_meta["mcp-tasks/idempotencyKey"]`).
    pub(crate) idempotency_key: Option<Arc<str>>,
    /// Where the call's notifications go while the request is open.
    pub(crate) notifier: Option<Notifier>,
    /// The call's trace context, stored with its task ([`trace`]).
    pub(crate) trace: Option<TraceContext>,
}

/// What a task stores of its creating call's `_meta`: the protocol version and the client's
/// capabilities, which a replay reads. The rest (the client's info, a progress token, the
/// trace context, which is stored on its own, and any key of the client's) is not stored, so
/// a client's `_meta` does not grow every task it creates.
fn stored_meta(meta: &JsonObject) -> JsonObject {
    rmcp::model::RequestMetaObject::DRAFT_REQUIRED_KEYS
        .iter()
        .filter_map(|key| Some(((*key).to_owned(), meta.get(*key)?.clone())))
        .collect()
}

impl Call<'_> {
    fn parts(&mut self, id: Arc<str>, cancel: CancellationToken) -> CallParts {
        CallParts {
            mrtr: self.mrtr.take().map(Mrtr::new),
            replay: None,
            notifier: self.notifier.take(),
            id,
            tool: self.tool.clone(),
            owner: self.owner.clone(),
            cancel,
            // Each call builds its parts once.
            client_capabilities: std::mem::take(&mut self.client_capabilities),
            state: self.state.clone(),
            runtime: self.runtime.clone(),
        }
    }

    /// The record of the task; in cluster mode run by this instance (`runs`) or queued.
    fn new_task(&self, id: Arc<str>, message: Option<String>, runs: bool) -> NewTask {
        let definition = &self.registered.definition;
        let mut task = NewTask::new(id, self.owner.clone(), self.tool.clone())
            .with_status_message(message.map(|m| self.runtime.limits.clip_status(m)))
            .with_ttl(definition.ttl().duration())
            .with_poll_interval(definition.poll_interval())
            .with_arguments(self.arguments.clone())
            .with_tool_version(Arc::from(definition.version()))
            .with_request_meta(stored_meta(self.request_meta))
            .with_trace_context(self.trace.clone())
            .with_max_finished_per_owner(self.runtime.limits.max_finished_tasks_per_owner());
        if let Some(priority) = &self.runtime.priority {
            task = task.with_priority((priority.0)(&crate::PriorityInput {
                owner: &self.owner,
                tool: &self.tool,
                arguments: self.arguments,
            }));
        }
        task.limit_key = self.limit_key().map(Arc::from);
        let quota = self.runtime.limits.max_live_tasks_per_owner();
        task = self.runtime.placement.place(task, runs, quota);
        task.idempotency_key = self.idempotency_key.clone();
        task
    }

    /// The tool's work for `call`; the result it answers when it refuses the arguments.
    fn work(&self, call: &Arc<CallState>) -> Result<ToolFuture, CallToolResult> {
        let tool = &self.registered.tool;
        tool.call(call.context(), self.arguments.clone())
            .map_err(|error| error.into_result(&self.tool))
    }

    /// The `task` span of this call's task, run here: in cluster mode under the first lease
    /// (this instance, epoch 1).
    fn span(&self, id: &str) -> tracing::Span {
        let run = self.runtime.placement.first_run();
        trace::task_span(id, &self.tool, &self.owner, run, self.trace.as_ref())
    }

    /// Whether the task record is created before any work starts: as the placement says
    /// (`Placement::records_first`: queued calls, or a keyed call in cluster mode), or, in
    /// cluster mode, because its tool has a limit ([`Call::queued_for_its_limit`]).
    pub(crate) fn records_first(&self) -> bool {
        let keyed = self.idempotency_key.is_some();
        self.runtime.placement.records_first(keyed) || self.queued_for_its_limit()
    }

    /// Whether the call is only recorded, queued, because its tool has a concurrency, per-key
    /// or rate limit and the store is shared: the claims, which count the tool's running
    /// tasks (by key too) and its starts across the cluster, start it.
    fn queued_for_its_limit(&self) -> bool {
        self.runtime.placement.shared().is_some() && self.runtime.limited.limits(&self.tool)
    }

    /// The key of this call under its tool's per-key limits, if it has any.
    fn limit_key(&self) -> Option<String> {
        self.runtime
            .limited
            .key_of(&self.tool, &self.owner, self.arguments)
    }

    /// The status message of a task its tool's limits hold back: which limits.
    fn limit_message(&self) -> String {
        let definition = &self.registered.definition;
        let tasks = |n: u32| format!("{n} {}", if n == 1 { "task" } else { "tasks" });
        let at_once = |n| format!("runs at most {} at once", tasks(n));
        // `starts at most 10 tasks in any 1m`
        let starts = |rate: crate::rate::Rate| {
            let per = crate::duration::format(crate::clock::millis(rate.per()));
            format!("starts at most {} in any {per}", tasks(rate.count()))
        };
        let limits: Vec<String> = [
            definition.concurrency().map(&at_once),
            definition
                .key_concurrency()
                .map(|(key, n)| format!("{} for each {key}", at_once(n))),
            definition.rate().map(&starts),
            definition
                .key_rate()
                .map(|(key, rate)| format!("{} for each {key}", starts(rate))),
        ]
        .into_iter()
        .flatten()
        .collect();
        format!(
            "queued: waiting to start (the tool {})",
            limits.join(" and ")
        )
    }

    /// A call whose task is recorded before any work starts (see [`Call::records_first`]):
    /// a retry with the same idempotency key answers the existing task and starts nothing
    /// (the work starts only after this create won); a queued call
    /// starts nothing here (an instance or worker claims it, and runs it as a task from its
    /// first poll, so input it asks before the task is asked through the task).
    pub(crate) async fn recorded(mut self) -> Result<Answer, ErrorData> {
        let id: Arc<str> = Arc::from(new_task_id());
        let runs = !self.runtime.placement.queues_calls() && !self.queued_for_its_limit();
        // Work that runs here counts against the owner's quota, checked before the record.
        let slot = if runs {
            Some(self.runtime.admit(&self.owner).await?)
        } else {
            None
        };
        // What a task recorded queued waits for, until an instance claims it (and clears it).
        let message = (!runs).then(|| {
            if self.queued_for_its_limit() {
                return self.limit_message();
            }
            "queued: waiting for an instance with a free slot to start it".to_owned()
        });
        let record = self.new_task(id.clone(), message, runs);
        let lease = Lease::first(&record);
        let (task, new) = self.create(record).await?;
        // An existing task answers as it is; without a slot the work runs elsewhere: the task
        // is queued.
        let (true, Some(slot)) = (new, slot) else {
            return Ok(Answer::Task(task));
        };
        let cancel = CancellationToken::new();
        let mut parts = self.parts(id.clone(), cancel.clone());
        parts.mrtr = None;
        // The request is answered with the task before the work runs (invariant 10).
        parts.notifier = None;
        let call = CallState::task(parts);
        let runtime = self.runtime;
        runtime.register(id.clone(), &self.tool, Run::First, cancel, lease, slot);
        match self.work(&call) {
            Ok(work) => {
                let span = self.span(&id);
                runtime.spawn(id, self.tool.clone(), span, run_caught(work));
            }
            Err(refused) => {
                let ended = Ended::Completed(refused);
                runtime.finish(&id, &self.tool, ended).await;
            }
        }
        Ok(Answer::Task(task))
    }

    /// An ordinary call: the work runs here and its result is the answer. Input it asks for
    /// goes by multi round-trip request (modern wire). Dropping the request cancels the work.
    pub(crate) async fn inline(mut self, request: &CancellationToken) -> Result<Answer, ErrorData> {
        let cancel = request.child_token();
        // An inline call has no task id: one shared empty id, not an allocation a call.
        static NO_ID: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| Arc::from(""));
        let call = CallState::inline(self.parts(NO_ID.clone(), cancel.clone()));
        let work = match self.work(&call) {
            Ok(work) => work,
            Err(refused) => return Ok(Answer::Result(refused)),
        };
        let mut work = std::pin::pin!(run_caught(work));
        tokio::select! {
            biased;
            ended = &mut work => inline_answer(&self.tool, ended),
            () = call.round_trip_asked() => {
                cancel.cancel();
                Ok(call.input_required())
            }
        }
    }

    /// A call that runs as a task (see the module docs for when the task is created).
    pub(crate) async fn task(
        mut self,
        budget: Option<Duration>,
        request: &CancellationToken,
    ) -> Result<Answer, ErrorData> {
        // The owner's quota is checked before any work starts (invariant 1: it never starts
        // twice, so it must not start for a task that cannot be created).
        let slot = self.runtime.admit(&self.owner).await?;
        let id: Arc<str> = Arc::from(new_task_id());
        let cancel = CancellationToken::new();
        let (call, mut promote) = CallState::pending(self.parts(id.clone(), cancel.clone()));
        let work = match self.work(&call) {
            Ok(work) => work,
            Err(refused) => return Ok(Answer::Result(refused)),
        };
        // Past its tool's gate, if it has one; else held back, its work dropped unpolled.
        let key = self.limit_key();
        let work = match self.runtime.enter(&self.tool, key.as_deref()) {
            Entry::Open => work,
            Entry::Pass(pass) => holding(work, Some(pass)),
            Entry::Held => {
                drop((work, call, promote));
                return self.held(id, slot, key).await;
            }
        };
        let span = self.span(&id);
        let mut work: Pin<Box<dyn Future<Output = Ended> + Send>> =
            Box::pin(run_caught(work).instrument(span.clone()));
        let ended = tokio::select! {
            biased;
            () = request.cancelled() => {
                cancel.cancel();
                return Err(errors::request_cancelled());
            }
            ended = &mut work => Some(ended),
            () = call.round_trip_asked() => {
                cancel.cancel();
                return Ok(call.input_required());
            }
            _ = &mut promote => None,
            () = after(budget) => None,
        };
        if let (Some(ended), Some(_)) = (&ended, budget) {
            return inline_answer(&self.tool, ended.clone());
        }
        let message = call.begin_promotion();
        let record = self
            .new_task(id.clone(), message, true)
            .with_answers(call.round_trip_taken());
        let lease = Lease::first(&record);
        // Not created, or a retry of a call that created its task already (same owner, tool
        // and idempotency key; that task answers): this run of the work stops before its
        // first step or input request (both wait for a record of their own).
        let (task, new) = self.create(record).await.inspect_err(|_| cancel.cancel())?;
        if !new {
            cancel.cancel();
            return Ok(Answer::Task(task));
        }
        let runtime = self.runtime;
        runtime.register(id.clone(), &self.tool, Run::First, cancel, lease, slot);
        call.finish_promotion().await;
        match ended {
            // The work ended before it ever waited: the task is born finished.
            Some(ended) => {
                runtime
                    .finish(&id, &self.tool, ended)
                    .instrument(span)
                    .await;
            }
            None => runtime.spawn(id, self.tool.clone(), span, work),
        }
        Ok(Answer::Task(task))
    }

    /// Creates `record`: the task to answer, and whether it is new (else it is the existing
    /// task an idempotent retry finds).
    async fn create(&self, record: NewTask) -> Result<(rmcp::model::Task, bool), ErrorData> {
        match self.runtime.store.create(record).await {
            Ok(Created::New(snapshot)) => Ok((snapshot.to_task(), true)),
            Ok(Created::Existing(existing)) => {
                tracing::debug!(task_id = %existing.id, tool = %self.tool, "idempotent retry");
                Ok((existing.to_task(), false))
            }
            Err(StoreError::Full { max_tasks }) => Err(errors::store_full(max_tasks)),
            Err(other) => Err(errors::store_failure(&other)),
        }
    }

    /// A call of a limited tool whose gate has no room, over a single-process store: its
    /// task `id` is recorded, saying which limit holds it, and held back with no work
    /// (`held.rs`); its owner's count stays held from `slot`.
    async fn held(
        self,
        id: Arc<str>,
        slot: OwnerSlot,
        key: Option<String>,
    ) -> Result<Answer, ErrorData> {
        let record = self.new_task(id.clone(), Some(self.limit_message()), true);
        let (task, new) = self.create(record).await?;
        if !new {
            return Ok(Answer::Task(task));
        }
        self.runtime.warn_if_not_started(&self.tool);
        self.runtime.hold_back(Held {
            id,
            owner: slot.hold(),
            key,
            tool: self.tool.clone(),
        });
        Ok(Answer::Task(task))
    }
}

/// `work` holding `pass`, its places at its tool's gate, until it ends or is dropped.
pub(crate) fn holding(work: ToolFuture, pass: Option<GatePass>) -> ToolFuture {
    match pass {
        None => work,
        Some(pass) => Box::pin(async move {
            let _pass = pass;
            work.await
        }),
    }
}

/// Resolves after `budget`, or, without one, once the work it races has been polled and
/// waits (the second poll of a `yield_now`).
async fn after(budget: Option<Duration>) {
    match budget {
        Some(budget) => tokio::time::sleep(budget).await,
        None => tokio::task::yield_now().await,
    }
}

/// The answer to an inline call from how its work ended.
fn inline_answer(tool: &str, ended: Ended) -> Result<Answer, ErrorData> {
    // Held to a task outcome's measure: the fields a tool fills, the result's
    // `structuredContent` and the error's `data` (serialising the whole result to walk it
    // would cost every inline call).
    let too_deep = |field: &Option<_>| field.as_ref().is_some_and(crate::limits::field_too_deep);
    match ended {
        Ended::Completed(result) if too_deep(&result.structured_content) => {
            Err(errors::value_too_deep(tool, "result"))
        }
        Ended::Failed(error) if too_deep(&error.data) => Err(errors::value_too_deep(tool, "error")),
        Ended::Completed(result) => Ok(Answer::Result(result)),
        Ended::Failed(error) => Err(error),
        Ended::Cancelled => Err(errors::request_cancelled()),
        Ended::Panicked(panic) => {
            tracing::error!(tool, panic, "tool panicked");
            Err(errors::tool_panicked(tool, &panic))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_task_stores_only_what_a_replay_reads_of_the_meta() {
        let capabilities = json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } });
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "c", "version": "1" },
            "io.modelcontextprotocol/clientCapabilities": capabilities,
            "progressToken": 7,
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "com.example/large": "x".repeat(10_000),
        });
        let stored = stored_meta(meta.as_object().unwrap());
        assert_eq!(
            serde_json::Value::Object(stored),
            json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": capabilities,
            })
        );
        assert!(stored_meta(&JsonObject::new()).is_empty());
    }
}
