//! Quotas and slots: the live tasks of each owner, and how many tasks' work may run here at
//! once.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use parking_lot::Mutex;

use crate::{
    LimitKey,
    rate::{LocalRates, Rate},
};

use rmcp::model::ErrorData;

/// One live task of an owner, counted against the owner's quota until dropped.
pub(crate) struct OwnerSlot {
    pub(super) owner: Arc<str>,
    pub(super) owners: Arc<Mutex<HashMap<Arc<str>, usize>>>,
    /// The task's slot of this instance's [`Capacity`].
    pub(super) running: Option<RunSlot>,
    /// Whether dropping it gives the owner's count back (not once [`OwnerSlot::hold`] kept
    /// it).
    pub(super) counted: bool,
}

impl OwnerSlot {
    /// Gives back the running slot and keeps the owner's count (the task parked): the owner,
    /// whose count [`unhold`] gives back later.
    pub(super) fn hold(mut self) -> Arc<str> {
        self.counted = false;
        self.running = None;
        Arc::clone(&self.owner)
    }
}

/// Gives back one count of `owner`, kept by [`OwnerSlot::hold`].
pub(super) fn unhold(owners: &Mutex<HashMap<Arc<str>, usize>>, owner: &str) {
    let mut owners = owners.lock();
    if let Some(count) = owners.get_mut(owner) {
        *count -= 1;
        if *count == 0 {
            owners.remove(owner);
        }
    }
}

/// How many tasks' work may run here at once ([`Settings::max_running`](super::Settings::max_running)), and how many
/// slots are taken: by the work of every task that runs here (from before its work starts
/// to its end), and for a moment by a claim about to take tasks.
pub(crate) struct Capacity {
    max: Option<usize>,
    taken: AtomicUsize,
    /// Of `taken`, the slots that claims in flight hold ([`Capacity::hold_for_claim`]).
    claiming: AtomicUsize,
    /// Told when a claim gives its slots back: a call that found every slot taken while a
    /// claim held some tries again.
    claim_ended: tokio::sync::Notify,
}

/// How long a call waits for the claims in flight to give their slots back before it is
/// refused at `max_running`: a claim takes milliseconds.
const CLAIM_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Capacity {
    pub(super) fn new(max: Option<usize>) -> Arc<Self> {
        Arc::new(Self {
            max: max.map(|max| max.max(1)),
            taken: AtomicUsize::new(0),
            claiming: AtomicUsize::new(0),
            claim_ended: tokio::sync::Notify::new(),
        })
    }

    /// Takes one slot when one is free.
    fn take_free(self: &Arc<Self>) -> Option<RunSlot> {
        (self.take_up_to(1) == 1).then(|| RunSlot(Arc::clone(self)))
    }

    /// Takes one slot, counted even over the limit (a task a restarted server takes back, or
    /// one a claim took with the slots it held).
    pub(super) fn take_over(self: &Arc<Self>) -> RunSlot {
        if self.max.is_some() {
            self.taken.fetch_add(1, Ordering::AcqRel);
        }
        RunSlot(Arc::clone(self))
    }

    /// Takes one free slot; when every slot is taken while a claim holds some, waits (up to
    /// [`CLAIM_WAIT`]) for the claims to give theirs back and tries again, so a call is not
    /// refused for slots a claim held for a moment.
    pub(super) async fn take_waiting(self: &Arc<Self>) -> Option<RunSlot> {
        // The usual case: a free slot, and no waiter registered.
        if let Some(slot) = self.take_free() {
            return Some(slot);
        }
        let deadline = tokio::time::Instant::now() + CLAIM_WAIT;
        loop {
            let ended = self.claim_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if let Some(slot) = self.take_free() {
                return Some(slot);
            }
            if self.claiming.load(Ordering::Acquire) == 0 {
                return None;
            }
            tokio::time::timeout_at(deadline, ended).await.ok()?;
        }
    }

    /// Takes up to `wanted` free slots for a claim about to take tasks; how many it took.
    /// Give them back with [`Capacity::end_claim`].
    pub(crate) fn hold_for_claim(&self, wanted: usize) -> usize {
        let n = self.take_up_to(wanted);
        if self.max.is_some() {
            self.claiming.fetch_add(n, Ordering::AcqRel);
        }
        n
    }

    /// Gives back the `n` slots of [`Capacity::hold_for_claim`], and tells the calls that
    /// wait for them.
    pub(crate) fn end_claim(&self, n: usize) {
        if self.max.is_some() {
            self.claiming.fetch_sub(n, Ordering::AcqRel);
            self.give(n);
            self.claim_ended.notify_waiters();
        }
    }

    /// Takes up to `wanted` free slots at once; how many it took (`wanted` when there is
    /// no limit, counting nothing). Give them back with [`Capacity::give`].
    fn take_up_to(&self, wanted: usize) -> usize {
        let Some(max) = self.max else {
            return wanted;
        };
        let mut current = self.taken.load(Ordering::Acquire);
        loop {
            let n = wanted.min(max.saturating_sub(current));
            if n == 0 {
                return 0;
            }
            match self.taken.compare_exchange(
                current,
                current + n,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return n,
                Err(now) => current = now,
            }
        }
    }

    /// Gives back `n` slots taken by [`Capacity::take_up_to`].
    fn give(&self, n: usize) {
        if n > 0 && self.max.is_some() {
            self.taken.fetch_sub(n, Ordering::AcqRel);
        }
    }

    /// The limit.
    pub(crate) fn max(&self) -> Option<usize> {
        self.max
    }
}

