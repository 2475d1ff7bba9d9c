//! Metrics for operators, through the `metrics` facade: the user installs the
//! recorder (the exporter) of their choice; until one is installed every recording is a
//! no-op. With the feature `prometheus`, [`install_prometheus`] installs the Prometheus
//! recorder of `metrics-exporter-prometheus` (no HTTP listener of its own) and
//! [`prometheus_router`] serves its scrape page as an axum route to mount.
//!
//! Install the recorder before the engine is built: what is recorded before it is lost
//! (the gauges start from what happens after it). Building an engine registers every
//! metric at 0 (its task tools' series too), so a new server's scrape page shows each one.
//!
//! Every name follows the Prometheus conventions (`_total` counters, `_seconds`
//! histograms, base units); no label takes unbounded values (no task ids, no owners): `tool`
//! is one of the registered tools, `status` one of `completed`, `failed`, `cancelled`,
//! `operation` one of the store's methods, `code` one of the JSON-RPC codes this crate
//! answers with.
//!
//! The names, types, labels and meanings are in one table, in
//! [the operating guide](crate::guide::operating) ("Metrics"); the constants below are
//! the names.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use ::metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge};
use rmcp::model::TaskStatus;
use tokio::sync::broadcast::error::RecvError;

use crate::store::Notice;

#[cfg(feature = "prometheus")]
mod prometheus;
mod store;

#[cfg(feature = "prometheus")]
pub use prometheus::{PrometheusHandle, install_prometheus, prometheus_router};
pub(crate) use store::timed;

/// `mcp_tasks_tasks_created_total`.
pub const TASKS_CREATED: &str = "mcp_tasks_tasks_created_total";
/// `mcp_tasks_tasks_finished_total`.
pub const TASKS_FINISHED: &str = "mcp_tasks_tasks_finished_total";
/// `mcp_tasks_tasks_expired_total`.
pub const TASKS_EXPIRED: &str = "mcp_tasks_tasks_expired_total";
/// `mcp_tasks_tasks_running`.
pub const TASKS_RUNNING: &str = "mcp_tasks_tasks_running";
/// `mcp_tasks_tasks_input_required`.
pub const TASKS_INPUT_REQUIRED: &str = "mcp_tasks_tasks_input_required";
/// `mcp_tasks_task_duration_seconds`.
pub const TASK_DURATION: &str = "mcp_tasks_task_duration_seconds";
/// `mcp_tasks_task_first_status_seconds`.
pub const TASK_FIRST_STATUS: &str = "mcp_tasks_task_first_status_seconds";
/// `mcp_tasks_store_operation_seconds`.
pub const STORE_OPERATION: &str = "mcp_tasks_store_operation_seconds";
/// `mcp_tasks_queue_depth`.
pub const QUEUE_DEPTH: &str = "mcp_tasks_queue_depth";
/// `mcp_tasks_claim_lag_seconds`.
pub const CLAIM_LAG: &str = "mcp_tasks_claim_lag_seconds";
/// `mcp_tasks_leases_lost_total`.
pub const LEASES_LOST: &str = "mcp_tasks_leases_lost_total";
/// `mcp_tasks_fenced_writes_total`.
pub const FENCED_WRITES: &str = "mcp_tasks_fenced_writes_total";
/// `mcp_tasks_wakeups_received_total`.
pub const WAKEUPS_RECEIVED: &str = "mcp_tasks_wakeups_received_total";
/// `mcp_tasks_wakeups_missed_total`.
pub const WAKEUPS_MISSED: &str = "mcp_tasks_wakeups_missed_total";
/// `mcp_tasks_requests_refused_total`.
pub const REQUESTS_REFUSED: &str = "mcp_tasks_requests_refused_total";
/// Counter: tasks parked (their work dropped while they wait for an answer or a timer).
pub const TASKS_PARKED: &str = "mcp_tasks_tasks_parked_total";
/// Counter: attempts of retried steps that failed and are tried again, by tool.
pub const STEP_RETRIES: &str = "mcp_tasks_step_retries_total";
/// Counter: parked tasks woken and run again, by this instance.
pub const TASKS_WOKEN: &str = "mcp_tasks_tasks_woken_total";
/// Gauge: tasks parked in the task space (the store's count, sampled).
pub const PARKED_TASKS: &str = "mcp_tasks_parked_tasks";
/// Gauge: tasks of a tool's version this instance does not run, waiting for an instance
/// that does (`tool`, `version`; sampled).
pub const TASKS_WAITING_FOR_VERSION: &str = "mcp_tasks_tasks_waiting_for_version";
/// Histogram: how late durable timers fire, in seconds.
pub const TIMER_LAG: &str = "mcp_tasks_timer_lag_seconds";
/// Counter: changes the listen streams' dispatcher missed because it fell behind the change
/// feed (each time, it reads every task it follows again).
pub const PUSH_CHANGES_MISSED: &str = "mcp_tasks_push_changes_missed_total";

