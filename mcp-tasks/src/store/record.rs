//! The task state machine: every transition of a stored task, written once and free of I/O.
//!
//! Each transition takes the task's current record (through [`Record`], a view that the
//! memory store implements on its compact entry and the SQL stores on their decoded row) and
//! the time, changes the record in place and answers a [`Change`]: whether there is something
//! to persist, whether the task ended (its steps and its deadline go), and whom to wake. Or
//! it refuses with a [`Refusal`] and changes nothing. The stores only lock, persist and
//! notify; none decides a transition itself. Deadline arithmetic saturates.
//!
//! # Invariants (docs/protocol.md rule numbers)
//!
//! Every store keeps these; the transitions below decide 2-9 for all of them, the stores
//! add durability (1), the cluster ones (10-13) and the notifications.
//!
//! 1. **Durable before visible (R10).** [`TaskStore::create`](super::TaskStore::create) returns only once a
//!    [`TaskStore::get`](super::TaskStore::get) of that id, from any client of the store, succeeds.
//! 2. **One way through the state machine (R56).** `working ↔ input_required`, and from
//!    either to exactly one terminal state (`completed`, `failed`, `cancelled`), which never
//!    changes afterwards. An operation that would leave a terminal state answers
//!    [`StoreError::Terminal`] and changes nothing.
//! 3. **Timestamps (R57).** `lastUpdatedAt` moves forward on every change; `createdAt` never
//!    changes.
//! 4. **Input keys (R26-R28).** A key names one input request for the whole life of a task:
//!    [`Transition::RequestInput`] refuses a key used before ([`StoreError::KeyReused`]).
//!    [`TaskStore::deliver_input`](super::TaskStore::deliver_input) takes answers only for keys outstanding at that moment,
//!    ignores every other key (never issued, already answered, superseded), accepts a subset
//!    (the task stays `input_required` until the last one arrives), and returns what it took.
//! 5. **Cancel intent.** [`TaskStore::request_cancel`](super::TaskStore::request_cancel) records the intent (also on a task
//!    whose status it cannot change any more); the status changes only when the work ends.
//! 6. **Replay data.** Every answer delivered to an input request, every answer the task was
//!    created with ([`NewTask::answers`](super::NewTask::answers): given before it existed, their keys count as used)
//!    and every completed step ([`Transition::SaveStep`]) stays with a running task, durably before the call that
//!    stores it returns, so a restarted process can replay the work
//!    ([`TaskStore::recoverable`](super::TaskStore::recoverable)) without asking a question twice or running a completed step
//!    again. [`Transition::RequestInput`] of a key that is still outstanding is a no-op: a
//!    replay asks its questions again under the same keys.
//! 7. **Expiry from creation (R20).** At `createdAt + ttlMs` a task that is not terminal
//!    becomes `failed` with a "task expired" error; a terminal task is purged at that
//!    instant, an expired one after the store's retention for expired tasks. A purged id
//!    reads as unknown (`None`), which the server answers with `-32602` (R17). Expiry is
//!    applied when due, also to a read that comes before the store's own sweep.
//! 8. **Terminal status messages (R21).** When a task ends, its `statusMessage` becomes
//!    [`Outcome::status_message`](super::Outcome::status_message): the error's message for `failed` (an expired task's says
//!    that its ttl elapsed), none for `completed` and `cancelled`, so no progress text such
//!    as "waiting for your answer" outlives the work.
//! 9. **Idempotent creation.** A [`NewTask`](super::NewTask) with an idempotency key
//!    ([`NewTask::with_idempotency_key`](super::NewTask::with_idempotency_key)) whose owner, tool and key match a task created
//!    before, within that task's TTL, creates nothing: [`TaskStore::create`](super::TaskStore::create) answers
//!    [`Created::Existing`](super::Created::Existing) with the existing task, also when the retries race each other.
//!    Every store keeps this; a purged task frees its key.
//!
//! # Several instances, one task space ([`ClusterStore`](super::ClusterStore))
//!
//! A store that several processes share (`PostgresStore`) also offers [`TaskStore::cluster`](super::TaskStore::cluster),
//! the operations a runtime needs to run each task's work in exactly one place:
//!
//! 10. **Leases with a fencing epoch.** The instance that runs a task's work holds its
//!     [`Lease`](super::Lease): (instance id, lease deadline, epoch). The deadline is kept in the store on the
//!     store's own clock (not the instances' clocks), and the holder extends it with
//!     [`ClusterStore::renew`](super::ClusterStore::renew). Every change of holder increments the epoch.
//! 11. **One claimer.** When a lease lapses, [`ClusterStore::claim`](super::ClusterStore::claim) gives the task to
//!     exactly one of the instances asking at that moment, at the next epoch, with the
//!     [`Recovery`](super::Recovery) data to replay or fail it; a claim of queued tasks does the same for
//!     tasks created with no runner (worker mode). Claimers skip each other's locked rows, so
//!     they never wait on each other.
//! 12. **Fencing.** The fenced writes of the running work ([`TaskStore::apply`](super::TaskStore::apply)
//!     under a lease) are refused with [`StoreError::Fenced`], changing nothing, once the task's
//!     epoch is no longer the lease's: an instance that stalled and lost its lease cannot
//!     overwrite its successor's work.
//! 13. **Wake-ups.** An answer ([`TaskStore::deliver_input`](super::TaskStore::deliver_input)) or a cancel intent
//!     ([`TaskStore::request_cancel`](super::TaskStore::request_cancel)) stored through any
//!     instance is announced to every instance as a [`Notice`](super::Notice) on
//!     [`ClusterStore::wakeups`](super::ClusterStore::wakeups), and so is a task queued for a
//!     worker. The store keeps no list of who holds which lease: that is the runtime's
//!     knowledge (it keeps the wake-ups of the tasks it runs, and re-reads them to cover a
//!     lost notification).

