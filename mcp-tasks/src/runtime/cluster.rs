//! Several instances on one task space: what a runtime does when its store is a
//! [`ClusterStore`] (`PostgresStore`).
//!
//! # Invariants
//!
//! 1. **Work runs under a lease.** A task's work runs on an instance only while that
//!    instance holds the task's lease: the creating instance from the create
//!    ([`NewTask::with_runner`](crate::store::NewTask::with_runner)), a claiming instance
//!    from its claim. Every write of the work is fenced with that lease (see the
//!    [runtime docs](super)); one refused as fenced stops the work, which writes nothing more.
//! 2. **Leases are renewed** every [`ClusterConfig::renewal`] while the work runs; a
//!    renewal refused (the lease lapsed and another instance took the task, or the task
//!    ended) stops the work the same way.
//! 3. **Wake-ups reach the work.** A cancel intent stored through any instance cancels the
//!    work here; answers stored through any instance are read back from the store and handed
//!    to the waiting input request. Notifications come from the store's listener; which
//!    tasks run here under which lease is this runtime's knowledge alone, so the runtime
//!    ignores wake-ups of tasks it does not run, and it re-reads the tasks it runs every
//!    [`ClusterConfig::reread_interval`] (and at once when it falls behind the
//!    notifications) to cover a lost one.
//! 4. **Takeover.** Every [`ClusterConfig::claim_interval`] an executing instance claims
//!    tasks whose lease lapsed ([`Claim::lapsed`]: one claimer per task) and
//!    applies the tool's restart policy (`runtime/recover.rs`): `resume` replays with the
//!    stored steps and answers, `fail` ends the task `failed` with a `statusMessage` saying
//!    that its server stopped. It also claims queued tasks
//!    ([`Claim::queued`]), at once when a queued wake-up arrives.
//! 5. **Expiry** runs on every instance (the reaper of [`Runtime`]); the store splits the due
//!    rows between the sweeping instances.
//! 6. **Self-fencing: one runner per task.** Each lease held here has a local deadline on
//!    this process's monotonic clock: the instant the request that granted or last renewed
//!    it was *sent*, plus the lease length (never the instant of the reply). The store set
//!    its own deadline (on the database clock) after that request arrived, so the local one
//!    is never later, and no other instance can claim the task before it. A renewal is
//!    given until the lease's *fence point*, [`ClusterConfig::fence_margin`] before the local
//!    deadline; work whose lease was not renewed by then is cancelled here, as a
//!    `tasks/cancel` cancels it, and marked as having lost its lease: it writes nothing
//!    more, not even its outcome, and no new step or input request of it starts. Then, at
//!    its *halt point*, half the margin before the local deadline, the work's future is
//!    dropped if it has not ended: the step in flight ends there, whether or not its code
//!    waits on the cancellation, and its side effects stop. Work whose lease another
//!    instance took (a renewal or write refused as fenced) is dropped at once. So the
//!    ordering is: told to stop, dropped, and only then can the lease lapse anywhere and
//!    another instance start the task; however the store became unreachable (a partition,
//!    an overloaded or restarting database), a task's code never runs on two instances at
//!    once. What a tool author must still expect: a step cut mid-way (at the fence point or
//!    dropped at the halt point) did not store its result, so the instance that takes the
//!    task over runs that step again, from its start, later and never concurrently; a step
//!    belongs to code that tolerates being cut at any await and run again (an idempotent
//!    write, or one keyed by the task id and step). The guarantee assumes this process's
//!    monotonic clock does not run slower than the database's by more than half the margin
//!    over one lease, and that this process's tokio runtime is not stalled past the halt
//!    point (a blocking step that never yields cannot be dropped: keep blocking work in
//!    `spawn_blocking`, whose thread runs to its end).
//! 7. **Winding-down work is not taken twice.** A task whose earlier work still runs here
//!    after it lost its lease (between its fence point and its halt point) is not replayed
//!    here when this instance claims it again: the claimed lease is left to lapse, and the
//!    task is taken (here or elsewhere) once that work ended or was dropped.
//! 8. **Owned loops.** The loops start with the runtime and stop with it (`lifecycle.rs`):
//!    claims at the start of a shutdown (a claim pass under way ends after its batch, and
//!    what it claimed runs under the grace period), renewals and wake-ups at its end, once
//!    no work runs here any more.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use futures::StreamExt;
use tokio::time::Instant;

