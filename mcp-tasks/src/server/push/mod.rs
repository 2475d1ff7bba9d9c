//! Task status pushed to clients: `subscriptions/listen` with `notifications.taskIds`, and
//! the `notifications/tasks` it streams.
//!
//! rmcp's `SubscriptionFilter` has no `taskIds` and its subscription sink refuses
//! `notifications/tasks`, so a task listen never reaches rmcp: the request guard marks it
//! ([`Checked::task_listen`]) and the transports hand it here (Streamable HTTP in
//! `serve_http.rs`, stdio in `serve_stdio.rs`). A listen without `taskIds` is rmcp's.
//!
//! # What a stream carries
//!
//! 1. The acknowledgement, first: `notifications/subscriptions/acknowledged` whose
//!    `notifications.taskIds` names the requested tasks the caller owns (an unknown id, a
//!    purged one and another owner's are all simply left out, so an id reveals nothing;
//!    `taskIds` is absent when none is agreed). Core filters asked beside `taskIds`
//!    (`toolsListChanged`, ...) are answered as rmcp answers them for this server: it
//!    advertises none of them, so none is agreed.
//! 2. For each agreed task, its state at once, then one `notifications/tasks` on every change
//!    of its status, status message or input requests and on its terminal state (with its
//!    `result` or `error`); then nothing more for that task. Each notification's params are
//!    the `DetailedTask` a `tasks/get` answers at that moment, from the same read
//!    (`Runtime::visible`), plus `_meta["io.modelcontextprotocol/subscriptionId"]`, the listen
//!    request's id, as on every message of the stream. No `notifications/progress` or
//!    `notifications/message` is ever sent on it.
//! 3. At the engine's stop (the end of a shutdown's grace, or the last handle dropped), what
//!    is pending and then the graceful result (`resultType: "complete"` with the
//!    subscription id); a client that closes the stream (HTTP) or sends
//!    `notifications/cancelled` for it (stdio) ends it with nothing more sent. Over HTTP a
//!    stream also ends so, cleanly, when it had nothing to send for its idle timeout, at
//!    its maximum lifetime, or when its bearer token is no longer accepted at a check
//!    ([`HttpOptions`](crate::HttpOptions)'s listen bounds). The crate's client
//!    ([`TaskHandle::wait`](crate::client::TaskHandle::wait)) follows a task across such an
//!    end: it polls, then listens again.
//!
//! # One feed, one read per change
//!
//! One dispatcher per engine (`hub.rs`), started by [`Engine::start`] on the runtime's loops
//! and ended with them (a listen to an engine not started is refused), keeps which streams
//! follow which task: on a change of a followed task it reads the task once and offers that
//! state to every stream following it, whatever their number. Registration and change reads
//! run in that one dispatcher, in order, so a stream never sees an older state after a newer
//! one.
//!
//! It learns of changes from the runtime's one change feed
//! ([`Runtime::subscribe`](crate::runtime::Runtime)), of [`Notice`](crate::store::Notice)s:
//!
//! - **One process** (memory, SQLite): the runtime publishes every task it changes.
//! - **Several instances** (Postgres): every write that changes what `tasks/get` answers (a
//!   status, a status message, an input request, an answer, the end, an expiry) announces
//!   the task on the store's `LISTEN`/`NOTIFY` channel in its own transaction (`Changed`, or
//!   the `Answers` and `Cancel` wake-ups), whichever instance made it, this one included.
//!   The dispatcher of every instance hears it; one with streams following that task reads
//!   it once (one read per change per instance, not per stream), the others read nothing.
//!
//! When the store's listener was cut off and is back (`Missed`), or the dispatcher fell
//! behind, every followed task is read again.
//!
//! # Limits
//!
//! A stream holds at most one pending state per task (a newer one replaces it: a slow reader
//! skips intermediate states, never the latest, never the terminal one), so its buffer is
//! bounded by its ids. One listen names at most [`Limits::max_listen_task_ids`] ids (default
//! 256; `-32602` beyond), and one owner holds at most
//! [`Limits::max_listen_streams_per_owner`] streams open on one server (default 64; `-32603`
//! beyond).
// docs/protocol.md R39-R44, C22-C26.