use std::{borrow::Cow, time::Duration};

use rmcp::model::{InputRequest, InputRequests, InputResponses, TaskStatus};

use super::{
    StoreError,
    row::{AskedAtStep, Outcome, PARKED_FOR_ANSWER, Pending, State, Step},
};
use crate::{clock::millis, errors};

/// The `statusMessage` of a task that expired (invariant 7), the one place it is written.
pub(crate) const EXPIRED_MESSAGE: &str = "task expired: its ttl elapsed before it finished";

/// The statuses of a live task, the only ones a transition of running work leaves
/// (invariant 2).
pub(crate) const LIVE: [TaskStatus; 2] = [TaskStatus::Working, TaskStatus::InputRequired];

impl State {
    /// Moves `lastUpdatedAt` to `now`, and always forwards (invariant 3).
    fn touch(&mut self, now: u64) {
        self.last_updated_at_ms = now.max(self.last_updated_at_ms.saturating_add(1));
    }

    fn check_live(&self) -> Result<(), Refusal> {
        if !LIVE.contains(&self.status) {
            Err(Refusal::Terminal(self.status))
        } else {
            Ok(())
        }
    }
}

/// A stored task as the transitions see it: the memory store's entry, a SQL store's row.
pub(crate) trait Record {
    /// The changeable fields.
    fn state(&self) -> &State;
    /// The changeable fields, to change.
    fn state_mut(&mut self) -> &mut State;
    /// The input requests and replay data of the live task.
    fn pending_mut(&mut self) -> &mut Pending;
    /// Keeps `outcome` as the task's and drops its outstanding questions, and (unless it
    /// [`keeps_history`]) the rest of its pending data (the status is set by the
    /// transition).
    fn end_with(&mut self, outcome: Outcome);
}

/// The notice beside [`Notice::Changed`](super::Notice::Changed) a transition asks for : the instance
/// running the task must hear of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WakeupKind {
    Answers,
    Cancel,
}

/// The SQL stores' decoded row.
#[cfg(any(test, feature = "sqlite", feature = "postgres"))]
impl Record for super::row::TaskRow {
    fn state(&self) -> &State {
        &self.state
    }

    fn state_mut(&mut self) -> &mut State {
        &mut self.state
    }

    fn pending_mut(&mut self) -> &mut Pending {
        &mut self.pending
    }

    fn end_with(&mut self, outcome: Outcome) {
        self.pending.end(keeps_history(outcome.status()));
        self.outcome = Some(outcome);
    }
}

/// Whether a task that ended with `status` keeps its history (its steps, the answers it took
/// and its origin: tool version, arguments, the request's `_meta`), for an operator's retry
/// or fork: a `failed` or `cancelled` one does, until it is purged; a `completed` one drops
/// it (its result is all that is left to read). Its outstanding questions go either way.
pub(crate) fn keeps_history(status: TaskStatus) -> bool {
    matches!(status, TaskStatus::Failed | TaskStatus::Cancelled)
}

/// What a transition did, for the store to persist and announce.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Change {
    /// The record changed: persist it.
    pub(crate) changed: bool,
    /// The task ended: its steps and its deadline go.
    pub(crate) ended: bool,
    /// The instance running the task must hear of it.
    pub(crate) wake: Option<WakeupKind>,
}

impl Change {
    pub(crate) const NONE: Self = Self {
        changed: false,
        ended: false,
        wake: None,
    };
    pub(crate) const CHANGED: Self = Self {
        changed: true,
        ended: false,
        wake: None,
    };
    pub(crate) const ENDED: Self = Self {
        changed: true,
        ended: true,
        wake: None,
    };
}

/// A transition the state machine refuses; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The task is terminal (invariant 2).
    Terminal(TaskStatus),
    /// The input key was used before in this task (invariant 4).
    KeyReused(String),
    /// A park, but what the task waits for has come.
    Woken,
}

impl From<Refusal> for StoreError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Terminal(status) => Self::Terminal(status),
            Refusal::KeyReused(key) => Self::KeyReused(key),
            Refusal::Woken => Self::Woken,
        }
    }
}

/// What is due for a task at some instant (invariant 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    /// Nothing.
    Nothing,
    /// The live task is past its TTL: it expires.
    Expiry,
    /// The terminal task is past its purge time: it goes.
    Purge,
}

// ---------------------------------------------------------------------------------------
// Transitions.

