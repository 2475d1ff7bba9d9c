//! [`Followers`]: the handles following a task by listening, by task id. The rmcp client
//! handler ([`Handler`](super::handler::Handler)) passes each pushed `notifications/tasks` to
//! the handles following that task.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use parking_lot::Mutex;
use rmcp::model::{DetailedTask, RequestId};
use tokio::sync::mpsc;

/// A pushed task state and the subscription it came on.
pub(crate) type Pushed = (Option<RequestId>, DetailedTask);

/// The handles following each task, by task id: a key of each, and where its states go.
type ByTask = HashMap<String, Vec<(u64, mpsc::UnboundedSender<Pushed>)>>;

/// The handles following a task by listening, by task id.
#[derive(Default)]
pub(crate) struct Followers {
    by_task: Mutex<ByTask>,
    next: AtomicU64,
}

impl Followers {
    /// Follows task `task_id` until the returned registration is dropped. Registered before
    /// the listen is sent, so nothing pushed on it is missed.
    pub(crate) fn register(
        self: &Arc<Self>,
        task_id: &str,
    ) -> (Registration, mpsc::UnboundedReceiver<Pushed>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        self.by_task
            .lock()
            .entry(task_id.to_owned())
            .or_default()
            .push((key, sender));
        let registration = Registration {
            followers: Arc::clone(self),
            task_id: task_id.to_owned(),
            key,
        };
        (registration, receiver)
    }

    /// A `notifications/tasks` on subscription `subscription` (when known): to every
    /// handle following its task (each keeps the ones of its own subscription).
    pub(crate) fn deliver(&self, subscription: Option<RequestId>, task: &DetailedTask) {
        if let Some(followers) = self.by_task.lock().get(&task.task.task_id) {
            for (_, sender) in followers {
                let _ = sender.send((subscription.clone(), task.clone()));
            }
        }
    }
}

/// One handle's following of one task; dropping it ends it.
pub(crate) struct Registration {
    followers: Arc<Followers>,
    task_id: String,
    key: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut by_task = self.followers.by_task.lock();
        if let Some(followers) = by_task.get_mut(&self.task_id) {
            followers.retain(|(key, _)| *key != self.key);
            if followers.is_empty() {
                by_task.remove(&self.task_id);
            }
        }
    }
}