/// The histograms, each with its unit (all in seconds).
pub const HISTOGRAMS: [&str; 5] = [
    TASK_DURATION,
    TASK_FIRST_STATUS,
    STORE_OPERATION,
    CLAIM_LAG,
    TIMER_LAG,
];

/// Describes every metric of this crate to the installed recorder (its `# HELP` lines in
/// Prometheus). [`install_prometheus`] calls it; call it after installing another
/// recorder.
pub fn describe() {
    describe_counter!(TASKS_CREATED, "Tasks created, by tool.");
    describe_counter!(
        TASKS_FINISHED,
        "Task outcomes stored by this process, by tool and final status."
    );
    describe_counter!(
        TASKS_EXPIRED,
        "Tasks this process's expiry sweep ended at the end of their TTL."
    );
    describe_gauge!(
        TASKS_RUNNING,
        "Tasks whose work runs in this process, by tool."
    );
    describe_gauge!(
        TASKS_INPUT_REQUIRED,
        "Tasks running here that wait for an answer to an input request, by tool."
    );
    describe_histogram!(
        TASK_DURATION,
        Unit::Seconds,
        "From a task's creation to its stored outcome, by tool and final status."
    );
    describe_histogram!(
        TASK_FIRST_STATUS,
        Unit::Seconds,
        "From a task's creation to the first change its work makes visible, by tool."
    );
    describe_histogram!(
        STORE_OPERATION,
        Unit::Seconds,
        "Latency of task store calls, by operation."
    );
    describe_gauge!(
        QUEUE_DEPTH,
        "Queued tasks not yet claimed (cluster mode), or held back by their tool's limit (one process)."
    );
    describe_histogram!(
        CLAIM_LAG,
        Unit::Seconds,
        "From a queued (or held back) task's creation to its claim (or start), by tool."
    );
    describe_counter!(
        LEASES_LOST,
        "Leases this instance lost, by reason (cluster mode)."
    );
    describe_counter!(
        FENCED_WRITES,
        "Writes of running work refused because the lease was lost (cluster mode)."
    );
    describe_counter!(
        WAKEUPS_RECEIVED,
        "Wake-ups received from the store, by kind (cluster mode)."
    );
    describe_counter!(WAKEUPS_MISSED, "Wake-ups missed (cluster mode).");
    describe_counter!(
        PUSH_CHANGES_MISSED,
        "Task changes the listen streams' dispatcher fell behind on (it then reads every followed task again)."
    );
    describe_counter!(
        REQUESTS_REFUSED,
        "Requests the request guard refused, by JSON-RPC error code."
    );
    describe_counter!(
        TASKS_PARKED,
        "Tasks parked: their work dropped while they wait for an answer or a timer."
    );
    describe_counter!(TASKS_WOKEN, "Parked tasks woken and run again here.");
    describe_gauge!(
        PARKED_TASKS,
        "Tasks parked in the task space (live, their work dropped while they wait), as last sampled from the store."
    );
    describe_gauge!(
        TASKS_WAITING_FOR_VERSION,
        "Unfinished tasks recorded by a version of their tool this instance does not run, waiting for an instance that runs it, by tool and version (sampled)."
    );
    describe_histogram!(
        TIMER_LAG,
        Unit::Seconds,
        "How late a durable timer (a sleep, a retry's wait) went off: from its deadline to the task's wake-up or the end of its sleep."
    );
    describe_counter!(
        STEP_RETRIES,
        "Failed attempts of retried steps (TaskContext::retry_step) that are tried again, by tool."
    );
}