/// The state of a task created at `now` with `status_message` and `ttl`: `working`, its
/// TTL counted from now (the message is moved in: the memory store's create allocates
/// nothing for it).
pub(crate) fn create(status_message: Option<String>, ttl: Option<Duration>, now: u64) -> State {
    State {
        status: TaskStatus::Working,
        status_message: storable(status_message),
        created_at_ms: now,
        last_updated_at_ms: now,
        ttl_ms: ttl.map(millis),
        cancel_requested: false,
        purge_at_ms: None,
        parked_until_ms: None,
    }
}

/// The pending data of a task created with `answers`, asked at `asked_at_step`
/// (invariant 6): kept for replay, their keys used, no request outstanding.
pub(crate) fn create_pending(answers: InputResponses, asked_at_step: AskedAtStep) -> Pending {
    Pending {
        input_requests: InputRequests::new(),
        used_keys: answers.keys().map(|key| key.as_str().into()).collect(),
        answers,
        asked_at_step,
    }
}

/// Whether a create with the idempotency key of the task in `first` is a retry of it, at
/// `now` (invariant 9): within the first task's TTL.
pub(crate) fn is_retry_of(first: &State, now: u64) -> bool {
    first.deadline_ms().is_none_or(|deadline| now < deadline)
}

/// What is due at `now`.
pub(crate) fn due(state: &State, now: u64) -> Due {
    let (at, due) = if state.status.is_terminal() {
        (state.purge_at_ms, Due::Purge)
    } else {
        (state.deadline_ms(), Due::Expiry)
    };
    match at {
        Some(at) if now >= at => due,
        _ => Due::Nothing,
    }
}

/// The outcome of an expired task (invariant 7).
pub(crate) fn expired_outcome() -> Outcome {
    Outcome::Failed(errors::to_object(&errors::task_expired()))
}

/// Applies what is due at `now` (invariant 7): a live task past its TTL becomes `failed`
/// with [`EXPIRED_MESSAGE`], purged `retention_ms` after its deadline ([`Due::Expiry`], the
/// change to persist); a terminal task past its purge time is to be removed by the store
/// ([`Due::Purge`], the record unchanged).
pub(crate) fn apply_due(record: &mut impl Record, now: u64, retention_ms: u64) -> Due {
    let due = due(record.state(), now);
    if due == Due::Expiry {
        let deadline = record.state().deadline_ms().unwrap_or(now);
        end(
            record,
            now,
            expired_outcome(),
            Some(EXPIRED_MESSAGE.to_owned()),
            Some(deadline.saturating_add(retention_ms)),
        );
    }
    due
}

/// A write of a task's running work, as a value: what
/// [`TaskStore::apply`](super::TaskStore::apply) applies, with or without a fence.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Transition {
    /// Sets or clears `statusMessage`.
    StatusMessage(Option<String>),
    /// Adds an outstanding input request under a key never used before in this task; the
    /// task becomes `input_required`. A key that is still outstanding is left as it is (a
    /// replay asks again under the same key); a key already answered is
    /// [`StoreError::KeyReused`].
    RequestInput {
        /// The key that names the request for the life of the task.
        key: String,
        /// The request.
        request: InputRequest,
        /// How many steps the run had begun when it asked: what a fork reads to tell the
        /// answers it keeps.
        at_step: u64,
    },
    /// Records a completed step, durably before the write returns.
    SaveStep(Step),
    /// Moves the task to its terminal state.
    Finish(Outcome),
    /// Parks the live task: its work stops wherever it runs, and nothing runs it until it is
    /// woken (an answer is taken, its timer is due, a cancel intent is recorded). Refused
    /// with [`StoreError::Woken`] when what it waits for has come already; a cluster store
    /// also gives up the lease (the epoch moves on).
    Park(Wait),
}

/// What a parked task waits for ([`Transition::Park`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Wait {
    /// The input request whose answer it waits for: already answered, the park is refused.
    pub key: Option<String>,
    /// Its timer: woken at this instant (milliseconds since the Unix epoch). `None`: only an
    /// answer or a cancel wakes it.
    pub until_ms: Option<u64>,
}

impl Wait {
    /// Waits for the answer to input request `key`.
    #[must_use]
    pub fn answer(key: impl Into<String>) -> Self {
        Self {
            key: Some(key.into()),
            until_ms: None,
        }
    }

    /// Waits until `until_ms` (milliseconds since the Unix epoch).
    #[must_use]
    pub fn until(until_ms: u64) -> Self {
        Self {
            key: None,
            until_ms: Some(until_ms),
        }
    }
}

impl Transition {
    /// The operation's name, as the store metrics label it.
    pub(crate) const fn name(&self) -> &'static str {
        match self {
            Self::StatusMessage(_) => "set_status_message",
            Self::RequestInput { .. } => "request_input",
            Self::SaveStep(_) => "save_step",
            Self::Finish(_) => "finish",
            Self::Park(_) => "park",
        }
    }

    /// Whether `tasks/get` shows what it changes (neither a step nor a park is visible).
    pub(crate) const fn visible(&self) -> bool {
        !matches!(self, Self::SaveStep(_) | Self::Park(_))
    }
}

