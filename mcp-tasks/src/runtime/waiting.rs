//! The tasks of another version of their tool that a single-process server keeps
//! (`versions.rs`, invariant 2), and the tools a runtime runs at their versions.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use parking_lot::Mutex;

use crate::store::ToolVersions;

/// The tasks of another version kept by a single-process server (invariant 2): by id, their
/// tool and version.
#[derive(Default)]
pub(crate) struct Waiting {
    tasks: Mutex<HashMap<Arc<str>, ToolAt>>,
}

/// A tool and a version of it.
type ToolAt = (Arc<str>, Arc<str>);

impl Waiting {
    /// The number of tasks of `tool` at `version` kept.
    fn count(&self, tool: &str, version: &str) -> usize {
        (self.tasks.lock().values())
            .filter(|(t, v)| &**t == tool && &**v == version)
            .count()
    }

    /// Keeps task `id`; the gauge follows.
    pub(crate) fn keep(&self, id: Arc<str>, tool: Arc<str>, version: Arc<str>) {
        self.tasks
            .lock()
            .insert(id, (Arc::clone(&tool), Arc::clone(&version)));
        self.sample(&tool, &version);
    }

    /// Takes task `id` out, if kept; the gauge follows.
    pub(crate) fn remove(&self, id: &str) -> Option<ToolAt> {
        let removed = self.tasks.lock().remove(id)?;
        self.sample(&removed.0, &removed.1);
        Some(removed)
    }

    fn sample(&self, tool: &str, version: &str) {
        crate::metrics::waiting_for_version(tool, version, self.count(tool, version) as u64);
    }
}

/// The tools of `toolkit` at their versions, for the claims (invariant 1).
pub(crate) fn of(toolkit: &crate::Toolkit) -> ToolVersions {
    ToolVersions::new(toolkit.definitions().map(|d| (d.name(), d.version())))
}

/// Whether this instance's claims route by version (`versions.rs`, invariant 1): on from the
/// start, and while tasks of a version it does not run are known to wait for a claim.
pub(crate) struct Routing(AtomicBool);

impl Default for Routing {
    fn default() -> Self {
        Self(AtomicBool::new(true))
    }
}

impl Routing {
    /// Whether the claims route now.
    pub(crate) fn is_on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Routes from now on (`true`), or not.
    pub(crate) fn set(&self, on: bool) {
        self.0.store(on, Ordering::Relaxed);
    }
}