use super::{
    Runtime,
    placement::Cluster,
    recover::{Cause, take},
};
use crate::{
    RecoveryReport,
    store::{Claim, StoreError},
};

pub(crate) mod config;
mod wakeups;

pub(crate) use config::random_instance_id;
pub use config::{
    ClusterConfig, DEFAULT_CLAIM_INTERVAL, DEFAULT_LEASE, DEFAULT_OWNER_BUCKET, DEFAULT_RENEWAL,
    DEFAULT_REREAD_INTERVAL,
};
use wakeups::wakeup_loop;

/// Tasks one claim takes at most; a full claim is repeated at once.
const CLAIM_BATCH: usize = 32;
/// Leases renewed at once.
const RENEW_CONCURRENCY: usize = 8;

/// Spawns the cluster loops of `runtime`, instance `instance`, on its loop tracker
/// (renewals, wake-ups and, on an executing instance, claims). Called once, by
/// [`Runtime::start`].
pub(crate) fn start(runtime: &Arc<Runtime>, instance: &Arc<Cluster>) {
    let wakeups = runtime.subscribe();
    let loops = &runtime.lifecycle.loops;
    loops.spawn(renew_loop(Arc::clone(runtime), Arc::clone(instance)));
    let margin = instance.config.fence_margin();
    loops.spawn(fence_loop(Arc::clone(runtime), margin));
    loops.spawn(wakeup_loop(
        Arc::clone(runtime),
        Arc::clone(instance),
        wakeups,
    ));
    if instance.config.execution {
        loops.spawn(claim_loop(Arc::clone(runtime), Arc::clone(instance)));
    }
}

/// Renews every lease held here, each [`ClusterConfig::renewal`], until the runtime stops.
async fn renew_loop(runtime: Arc<Runtime>, instance: Arc<Cluster>) {
    let stop = runtime.lifecycle.stop.clone();
    let every = instance.config.renewal;
    super::lifecycle::periodic(stop, every, true, || renew_all(&runtime, &instance)).await;
}

/// One renewal of every lease held here. Each is given until its fence point (invariant
/// 6): one still unanswered then is dropped, and its work stops.
async fn renew_all(runtime: &Arc<Runtime>, instance: &Cluster) {
    let cluster = &*instance.store;
    let margin = instance.config.fence_margin();
    futures::stream::iter(runtime.leases())
        .for_each_concurrent(RENEW_CONCURRENCY, |lease| async move {
            let sent = Instant::now();
            let renewal = cluster.renew(&lease);
            let answered = match lease.deadline {
                Some(deadline) => tokio::time::timeout_at(fence_point(deadline, margin), renewal)
                    .await
                    .ok(),
                None => Some(renewal.await),
            };
            let Some(answered) = answered else {
                tracing::warn!(task_id = %lease.task_id, epoch = lease.epoch,
                    "lease renewal unanswered at the lease's fence point");
                return;
            };
            match answered {
                Ok(renewed) => runtime.renewed(renewed.sent_at(sent)),
                Err(StoreError::Fenced { current, .. }) => {
                    tracing::warn!(task_id = %lease.task_id, epoch = lease.epoch, current,
                        "lease renewal refused: another instance holds the task");
                    runtime.lost_at(&lease.task_id, lease.epoch);
                }
                Err(StoreError::Terminal(_) | StoreError::NotFound) => {
                    // Ended elsewhere (expired): nothing more to write.
                    runtime.lost(&lease.task_id);
                }
                Err(error) => {
                    tracing::warn!(task_id = %lease.task_id, %error, "lease renewal failed; retrying");
                }
            }
        })
        .await;
}