/// Runs `transition` on a live task at `now`: the change, and the step the store keeps
/// with it (for [`Transition::SaveStep`]).
pub(crate) fn apply(
    record: &mut impl Record,
    now: u64,
    transition: Transition,
) -> Result<(Change, Option<Step>), Refusal> {
    Ok(match transition {
        Transition::StatusMessage(message) => (set_status_message(record, now, message)?, None),
        Transition::RequestInput {
            key,
            request,
            at_step,
        } => (request_input(record, now, &key, request, at_step)?, None),
        Transition::SaveStep(step) => (save_step(record, now)?, Some(step)),
        Transition::Finish(outcome) => (finish(record, now, outcome)?, None),
        Transition::Park(wait) => (park(record, wait)?, None),
    })
}

/// Parks a live task until `wait` is over (see [`Transition::Park`]). Not a visible change:
/// `lastUpdatedAt` stays.
pub(crate) fn park(record: &mut impl Record, wait: Wait) -> Result<Change, Refusal> {
    record.state().check_live()?;
    let answered = wait
        .key
        .as_ref()
        .is_some_and(|key| !record.pending_mut().input_requests.contains_key(key));
    let state = record.state_mut();
    if state.cancel_requested || answered {
        return Err(Refusal::Woken);
    }
    state.parked_until_ms = Some(wait.until_ms.unwrap_or(PARKED_FOR_ANSWER));
    Ok(Change::CHANGED)
}

/// Wakes a parked task now (an answer was taken, a cancel recorded): it is due at once.
fn wake_now(state: &mut State) {
    if state.parked_until_ms.is_some() {
        state.parked_until_ms = Some(0);
    }
}

/// Whether the parked task is due to be woken at `now` (a task that is not parked is not).
pub(crate) fn woken(state: &State, now: u64) -> bool {
    !state.status.is_terminal() && state.parked_until_ms.is_some_and(|until| until <= now)
}

/// Takes a woken task out of its park (see [`woken`]): its work is about to go on. Returns
/// the instant of the timer that woke it, when its timer did (not an answer or a cancel).
pub(crate) fn unpark(state: &mut State) -> Option<u64> {
    state
        .parked_until_ms
        .take()
        .and_then(super::row::woken_by_timer)
}

/// Sets or clears `statusMessage` of a live task (a change only when it differs).
pub(crate) fn set_status_message(
    record: &mut impl Record,
    now: u64,
    message: Option<String>,
) -> Result<Change, Refusal> {
    let state = record.state_mut();
    state.check_live()?;
    let message = storable(message);
    if state.status_message == message {
        return Ok(Change::NONE);
    }
    state.status_message = message;
    state.touch(now);
    Ok(Change::CHANGED)
}

/// Asks for input under `key`, with `at_step` steps of the run begun (invariants 4 and 6):
/// the task becomes `input_required`. A key still outstanding is left as it is (a replay
/// asks again); any other used key is refused.
pub(crate) fn request_input(
    record: &mut impl Record,
    now: u64,
    key: &str,
    request: InputRequest,
    at_step: u64,
) -> Result<Change, Refusal> {
    record.state().check_live()?;
    let pending = record.pending_mut();
    if pending.input_requests.contains_key(key) {
        return Ok(Change::NONE);
    }
    if pending.used_keys.iter().any(|used| &**used == key) {
        return Err(Refusal::KeyReused(key.to_owned()));
    }
    pending.used_keys.push(key.into());
    if at_step > 0 {
        pending.asked_at_step.insert(key.to_owned(), at_step);
    }
    pending.input_requests.insert(key.to_owned(), request);
    let state = record.state_mut();
    state.status = TaskStatus::InputRequired;
    state.touch(now);
    Ok(Change::CHANGED)
}

/// Takes the answers whose keys are outstanding (invariant 4), keeps them for replay
/// (invariant 6) and returns them; every other key is ignored, and a terminal task takes
/// nothing. The task is `working` again once no request is outstanding. Taking any wakes the
/// instance running the task.
pub(crate) fn deliver_input(
    record: &mut impl Record,
    now: u64,
    responses: InputResponses,
) -> (InputResponses, Change) {
    let mut accepted = InputResponses::new();
    if record.state().status.is_terminal() {
        return (accepted, Change::NONE);
    }
    let pending = record.pending_mut();
    for (key, value) in responses {
        if pending.input_requests.remove(&key).is_some() {
            pending.answers.insert(key.clone(), value.clone());
            accepted.insert(key, value);
        }
    }
    if accepted.is_empty() {
        return (accepted, Change::NONE);
    }
    let idle = pending.input_requests.is_empty();
    let state = record.state_mut();
    if idle {
        state.status = TaskStatus::Working;
    }
    wake_now(state);
    state.touch(now);
    let change = Change {
        wake: Some(WakeupKind::Answers),
        ..Change::CHANGED
    };
    (accepted, change)
}

