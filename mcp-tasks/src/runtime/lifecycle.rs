//! Who starts and stops what a runtime runs in the background.
//!
//! A runtime (of an [`Engine`](crate::Engine) or a [`Worker`](super::Worker)) owns two
//! [`TaskTracker`]s and two [`CancellationToken`]s: the **loops** (the expiry sweep; an
//! engine's dispatcher of listen streams, `server/push`; in cluster mode the claims, the
//! lease renewals and the wake-ups, and what they spawn) and
//! the **work** of every task that runs here. Nothing is spawned outside them, nothing holds
//! a weak reference to the runtime to find out whether it should stop, and nothing starts
//! from a request.
//!
//! # Invariants
//!
//! 1. **Built, running, stopping, stopped**, in that order only. `start` moves a built
//!    runtime to running and spawns every loop, once; starting a running runtime does
//!    nothing, starting a stopped one is refused ([`StartError::Stopped`]).
//! 2. **Shutdown has three steps** ([`Lifecycle::shutdown`]):
//!    1. *intake stops*: the claims and the expiry sweep end, and new task calls are
//!       refused;
//!    2. *grace*: the work already running has the grace period to end on its own; its
//!       leases are still renewed and its wake-ups (answers, cancels) still reach it, and
//!       its outcome is written as usual;
//!    3. *stop*: the work still running is dropped and writes nothing more under its own
//!       name; what becomes of its task depends on its tool's restart policy (the drain,
//!       [`Runtime::abandon`](super::Runtime)):
//!       - `resume`: over a shared store its lease is **released** (it lapses at once and
//!         the task space is woken), so another instance claims it now and replays it; over
//!         a single-process durable store it stays as stored, and the next start replays it;
//!       - `fail`: it ends `failed`, with a message saying the server was shut down (it had
//!         the whole grace period to end on its own).
//!
//!       Renewals, wake-ups and the listen dispatcher end. Shutdown returns once every loop and every work has
//!       ended: both trackers are closed and empty.
//! 3. **Dropping the last handle** (every clone of the engine, or the worker's handle)
//!    without a shutdown stops everything at once, as step 3 but without waiting and
//!    without the drain: each task stays exactly as the store has it (as after a crash:
//!    another instance takes it over once its lease lapses, or the next start recovers it).

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use parking_lot::Mutex;

use tokio_util::{
    sync::{CancellationToken, DropGuard},
    task::TaskTracker,
};

/// How long a shutdown the serving functions or [`Worker::run_until`](crate::Worker::run_until)
/// make on their own lets running work end by itself, unless
/// [`EngineBuilder::with_shutdown_grace`](crate::EngineBuilder::with_shutdown_grace) says
/// otherwise.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Why a runtime did not start.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartError {
    /// It was shut down (or every handle to it was dropped); build a new one to run again.
    #[error("it was shut down; build a new one to run again")]
    Stopped,
    /// `start` was called outside a tokio runtime: there is nothing to spawn the background
    /// loops on.
    #[error("start must be called from within a tokio runtime")]
    NoRuntime,
    /// A [`Worker`](crate::Worker) needs a store that several instances share
    /// (`PostgresStore`): this store has no cluster operations, so there is nothing to claim.
    #[error(
        "a Worker needs a store that several instances share (PostgresStore); this store has \
         no cluster operations"
    )]
    NotShared,
}

/// What a shutdown did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Tasks whose work was still running when the grace period ended: it was stopped, and
    /// each task was released, left for the next start, or failed (the other fields).
    pub abandoned: usize,
    /// Of those, tasks of `resume` tools whose lease was released over a shared store:
    /// another instance claims each at once and replays it.
    pub released: usize,
    /// Of those, tasks of `resume` tools left as stored over a single-process store: the
    /// next start replays them (a memory store forgets them).
    pub left: usize,
    /// Of those, tasks of `fail` tools (which cannot be resumed), ended `failed` with a
    /// message saying the server was shut down.
    pub failed: usize,
}

/// What became of one task whose work was stopped at the end of a grace period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Drained {
    Released,
    Left,
    Failed,
    /// Any of them (or none, when the hand-over failed): the work was stopped.
    Stopped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Built,
    Running,
    Stopping,
    Stopped,
}