/// One taken slot of a [`Capacity`], given back when dropped.
pub(super) struct RunSlot(Arc<Capacity>);

impl Drop for RunSlot {
    fn drop(&mut self) {
        self.0.give(1);
    }
}

impl Drop for OwnerSlot {
    fn drop(&mut self) {
        if self.counted {
            unhold(&self.owners, &self.owner);
        }
    }
}

/// `-32603` for a task call refused because this instance runs its limit of tasks: retry
/// later, or on another instance.
pub(super) fn at_capacity(max: usize) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "this server instance already runs its limit of {max} tasks at once (max_running); \
             retry later or on another instance"
        ),
        Some(serde_json::json!({ "retryable": true })),
    )
}

/// The tools with a concurrency, per-key concurrency or rate limit of their own
/// ([`ToolDefinition::with_concurrency`](crate::ToolDefinition::with_concurrency),
/// [`ToolDefinition::with_key_concurrency`](crate::ToolDefinition::with_key_concurrency),
/// [`ToolDefinition::with_rate`](crate::ToolDefinition::with_rate)): over a shared store,
/// the claims count their running tasks (by key too) and their starts across the cluster;
/// over a single-process store, each has a gate here (permits, permits by key, and a window
/// of starts).
#[derive(Default)]
pub(crate) struct ToolLimits {
    /// `(tool, limit)` of the concurrency limits, sorted by tool.
    pub(crate) limits: Vec<(Arc<str>, u32)>,
    /// `(tool, rate)` of the rate limits, sorted by tool.
    pub(crate) rates: Vec<(Arc<str>, Rate)>,
    /// `(tool, limit)` of the per-key concurrency limits, sorted by tool.
    pub(crate) keyed: Vec<(Arc<str>, u32)>,
    /// `(tool, rate)` of the per-key rate limits, sorted by tool.
    pub(crate) key_rates: Vec<(Arc<str>, Rate)>,
    gates: HashMap<Arc<str>, Gate>,
    /// The windows of starts in this process: the gates' and the step limiters'.
    pub(crate) local: Arc<LocalRates>,
}

/// What one limited tool's work waits for here.
struct Gate {
    permits: Option<Arc<tokio::sync::Semaphore>>,
    /// The tool's rate, and its key in [`ToolLimits::local`].
    rate: Option<(Rate, Arc<str>)>,
    /// What the tool's per-key limits count by.
    key: Option<LimitKey>,
    /// The permits of each key (the tool's per-key concurrency limit).
    key_permits: Option<Arc<KeyPermits>>,
    /// The tool's per-key rate, and the start of its keys in [`ToolLimits::local`].
    key_rate: Option<(Rate, Arc<str>)>,
}

/// The permits of each key of one tool's per-key concurrency limit, in this process: a key
/// has an entry (its permits, and how many tasks run or wait under it) while a task of it
/// runs or waits.
struct KeyPermits {
    limit: usize,
    keys: Mutex<HashMap<String, (Arc<tokio::sync::Semaphore>, usize)>>,
}

