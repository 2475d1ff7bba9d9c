//! Quotas and slots: the live tasks of each owner, and how many tasks' work may run here at
//! once.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering, fence},
    },
    time::Duration,
};

use parking_lot::Mutex;

use crate::{
    LimitKey,
    rate::{LocalRates, Rate},
};

use rmcp::model::{ErrorData, JsonObject};

/// One live task of an owner, counted against the owner's quota until dropped.
pub(crate) struct OwnerSlot {
    pub(super) owner: Arc<str>,
    pub(super) owners: Arc<Mutex<HashMap<Arc<str>, usize>>>,
    /// The task's slot of this instance's [`Capacity`], held until dropped.
    pub(super) _running: RunSlot,
    /// Whether dropping it gives the owner's count back (not once [`OwnerSlot::hold`] kept
    /// it).
    pub(super) counted: bool,
}

impl OwnerSlot {
    /// Gives back the running slot and keeps the owner's count (the task parked): the owner,
    /// whose count [`unhold`] gives back later.
    pub(super) fn hold(mut self) -> Arc<str> {
        self.counted = false;
        Arc::clone(&self.owner)
    }
}

/// Gives back one count of `owner` in `owners` (its entry goes with the last): one kept by
/// [`OwnerSlot::hold`], or a listen stream's (`server/push/hub.rs`).
pub(crate) fn unhold(owners: &Mutex<HashMap<Arc<str>, usize>>, owner: &str) {
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
    /// Set when a claim found no free slot: the next slot given back tells `freed`.
    short: AtomicBool,
    /// The claim loop's wake-up: queued tasks a claim had no slot for are claimed as soon
    /// as one is free, not at the next claim interval.
    freed: Arc<tokio::sync::Notify>,
}