use std::{collections::HashSet, sync::Arc};

use rmcp::model::{ErrorData, RequestId};
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use self::hub::{Register, Shared, StreamSlot, reserve};
use super::{Engine, negotiation::Checked};
use crate::{Limits, context::answer::kind, errors};

/// How many task ids one `subscriptions/listen` may name by default
/// ([`Limits::DEFAULT_MAX_LISTEN_TASK_IDS`]; set with [`Limits::with_max_listen_task_ids`]).
pub const MAX_TASK_IDS_PER_LISTEN: usize = Limits::DEFAULT_MAX_LISTEN_TASK_IDS;

/// How many task listen streams one owner may hold open on one server at once by default
/// ([`Limits::DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER`]; set with
/// [`Limits::with_max_listen_streams_per_owner`]).
pub const MAX_LISTEN_STREAMS_PER_OWNER: usize = Limits::DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER;

/// The `_meta` key naming the subscription a message belongs to.
const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";

/// A refused listen: the error to answer, with the request's id when it has one.
pub(crate) type Refusal = (Option<RequestId>, ErrorData);

/// Opens a listen stream for `message`, a `subscriptions/listen` the guard marked
/// ([`Checked::task_listen`]), as `owner` (the engine's default owner when `None`).
///
/// # Errors
/// `-32021` when the request does not declare the tasks extension (checked first);
/// `-32602` for a malformed `taskIds` or more than [`Limits::max_listen_task_ids`] of them;
/// `-32603` beyond [`Limits::max_listen_streams_per_owner`] streams of the owner, or when the
/// store fails.
// docs/protocol.md R43, R44, C23.
pub(crate) async fn open(
    engine: &Engine,
    message: &Value,
    checked: &Checked,
    owner: Option<&super::Owner>,
) -> Result<Subscription, Refusal> {
    let id = super::shape::request_id(message);
    let refuse = |error: ErrorData| (id.clone(), error);
    let Some(request_id) = id.clone() else {
        return Err(refuse(ErrorData::invalid_request(
            "subscriptions/listen: the request needs an id (a string or an integer)",
            None,
        )));
    };
    if !checked.negotiation.declares_tasks {
        return Err(refuse(errors::tasks_capability_required()));
    }
    let limits = &engine.runtime.limits;
    let ids = task_ids(message, limits.max_listen_task_ids()).map_err(refuse)?;
    let owner: Arc<str> = owner.map_or_else(|| engine.default_owner.clone(), |o| o.0.clone());
    let slot =
        reserve(&engine.push, &owner, limits.max_listen_streams_per_owner()).map_err(refuse)?;
    let stream = Arc::new(Shared::default());
    let (reply, agreed) = oneshot::channel();
    let register = Register {
        owner,
        ids,
        stream: stream.clone(),
        reply,
    };
    engine.push.register(register).map_err(refuse)?;
    let agreed = agreed
        .await
        .unwrap_or_else(|_| Err(errors::shutting_down()));
    let agreed = agreed.map_err(refuse)?;
    Ok(Subscription {
        id: request_id,
        agreed: Some(agreed),
        stream,
        stop: engine.runtime.lifecycle.stop.clone(),
        stopping: false,
        ended: false,
        result_meta: engine.result_meta.clone(),
        _slot: slot,
    })
}