/// The JSON-RPC codes the request guard refuses with (`code` of [`REQUESTS_REFUSED`]): parse
/// error, invalid request, invalid params, and the tasks extension not declared.
const REFUSAL_CODES: [i32; 4] = [-32700, -32600, -32602, -32021];

/// The `operation` labels of [`STORE_OPERATION`]: the methods the timed store wraps.
const STORE_OPERATIONS: [&str; 25] = [
    "create",
    "get",
    "get_many",
    "set_status_message",
    "request_input",
    "deliver_input",
    "finish",
    "request_cancel",
    "save_step",
    "recoverable",
    "stored_answers",
    "expire_due",
    "renew",
    "claim_lapsed",
    "claim_queued",
    "release",
    "answers",
    "queue_depth",
    "unclaimed_versions",
    "take_rate",
    "park",
    "wake",
    "next_wake",
    "parked_owners",
    "parked_count",
];

/// Registers every metric of this crate at zero (a histogram by taking its handle; an engine's task tools, every status,
/// reason, kind, code and store operation), so that a new server's scrape shows each family
/// (dashboards and alerts read 0, not "no data"). Adding zero leaves what was recorded, so a
/// second engine changes nothing.
pub(crate) fn register(toolkit: &crate::Toolkit) {
    for definition in toolkit.definitions() {
        if definition.mode() == crate::Mode::Inline {
            continue;
        }
        let tool = || definition.name().to_owned();
        counter!(TASKS_CREATED, "tool" => tool()).increment(0);
        for status in ["completed", "failed", "cancelled"] {
            counter!(TASKS_FINISHED, "tool" => tool(), "status" => status).increment(0);
            drop(::metrics::histogram!(TASK_DURATION, "tool" => tool(), "status" => status));
        }
        gauge!(TASKS_RUNNING, "tool" => tool()).increment(0.0);
        // The queue's series of the default owner bucket (owner buckets of the application's
        // own appear with their first sample).
        let bucket = crate::cluster::DEFAULT_OWNER_BUCKET;
        gauge!(QUEUE_DEPTH, "tool" => tool(), "owner_bucket" => bucket).increment(0.0);
        drop(::metrics::histogram!(CLAIM_LAG, "tool" => tool(), "owner_bucket" => bucket));
        gauge!(TASKS_INPUT_REQUIRED, "tool" => tool()).increment(0.0);
        drop(::metrics::histogram!(TASK_FIRST_STATUS, "tool" => tool()));
        counter!(STEP_RETRIES, "tool" => tool()).increment(0);
        let version = definition.version().to_owned();
        gauge!(TASKS_WAITING_FOR_VERSION, "tool" => tool(), "version" => version).increment(0.0);
    }
    counter!(TASKS_EXPIRED).increment(0);
    for operation in STORE_OPERATIONS {
        drop(::metrics::histogram!(STORE_OPERATION, "operation" => operation));
    }
    gauge!(PARKED_TASKS).increment(0.0);
    drop(::metrics::histogram!(TIMER_LAG));
    for reason in ["refused", "unrenewed"] {
        counter!(LEASES_LOST, "reason" => reason).increment(0);
    }
    counter!(FENCED_WRITES).increment(0);
    for kind in ["cancel", "answers", "queued", "changed"] {
        counter!(WAKEUPS_RECEIVED, "kind" => kind).increment(0);
    }
    counter!(WAKEUPS_MISSED).increment(0);
    counter!(PUSH_CHANGES_MISSED).increment(0);
    counter!(TASKS_PARKED).increment(0);
    counter!(TASKS_WOKEN).increment(0);
    for code in REFUSAL_CODES {
        counter!(REQUESTS_REFUSED, "code" => code.to_string()).increment(0);
    }
}

