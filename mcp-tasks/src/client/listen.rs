//! Following a task by listening ([`Pushing`], what [`TaskHandle::wait`](super::TaskHandle::wait)
//! and [`TaskHandle::updates`](super::TaskHandle::updates) read). The `notifications/tasks` of
//! a `subscriptions/listen` with `notifications.taskIds` go to the rmcp client's
//! [`Handler`](super::handler::Handler) (rmcp routes only its own listens' notifications
//! elsewhere), which passes each to [`Followers`](super::followers::Followers).

use std::{pin::Pin, time::Duration};

use rmcp::{
    RoleClient,
    model::{ClientRequest, CustomRequest, DetailedTask, RequestId},
    service::{PeerRequestOptions, RequestHandle},
};
use tokio::sync::mpsc;

use super::{
    TaskClient,
    followers::{Pushed, Registration},
};

/// One task followed on one `subscriptions/listen` stream, until the stream is of no use:
/// the task not agreed (no state pushed within the first wait), or the stream ended by the
/// server or the transport. Closing it (or dropping it) cancels the listen.
// docs/protocol.md R39-R41, C23-C25.
pub(crate) struct Pushing {
    _following: Registration,
    pushed: mpsc::Receiver<Pushed>,
    /// `None` once closed.
    listen: Option<RequestHandle<RoleClient>>,
    subscription: RequestId,
    first_by: Pin<Box<tokio::time::Sleep>>,
    agreed: bool,
}

impl Pushing {
    /// Listens for task `task_id`, whose first state must be pushed within `first_within`;
    /// `None` when the listen could not be sent.
    pub(crate) async fn open(
        client: &TaskClient,
        task_id: &str,
        first_within: Duration,
    ) -> Option<Self> {
        // Registered before the listen is sent, so nothing pushed on it is missed.
        let (following, pushed) = client.inner.followers.register(task_id);
        // docs/protocol.md R43, C6.
        let params = serde_json::json!({ "notifications": { "taskIds": [task_id] } });
        let request = CustomRequest::new("subscriptions/listen", Some(params));
        let request = ClientRequest::CustomRequest(request);
        let options = PeerRequestOptions::no_options().with_meta(client.inner.meta.clone());
        let sent = client.inner.peer.send_request_with_option(request, options);
        let listen = sent.await.ok()?;
        Some(Self {
            _following: following,
            pushed,
            subscription: listen.id.clone(),
            listen: Some(listen),
            first_by: Box::pin(tokio::time::sleep(first_within)),
            agreed: false,
        })
    }

    /// The next state pushed for the task on this stream; `None` once the stream is of no
    /// use (then it stays so).
    pub(crate) async fn next(&mut self) -> Option<DetailedTask> {
        let listen = self.listen.as_mut()?;
        loop {
            tokio::select! {
                message = self.pushed.recv() => {
                    let (on, snapshot) = message?;
                    // Another handle's stream for the same task.
                    if on.is_some_and(|on| on != self.subscription) {
                        continue;
                    }
                    self.agreed = true;
                    return Some(snapshot);
                }
                // The stream ended (the server's graceful end, an error, a dropped transport).
                _ = &mut listen.rx => break,
                () = &mut self.first_by, if !self.agreed => break,
            }
        }
        self.close().await;
        None
    }

    /// Ends the stream: `notifications/cancelled` for the listen.
    // docs/protocol.md C25.
    pub(crate) async fn close(&mut self) {
        if let Some(listen) = self.listen.take() {
            let _ = listen
                .cancel(Some("the task is followed no more".to_owned()))
                .await;
        }
    }
}

impl Drop for Pushing {
    fn drop(&mut self) {
        // Dropped while open (a caller that stopped reading): cancel it in the background.
        if let Some(listen) = self.listen.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(listen.cancel(Some("the task is followed no more".to_owned())));
        }
    }
}