/// Ends a live task with `outcome` (invariants 2 and 8): its status message becomes the
/// outcome's, it is purged at its TTL deadline (never without a TTL).
pub(crate) fn finish(
    record: &mut impl Record,
    now: u64,
    outcome: Outcome,
) -> Result<Change, Refusal> {
    record.state().check_live()?;
    let purge_at = record.state().deadline_ms();
    let (_, message) = finished(&outcome);
    Ok(end(record, now, outcome, message, purge_at))
}

/// What a finish with `outcome` writes besides the outcome (invariant 8): its terminal
/// status and its status message. A batch that finishes many tasks in one statement takes
/// them from here; the purge time is the task's deadline, as in [`finish`].
pub(crate) fn finished(outcome: &Outcome) -> (TaskStatus, Option<String>) {
    (outcome.status(), storable(outcome.status_message()))
}

/// A status message every store can hold: U+FFFD in place of each NUL character, which a
/// Postgres text column refuses (the write would fail, and with it a finish).
fn storable(message: Option<String>) -> Option<String> {
    message.map(|text| match storable_text(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(replaced) => replaced,
    })
}

/// [`storable`], borrowed where it changes nothing (a new task's message, bound as it is).
pub(crate) fn storable_text(text: &str) -> Cow<'_, str> {
    if text.contains('\0') {
        Cow::Owned(text.replace('\0', "\u{fffd}"))
    } else {
        Cow::Borrowed(text)
    }
}

/// Records a cancel intent (invariant 5): once, and only on a live task (on a terminal one
/// it is acknowledged and changes nothing). Recording it wakes the instance running the task.
pub(crate) fn request_cancel(record: &mut impl Record, now: u64) -> Change {
    let state = record.state_mut();
    if state.cancel_requested || state.status.is_terminal() {
        return Change::NONE;
    }
    state.cancel_requested = true;
    wake_now(state);
    state.touch(now);
    Change {
        wake: Some(WakeupKind::Cancel),
        ..Change::CHANGED
    }
}

/// A completed step of a live task (invariant 6): the store keeps the step with the change.
pub(crate) fn save_step(record: &mut impl Record, now: u64) -> Result<Change, Refusal> {
    let state = record.state_mut();
    state.check_live()?;
    state.touch(now);
    Ok(Change::CHANGED)
}

fn end(
    record: &mut impl Record,
    now: u64,
    outcome: Outcome,
    message: Option<String>,
    purge_at_ms: Option<u64>,
) -> Change {
    let state = record.state_mut();
    state.status = outcome.status();
    state.status_message = message;
    state.purge_at_ms = purge_at_ms;
    state.parked_until_ms = None;
    state.touch(now);
    record.end_with(outcome);
    Change::ENDED
}

#[cfg(test)]
mod tests {
    use rmcp::model::TaskStatus;

    use std::sync::Arc;

    use crate::store::{NewTask, row::TaskRow};
    use serde_json::json;

    use super::*;

    /// The plain record: the transitions need no store.
    type Task = TaskRow;

    const T0: u64 = 1_000_000;

    fn new_task(ttl_ms: Option<u64>) -> NewTask {
        NewTask::new(Arc::from("t"), Arc::from("alice"), Arc::from("tool"))
            .with_ttl(ttl_ms.map(Duration::from_millis))
            .with_status_message(Some("starting".into()))
    }

    fn task(ttl_ms: Option<u64>) -> Task {
        created(new_task(ttl_ms))
    }

    fn created(new: NewTask) -> Task {
        Task {
            id: Arc::clone(&new.id),
            owner: Arc::clone(&new.owner),
            tool: Arc::clone(&new.tool),
            poll_interval_ms: None,
            state: create(new.status_message, new.ttl, T0),
            pending: create_pending(new.answers, new.asked_at_step),
            outcome: None,
        }
    }

    #[allow(deprecated, reason = "roots/list is the simplest input request")]
    fn roots() -> InputRequest {
        InputRequest::ListRoots(rmcp::model::ListRootsRequest {
            method: Default::default(),
            extensions: Default::default(),
        })
    }

    fn answers(keys: &[&str]) -> InputResponses {
        keys.iter()
            .map(|key| ((*key).to_owned(), json!({ "for": key })))
            .collect()
    }

    fn failed(message: &str) -> Outcome {
        Outcome::Failed(
            json!({ "code": -32603, "message": message })
                .as_object()
                .cloned()
                .unwrap_or_default(),
        )
    }

    fn ended(status: TaskStatus) -> Task {
        let mut t = task(Some(10_000));
        let outcome = match status {
            TaskStatus::Failed => failed("boom"),
            TaskStatus::Cancelled => Outcome::Cancelled,
            _ => Outcome::Completed(JsonObjectLike::default()),
        };
        finish(&mut t, T0 + 1, outcome).unwrap();
        t
    }

    type JsonObjectLike = rmcp::model::JsonObject;