/// Seconds from the creation time in task id `id` (its millisecond prefix) to now, on this
/// machine's clock; `None` for an id without one.
fn age(id: &str) -> Option<f64> {
    let ms = crate::clock::system_now_ms().saturating_sub(crate::id::created_ms(id)?);
    Some(std::time::Duration::from_millis(ms).as_secs_f64())
}

pub(crate) fn task_created(tool: &Arc<str>) {
    counter!(TASKS_CREATED, "tool" => Arc::clone(tool)).increment(1);
}

/// The outcome of task `id` of `tool` was stored with final `status`.
pub(crate) fn task_finished(id: &str, tool: &Arc<str>, status: TaskStatus) {
    let status = crate::store::admin::status_word(status);
    counter!(TASKS_FINISHED, "tool" => Arc::clone(tool), "status" => status).increment(1);
    if let Some(age) = age(id) {
        ::metrics::histogram!(TASK_DURATION, "tool" => Arc::clone(tool), "status" => status)
            .record(age);
    }
}

pub(crate) fn tasks_expired(n: u64) {
    counter!(TASKS_EXPIRED).increment(n);
}

/// Which run of a task's work a live registration is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Run {
    /// The first, started by the creating call.
    First,
    /// A replay or a claim (after a restart or a takeover).
    Again,
}

/// The gauges of one task's live work: it counts in `mcp_tasks_tasks_running` from its
/// registration until it is dropped, and in `mcp_tasks_tasks_input_required` while it says
/// it waits. Tied to the runtime's registry entry, so the gauges follow the registry (no
/// increment without its decrement).
pub(crate) struct Live {
    tool: Arc<str>,
    waiting: AtomicBool,
    /// The first visible change is still to come (first runs only).
    first_pending: AtomicBool,
    /// Its expiry was counted (the sweep and a read may both see it).
    expired: AtomicBool,
}

impl Live {
    /// The live work of a task of `tool`, counted as running.
    pub(crate) fn new(tool: &Arc<str>, run: Run) -> Self {
        gauge!(TASKS_RUNNING, "tool" => Arc::clone(tool)).increment(1.0);
        Self {
            tool: Arc::clone(tool),
            waiting: AtomicBool::new(false),
            first_pending: AtomicBool::new(run == Run::First),
            expired: AtomicBool::new(false),
        }
    }

    /// The work waits (or no longer waits) for at least one answer.
    pub(crate) fn set_waiting(&self, waiting: bool) {
        if self.waiting.swap(waiting, Ordering::AcqRel) != waiting {
            let gauge = gauge!(TASKS_INPUT_REQUIRED, "tool" => Arc::clone(&self.tool));
            gauge.increment(if waiting { 1.0 } else { -1.0 });
        }
    }

    /// The work of task `id` made a change visible; the first one of a first run is timed.
    pub(crate) fn visible(&self, id: &str) {
        if self.first_pending.load(Ordering::Relaxed)
            && self.first_pending.swap(false, Ordering::AcqRel)
            && let Some(age) = age(id)
        {
            ::metrics::histogram!(TASK_FIRST_STATUS, "tool" => Arc::clone(&self.tool)).record(age);
        }
    }