/// The distinct task ids of the request's `params.notifications.taskIds`.
fn task_ids(message: &Value, limit: usize) -> Result<Vec<Arc<str>>, ErrorData> {
    const FIELD: &str = "notifications.taskIds";
    const EXPECTED: &str = "an array of task ids (strings)";
    let raw = message.pointer("/params/notifications/taskIds");
    let malformed =
        |found: &str| errors::malformed_param("subscriptions/listen", FIELD, EXPECTED, found);
    let Some(Value::Array(raw)) = raw else {
        return Err(malformed(raw.map_or("none", kind)));
    };
    if let Some(other) = raw.iter().find(|id| !id.is_string()) {
        return Err(malformed(&format!("an array holding {}", kind(other))));
    }
    let mut seen = HashSet::new();
    let ids: Vec<Arc<str>> = raw
        .iter()
        .filter_map(Value::as_str)
        .filter(|id| seen.insert(*id))
        .map(Arc::from)
        .collect();
    if ids.len() > limit {
        return Err(errors::too_many_listen_task_ids(ids.len(), limit));
    }
    Ok(ids)
}

/// One open listen stream: the messages to send, in order ([`Subscription::next`]).
pub(crate) struct Subscription {
    id: RequestId,
    /// The agreed ids until the acknowledgement is sent.
    agreed: Option<Vec<Arc<str>>>,
    stream: Arc<Shared>,
    stop: CancellationToken,
    /// The engine stopped: what is pending, then the graceful result, then the end.
    stopping: bool,
    /// The graceful result was sent.
    ended: bool,
    result_meta: Arc<rmcp::model::MetaObject>,
    _slot: StreamSlot,
}

impl Subscription {
    /// The listen request's id (the subscription id).
    #[cfg(feature = "stdio")]
    pub(crate) fn id(&self) -> &RequestId {
        &self.id
    }

    /// The next JSON-RPC message of the stream; `None` once it ended (after the graceful
    /// result). Cancel-safe: nothing is taken while it waits.
    pub(crate) async fn next(&mut self) -> Option<Value> {
        if let Some(agreed) = self.agreed.take() {
            return Some(self.acknowledgement(&agreed));
        }
        loop {
            if let Some((_, state)) = self.stream.take() {
                return Some(self.notification(state));
            }
            if self.stopping {
                return self.graceful_end();
            }
            tokio::select! {
                biased;
                () = self.stream.wake.notified() => {}
                () = self.stop.cancelled() => self.stopping = true,
            }
        }
    }

    /// Ends the stream cleanly from here on: [`next`](Self::next) answers the
    /// acknowledgement if not sent yet and what is pending, then the graceful result, then
    /// `None` (as at the engine's stop).
    #[cfg(feature = "http")]
    pub(crate) fn finish(&mut self) {
        self.stopping = true;
    }

    fn subscription_meta(&self) -> Map<String, Value> {
        Map::from_iter([(SUBSCRIPTION_ID_KEY.to_owned(), json!(self.id))])
    }

    fn acknowledgement(&self, agreed: &[Arc<str>]) -> Value {
        let mut notifications = Map::new();
        if !agreed.is_empty() {
            notifications.insert("taskIds".to_owned(), json!(agreed));
        }
        json!({
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": { "_meta": self.subscription_meta(), "notifications": notifications },
        })
    }

    fn notification(&self, state: Value) -> Value {
        let mut params = match state {
            Value::Object(params) => params,
            _ => Map::new(),
        };
        let meta = params.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.extend(self.subscription_meta());
        }
        json!({ "jsonrpc": "2.0", "method": "notifications/tasks", "params": params })
    }

    /// The graceful result, once; `None` after it.
    fn graceful_end(&mut self) -> Option<Value> {
        if std::mem::replace(&mut self.ended, true) {
            return None;
        }
        let mut meta: Map<String, Value> = self.result_meta.0.clone();
        meta.extend(self.subscription_meta());
        Some(json!({
            "jsonrpc": "2.0",
            "id": self.id,
            "result": { "resultType": "complete", "_meta": meta },
        }))
    }
}

#[cfg(feature = "http")]
mod http;
mod hub;
#[cfg(feature = "stdio")]
mod stdio;

#[cfg(feature = "http")]
pub(crate) use http::serve as serve_http_listen;
pub(crate) use hub::Hub;
#[cfg(feature = "stdio")]
pub(crate) use stdio::Listens;