    /// Create: `working`, its message, both timestamps now, the TTL; answers given before
    /// the task existed are kept and their keys used.
    #[test]
    fn create_starts_working_with_its_answers_kept() {
        let t = task(Some(5_000));
        assert_eq!(t.state.status, TaskStatus::Working);
        assert_eq!(t.state.status_message.as_deref(), Some("starting"));
        assert_eq!(
            (t.state.created_at_ms, t.state.last_updated_at_ms),
            (T0, T0)
        );
        assert_eq!(t.state.ttl_ms, Some(5_000));
        assert_eq!(t.state.deadline_ms(), Some(T0 + 5_000));
        assert!(!t.state.cancel_requested);
        assert_eq!(t.state.purge_at_ms, None);
        assert!(t.pending.input_requests.is_empty());

        let given = answers(&["a", "b"]);
        let pending = create_pending(given.clone(), AskedAtStep::new());
        assert_eq!(pending.answers, given);
        let mut used: Vec<&str> = pending.used_keys.iter().map(|k| &**k).collect();
        used.sort_unstable();
        assert_eq!(used, ["a", "b"]);
    }

    /// Idempotent create: a retry is one within the first task's TTL; without a TTL always.
    #[test]
    fn a_retry_is_one_within_the_first_tasks_ttl() {
        let t = task(Some(100));
        assert!(is_retry_of(&t.state, T0));
        assert!(is_retry_of(&t.state, T0 + 99));
        assert!(!is_retry_of(&t.state, T0 + 100));
        assert!(is_retry_of(&task(None).state, u64::MAX));
    }

    /// Deadlines saturate: a TTL that would overflow `createdAt + ttlMs` is "never".
    #[test]
    fn deadline_arithmetic_saturates() {
        let mut t = task(Some(u64::MAX));
        assert_eq!(t.state.deadline_ms(), Some(u64::MAX));
        assert!(is_retry_of(&t.state, u64::MAX - 1));
        assert_eq!(due(&t.state, u64::MAX - 1), Due::Nothing);
        // An expiry at the very end of time purges at the end of time too.
        assert_eq!(apply_due(&mut t, u64::MAX, u64::MAX), Due::Expiry);
        assert_eq!(t.state.purge_at_ms, Some(u64::MAX));
        // lastUpdatedAt saturates as well.
        t.state.last_updated_at_ms = u64::MAX;
        t.state.touch(0);
        assert_eq!(t.state.last_updated_at_ms, u64::MAX);
    }

    /// What is due, at each side of each instant.
    #[test]
    fn due_expires_live_tasks_and_purges_terminal_ones() {
        let t = task(Some(100));
        assert_eq!(due(&t.state, T0 + 99), Due::Nothing);
        assert_eq!(due(&t.state, T0 + 100), Due::Expiry);
        assert_eq!(due(&task(None).state, u64::MAX), Due::Nothing);
        let done = ended(TaskStatus::Completed);
        assert_eq!(
            done.state.purge_at_ms,
            Some(T0 + 10_000),
            "purged at its TTL"
        );
        assert_eq!(due(&done.state, T0 + 9_999), Due::Nothing);
        assert_eq!(due(&done.state, T0 + 10_000), Due::Purge);
        let mut forever = task(None);
        finish(&mut forever, T0 + 1, Outcome::Cancelled).unwrap();
        assert_eq!(forever.state.purge_at_ms, None, "no TTL: never purged");
        assert_eq!(due(&forever.state, u64::MAX), Due::Nothing);
    }

    /// Expiry: `failed` with the expired error and message, written once; purged after the
    /// retention, counted from the deadline; what only a live task keeps goes.
    #[test]
    fn expiry_fails_the_task_once_and_schedules_its_purge() {
        let mut t = task(Some(100));
        request_input(&mut t, T0 + 1, "k", roots(), 0).unwrap();
        assert_eq!(apply_due(&mut t, T0 + 99, 50), Due::Nothing);
        assert_eq!(t.state.status, TaskStatus::InputRequired);
        assert_eq!(apply_due(&mut t, T0 + 150, 50), Due::Expiry);
        assert_eq!(t.state.status, TaskStatus::Failed);
        assert_eq!(t.state.status_message.as_deref(), Some(EXPIRED_MESSAGE));
        assert_eq!(t.outcome, Some(expired_outcome()));
        assert_eq!(t.state.purge_at_ms, Some(T0 + 150));
        assert_eq!(t.state.last_updated_at_ms, T0 + 150);
        // Failed: its question goes, its history (the keys it used) stays.
        assert!(t.pending.input_requests.is_empty());
        assert_eq!(t.pending.used_keys, vec![Box::from("k")]);
        let once = t.clone();
        assert_eq!(apply_due(&mut t, T0 + 149, 50), Due::Nothing);
        assert_eq!(t, once, "an expired task is not expired again");
        assert_eq!(apply_due(&mut t, T0 + 150, 50), Due::Purge);
        assert_eq!(
            t, once,
            "a purge is the store's to do; the record is unchanged"
        );
    }