    /// The task expired (`None`: the sweep says so), or was read ended (`Some`: counted
    /// when that is its expiry), while its work ran here; counted once.
    pub(crate) fn expired(&self, read: Option<&crate::store::TaskSnapshot>) {
        let expiry = read.is_none_or(|task| {
            task.status == TaskStatus::Failed
                && task.status_message.as_deref() == Some(crate::store::record::EXPIRED_MESSAGE)
        });
        if expiry && !self.expired.swap(true, Ordering::AcqRel) {
            tasks_expired(1);
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.set_waiting(false);
        gauge!(TASKS_RUNNING, "tool" => Arc::clone(&self.tool)).decrement(1.0);
    }
}

/// The number of queued tasks of `tool` and owners of `bucket` not yet claimed, as sampled
/// now.
pub(crate) fn queue_depth(tool: &str, bucket: &str, depth: u64) {
    gauge!(QUEUE_DEPTH, "tool" => tool.to_owned(), "owner_bucket" => bucket.to_owned())
        .set(depth as f64);
}

/// A queued task `id` of `tool`, owned by an owner of `bucket`, was claimed.
pub(crate) fn claimed_queued(id: &str, tool: &str, bucket: &str) {
    if let Some(age) = age(id) {
        ::metrics::histogram!(CLAIM_LAG, "tool" => tool.to_owned(), "owner_bucket" => bucket.to_owned())
            .record(age);
    }
}

/// Why a lease was lost.
#[derive(Clone, Copy)]
pub(crate) enum LeaseLoss {
    /// A write or renewal was refused: another instance holds the task (or it ended).
    Refused,
    /// It was not renewed by its fence point.
    Unrenewed,
}

/// A lease held here was lost.
pub(crate) fn lease_lost(reason: LeaseLoss) {
    let reason = match reason {
        LeaseLoss::Refused => "refused",
        LeaseLoss::Unrenewed => "unrenewed",
    };
    counter!(LEASES_LOST, "reason" => reason).increment(1);
}

/// A task was parked here.
pub(crate) fn parked() {
    counter!(TASKS_PARKED).increment(1);
}

/// A failed attempt of a retried step of `tool` is tried again.
pub(crate) fn step_retried(tool: &str) {
    counter!(STEP_RETRIES, "tool" => tool.to_owned()).increment(1);
}

/// A parked task was woken and runs again here; `timer_ms`: the instant of the timer that
/// woke it, if its timer did.
pub(crate) fn woken(timer_ms: Option<u64>) {
    counter!(TASKS_WOKEN).increment(1);
    if let Some(timer_ms) = timer_ms {
        timer_fired(timer_ms);
    }
}

/// A durable timer set for `deadline_ms` (epoch milliseconds) went off now.
pub(crate) fn timer_fired(deadline_ms: u64) {
    let late = crate::clock::system_now_ms().saturating_sub(deadline_ms);
    ::metrics::histogram!(TIMER_LAG).record(late as f64 / 1000.0);
}

/// The number of tasks parked in the task space, as sampled now.
pub(crate) fn parked_tasks(count: u64) {
    gauge!(PARKED_TASKS).set(count as f64);
}

/// The number of unfinished tasks of `tool` recorded by `version` (one this instance does
/// not run), as counted now.
pub(crate) fn waiting_for_version(tool: &str, version: &str, count: u64) {
    gauge!(TASKS_WAITING_FOR_VERSION, "tool" => tool.to_owned(), "version" => version.to_owned())
        .set(count as f64);
}

/// The listen streams' dispatcher fell `n` changes behind the runtime's change feed.
#[cfg(any(feature = "http", feature = "stdio"))]
pub(crate) fn push_changes_missed(n: u64) {
    counter!(PUSH_CHANGES_MISSED).increment(n);
}

/// A wake-up (or a failure to receive one) came from the store's feed: counted by its
/// kind, or as missed.
pub(crate) fn received(received: &Result<Notice, RecvError>) {
    let kind = match received {
        Ok(Notice::Cancel(_)) => "cancel",
        Ok(Notice::Answers { .. }) => "answers",
        Ok(Notice::Queued(_)) => "queued",
        Ok(Notice::Changed(_)) => "changed",
        Ok(Notice::Missed) => return counter!(WAKEUPS_MISSED).increment(1),
        Err(RecvError::Lagged(missed)) => return counter!(WAKEUPS_MISSED).increment(*missed),
        Err(RecvError::Closed) => return,
    };
    counter!(WAKEUPS_RECEIVED, "kind" => kind).increment(1);
}

/// The request guard refused a request with JSON-RPC error `code`.
#[cfg(any(feature = "http", feature = "stdio"))]
pub(crate) fn request_refused(code: i32) {
    counter!(REQUESTS_REFUSED, "code" => code.to_string()).increment(1);
}
