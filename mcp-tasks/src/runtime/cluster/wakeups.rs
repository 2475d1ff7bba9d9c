//! The change feed's notices for the work running here ([`Runtime::subscribe`]), and the
//! periodic re-reads that cover a lost one (invariant 3 of the [cluster docs](super)).

use std::sync::Arc;

use tokio::sync::{Notify, broadcast::error::RecvError};

use crate::{
    runtime::{Runtime, placement::Cluster},
    store::{ClusterStore, Notice},
};

/// Acts on the feed's notices for the work running here, and re-reads that work every
/// [`ClusterConfig::reread_interval`](crate::ClusterConfig::reread_interval), until the
/// runtime stops.
pub(super) async fn wakeup_loop(
    runtime: Arc<Runtime>,
    instance: Arc<Cluster>,
    mut wakeups: tokio::sync::broadcast::Receiver<Notice>,
) {
    let (cluster, claim_now) = (&instance.store, &runtime.parking.claim_now);
    let stop = runtime.lifecycle.stop.clone();
    let mut ticks = tokio::time::interval(instance.config.reread_interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    // One re-read at a time: asked for while one runs (a storm of lags), one more follows,
    // instead of a pile of re-reads queueing for the pool ahead of the answers they bring.
    let reread_now = Arc::new(Notify::new());
    helper(&runtime, {
        let reread_now = Arc::clone(&reread_now);
        let cluster = Arc::clone(cluster);
        |runtime| async move {
            loop {
                reread_now.notified().await;
                for id in runtime.live_ids() {
                    reread_one(&runtime, &*cluster, &id).await;
                }
            }
        }
    });
    loop {
        let received = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            received = wakeups.recv() => received,
            _ = ticks.tick() => {
                reread_now.notify_one();
                continue;
            }
        };
        crate::metrics::received(&received);
        match received {
            // A hint: the row says whether the work stops.
            Ok(Notice::Cancel(id)) if runtime.runs(&id) => {
                let cluster = Arc::clone(cluster);
                helper(&runtime, |runtime| async move {
                    reread_one(&runtime, &*cluster, &id).await;
                });
            }
            Ok(Notice::Answers { task_id: id, .. }) if runtime.runs(&id) => {
                let cluster = Arc::clone(cluster);
                helper(&runtime, |runtime| async move {
                    deliver_stored(&runtime, &*cluster, &id).await;
                });
            }
            // For a task whose work runs elsewhere (or nowhere): not ours.
            Ok(Notice::Cancel(_) | Notice::Answers { .. }) => {}
            Ok(Notice::Queued(_)) => claim_now.notify_one(),
            // For listen streams (`server/push`); the work needs nothing.
            Ok(Notice::Changed(_)) => {}
            // The listener reconnected: what was announced while it was down is read.
            Ok(Notice::Missed) => {
                tracing::info!("wake-ups may have been missed; re-reading every task running here");
                reread_now.notify_one();
                claim_now.notify_one();
            }
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "wake-ups missed; re-reading every task running here"
                );
                reread_now.notify_one();
                claim_now.notify_one();
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// Runs `f` on the loop tracker, until it ends or the runtime stops.
fn helper<F, Fut>(runtime: &Arc<Runtime>, f: F)
where
    F: FnOnce(Arc<Runtime>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let stop = runtime.lifecycle.stop.clone();
    let work = f(Arc::clone(runtime));
    runtime.lifecycle.loops.spawn(async move {
        tokio::select! {
            biased;
            () = stop.cancelled() => {}
            () = work => {}
        }
    });
}

/// Hands the answers stored for task `id` to the work waiting here.
async fn deliver_stored(runtime: &Runtime, cluster: &dyn ClusterStore, id: &str) {
    match cluster.answers(id).await {
        Ok(answers) => runtime.deliver(id, answers),
        Err(error) => tracing::warn!(task_id = %id, %error, "stored answers not read"),
    }
}

/// Re-reads task `id`, running here (for each such task at a re-read, and for a cancel
/// notice): cancels its work when the row holds a cancel intent (or ended), hands the stored
/// answers to its work when that waits for input (a waiter takes an answer once; the rest
/// are ignored). Whether the work waits is this instance's knowledge, not the row's: a
/// stored answer has already moved the row to `working`.
async fn reread_one(runtime: &Runtime, cluster: &dyn ClusterStore, id: &str) {
    match runtime.store.get(id).await {
        Ok(Some(snapshot)) if snapshot.cancel_requested || snapshot.status.is_terminal() => {
            runtime.cancel(id);
        }
        Ok(Some(_)) if runtime.awaits_input(id) => deliver_stored(runtime, cluster, id).await,
        Ok(_) => {}
        Err(error) => tracing::warn!(task_id = %id, %error, "re-read failed"),
    }
}