    /// Status message: set, cleared, unchanged when equal; refused once terminal.
    #[test]
    fn status_message_changes_only_live_tasks() {
        let mut t = task(None);
        let change = set_status_message(&mut t, T0 + 5, Some("half".into())).unwrap();
        assert_eq!(change, Change::CHANGED);
        assert_eq!(t.state.status_message.as_deref(), Some("half"));
        assert_eq!(t.state.last_updated_at_ms, T0 + 5);
        let before = t.clone();
        assert_eq!(
            set_status_message(&mut t, T0 + 6, Some("half".into())).unwrap(),
            Change::NONE
        );
        assert_eq!(t, before, "the same message changes nothing");
        set_status_message(&mut t, T0 + 6, None).unwrap();
        assert_eq!(t.state.status_message, None);
        for status in [
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Cancelled,
        ] {
            let mut done = ended(status);
            let before = done.clone();
            assert_eq!(
                set_status_message(&mut done, T0 + 9, Some("late".into())),
                Err(Refusal::Terminal(status))
            );
            assert_eq!(done, before);
        }
    }

    /// Ask: a new key makes the task `input_required`; an outstanding key asked again is a
    /// no-op (a replay); a key answered before, or answered before the task existed, is
    /// refused; a terminal task refuses.
    #[test]
    fn request_input_uses_each_key_once() {
        let mut t = task(None);
        let change = request_input(&mut t, T0 + 1, "k", roots(), 0).unwrap();
        assert_eq!(change, Change::CHANGED);
        assert_eq!(t.state.status, TaskStatus::InputRequired);
        assert!(t.pending.input_requests.contains_key("k"));
        assert_eq!(t.state.last_updated_at_ms, T0 + 1);

        let before = t.clone();
        assert_eq!(
            request_input(&mut t, T0 + 2, "k", roots(), 0).unwrap(),
            Change::NONE
        );
        assert_eq!(t, before, "re-asking an outstanding key changes nothing");
        assert!(t.pending.asked_at_step.is_empty(), "asked before any step");
        request_input(&mut t, T0 + 2, "later", roots(), 2).unwrap();
        let asked = &t.pending.asked_at_step;
        assert_eq!(asked.get("later"), Some(&2), "asked with two steps begun");
        assert!(!crate::store::row::asked_before(asked, "later", 2));
        assert!(crate::store::row::asked_before(asked, "later", 3));
        assert!(crate::store::row::asked_before(asked, "k", 1));
        assert!(!crate::store::row::asked_before(asked, "k", 0));

        let _ = deliver_input(&mut t, T0 + 3, answers(&["k"]));
        let before = t.clone();
        assert_eq!(
            request_input(&mut t, T0 + 4, "k", roots(), 0),
            Err(Refusal::KeyReused("k".into()))
        );
        assert_eq!(t, before);

        let mut t = created(new_task(None).with_answers(answers(&["early"])));
        assert_eq!(
            request_input(&mut t, T0 + 1, "early", roots(), 0),
            Err(Refusal::KeyReused("early".into())),
            "a key answered before the task existed counts as used"
        );

        let mut done = ended(TaskStatus::Completed);
        assert_eq!(
            request_input(&mut done, T0 + 2, "new", roots(), 0),
            Err(Refusal::Terminal(TaskStatus::Completed))
        );
        assert!(done.pending.input_requests.is_empty());
    }

    /// Answer: only outstanding keys are taken (a subset keeps the task `input_required`),
    /// others ignored; taken answers are kept for replay and wake the runner; the last one
    /// makes it `working`; a terminal task takes nothing.
    #[test]
    fn deliver_input_takes_only_outstanding_keys() {
        let mut t = task(None);
        request_input(&mut t, T0 + 1, "a", roots(), 0).unwrap();
        request_input(&mut t, T0 + 1, "b", roots(), 0).unwrap();

        let before = t.clone();
        let (taken, change) = deliver_input(&mut t, T0 + 2, answers(&["never-asked"]));
        assert!(taken.is_empty());
        assert_eq!(change, Change::NONE);
        assert_eq!(t, before, "an answer to no outstanding key changes nothing");

        let (taken, change) = deliver_input(&mut t, T0 + 3, answers(&["a", "never-asked"]));
        assert_eq!(taken, answers(&["a"]));
        assert_eq!(
            change,
            Change {
                changed: true,
                ended: false,
                wake: Some(WakeupKind::Answers)
            }
        );
        assert_eq!(t.state.status, TaskStatus::InputRequired, "b is still open");
        assert_eq!(t.pending.answers, answers(&["a"]));
        assert_eq!(t.state.last_updated_at_ms, T0 + 3);

        let (taken, _) = deliver_input(&mut t, T0 + 4, answers(&["a"]));
        assert!(taken.is_empty(), "an answered key is not taken twice");

        let (taken, _) = deliver_input(&mut t, T0 + 5, answers(&["b"]));
        assert_eq!(taken, answers(&["b"]));
        assert_eq!(t.state.status, TaskStatus::Working);
        assert_eq!(t.pending.answers, answers(&["a", "b"]));

        let mut done = ended(TaskStatus::Cancelled);
        let before = done.clone();
        let (taken, change) = deliver_input(&mut done, T0 + 6, answers(&["a"]));
        assert!(taken.is_empty());
        assert_eq!(change, Change::NONE);
        assert_eq!(done, before);
    }

