//! The tasks of another version of their tool that a single-process server keeps
//! (`versions.rs`, invariant 2).

use std::{collections::HashMap, sync::Arc};

use parking_lot::Mutex;

/// The tasks of another version kept by a single-process server (invariant 2): by id, their
/// tool and version.
#[derive(Default)]
pub(crate) struct Waiting(Mutex<Kept>);

/// A tool and a version of it.
type ToolAt = (Arc<str>, Arc<str>);

/// The tasks kept, and how many of each tool and version (the gauge's values), changed
/// together under one lock.
#[derive(Default)]
struct Kept {
    tasks: HashMap<Arc<str>, ToolAt>,
    counts: HashMap<ToolAt, u64>,
}

impl Kept {
    /// One task more (`more`) or one fewer of `at`; the gauge follows.
    fn count(&mut self, at: &ToolAt, more: bool) {
        let count = self.counts.entry(at.clone()).or_default();
        *count = if more {
            *count + 1
        } else {
            count.saturating_sub(1)
        };
        crate::metrics::waiting_for_version(&at.0, &at.1, *count);
        if *count == 0 {
            self.counts.remove(at);
        }
    }
}

impl Waiting {
    /// Keeps task `id` (in place of what it was kept as, if it was).
    pub(crate) fn keep(&self, id: Arc<str>, tool: Arc<str>, version: Arc<str>) {
        let mut kept = self.0.lock();
        let at = (tool, version);
        if let Some(before) = kept.tasks.insert(id, at.clone()) {
            kept.count(&before, false);
        }
        kept.count(&at, true);
    }

    /// Takes task `id` out, if kept.
    pub(crate) fn remove(&self, id: &str) -> Option<ToolAt> {
        let mut kept = self.0.lock();
        let removed = kept.tasks.remove(id)?;
        kept.count(&removed, false);
        Some(removed)
    }
}
