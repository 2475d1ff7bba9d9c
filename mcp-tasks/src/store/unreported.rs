//! Expiries an operator's read applied ([`AdminStore`](super::AdminStore) reads apply due
//! expiry first, so that they show expired tasks as `failed`), kept for the store's next
//! [`TaskStore::expire_due`](super::TaskStore::expire_due) to report: the runtime's expiry
//! sweep learns of every task it must stop the work of, whichever call expired it.

use std::sync::Arc;

use parking_lot::Mutex;

/// At most this many ids are kept between two sweeps (a store no runtime sweeps would
/// otherwise keep every one); past it the oldest go.
const MAX_KEPT: usize = 65_536;

/// The ids of tasks expired outside the sweep, not yet reported.
#[derive(Default)]
pub(crate) struct Unreported(Mutex<Vec<Arc<str>>>);

impl Unreported {
    /// Keeps `ids` for the next sweep.
    pub(crate) fn keep(&self, ids: Vec<Arc<str>>) {
        if ids.is_empty() {
            return;
        }
        let mut kept = self.0.lock();
        kept.extend(ids);
        if kept.len() > MAX_KEPT {
            let over = kept.len() - MAX_KEPT;
            kept.drain(..over);
        }
    }

    /// The ids kept since the last call.
    pub(crate) fn take(&self) -> Vec<Arc<str>> {
        std::mem::take(&mut *self.0.lock())
    }
}