    /// Finish: the outcome's status and message (a failed task's says why, a completed or
    /// cancelled one keeps no progress text); purged at the deadline; live data dropped;
    /// exactly once.
    #[test]
    fn finish_ends_a_live_task_once() {
        let mut t = task(Some(10_000));
        request_input(&mut t, T0 + 1, "k", roots(), 0).unwrap();
        set_status_message(&mut t, T0 + 1, Some("waiting for your answer".into())).unwrap();
        let change = finish(&mut t, T0 + 2, failed("it broke")).unwrap();
        assert_eq!(change, Change::ENDED);
        assert_eq!(t.state.status, TaskStatus::Failed);
        assert_eq!(t.state.status_message.as_deref(), Some("it broke"));
        assert_eq!(t.outcome, Some(failed("it broke")));
        assert_eq!(t.state.purge_at_ms, Some(T0 + 10_000));
        assert!(t.pending.input_requests.is_empty(), "its question goes");
        assert_eq!(
            t.pending.used_keys,
            vec![Box::from("k")],
            "its history stays"
        );
        let mut completed = task(Some(10_000));
        request_input(&mut completed, T0 + 1, "k", roots(), 0).unwrap();
        finish(&mut completed, T0 + 2, Outcome::Cancelled).unwrap();
        assert_eq!(
            completed.pending.used_keys.len(),
            1,
            "a cancelled task keeps it too"
        );
        let result = Outcome::Completed(rmcp::model::JsonObject::new());
        let mut completed = task(Some(10_000));
        request_input(&mut completed, T0 + 1, "k", roots(), 0).unwrap();
        finish(&mut completed, T0 + 2, result).unwrap();
        assert_eq!(
            completed.pending,
            Pending::default(),
            "a completed one drops it"
        );
        assert_eq!(
            t.state.last_updated_at_ms,
            T0 + 3,
            "after two changes at T0 + 1"
        );

        let before = t.clone();
        assert_eq!(
            finish(&mut t, T0 + 3, Outcome::Cancelled),
            Err(Refusal::Terminal(TaskStatus::Failed))
        );
        assert_eq!(t, before);

        for outcome in [
            Outcome::Completed(JsonObjectLike::default()),
            Outcome::Cancelled,
        ] {
            let mut t = task(None);
            set_status_message(&mut t, T0 + 1, Some("half way".into())).unwrap();
            finish(&mut t, T0 + 2, outcome.clone()).unwrap();
            assert_eq!(t.state.status, outcome.status());
            assert_eq!(
                t.state.status_message, None,
                "no progress text outlives the work"
            );
            assert_eq!(finished(&outcome), (outcome.status(), None));
        }
        assert_eq!(
            finished(&failed("why")),
            (TaskStatus::Failed, Some("why".into()))
        );
    }

    /// Cancel intent: recorded once on a live task, waking its runner; acknowledged without
    /// a change on a terminal one.
    #[test]
    fn cancel_intent_is_recorded_once_on_live_tasks() {
        let mut t = task(None);
        let change = request_cancel(&mut t, T0 + 1);
        assert_eq!(
            change,
            Change {
                changed: true,
                ended: false,
                wake: Some(WakeupKind::Cancel)
            }
        );
        assert!(t.state.cancel_requested);
        assert_eq!(
            t.state.status,
            TaskStatus::Working,
            "the status waits for the work"
        );
        let before = t.clone();
        assert_eq!(request_cancel(&mut t, T0 + 2), Change::NONE);
        assert_eq!(t, before);

        let mut done = ended(TaskStatus::Completed);
        let before = done.clone();
        assert_eq!(request_cancel(&mut done, T0 + 2), Change::NONE);
        assert_eq!(done, before);
    }

    /// A step: a change of a live task (the store keeps the step); refused once terminal.
    #[test]
    fn save_step_touches_live_tasks_only() {
        let mut t = task(None);
        assert_eq!(save_step(&mut t, T0 + 1).unwrap(), Change::CHANGED);
        assert_eq!(t.state.last_updated_at_ms, T0 + 1);
        let mut done = ended(TaskStatus::Failed);
        assert_eq!(
            save_step(&mut done, T0 + 2),
            Err(Refusal::Terminal(TaskStatus::Failed))
        );
    }

    /// `lastUpdatedAt` moves forward on every change, even within one millisecond or when
    /// the clock reads earlier; `createdAt` never changes.
    #[test]
    fn timestamps_move_forward() {
        let mut t = task(None);
        for _ in 0..3 {
            let last = t.state.last_updated_at_ms;
            save_step(&mut t, T0).unwrap();
            assert_eq!(t.state.last_updated_at_ms, last + 1);
        }
        save_step(&mut t, T0 - 500).unwrap();
        assert_eq!(t.state.last_updated_at_ms, T0 + 4);
        assert_eq!(t.state.created_at_ms, T0);
    }

    /// Refusals become the store errors the trait documents.
    #[test]
    fn refusals_are_store_errors() {
        assert!(matches!(
            StoreError::from(Refusal::Terminal(TaskStatus::Failed)),
            StoreError::Terminal(TaskStatus::Failed)
        ));
        assert!(matches!(
            StoreError::from(Refusal::KeyReused("k".into())),
            StoreError::KeyReused(key) if key == "k"
        ));
    }
}
