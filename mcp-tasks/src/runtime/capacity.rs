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
}

impl Capacity {
    pub(super) fn new(max: Option<usize>) -> Arc<Self> {
        Arc::new(Self {
            max: max.map(|max| max.max(1)),
            taken: AtomicUsize::new(0),
        })
    }

    /// Takes one slot; `enforce`: only when one is free (else it is counted even over the
    /// limit: a task a restarted server takes back).
    pub(super) fn take(self: &Arc<Self>, enforce: bool) -> Option<RunSlot> {
        if self.max.is_some() {
            if !enforce {
                self.taken.fetch_add(1, Ordering::AcqRel);
            } else if self.take_up_to(1) == 0 {
                return None;
            }
        }
        Some(RunSlot(Arc::clone(self)))
    }

    /// Takes up to `wanted` free slots at once; how many it took (`wanted` when there is
    /// no limit, counting nothing). Give them back with [`Capacity::give`].
    pub(crate) fn take_up_to(&self, wanted: usize) -> usize {
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
    pub(crate) fn give(&self, n: usize) {
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

/// The tools with a concurrency limit of their own
/// ([`ToolDefinition::with_concurrency`](crate::ToolDefinition::with_concurrency)): over a
/// shared store, the claims count their running tasks across the cluster; over a
/// single-process store, each has a gate of that many permits here.
#[derive(Default)]
pub(crate) struct ToolLimits {
    /// `(tool, limit)`, sorted by tool.
    pub(crate) limits: Vec<(Arc<str>, u32)>,
    gates: HashMap<Arc<str>, Arc<tokio::sync::Semaphore>>,
}

impl ToolLimits {
    pub(crate) fn of(toolkit: &crate::Toolkit) -> Self {
        let mut limits: Vec<(Arc<str>, u32)> = toolkit
            .definitions()
            .filter_map(|d| d.concurrency().map(|n| (Arc::from(d.name()), n)))
            .collect();
        limits.sort();
        let gates = limits
            .iter()
            .map(|(tool, n)| {
                let permits = usize::try_from(*n).unwrap_or(usize::MAX);
                (
                    Arc::clone(tool),
                    Arc::new(tokio::sync::Semaphore::new(permits)),
                )
            })
            .collect();
        Self { limits, gates }
    }

    /// Whether `tool` has a limit of its own.
    pub(crate) fn limits(&self, tool: &str) -> bool {
        // Most toolkits limit nothing: no hashing then, on every call and every task end.
        !self.gates.is_empty() && self.gates.contains_key(tool)
    }

    /// `work` of `tool` behind the tool's gate (over a single-process store): it starts once
    /// one of the tool's permits is free, and gives it back when it ends or is dropped.
    pub(crate) fn gated(
        &self,
        tool: &str,
        work: crate::tool::ToolFuture,
    ) -> crate::tool::ToolFuture {
        if self.gates.is_empty() {
            return work;
        }
        match self.gates.get(tool) {
            None => work,
            Some(gate) => {
                let gate = Arc::clone(gate);
                Box::pin(async move {
                    // The gate is never closed: a permit always comes.
                    let _permit = gate.acquire_owned().await;
                    work.await
                })
            }
        }
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
