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
use tokio::sync::mpsc::{self, error::TrySendError};

/// How many pushed states wait for one handle that reads slowly: past it the handle's
/// stream ends, and the handle polls (each state is the whole task: the latest read is the
/// truth), so a server that floods notifications cannot grow the client's memory.
pub(crate) const MAX_QUEUED: usize = 64;

/// A pushed task state and the subscription it came on.
pub(crate) type Pushed = (Option<RequestId>, DetailedTask);

/// The handles following each task, by task id: a key of each, and where its states go.
type ByTask = HashMap<String, Vec<(u64, mpsc::Sender<Pushed>)>>;

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
    ) -> (Registration, mpsc::Receiver<Pushed>) {
        let (sender, receiver) = mpsc::channel(MAX_QUEUED);
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
    /// handle following its task (each keeps the ones of its own subscription). A handle
    /// with [`MAX_QUEUED`] states unread is dropped from the task: its stream ends once it
    /// has read them.
    pub(crate) fn deliver(&self, subscription: Option<RequestId>, task: &DetailedTask) {
        if let Some(followers) = self.by_task.lock().get_mut(&task.task.task_id) {
            followers.retain(|(_, sender)| {
                let state = (subscription.clone(), task.clone());
                !matches!(sender.try_send(state), Err(TrySendError::Full(_)))
            });
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::DetailedTask;
    use serde_json::json;
    use tokio::sync::mpsc::error::TryRecvError;

    use super::{Followers, MAX_QUEUED};

    /// A handle that reads nothing holds at most `MAX_QUEUED` states: the next one ends its
    /// stream (after the ones queued), while another handle of the same task that reads
    /// keeps getting every state.
    #[tokio::test]
    async fn a_handle_that_reads_nothing_holds_a_bounded_queue() {
        let followers = Arc::new(Followers::default());
        let (_slow_following, mut slow) = followers.register("t1");
        let (_fast_following, mut fast) = followers.register("t1");
        let task: DetailedTask = serde_json::from_value(json!({
            "taskId": "t1", "status": "working", "createdAt": "2026-12-06T00:00:00Z",
            "lastUpdatedAt": "2026-12-06T00:00:00Z", "ttlMs": null,
        }))
        .expect("a task");
        for _ in 0..MAX_QUEUED * 3 {
            followers.deliver(None, &task);
            assert!(
                fast.recv().await.is_some(),
                "the reading handle gets each state"
            );
        }
        let mut queued = 0;
        let end = loop {
            match slow.try_recv() {
                Ok(_) => queued += 1,
                Err(end) => break end,
            }
        };
        assert_eq!(queued, MAX_QUEUED);
        assert_eq!(
            end,
            TryRecvError::Disconnected,
            "the slow handle's stream ended"
        );
    }
}