/// A task's place under one key: counted in the key's entry from before it waits to its
/// drop (a task dropped while it waits included), which removes the entry with the last.
struct KeyPermit {
    permits: Arc<KeyPermits>,
    key: String,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl KeyPermits {
    /// Waits for a permit of `key`.
    async fn acquire(self: Arc<Self>, key: String) -> KeyPermit {
        let semaphore = {
            let mut keys = self.keys.lock();
            let (semaphore, users) = keys
                .entry(key.clone())
                .or_insert_with(|| (Arc::new(tokio::sync::Semaphore::new(self.limit)), 0));
            *users += 1;
            Arc::clone(semaphore)
        };
        let mut place = KeyPermit {
            permits: self,
            key,
            permit: None,
        };
        // Never closed: a permit always comes.
        place.permit = semaphore.acquire_owned().await.ok();
        place
    }
}

impl Drop for KeyPermit {
    fn drop(&mut self) {
        drop(self.permit.take());
        let mut keys = self.permits.keys.lock();
        if let Some((_, users)) = keys.get_mut(&self.key) {
            *users -= 1;
            if *users == 0 {
                keys.remove(&self.key);
            }
        }
    }
}

impl ToolLimits {
    pub(crate) fn of(toolkit: &crate::Toolkit) -> Self {
        let mut limits: Vec<(Arc<str>, u32)> = Vec::new();
        let mut rates: Vec<(Arc<str>, Rate)> = Vec::new();
        let mut keyed: Vec<(Arc<str>, u32)> = Vec::new();
        let mut key_rates: Vec<(Arc<str>, Rate)> = Vec::new();
        let mut gates = HashMap::new();
        for definition in toolkit.definitions() {
            let (concurrency, rate) = (definition.concurrency(), definition.rate());
            let (per_key, key_rate) = (definition.key_concurrency(), definition.key_rate());
            if concurrency.is_none() && rate.is_none() && definition.limit_key().is_none() {
                continue;
            }
            let tool: Arc<str> = Arc::from(definition.name());
            let permits = concurrency.map(|n| {
                limits.push((Arc::clone(&tool), n));
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                Arc::new(tokio::sync::Semaphore::new(n))
            });
            let rate = rate.map(|rate| {
                rates.push((Arc::clone(&tool), rate));
                (rate, Arc::from(crate::rate::tool_key(&tool)))
            });
            let key_permits = per_key.map(|(_, limit)| {
                keyed.push((Arc::clone(&tool), limit));
                Arc::new(KeyPermits {
                    limit: usize::try_from(limit).unwrap_or(usize::MAX),
                    keys: Mutex::default(),
                })
            });
            let key_rate = key_rate.map(|(_, rate)| {
                key_rates.push((Arc::clone(&tool), rate));
                (rate, Arc::from(crate::rate::tool_key_prefix(&tool)))
            });
            let gate = Gate {
                permits,
                rate,
                key: definition.limit_key().cloned(),
                key_permits,
                key_rate,
            };
            gates.insert(tool, gate);
        }
        limits.sort();
        rates.sort_by(|a, b| a.0.cmp(&b.0));
        keyed.sort();
        key_rates.sort_by(|a, b| a.0.cmp(&b.0));
        Self {
            limits,
            rates,
            keyed,
            key_rates,
            gates,
            local: Arc::default(),
        }
    }

    /// The key of a call of `tool` by `owner` with `arguments` under the tool's per-key
    /// limits; `None` when it has none.
    pub(crate) fn key_of(
        &self,
        tool: &str,
        owner: &str,
        arguments: &rmcp::model::JsonObject,
    ) -> Option<String> {
        if self.keyed.is_empty() && self.key_rates.is_empty() {
            return None;
        }
        let key = self.gates.get(tool)?.key.as_ref()?;
        Some(key.of(owner, arguments))
    }

    /// Whether `tool` has a limit of its own.
    pub(crate) fn limits(&self, tool: &str) -> bool {
        // Most toolkits limit nothing: no hashing then, on every call and every task end.
        !self.gates.is_empty() && self.gates.contains_key(tool)
    }

