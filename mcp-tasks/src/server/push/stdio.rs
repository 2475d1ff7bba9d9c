//! Task listen streams over stdio: one connection's streams, by subscription id.

use std::collections::HashMap;

use rmcp::model::RequestId;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::{Refusal, open};
use crate::server::{Engine, negotiation::Checked};

/// The task listen streams of one stdio connection, by subscription id. Dropping one's
/// guard ends it, so dropping this (the input ended) ends them all.
#[derive(Default)]
pub(crate) struct Listens {
    open: HashMap<RequestId, DropGuard>,
}

impl Listens {
    /// Opens a listen stream whose messages go to `lines`, one line each; a refusal
    /// is returned to answer as an error line.
    pub(crate) async fn open(
        &mut self,
        engine: &Engine,
        message: &Value,
        checked: &Checked,
        lines: mpsc::Sender<Vec<u8>>,
    ) -> Result<(), Refusal> {
        self.open.retain(|_, ended| !ended.token().is_cancelled());
        let mut subscription = open(engine, message, checked, None).await?;
        let cancel = CancellationToken::new();
        let id = subscription.id().clone();
        let ended = cancel.clone();
        tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    biased;
                    () = ended.cancelled() => break,
                    message = subscription.next() => message,
                };
                let Some(message) = message else { break };
                let Ok(mut line) = serde_json::to_vec(&message) else {
                    break;
                };
                line.push(b'\n');
                if lines.send(line).await.is_err() {
                    break;
                }
            }
            ended.cancel();
        });
        // A client reusing the id of an open stream (C1 forbids it) ends the old one: its
        // guard, replaced, is dropped.
        self.open.insert(id, cancel.drop_guard());
        Ok(())
    }

    /// Ends the stream of `id` (a `notifications/cancelled` for it): nothing more is
    /// sent on it. Whether `id` was one of these streams.
    pub(crate) fn cancel(&mut self, id: &RequestId) -> bool {
        self.open.remove(id).is_some()
    }
}