/// The owner of a runtime's loops and work (see the module docs).
pub(crate) struct Lifecycle {
    state: Mutex<State>,
    /// Cancelled at step 3 (or when the last handle drops): renewals, wake-ups, running work
    /// end.
    pub(crate) stop: CancellationToken,
    /// Cancelled at step 1: claims and the expiry sweep end. A child of `stop`.
    pub(crate) intake: CancellationToken,
    /// Background loops and what they spawn: running until `stop` or `intake` ends them.
    pub(crate) loops: TaskTracker,
    /// The work of the tasks that run here.
    pub(crate) work: TaskTracker,
    /// What the drain of step 3 did: released, left, failed.
    drained: [AtomicUsize; 4],
}

impl Lifecycle {
    pub(crate) fn new() -> Self {
        let stop = CancellationToken::new();
        Self {
            state: Mutex::new(State::Built),
            intake: stop.child_token(),
            stop,
            loops: TaskTracker::new(),
            work: TaskTracker::new(),
            drained: Default::default(),
        }
    }

    /// Moves a built runtime to running: `Ok(true)` when the caller is to spawn the loops,
    /// `Ok(false)` when it runs already.
    pub(crate) fn begin(&self) -> Result<bool, StartError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(StartError::NoRuntime);
        }
        let mut state = self.state.lock();
        match *state {
            State::Built if !self.stop.is_cancelled() => {
                *state = State::Running;
                Ok(true)
            }
            State::Running => Ok(false),
            _ => Err(StartError::Stopped),
        }
    }

    /// Whether loops were started and not yet told to stop.
    pub(crate) fn is_running(&self) -> bool {
        *self.state.lock() == State::Running && !self.stop.is_cancelled()
    }

    /// Whether new task calls are taken: not once a shutdown began.
    pub(crate) fn accepting(&self) -> bool {
        matches!(*self.state.lock(), State::Built | State::Running) && !self.intake.is_cancelled()
    }

    /// Whether a shutdown began: the work stopped at its step 3 is drained (released or
    /// failed), unlike work stopped because the last handle was dropped.
    pub(crate) fn draining(&self) -> bool {
        matches!(*self.state.lock(), State::Stopping | State::Stopped)
    }

    /// Counts one task drained at step 3.
    pub(crate) fn count_drained(&self, drained: Drained) {
        self.drained[drained as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the runtime stopped: both trackers closed and empty.
    pub(crate) fn is_stopped(&self) -> bool {
        self.loops.is_closed()
            && self.loops.is_empty()
            && self.work.is_closed()
            && self.work.is_empty()
    }

    /// A guard that stops everything when dropped (invariant 3).
    pub(crate) fn drop_guard(&self) -> Arc<DropGuard> {
        Arc::new(self.stop.clone().drop_guard())
    }

    /// The three steps of the module docs; a second call waits for the first one's end.
    pub(crate) async fn shutdown(&self, grace: Duration) -> ShutdownReport {
        {
            let mut state = self.state.lock();
            if matches!(*state, State::Built | State::Running) {
                *state = State::Stopping;
            }
        }
        // Step 1: intake.
        self.intake.cancel();
        self.loops.close();
        self.work.close();
        // Step 2: grace.
        let _ = tokio::time::timeout(grace, self.work.wait()).await;
        // Step 3: stop.
        self.stop.cancel();
        self.work.wait().await;
        self.loops.wait().await;
        *self.state.lock() = State::Stopped;
        let count = |drained: Drained| self.drained[drained as usize].load(Ordering::Relaxed);
        let report = ShutdownReport {
            abandoned: count(Drained::Stopped),
            released: count(Drained::Released),
            left: count(Drained::Left),
            failed: count(Drained::Failed),
        };
        if report.abandoned > 0 {
            tracing::info!(
                abandoned = report.abandoned,
                released = report.released,
                left = report.left,
                failed = report.failed,
                "shutdown: work still running after the grace period was stopped"
            );
        }
        report
    }
}

/// Runs `work` every `every` until `stop` is cancelled (`skip_first`: not at once, only after
/// the first period). A tick that comes while `work` runs is not made up later, and a cancel
/// during `work` ends it there: the background loops of the runtime are each one of these.
pub(crate) async fn periodic<F, Fut>(
    stop: CancellationToken,
    every: Duration,
    skip_first: bool,
    mut work: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    if skip_first {
        tick.tick().await;
    }
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            () = work() => {}
        }
    }
}