/// The instant work under a lease with local deadline `deadline` is told to stop unless
/// renewed.
fn fence_point(deadline: Instant, margin: Duration) -> Instant {
    deadline.checked_sub(margin).unwrap_or(deadline)
}

/// The instant work told to stop at its fence point is dropped, if it is still running:
/// half the margin before the local deadline.
fn halt_point(deadline: Instant, margin: Duration) -> Instant {
    fence_point(deadline, margin / 2)
}

/// Stops the work whose lease reached its fence point unrenewed, and drops it at its halt
/// point (invariant 6), until the runtime stops. It wakes at the next of those points, and
/// at least every half margin (for leases granted meanwhile), so work is told to stop
/// between the margin and half the margin before its local deadline, and dropped half the
/// margin before it.
async fn fence_loop(runtime: Arc<Runtime>, margin: Duration) {
    let stop = runtime.lifecycle.stop.clone();
    let most = (margin / 2).max(Duration::from_millis(1));
    loop {
        let now = Instant::now();
        let next = runtime.fence_overdue(now, margin);
        let wake = next.map_or(now + most, |next| next.min(now + most));
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            () = tokio::time::sleep_until(wake) => {}
        }
    }
}

impl Runtime {
    /// Stops the work here whose lease reached its fence point at `now`, and drops the
    /// work that reached its halt point (invariant 6); the earliest of those points still
    /// ahead, if any.
    pub(crate) fn fence_overdue(&self, now: Instant, margin: Duration) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut overdue = Vec::new();
        for (id, live) in self.live.lock().iter() {
            let Some(deadline) = live.lease().and_then(|lease| lease.deadline) else {
                continue;
            };
            // Told to stop already (or its lease lost): dropped at its halt point, before
            // the lease can lapse anywhere, unless it ended meanwhile.
            let point = if live.fenced.load(Ordering::Acquire) {
                if live.is_halted() {
                    continue;
                }
                let point = halt_point(deadline, margin);
                if point <= now {
                    tracing::warn!(task_id = %id, "the work did not stop at its lease's fence \
                        point: dropping it before the lease can lapse");
                    live.halt();
                    continue;
                }
                point
            } else {
                let point = fence_point(deadline, margin);
                if point <= now {
                    overdue.push((Arc::clone(id), Arc::clone(live), deadline));
                    halt_point(deadline, margin)
                } else {
                    point
                }
            };
            next = Some(next.map_or(point, |next| next.min(point)));
        }
        for (id, live, deadline) in overdue {
            if !live.fenced.swap(true, Ordering::AcqRel) {
                crate::metrics::lease_lost(crate::metrics::LeaseLoss::Unrenewed);
                let left = deadline.saturating_duration_since(now);
                tracing::warn!(task_id = %id, left_ms = left.as_millis(),
                    "lease not renewed in time: the local work stops before the lease lapses, \
                     writes nothing more, and another instance takes the task over");
            }
            live.cancel.cancel();
        }
        next
    }

    /// Whether work of task `id` still runs here after it lost its lease (invariant 7).
    pub(crate) fn winding_down(&self, id: &str) -> bool {
        self.get_live(id)
            .is_some_and(|live| live.fenced.load(Ordering::Acquire))
    }
}