/// How long a call waits for the claims in flight to give their slots back before it is
/// refused at `max_running`: a claim takes milliseconds.
const CLAIM_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Capacity {
    /// `max` slots (`None`: no limit); `freed`: the claim loop's wake-up.
    pub(super) fn new(max: Option<usize>, freed: Arc<tokio::sync::Notify>) -> Arc<Self> {
        Arc::new(Self {
            max: max.map(|max| max.max(1)),
            taken: AtomicUsize::new(0),
            claiming: AtomicUsize::new(0),
            claim_ended: tokio::sync::Notify::new(),
            short: AtomicBool::new(false),
            freed,
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
        if self.max.is_none() {
            return wanted;
        }
        let mut n = self.take_up_to(wanted);
        if n == 0 {
            // Marked before a second look: a slot given back meanwhile is taken now, or its
            // `give` sees the mark (which a claim that took slots leaves: one spare pass).
            self.short.store(true, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            n = self.take_up_to(wanted);
        }
        self.claiming.fetch_add(n, Ordering::AcqRel);
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

    /// Gives back `n` slots taken by [`Capacity::take_up_to`]; the first slot free after a
    /// claim found none wakes the claim loop.
    fn give(&self, n: usize) {
        let Some(max) = self.max.filter(|_| n > 0) else {
            return;
        };
        let left = self.taken.fetch_sub(n, Ordering::SeqCst).saturating_sub(n);
        fence(Ordering::SeqCst);
        if left < max && self.short.swap(false, Ordering::SeqCst) {
            self.freed.notify_one();
        }
    }

    /// How many slots are free now (`usize::MAX` without a limit).
    pub(crate) fn free(&self) -> usize {
        self.max.map_or(usize::MAX, |max| {
            max.saturating_sub(self.taken.load(Ordering::Acquire))
        })
    }

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

/// The tools with a limit of their own: a concurrency limit, a rate, or per-key ones
/// ([`ToolDefinition::with_concurrency`](crate::ToolDefinition::with_concurrency),
/// [`ToolDefinition::with_rate`](crate::ToolDefinition::with_rate),
/// [`ToolDefinition::with_key_concurrency`](crate::ToolDefinition::with_key_concurrency),
/// [`ToolDefinition::with_key_rate`](crate::ToolDefinition::with_key_rate)): over a shared
/// store, the claims count their running tasks (by key too) and their starts across the
/// cluster; over a single-process store, each has a gate here (permits, permits by key,
/// windows of starts) and a queue of the tasks it holds back (`held.rs`).
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
    /// Where each task held back is, so that a cancel or an expiry looks at that one place.
    /// Locked after a gate's queue when both are (a hold, a start), never before.
    held_at: Mutex<HashMap<Arc<str>, Place>>,
    /// The queue entries [`ToolLimits::unhold`] looked at, for the tests of its cost.
    #[cfg(test)]
    visited: AtomicUsize,
    /// The windows of starts in this process: the gates' and the step limiters'.
    pub(crate) local: Arc<LocalRates>,
    /// Told when a task that passed a gate gives its places back, and when a task is held
    /// back: the held tasks' dispatcher looks again.
    pub(crate) freed: Arc<tokio::sync::Notify>,
}

/// One limited tool's gate in this process.
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
    held: Mutex<Queue>,
}

/// A gate's tasks held back, oldest first: each under the number of its hold, so that
/// one taken out anywhere in the queue costs a lookup, not a scan.
#[derive(Default)]
struct Queue {
    next: u64,
    tasks: BTreeMap<u64, Held>,
}

/// Where a task held back is: its tool's queue, and its number there.
struct Place {
    tool: Arc<str>,
    at: u64,
}

/// A task a gate holds back: all it costs this process (its row holds the rest).
pub(crate) struct Held {
    pub(crate) id: Arc<str>,
    /// The owner, whose count of live tasks it holds ([`OwnerSlot::hold`]).
    pub(crate) owner: Arc<str>,
    /// Its key under the tool's per-key limits.
    pub(crate) key: Option<String>,
    pub(crate) tool: Arc<str>,
}

/// The permits of each key of one tool's per-key concurrency limit, in this process: a key
/// has an entry (its permits, and how many tasks hold one) while a task of it runs.
struct KeyPermits {
    limit: usize,
    keys: Mutex<HashMap<String, (Arc<tokio::sync::Semaphore>, usize)>>,
}

/// A task's place under one key: counted in the key's entry until dropped, which removes
/// the entry with the last.
struct KeyPermit {
    permits: Arc<KeyPermits>,
    key: String,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl KeyPermits {
    /// A permit of `key`, if one is free.
    fn try_acquire(self: &Arc<Self>, key: &str) -> Option<KeyPermit> {
        let mut keys = self.keys.lock();
        let (semaphore, users) = keys
            .entry(key.to_owned())
            .or_insert_with(|| (Arc::new(tokio::sync::Semaphore::new(self.limit)), 0));
        // A new entry has every permit free: a refusal leaves no empty entry behind.
        let permit = Arc::clone(semaphore).try_acquire_owned().ok()?;
        *users += 1;
        Some(KeyPermit {
            permits: Arc::clone(self),
            key: key.to_owned(),
            permit: Some(permit),
        })
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

/// The places a task took at its tool's gate, held while its work runs: given back when
/// dropped, and the held tasks' dispatcher told.
pub(crate) struct GatePass {
    key: Option<KeyPermit>,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    freed: Arc<tokio::sync::Notify>,
}

impl Drop for GatePass {
    fn drop(&mut self) {
        // The places first, so that the dispatcher finds them free.
        drop(self.key.take());
        drop(self.permit.take());
        self.freed.notify_one();
    }
}

/// Why a gate refused a task now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// Its key has no place, or no room in its window (until the wait, if any): another
    /// key's task may pass.
    Key(Option<Duration>),
    /// The tool has no place, or no room in its window (until the wait, if any): no task of
    /// the tool passes.
    Tool(Option<Duration>),
}

/// What a task finds at its tool's gate ([`ToolLimits::enter`]).
pub(crate) enum Entry {
    /// The tool has no gate here.
    Open,
    /// It passed: it holds its places while its work runs.
    Pass(GatePass),
    /// It is held back (its tool's queue is not empty, or the gate refused it).
    Held,
}

impl ToolLimits {
    pub(crate) fn of(toolkit: &crate::Toolkit) -> Self {
        let mut of = Self::default();
        for definition in toolkit.definitions() {
            let (concurrency, rate) = (definition.concurrency(), definition.rate());
            let (per_key, key_rate) = (definition.key_concurrency(), definition.key_rate());
            if concurrency.is_none() && rate.is_none() && definition.limit_key().is_none() {
                continue;
            }
            let tool: Arc<str> = Arc::from(definition.name());
            let permits = concurrency.map(|n| {
                of.limits.push((Arc::clone(&tool), n));
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                Arc::new(tokio::sync::Semaphore::new(n))
            });
            let rate = rate.map(|rate| {
                of.rates.push((Arc::clone(&tool), rate));
                (rate, Arc::from(crate::rate::tool_key(&tool)))
            });
            let key_permits = per_key.map(|(_, limit)| {
                of.keyed.push((Arc::clone(&tool), limit));
                Arc::new(KeyPermits {
                    limit: usize::try_from(limit).unwrap_or(usize::MAX),
                    keys: Mutex::default(),
                })
            });
            let key_rate = key_rate.map(|(_, rate)| {
                of.key_rates.push((Arc::clone(&tool), rate));
                (rate, Arc::from(crate::rate::tool_key_prefix(&tool)))
            });
            let gate = Gate {
                permits,
                rate,
                key: definition.limit_key().cloned(),
                key_permits,
                key_rate,
                held: Mutex::default(),
            };
            of.gates.insert(tool, gate);
        }
        of.limits.sort();
        of.rates.sort_by(|a, b| a.0.cmp(&b.0));
        of.keyed.sort();
        of.key_rates.sort_by(|a, b| a.0.cmp(&b.0));
        of
    }

    /// The key of a call of `tool` by `owner` with `arguments` under the tool's per-key
    /// limits; `None` when it has none.
    pub(crate) fn key_of(&self, tool: &str, owner: &str, arguments: &JsonObject) -> Option<String> {
        if self.keyed.is_empty() && self.key_rates.is_empty() {
            return None;
        }
        let key = self.gates.get(tool)?.key.as_ref()?;
        Some(key.of(owner, arguments))
    }

    /// Whether `tool` has a limit of its own.
    pub(crate) fn limits(&self, tool: &str) -> bool {
        // Most toolkits limit nothing: a lookup in an empty map hashes nothing.
        self.gates.contains_key(tool)
    }

    /// Whether any tool has a gate.
    pub(crate) fn any(&self) -> bool {
        !self.gates.is_empty()
    }

    /// A task of `tool` (of `key`) at its gate, over a single-process store: it passes when
    /// no task of the tool is held back and the gate has room (see [`ToolLimits::pass`]),
    /// else it is to be held back ([`ToolLimits::hold`]), so that the tasks held back start
    /// first, oldest first.
    pub(crate) fn enter(&self, tool: &str, key: Option<&str>) -> Entry {
        let Some(gate) = self.gates.get(tool) else {
            return Entry::Open;
        };
        if !gate.held.lock().tasks.is_empty() {
            return Entry::Held;
        }
        self.pass(gate, key).map_or(Entry::Held, Entry::Pass)
    }

    /// Takes a task's places at `gate` now, or none: its key's place, one of the tool's
    /// permits, and one start in the tool's window and in its key's (taken together: a start
    /// is logged in both or in neither).
    fn pass(&self, gate: &Gate, key: Option<&str>) -> Result<GatePass, Blocked> {
        let key_place = gate
            .key_permits
            .as_ref()
            .zip(key)
            .map(|(permits, key)| permits.try_acquire(key).ok_or(Blocked::Key(None)))
            .transpose()?;
        let permit = gate
            .permits
            .as_ref()
            .map(|permits| Arc::clone(permits).try_acquire_owned())
            .transpose()
            .map_err(|_| Blocked::Tool(None))?;
        let key_log = gate
            .key_rate
            .as_ref()
            .zip(key)
            .map(|((rate, prefix), key)| (format!("{prefix}{key}"), *rate));
        let tool_window = gate.rate.as_ref().map(|(rate, log)| (&**log, *rate));
        let key_window = key_log.as_ref().map(|(log, rate)| (log.as_str(), *rate));
        let windows: Vec<(&str, Rate)> = tool_window.into_iter().chain(key_window).collect();
        // The tool's window is the first when it has one: a refusal by it holds every key.
        if let Some(refused) = self.local.try_take_all(&windows) {
            return Err(if refused.first == 0 && gate.rate.is_some() {
                Blocked::Tool(Some(refused.first_wait))
            } else {
                Blocked::Key(Some(refused.wait))
            });
        }
        Ok(GatePass {
            key: key_place,
            permit,
            freed: Arc::clone(&self.freed),
        })
    }

    /// Holds `task` back at the end of its tool's queue, and tells the dispatcher.
    pub(crate) fn hold(&self, task: Held) {
        if let Some(gate) = self.gates.get(&task.tool) {
            let mut queue = gate.held.lock();
            let at = queue.next;
            queue.next += 1;
            // Noted before the queue is unlocked: the dispatcher that starts it finds the note.
            let place = Place {
                tool: Arc::clone(&task.tool),
                at,
            };
            self.held_at.lock().insert(Arc::clone(&task.id), place);
            queue.tasks.insert(at, task);
            drop(queue);
            self.freed.notify_one();
        }
    }

    /// Takes task `id` out of its queue, if it is held back.
    pub(crate) fn unhold(&self, id: &str) -> Option<Held> {
        let Place { tool, at } = {
            let mut held_at = self.held_at.lock();
            // Most tasks that end were never held: no hashing then.
            if held_at.is_empty() {
                return None;
            }
            held_at.remove(id)?
        };
        #[cfg(test)]
        self.visited.fetch_add(1, Ordering::Relaxed);
        // None when the dispatcher started it meanwhile.
        self.gates.get(&tool)?.held.lock().tasks.remove(&at)
    }

    /// The tasks held back that may start now, each with its places, at most `room` of
    /// them (oldest first in each tool's queue; a task whose key has no room is passed
    /// over, and a tool with no room ends its queue's turn); and how long until a window
    /// that refused one has room.
    pub(crate) fn startable(&self, room: usize) -> (Vec<(Held, GatePass)>, Option<Duration>) {
        let mut ready = Vec::new();
        let mut wait: Option<Duration> = None;
        let mut sooner = |w: Option<Duration>| wait = wait.into_iter().chain(w).min();
        for gate in self.gates.values() {
            let mut queue = gate.held.lock();
            let mut passed = Vec::new();
            for (&at, task) in &queue.tasks {
                if ready.len() + passed.len() >= room {
                    break;
                }
                match self.pass(gate, task.key.as_deref()) {
                    Ok(pass) => passed.push((at, pass)),
                    Err(Blocked::Key(w)) => sooner(w),
                    Err(Blocked::Tool(w)) => {
                        sooner(w);
                        break;
                    }
                }
            }
            if passed.is_empty() {
                continue;
            }
            let mut held_at = self.held_at.lock();
            for (at, pass) in passed {
                let task = queue.tasks.remove(&at).expect("within the queue");
                // The note of an id held twice is its later hold's: that one stays held.
                let noted = held_at.get(&task.id);
                if noted.is_some_and(|place| place.at == at && place.tool == task.tool) {
                    held_at.remove(&task.id);
                }
                ready.push((task, pass));
            }
        }
        (ready, wait)
    }

    /// How many tasks of `tool` its gate holds back.
    pub(crate) fn held_of(&self, tool: &str) -> usize {
        self.gates
            .get(tool)
            .map_or(0, |gate| gate.held.lock().tasks.len())
    }

    /// How many tasks the gates hold back.
    pub(crate) fn held(&self) -> usize {
        self.gates
            .values()
            .map(|gate| gate.held.lock().tasks.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_call_waits_for_the_slots_a_claim_holds() {
        let capacity = Capacity::new(Some(2), Arc::default());
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

    #[test]
    fn a_slot_given_back_after_a_claim_found_none_wakes_the_claim_loop() {
        use futures::FutureExt as _;
        let freed = Arc::new(tokio::sync::Notify::new());
        let capacity = Capacity::new(Some(1), Arc::clone(&freed));
        let running = capacity.take_over();
        let first = capacity.take_over();
        assert_eq!(capacity.hold_for_claim(32), 0, "no free slot");
        drop(first);
        assert!(
            freed.notified().now_or_never().is_none(),
            "every slot is still taken: nothing to claim yet"
        );
        drop(running);
        assert!(
            freed.notified().now_or_never().is_some(),
            "the free slot wakes the claim loop"
        );
        let slot = capacity.take_over();
        drop(slot);
        assert!(
            freed.notified().now_or_never().is_none(),
            "no claim waits for a slot: a slot given back wakes nothing"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_is_refused_when_the_claim_keeps_every_slot() {
        let capacity = Capacity::new(Some(1), Arc::default());
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

    #[test]
    fn a_key_keeps_its_entry_while_a_task_of_it_runs() {
        let permits = Arc::new(KeyPermits {
            limit: 1,
            keys: Mutex::default(),
        });
        let first = permits.try_acquire("acme").expect("a free place");
        assert!(
            permits.try_acquire("acme").is_none(),
            "one task of a key at once"
        );
        assert_eq!(permits.keys.lock()["acme"].1, 1, "a refusal counts nothing");
        let other = permits.try_acquire("bolt").expect("another key's place");
        drop(first);
        drop(other);
        assert!(
            permits.keys.lock().is_empty(),
            "no task of the key: no entry"
        );
    }

    /// A tool `t` with one permit, one place for each key, and `rate` for each key.
    fn gated(rate: Option<Rate>) -> ToolLimits {
        let mut limits = ToolLimits::default();
        let gate = Gate {
            permits: Some(Arc::new(tokio::sync::Semaphore::new(2))),
            rate: None,
            key: Some(LimitKey::Owner),
            key_permits: Some(Arc::new(KeyPermits {
                limit: 1,
                keys: Mutex::default(),
            })),
            key_rate: rate.map(|rate| (rate, Arc::from("tool-key t "))),
            held: Mutex::default(),
        };
        limits.gates.insert(Arc::from("t"), gate);
        limits
    }

    fn held(id: &str, key: &str) -> Held {
        Held {
            id: Arc::from(id),
            owner: Arc::from(key),
            key: Some(key.to_owned()),
            tool: Arc::from("t"),
        }
    }

    #[test]
    fn the_held_tasks_start_oldest_first_past_a_full_key() {
        let limits = gated(None);
        let Entry::Pass(running) = limits.enter("t", Some("alice")) else {
            panic!("an empty queue and a free gate: it passes");
        };
        for (id, key) in [("1", "alice"), ("2", "alice"), ("3", "bob"), ("4", "carol")] {
            limits.hold(held(id, key));
        }
        assert!(
            matches!(limits.enter("t", Some("dave")), Entry::Held),
            "behind the queue, though its key is free"
        );
        let (ready, wait) = limits.startable(usize::MAX);
        let ids: Vec<&str> = ready.iter().map(|(task, _)| &*task.id).collect();
        assert_eq!(
            ids,
            ["3"],
            "alice's tasks wait for her running one; bob's takes the tool's last permit"
        );
        assert_eq!(wait, None);
        assert_eq!(limits.held(), 3);
        drop(running);
        drop(ready);
        let (ready, _) = limits.startable(usize::MAX);
        let ids: Vec<&str> = ready.iter().map(|(task, _)| &*task.id).collect();
        assert_eq!(ids, ["1", "4"], "one of alice's, then carol's");
        assert!(limits.unhold("2").is_some());
        assert_eq!(limits.held(), 0);
        assert!(limits.unhold("2").is_none());
    }

    #[test]
    fn a_task_taken_out_of_the_queue_leaves_the_others_in_order() {
        let limits = gated(None);
        for id in ["1", "2", "3", "4", "5"] {
            limits.hold(held(id, &format!("key {id}")));
        }
        let middle = limits.unhold("3").expect("held back");
        assert_eq!(&*middle.id, "3");
        assert!(limits.unhold("9").is_none(), "never held");
        assert!(limits.unhold("3").is_none(), "taken out already");
        assert_eq!((limits.held(), limits.held_of("t")), (4, 4));
        let (first, _) = limits.startable(usize::MAX);
        let ids: Vec<&str> = first.iter().map(|(task, _)| &*task.id).collect();
        assert_eq!(ids, ["1", "2"], "the tool's two permits, oldest first");
        drop(first);
        let (then, _) = limits.startable(usize::MAX);
        let ids: Vec<&str> = then.iter().map(|(task, _)| &*task.id).collect();
        assert_eq!(ids, ["4", "5"]);
        assert_eq!(limits.held(), 0);
        assert!(
            limits.held_at.lock().is_empty(),
            "no note outlives its task"
        );
        assert!(limits.unhold("4").is_none(), "started: no longer held");
    }

    /// An expiry sweep that ends many held tasks looks at each once: the last held is not
    /// found by a walk past every older one.
    #[test]
    fn expiring_many_held_tasks_costs_one_look_each() {
        const TASKS: usize = 20_000;
        let limits = gated(None);
        for n in 0..TASKS {
            limits.hold(held(&n.to_string(), "alice"));
        }
        for n in (0..TASKS).rev() {
            assert!(limits.unhold(&n.to_string()).is_some());
            assert!(limits.unhold(&format!("other {n}")).is_none());
        }
        assert_eq!(limits.held(), 0);
        assert_eq!(limits.visited.load(Ordering::Relaxed), TASKS);
    }

    #[test]
    fn a_held_task_waits_for_its_keys_window() {
        let limits = gated(Some(Rate::new(1, Duration::from_secs(60))));
        let Entry::Pass(first) = limits.enter("t", Some("alice")) else {
            panic!("it passes");
        };
        drop(first);
        limits.hold(held("2", "alice"));
        limits.hold(held("3", "bob"));
        let (ready, wait) = limits.startable(usize::MAX);
        let ids: Vec<&str> = ready.iter().map(|(task, _)| &*task.id).collect();
        assert_eq!(ids, ["3"], "alice started once this minute");
        assert!(
            wait.is_some_and(|w| w > Duration::from_secs(59)),
            "{wait:?}"
        );
        let (ready, _) = limits.startable(0);
        assert!(ready.is_empty(), "no room here: none starts");
    }
}
