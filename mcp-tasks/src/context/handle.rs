//! The [`TaskContext`] handle itself: the call's [`Host`], shared. What it offers a tool is
//! in the module root (and input requests in `input.rs`).

use std::{fmt, sync::Arc};

use super::host::Host;

/// The handle a tool receives: its task id, status messages, cancellation, input from the
/// client, durable steps, and the application state registered on the toolkit.
///
/// Cheap to clone; every clone refers to the same call.
#[derive(Clone)]
pub struct TaskContext {
    pub(super) host: Arc<dyn Host>,
}

impl fmt::Debug for TaskContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskContext")
            .field("task_id", &self.host.task_id())
            .field("tool", &self.host.tool())
            .field("cancelled", &self.host.cancel_token().is_cancelled())
            .finish()
    }
}

impl TaskContext {
    pub(crate) fn new(host: Arc<dyn Host>) -> Self {
        Self { host }
    }
}