/// Claims lapsed and queued tasks, each [`ClusterConfig::claim_interval`], at once on a
/// queued wake-up, and when a rate-limited tool whose rate held tasks back has room again,
/// until intake stops. A pass under way is not cut short: it ends after its batch (see
/// [`claim`]).
async fn claim_loop(runtime: Arc<Runtime>, instance: Arc<Cluster>) {
    let stop = runtime.lifecycle.intake.clone();
    let mut tick = tokio::time::interval(instance.config.claim_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sampled = HashSet::new();
    let mut versions = HashSet::new();
    let mut versions_sampled: Option<Instant> = None;
    // When the soonest rate that held tasks back in the last pass has room again.
    let mut room_at: Option<Instant> = None;
    loop {
        let room = async {
            match room_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            _ = tick.tick() => {
                sample_queue(&instance, &mut sampled).await;
                if versions_sampled.is_none_or(|at| at.elapsed() >= VERSIONS_SAMPLE_INTERVAL) {
                    versions_sampled = Some(Instant::now());
                    sample_versions(&runtime, &instance, &mut versions).await;
                }
            }
            () = runtime.parking.claim_now.notified() => {}
            () = room => {}
        }
        let room_in = match pass(&runtime, &instance).await {
            Ok((_, room_in)) => room_in,
            Err(error) => {
                tracing::warn!(%error, "claiming tasks failed; retrying");
                None
            }
        };
        // A pass that claimed no queued tasks (no free slot, intake stopping) or failed
        // knows of no rate: a room still to come stays awaited.
        let now = Instant::now();
        room_at = room_in
            .map(|wait| now + wait)
            .or(room_at.filter(|at| *at > now));
    }
}

/// One claim pass: every lapsed task (woken parked ones among them), then every queued one,
/// in batches; no further batch once intake stopped (a shutdown began): what a batch claimed
/// is always taken. Work already begun goes first: a task woken by an answer is not held up
/// behind the queue's batches (nor left without a slot by them).
pub(crate) async fn claim(
    runtime: &Arc<Runtime>,
    instance: &Cluster,
) -> Result<RecoveryReport, StoreError> {
    pass(runtime, instance).await.map(|(report, _)| report)
}

/// One claim pass ([`claim`]), and how long until the soonest rate-limited tool whose rate
/// held tasks back has room again ([`Claimed::rate_room_in`](crate::store::Claimed)).
async fn pass(
    runtime: &Arc<Runtime>,
    instance: &Cluster,
) -> Result<(RecoveryReport, Option<Duration>), StoreError> {
    let mut report = RecoveryReport::default();
    let mut room_in: Option<Duration> = None;
    let cluster = &*instance.store;
    for cause in [Cause::Lapsed, Cause::Queued] {
        loop {
            if runtime.lifecycle.intake.is_cancelled() {
                return Ok((report, room_in));
            }
            // Only free slots are claimed (`max_running`): held for the batch, then handed
            // to the tasks it took (each takes its own slot as its work starts).
            let slots = runtime.capacity.hold_for_claim(CLAIM_BATCH);
            if slots == 0 {
                return Ok((report, room_in));
            }
            let sent = Instant::now();
            let (id, lease) = (&*instance.id, instance.config.lease);
            let mut claim = match cause {
                Cause::Queued => Claim::queued(id, lease, slots)
                    .with_order(instance.config.claim_order, &instance.config.weights)
                    .with_limits(&runtime.limited.limits)
                    .with_rates(&runtime.limited.rates)
                    .with_key_limits(&runtime.limited.keyed)
                    .with_key_rates(&runtime.limited.key_rates)
                    .with_priorities(instance.config.priority_aging),
                _ => Claim::lapsed(id, lease, slots),
            };
            if runtime.routing.load(Ordering::Relaxed) {
                claim = claim
                    .with_versions(&runtime.versions)
                    .with_cancel_grace(instance.config.cancel_grace());
            }
            let claimed = cluster.claim(claim).await;
            let claimed = claimed.inspect_err(|_| runtime.capacity.end_claim(slots))?;
            room_in = room_in.into_iter().chain(claimed.rate_room_in).min();
            let claimed = claimed.tasks;
            if matches!(cause, Cause::Queued) {
                for (task, _) in &claimed {
                    let bucket = instance.config.owner_buckets.of(&task.owner);
                    crate::metrics::claimed_queued(&task.id, &task.tool, &bucket);
                }
            }
            let full = claimed.len() == slots;
            let taken = take_claimed(runtime, claimed, sent, cause, &mut report).await;
            runtime.capacity.end_claim(slots);
            taken?;
            if !full {
                break;
            }
        }
    }
    Ok((report, room_in))
}

/// Starts (or fails, by the restart policy) every task of one claimed batch.
async fn take_claimed(
    runtime: &Arc<Runtime>,
    claimed: Vec<(crate::store::Recovery, crate::store::Lease)>,
    sent: Instant,
    cause: Cause,
    report: &mut RecoveryReport,
) -> Result<(), StoreError> {
    for (task, lease) in claimed {
        // The lease's local deadline counts from when the claim was sent.
        let lease = lease.sent_at(sent);
        tracing::info!(task_id = %task.id, tool = %task.tool, epoch = lease.epoch,
            ?cause, "task claimed");
        match runtime.get_live(&task.id) {
            // Its own task, whose earlier work lost the lease and still winds down here
            // (invariant 7): not replayed beside it; the lease claimed is left to lapse.
            Some(live) if live.fenced.load(Ordering::Acquire) => {
                tracing::info!(task_id = %task.id, epoch = lease.epoch,
                    "claimed task left to lapse: its earlier work still ends here");
            }
            // Its own lapsed task, whose work still runs here (it stalled past its lease, and
            // no other instance took the task meanwhile): it goes on under the new lease, not
            // twice.
            Some(live) => {
                *live.lease.lock() = Some(lease);
                report.resumed += 1;
            }
            None => take(runtime, task, Some(lease), cause, report, None).await?,
        }
    }
    Ok(())
}

/// Samples the queue depth of the cluster store by tool and owner bucket (a failed count is
/// not recorded); `sampled`: the series set by the last sample, each set to 0 when its
/// tasks are gone.
async fn sample_queue(instance: &Cluster, sampled: &mut HashSet<(String, String)>) {
    let buckets = &instance.config.owner_buckets;
    let depths = match instance.store.queue_depth(buckets.grouped()).await {
        Ok(Some(depths)) => depths,
        Ok(None) => return,
        Err(error) => {
            tracing::debug!(%error, "queue depth not counted");
            return;
        }
    };
    let mut series: HashMap<(String, String), u64> = HashMap::new();
    for depth in depths {
        let bucket = depth.owner.as_deref().map_or(
            std::borrow::Cow::Borrowed(config::DEFAULT_OWNER_BUCKET),
            |owner| buckets.of(owner),
        );
        *series.entry((depth.tool, bucket.into_owned())).or_default() += depth.tasks;
    }
    publish(sampled, series, crate::metrics::queue_depth);
}

/// Sets each gauge of a sample, `series` (by its two labels), with `set`, and to 0 each one
/// of the last sample (`sampled`) whose tasks are gone; `sampled` becomes this sample's.
fn publish(
    sampled: &mut HashSet<(String, String)>,
    series: HashMap<(String, String), u64>,
    set: fn(&str, &str, u64),
) {
    for (a, b) in sampled.iter().filter(|key| !series.contains_key(*key)) {
        set(a, b, 0);
    }
    for ((a, b), tasks) in &series {
        set(a, b, *tasks);
    }
    *sampled = series.into_keys().collect();
}

/// How often at most the unclaimed tasks are counted by version ([`sample_versions`]): at
/// each claim interval, but not more often than this (claims run every few milliseconds in
/// some deployments, and the count reads every unclaimed task).
const VERSIONS_SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// Samples the unclaimed tasks of the versions this instance does not run (`versions.rs`,
/// invariant 4); `sampled`: the series set by the last sample, each set to 0 when its tasks
/// are gone.
async fn sample_versions(
    runtime: &Runtime,
    instance: &Cluster,
    sampled: &mut HashSet<(String, String)>,
) {
    let counts = match instance.store.unclaimed_versions().await {
        Ok(Some(counts)) => counts,
        Ok(None) => return,
        Err(error) => {
            tracing::debug!(%error, "unclaimed tasks not counted by version");
            return;
        }
    };
    let series: HashMap<(String, String), u64> = counts
        .into_iter()
        .filter(|(tool, version, _)| !runtime.versions.runs(tool, version))
        .map(|(tool, version, tasks)| ((tool, version), tasks))
        .collect();
    // The claims route while such tasks wait (the filter costs each claim's scan a read of
    // every row it passes); a claim made between two samples is caught by the take.
    runtime.routing.store(!series.is_empty(), Ordering::Relaxed);
    publish(sampled, series, crate::metrics::waiting_for_version);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        runtime::{Settings, Tools},
        store::{ClusterStore, Lease, MemoryStore, Notice},
        toolkit::{StateMap, Toolkit},
    };
    use rmcp::model::InputResponses;
    use tokio_util::sync::CancellationToken;

    /// The cluster operations of a runtime over a memory store, for the wake-up loop: it
    /// reads no answers in these tests, and every operation answers `NotFound`.
    struct Unshared;

    #[async_trait::async_trait]
    impl ClusterStore for Unshared {
        async fn renew(&self, _: &Lease) -> Result<Lease, StoreError> {
            Err(StoreError::NotFound)
        }
        async fn claim(&self, _: Claim<'_>) -> Result<crate::store::Claimed, StoreError> {
            Err(StoreError::NotFound)
        }
        async fn release(&self, _: &Lease) -> Result<(), StoreError> {
            Err(StoreError::NotFound)
        }
        async fn answers(&self, _: &str) -> Result<InputResponses, StoreError> {
            Err(StoreError::NotFound)
        }
        async fn take_rate(
            &self,
            _: &str,
            _: crate::rate::Rate,
        ) -> Result<Option<Duration>, StoreError> {
            Err(StoreError::NotFound)
        }
        fn wakeups(&self) -> tokio::sync::broadcast::Receiver<Notice> {
            tokio::sync::broadcast::channel(1).1
        }
    }

    /// This instance over [`Unshared`], re-reading its tasks every `reread`.
    fn unshared(reread: Duration) -> Arc<Cluster> {
        Arc::new(Cluster {
            store: Arc::new(Unshared),
            id: Arc::from("instance-a"),
            config: ClusterConfig::default().with_reread_interval(reread),
        })
    }

    fn runtime() -> Arc<Runtime> {
        let tools = Tools {
            toolkit: Arc::new(Toolkit::default()),
            state: Arc::new(StateMap::default()),
        };
        Runtime::new(
            Arc::new(MemoryStore::new()),
            tools,
            Settings::default(),
            Arc::from("instance-a"),
            ClusterConfig::default(),
        )
    }

    /// Registers task `id` running under a lease of `length` granted by a request sent at
    /// `sent`; its cancellation token.
    fn held(
        runtime: &Arc<Runtime>,
        id: &str,
        length: Duration,
        sent: Instant,
    ) -> CancellationToken {
        let cancel = CancellationToken::new();
        let lease = Lease::granted(Arc::from(id), Arc::from("instance-a"), 1, length).sent_at(sent);
        let slot = runtime.reserve(&Arc::from("owner"));
        let (tool, first) = (Arc::from("tool"), crate::metrics::Run::First);
        runtime.register(
            Arc::from(id),
            &tool,
            first,
            cancel.clone(),
            Some(lease),
            slot,
        );
        cancel
    }

    #[test]
    fn the_fence_margin_defaults_to_a_fifth_of_the_lease_and_stays_below_it() {
        let config = ClusterConfig::default();
        assert_eq!(config.fence_margin(), Duration::from_secs(6));
        let config = config.with_lease(Duration::from_secs(3));
        assert_eq!(config.fence_margin(), Duration::from_millis(600));
        let config = config.with_fence_margin(Duration::from_secs(10));
        assert!(config.fence_margin() < config.lease());
    }

    #[test]
    fn the_local_deadline_counts_from_when_the_request_was_sent() {
        let sent = Instant::now();
        let lease =
            Lease::granted(Arc::from("t"), Arc::from("i"), 3, Duration::from_secs(3)).sent_at(sent);
        assert_eq!(lease.deadline, Some(sent + Duration::from_secs(3)));
    }

    #[tokio::test(start_paused = true)]
    async fn unrenewed_work_stops_at_its_fence_point_and_not_before() {
        let runtime = runtime();
        let margin = Duration::from_millis(600);
        let start = Instant::now();
        let cancel = held(&runtime, "t1", Duration::from_secs(3), start);
        let later = held(
            &runtime,
            "t2",
            Duration::from_secs(3),
            start + Duration::from_secs(1),
        );

        // Before the fence point of either: nothing stops; the next point is t1's.
        let next = runtime.fence_overdue(start + Duration::from_millis(2399), margin);
        assert_eq!(next, Some(start + Duration::from_millis(2400)));
        assert!(!cancel.is_cancelled() && !runtime.winding_down("t1"));
        assert!(runtime.runs("t1"));

        // At t1's fence point (600 ms before its deadline): t1 stops, t2 goes on.
        let next = runtime.fence_overdue(start + Duration::from_millis(2400), margin);
        assert!(cancel.is_cancelled(), "the work is cancelled");
        assert!(runtime.winding_down("t1"), "and writes nothing more");
        assert!(!runtime.runs("t1"));
        assert!(
            !runtime.leases().iter().any(|l| &*l.task_id == "t1"),
            "and is no longer renewed"
        );
        assert!(!later.is_cancelled());
        // Next: t1's halt point, half the margin before its deadline.
        assert_eq!(next, Some(start + Duration::from_millis(2700)));
        let live = runtime.get_live("t1").unwrap();
        assert!(!live.is_halted(), "told to stop, not dropped yet");

        // At t1's halt point its work is dropped; then t2's fence point is next.
        let next = runtime.fence_overdue(start + Duration::from_millis(2700), margin);
        assert!(live.is_halted(), "dropped before the lease can lapse");
        assert_eq!(next, Some(start + Duration::from_millis(3400)));
    }

    /// A lease taken by another instance (a write or renewal refused as fenced): the work
    /// is dropped at once, not at its halt point; a refusal under an older epoch than the
    /// one the work holds now changes nothing.
    #[tokio::test(start_paused = true)]
    async fn work_whose_lease_was_taken_is_dropped_at_once() {
        let runtime = runtime();
        let cancel = held(&runtime, "t1", Duration::from_secs(30), Instant::now());
        let live = runtime.get_live("t1").unwrap();
        runtime.lost_at("t1", 0);
        assert!(
            !cancel.is_cancelled() && !live.is_halted(),
            "an older epoch"
        );
        runtime.lost_at("t1", 1);
        assert!(cancel.is_cancelled(), "told to stop");
        assert!(live.is_halted(), "and dropped at once");
    }

    /// A step that does not wait on its cancellation (a plain sleep, then a side effect)
    /// is dropped before its lease can lapse: its side effect never happens here, and the
    /// task is forgotten, so that the instance that takes it over is its only runner.
    #[tokio::test(start_paused = true)]
    async fn work_that_ignores_its_cancellation_is_dropped_before_the_lease_lapses() {
        use std::sync::atomic::AtomicBool;
        let runtime = runtime();
        let start = Instant::now();
        let lease = Duration::from_secs(3);
        let cancel = held(&runtime, "t1", lease, start);
        let effect = Arc::new(AtomicBool::new(false));
        let work = {
            let effect = Arc::clone(&effect);
            async move {
                tokio::time::sleep(Duration::from_secs(10)).await;
                effect.store(true, Ordering::SeqCst);
                crate::runtime::Ended::Cancelled
            }
        };
        runtime.spawn(
            Arc::from("t1"),
            Arc::from("tool"),
            tracing::Span::none(),
            work,
        );
        let stop = runtime.lifecycle.stop.clone();
        let watchdog = tokio::spawn(fence_loop(Arc::clone(&runtime), Duration::from_millis(600)));
        cancel.cancelled().await;
        while runtime.live_count() > 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let dropped = Instant::now() - start;
        assert!(
            dropped >= Duration::from_millis(2700) && dropped < lease,
            "dropped {dropped:?} after the grant, for a lease of 3 s and a margin of 600 ms"
        );
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(
            !effect.load(Ordering::SeqCst),
            "the side effect never happens here"
        );
        stop.cancel();
        watchdog.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_moves_the_fence_point() {
        let runtime = runtime();
        let margin = Duration::from_millis(600);
        let start = Instant::now();
        let cancel = held(&runtime, "t1", Duration::from_secs(3), start);
        let renewed = Lease::granted(
            Arc::from("t1"),
            Arc::from("instance-a"),
            1,
            Duration::from_secs(3),
        )
        .sent_at(start + Duration::from_secs(1));
        runtime.renewed(renewed);
        assert_eq!(
            runtime.fence_overdue(start + Duration::from_millis(2400), margin),
            Some(start + Duration::from_millis(3400))
        );
        assert!(!cancel.is_cancelled());
    }

    /// Wake-ups missed (the broadcast buffer overflowed under a storm): the loop re-reads
    /// every task running here at once, long before its next periodic re-read, and the
    /// cancel whose notification was lost reaches the work.
    #[tokio::test]
    async fn missed_wakeups_reread_every_task_running_here() {
        use crate::store::NewTask;
        let runtime = runtime();
        let id: Arc<str> = Arc::from("t-cancelled");
        runtime
            .store
            .create(NewTask::new(
                id.clone(),
                Arc::from("owner"),
                Arc::from("tool"),
            ))
            .await
            .unwrap();
        let cancel = held(&runtime, &id, Duration::from_secs(30), Instant::now());
        runtime.store.request_cancel(&id).await.unwrap();
        // A buffer of one, and a storm of wake-ups for other tasks: the receiver lags, and
        // the cancel's own wake-up never arrives.
        let (sender, receiver) = tokio::sync::broadcast::channel(1);
        for n in 0..16 {
            sender
                .send(Notice::Answers {
                    task_id: Arc::from(format!("other-{n}")),
                    seq: 1,
                })
                .unwrap();
        }
        let stop = runtime.lifecycle.stop.clone();
        let reread = Duration::from_secs(3600);
        let wakeups = tokio::spawn(wakeup_loop(
            Arc::clone(&runtime),
            unshared(reread),
            receiver,
        ));
        tokio::time::timeout(Duration::from_secs(5), cancel.cancelled())
            .await
            .expect("the missed cancel reached the work");
        stop.cancel();
        wakeups.await.unwrap();
        drop(sender);
    }

    /// A cancel notice is a hint: the work stops when the row holds a cancel intent, not on
    /// a notice alone.
    #[tokio::test]
    async fn a_cancel_notice_stops_the_work_only_when_the_row_says_so() {
        use crate::store::NewTask;
        let runtime = runtime();
        let id: Arc<str> = Arc::from("t");
        let task = NewTask::new(id.clone(), Arc::from("owner"), Arc::from("tool"));
        runtime.store.create(task).await.unwrap();
        let cancel = held(&runtime, &id, Duration::from_secs(30), Instant::now());
        let (sender, receiver) = tokio::sync::broadcast::channel(16);
        let stop = runtime.lifecycle.stop.clone();
        let reread = Duration::from_secs(3600);
        let wakeups = tokio::spawn(wakeup_loop(runtime.clone(), unshared(reread), receiver));
        sender.send(Notice::Cancel(id.clone())).unwrap();
        let forged = tokio::time::timeout(Duration::from_millis(300), cancel.cancelled());
        assert!(
            forged.await.is_err(),
            "no cancel intent stored: the work goes on"
        );
        runtime.store.request_cancel(&id).await.unwrap();
        sender.send(Notice::Cancel(id.clone())).unwrap();
        tokio::time::timeout(Duration::from_secs(5), cancel.cancelled())
            .await
            .expect("the stored cancel reached the work");
        stop.cancel();
        wakeups.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn the_fence_loop_stops_the_work_in_time() {
        let runtime = runtime();
        let start = Instant::now();
        let cancel = held(&runtime, "t1", Duration::from_secs(3), start);
        let stop = runtime.lifecycle.stop.clone();
        let watchdog = tokio::spawn(fence_loop(Arc::clone(&runtime), Duration::from_millis(600)));
        cancel.cancelled().await;
        let at = Instant::now() - start;
        assert!(
            at >= Duration::from_millis(2400) && at <= Duration::from_millis(2700),
            "stopped {at:?} after the grant, for a lease of 3 s and a margin of 600 ms"
        );
        stop.cancel();
        watchdog.await.unwrap();
    }
}