    /// `work` of `tool` behind the tool's gate (over a single-process store): it starts once
    /// its key has a place, one of the tool's permits is free (given back when it ends or is
    /// dropped), and both the tool's window of starts and its key's have room (taken
    /// together: a start is logged in both or in neither).
    pub(crate) fn gated(
        &self,
        tool: &str,
        key: Option<String>,
        work: crate::tool::ToolFuture,
    ) -> crate::tool::ToolFuture {
        if self.gates.is_empty() {
            return work;
        }
        let Some(gate) = self.gates.get(tool) else {
            return work;
        };
        let permits = gate.permits.clone();
        let mut windows: Vec<(Arc<str>, Rate)> = Vec::new();
        if let Some((rate, log)) = &gate.rate {
            windows.push((Arc::clone(log), *rate));
        }
        if let (Some((rate, prefix)), Some(key)) = (&gate.key_rate, &key) {
            windows.push((Arc::from(format!("{prefix}{key}")), *rate));
        }
        let key_permits = gate.key_permits.clone();
        let local = Arc::clone(&self.local);
        Box::pin(async move {
            // The key's place first: a task that waits for its key holds none of the tool's
            // places, so the other keys' tasks go past it.
            let _key = match (key_permits, key) {
                (Some(keys), Some(key)) => Some(keys.acquire(key).await),
                _ => None,
            };
            let windows: Vec<(&str, Rate)> = windows.iter().map(|(k, r)| (&**k, *r)).collect();
            let _permit = loop {
                // The gate is never closed: a permit always comes.
                let permit = match &permits {
                    Some(permits) => Arc::clone(permits).acquire_owned().await.ok(),
                    None => None,
                };
                // Holding its permit, so the start logged is the start made. A full window
                // gives the permit back while the task waits: a key's full window holds
                // back none of the other keys' tasks.
                match local.take_all(&windows) {
                    None => break permit,
                    Some(wait) => {
                        drop(permit);
                        tokio::time::sleep(wait).await;
                    }
                }
            };
            work.await
        })
    }
}

/// What a task's priority is derived from
/// ([`EngineBuilder::with_priority`](crate::EngineBuilder::with_priority)): the call that
/// creates it.
#[derive(Debug)]
#[non_exhaustive]
pub struct PriorityInput<'a> {
    /// Who calls (the authenticated owner).
    pub owner: &'a str,
    /// The tool's wire name.
    pub tool: &'a str,
    /// The call's arguments.
    pub arguments: &'a rmcp::model::JsonObject,
}

/// The application's function from a call to its task's priority.
#[derive(Clone)]
pub(crate) struct Priority(pub(crate) Arc<dyn Fn(&PriorityInput<'_>) -> i16 + Send + Sync>);

impl std::fmt::Debug for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Priority(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_call_waits_for_the_slots_a_claim_holds() {
        let capacity = Capacity::new(Some(2));
        assert_eq!(
            capacity.hold_for_claim(32),
            2,
            "the claim holds every free slot"
        );
        let waiting = tokio::spawn({
            let capacity = Arc::clone(&capacity);
            async move { capacity.take_waiting().await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        // The claim took one task (its slot counted over the held ones), and ends.
        let claimed = capacity.take_over();
        capacity.end_claim(2);
        let call = waiting.await.unwrap();
        assert!(
            call.is_some(),
            "the call takes the slot the claim left free"
        );
        assert!(
            capacity.take_waiting().await.is_none(),
            "both slots run tasks, and no claim holds any: refused at once"
        );
        drop(claimed);
        assert!(capacity.take_waiting().await.is_some());
        drop(call);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_is_refused_when_the_claim_keeps_every_slot() {
        let capacity = Capacity::new(Some(1));
        assert_eq!(capacity.hold_for_claim(32), 1);
        let waiting = tokio::spawn({
            let capacity = Arc::clone(&capacity);
            async move { capacity.take_waiting().await.is_some() }
        });
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let claimed = capacity.take_over();
        capacity.end_claim(1);
        assert!(
            !waiting.await.unwrap(),
            "the claim's task runs in the only slot"
        );
        drop(claimed);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_keeps_its_entry_while_a_task_of_it_runs_or_waits() {
        let permits = Arc::new(KeyPermits {
            limit: 1,
            keys: Mutex::default(),
        });
        let first = Arc::clone(&permits).acquire("acme".to_owned()).await;
        let waiting = tokio::spawn(Arc::clone(&permits).acquire("acme".to_owned()));
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        assert!(!waiting.is_finished(), "one task of a key at once");
        // A waiting task dropped (cancelled) gives its count back.
        waiting.abort();
        assert!(waiting.await.is_err());
        assert_eq!(permits.keys.lock()["acme"].1, 1);
        drop(first);
        assert!(
            permits.keys.lock().is_empty(),
            "no task of the key: no entry"
        );
    }
}
