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
//!    ([`visible_task`]), plus `_meta["io.modelcontextprotocol/subscriptionId"]`, the listen
//!    request's id, as on every message of the stream. No `notifications/progress` or
//!    `notifications/message` is ever sent on it.
//! 3. At the engine's stop (the end of a shutdown's grace, or the last handle dropped), what
//!    is pending and then the graceful result (`resultType: "complete"` with the
//!    subscription id); a client that closes the stream (HTTP) or sends
//!    `notifications/cancelled` for it (stdio) ends it with nothing more sent.
//!
//! # One feed, one read per change
//!
//! The runtime publishes the id of every task it changes on one in-process feed
//! ([`Runtime::changes`]). One dispatcher per engine, started with the first listen,
//! subscribes to it and keeps which streams follow which task: on a change of a followed task
//! it reads the task once and offers that state to every stream following it, whatever
//! their number. Registration and change reads run in that one dispatcher, in order, so a
//! stream never sees an older state after a newer one.
//!
//! # Limits
//!
//! A stream holds at most one pending state per task (a newer one replaces it: a slow reader
//! skips intermediate states, never the latest, never the terminal one), so its buffer is
//! bounded by its ids. One listen names at most [`MAX_TASK_IDS_PER_LISTEN`] ids (`-32602`
//! beyond), and one owner holds at most [`MAX_LISTEN_STREAMS_PER_OWNER`] streams open
//! (`-32603` beyond).
// docs/protocol.md R39-R44, C22-C26.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, Weak},
};

use rmcp::model::{ErrorData, RequestId};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::{Notify, broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::{Engine, engine::visible_task, negotiation::Checked};
use crate::{errors, runtime::Runtime};

/// How many task ids one `subscriptions/listen` may name.
pub const MAX_TASK_IDS_PER_LISTEN: usize = 256;

/// How many task listen streams one owner may hold open on one server at once.
pub const MAX_LISTEN_STREAMS_PER_OWNER: usize = 64;

/// The `_meta` key naming the subscription a message belongs to.
const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";

/// Whether `params` of a `subscriptions/listen` names `notifications.taskIds`: such a
/// listen is served here.
pub(crate) fn names_task_ids(params: Option<&Value>) -> bool {
    params
        .and_then(|params| params.get("notifications"))
        .and_then(Value::as_object)
        .is_some_and(|filter| filter.contains_key("taskIds"))
}

/// A refused listen: the error to answer, with the request's id when it has one.
pub(crate) type Refusal = (Option<RequestId>, ErrorData);

/// The listen streams of one engine and the dispatcher that feeds them.
#[derive(Default)]
pub(crate) struct Hub {
    state: Mutex<HubState>,
}

#[derive(Default)]
struct HubState {
    /// The dispatcher's registration queue, once it runs.
    dispatcher: Option<mpsc::UnboundedSender<Register>>,
    /// Open streams per owner.
    streams: HashMap<Arc<str>, usize>,
}

impl Hub {
    fn lock(&self) -> std::sync::MutexGuard<'_, HubState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One owner's open stream, counted until dropped.
struct StreamSlot {
    hub: Weak<Hub>,
    owner: Arc<str>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.upgrade() {
            let mut state = hub.lock();
            if let Some(count) = state.streams.get_mut(&self.owner) {
                *count -= 1;
                if *count == 0 {
                    state.streams.remove(&self.owner);
                }
            }
        }
    }
}

/// What the dispatcher is asked when a stream opens.
struct Register {
    owner: Arc<str>,
    ids: Vec<Arc<str>>,
    stream: Arc<Shared>,
    /// The agreed ids, in request order.
    reply: oneshot::Sender<Result<Vec<Arc<str>>, ErrorData>>,
}

/// The state one stream shares with the dispatcher: the latest undelivered state per task.
#[derive(Default)]
struct Shared {
    pending: Mutex<Pending>,
    wake: Notify,
}

#[derive(Default)]
struct Pending {
    /// In the order the tasks first became pending; at most one entry per task.
    queue: Vec<(Arc<str>, Value)>,
    /// Tasks whose terminal state was offered: nothing more is taken for them.
    ended: HashSet<Arc<str>>,
}

impl Shared {
    /// Offers `state` of task `id`: replaces a pending older one, or queues it.
    fn offer(&self, id: &Arc<str>, state: &Value, terminal: bool) {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if pending.ended.contains(id) {
            return;
        }
        match pending.queue.iter_mut().find(|(queued, _)| queued == id) {
            Some((_, queued)) => queued.clone_from(state),
            None => pending.queue.push((id.clone(), state.clone())),
        }
        if terminal {
            pending.ended.insert(id.clone());
        }
        drop(pending);
        self.wake.notify_one();
    }

    fn take(&self) -> Option<(Arc<str>, Value)> {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (!pending.queue.is_empty()).then(|| pending.queue.remove(0))
    }
}

/// Opens a listen stream for `message`, a `subscriptions/listen` the guard marked
/// ([`Checked::task_listen`]), as `owner` (the engine's default owner when `None`).
///
/// # Errors
/// `-32021` when the request does not declare the tasks extension (checked first);
/// `-32602` for a malformed `taskIds` or more than [`MAX_TASK_IDS_PER_LISTEN`] of them;
/// `-32603` beyond [`MAX_LISTEN_STREAMS_PER_OWNER`] streams of the owner, or when the store
/// fails.
// docs/protocol.md R43, R44, C23.
pub(crate) async fn open(
    engine: &Engine,
    message: &Value,
    checked: &Checked,
    owner: Option<&super::Owner>,
) -> Result<Subscription, Refusal> {
    let id = super::guard::request_id(message);
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
    let ids = task_ids(message).map_err(refuse)?;
    let owner: Arc<str> = owner.map_or_else(|| engine.default_owner.clone(), |o| o.0.clone());
    let slot = reserve(&engine.push, &owner).map_err(refuse)?;
    let stream = Arc::new(Shared::default());
    let (reply, agreed) = oneshot::channel();
    let register = Register {
        owner,
        ids,
        stream: stream.clone(),
        reply,
    };
    dispatcher(&engine.push, &engine.runtime)
        .send(register)
        .map_err(|_| refuse(errors::shutting_down()))?;
    let agreed = match agreed.await {
        Ok(Ok(agreed)) => agreed,
        Ok(Err(error)) => return Err(refuse(error)),
        Err(_) => return Err(refuse(errors::shutting_down())),
    };
    Ok(Subscription {
        id: request_id,
        agreed: Some(agreed),
        stream,
        stop: engine.runtime.lifecycle.stop_token().clone(),
        stopping: false,
        ended: false,
        result_meta: engine.result_meta.clone(),
        _slot: slot,
    })
}

/// The distinct task ids of the request's `params.notifications.taskIds`.
fn task_ids(message: &Value) -> Result<Vec<Arc<str>>, ErrorData> {
    const FIELD: &str = "notifications.taskIds";
    const EXPECTED: &str = "an array of task ids (strings)";
    let raw = message
        .get("params")
        .and_then(|params| params.get("notifications"))
        .and_then(|filter| filter.get("taskIds"));
    let Some(Value::Array(raw)) = raw else {
        let found = raw.map_or("none", kind);
        return Err(errors::malformed_param(
            "subscriptions/listen",
            FIELD,
            EXPECTED,
            found,
        ));
    };
    if let Some(other) = raw.iter().find(|id| !id.is_string()) {
        return Err(errors::malformed_param(
            "subscriptions/listen",
            FIELD,
            EXPECTED,
            &format!("an array holding {}", kind(other)),
        ));
    }
    let mut seen = HashSet::new();
    let ids: Vec<Arc<str>> = raw
        .iter()
        .filter_map(Value::as_str)
        .filter(|id| seen.insert(*id))
        .map(Arc::from)
        .collect();
    if ids.len() > MAX_TASK_IDS_PER_LISTEN {
        return Err(errors::too_many_listen_task_ids(
            ids.len(),
            MAX_TASK_IDS_PER_LISTEN,
        ));
    }
    Ok(ids)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Counts one more open stream of `owner`, or refuses it at the limit.
fn reserve(hub: &Arc<Hub>, owner: &Arc<str>) -> Result<StreamSlot, ErrorData> {
    let mut state = hub.lock();
    let count = state.streams.entry(owner.clone()).or_insert(0);
    if *count >= MAX_LISTEN_STREAMS_PER_OWNER {
        return Err(errors::too_many_listen_streams(
            owner,
            MAX_LISTEN_STREAMS_PER_OWNER,
        ));
    }
    *count += 1;
    Ok(StreamSlot {
        hub: Arc::downgrade(hub),
        owner: owner.clone(),
    })
}

/// The dispatcher's registration queue, starting the dispatcher on first use.
fn dispatcher(hub: &Hub, runtime: &Arc<Runtime>) -> mpsc::UnboundedSender<Register> {
    let mut state = hub.lock();
    if let Some(sender) = state.dispatcher.as_ref().filter(|s| !s.is_closed()) {
        return sender.clone();
    }
    let (sender, registrations) = mpsc::unbounded_channel();
    // Subscribed before the first registration is read: no change after it is missed.
    let changes = runtime.changes.subscribe();
    tokio::spawn(dispatch(runtime.clone(), changes, registrations));
    state.dispatcher = Some(sender.clone());
    sender
}

/// The streams following one task.
struct Watch {
    owner: Arc<str>,
    /// The state last offered.
    last: Value,
    streams: Vec<Weak<Shared>>,
}

/// The dispatcher: registrations and change reads, one at a time, until the engine stops.
async fn dispatch(
    runtime: Arc<Runtime>,
    mut changes: broadcast::Receiver<Arc<str>>,
    mut registrations: mpsc::UnboundedReceiver<Register>,
) {
    let stop = runtime.lifecycle.stop_token().clone();
    let mut watches: HashMap<Arc<str>, Watch> = HashMap::new();
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => break,
            register = registrations.recv() => match register {
                Some(register) => registered(&runtime, &mut watches, register).await,
                None => break,
            },
            change = changes.recv() => match change {
                Ok(id) => refresh(&runtime, &mut watches, &id).await,
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "task listen dispatcher fell behind; reading every followed task");
                    let ids: Vec<Arc<str>> = watches.keys().cloned().collect();
                    for id in ids {
                        refresh(&runtime, &mut watches, &id).await;
                    }
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
        }
    }
}

/// The `DetailedTask` of `snapshot` as JSON, and whether it is terminal.
fn state_of(snapshot: crate::store::TaskSnapshot) -> (Value, bool) {
    let terminal = snapshot.status.is_terminal();
    let detailed = snapshot.into_detailed();
    let state = serde_json::to_value(&detailed).unwrap_or(Value::Null);
    (state, terminal)
}

async fn registered(runtime: &Runtime, watches: &mut HashMap<Arc<str>, Watch>, register: Register) {
    let Register {
        owner,
        ids,
        stream,
        reply,
    } = register;
    let mut agreed = Vec::new();
    for id in ids {
        let snapshot = match visible_task(runtime, &id, &owner).await {
            Ok(Some(snapshot)) => snapshot,
            Ok(None) => continue,
            Err(error) => {
                let _ = reply.send(Err(errors::store_failure(&error)));
                return;
            }
        };
        let (state, terminal) = state_of(snapshot);
        stream.offer(&id, &state, terminal);
        agreed.push(id.clone());
        if terminal {
            watches.remove(&id);
            continue;
        }
        match watches.get_mut(&id) {
            Some(watch) => {
                // This read may be newer than what the other streams were offered.
                if watch.last != state {
                    offer_all(watch, &id, &state, false);
                    watch.last = state;
                }
                watch.streams.push(Arc::downgrade(&stream));
            }
            None => {
                watches.insert(
                    id,
                    Watch {
                        owner: owner.clone(),
                        last: state,
                        streams: vec![Arc::downgrade(&stream)],
                    },
                );
            }
        }
    }
    let _ = reply.send(Ok(agreed));
}

/// Offers `state` to every live stream of `watch`, forgetting the closed ones.
fn offer_all(watch: &mut Watch, id: &Arc<str>, state: &Value, terminal: bool) {
    watch.streams.retain(|stream| match stream.upgrade() {
        Some(stream) => {
            stream.offer(id, state, terminal);
            true
        }
        None => false,
    });
}

/// Task `id` changed: one read, offered to every stream following it.
async fn refresh(runtime: &Runtime, watches: &mut HashMap<Arc<str>, Watch>, id: &Arc<str>) {
    let Some(watch) = watches.get_mut(id) else {
        return;
    };
    watch.streams.retain(|stream| stream.strong_count() > 0);
    if watch.streams.is_empty() {
        watches.remove(id);
        return;
    }
    let owner = watch.owner.clone();
    match visible_task(runtime, id, &owner).await {
        Ok(Some(snapshot)) => {
            let (state, terminal) = state_of(snapshot);
            let Some(watch) = watches.get_mut(id) else {
                return;
            };
            if watch.last != state || terminal {
                offer_all(watch, id, &state, terminal);
                watch.last = state;
            }
            if terminal {
                watches.remove(id);
            }
        }
        // Purged: there is nothing more to say about it.
        Ok(None) => {
            watches.remove(id);
        }
        Err(error) => {
            tracing::warn!(task_id = %id, %error, "a followed task could not be read; the next change reads it again");
        }
    }
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

    fn subscription_meta(&self) -> Map<String, Value> {
        let mut meta = Map::new();
        meta.insert(SUBSCRIPTION_ID_KEY.to_owned(), id_value(&self.id));
        meta
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
        let meta = params
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.extend(self.subscription_meta());
        }
        json!({ "jsonrpc": "2.0", "method": "notifications/tasks", "params": params })
    }

    /// The graceful result, once; `None` after it.
    fn graceful_end(&mut self) -> Option<Value> {
        if !self.ended {
            self.ended = true;
            let mut meta: Map<String, Value> = self.result_meta.0.clone();
            meta.extend(self.subscription_meta());
            return Some(json!({
                "jsonrpc": "2.0",
                "id": id_value(&self.id),
                "result": { "resultType": "complete", "_meta": meta },
            }));
        }
        None
    }
}

fn id_value(id: &RequestId) -> Value {
    serde_json::to_value(id).unwrap_or(Value::Null)
}

/// The `requestId` of a `notifications/cancelled`, when `message` is one (stdio ends a
/// listen stream with it).
pub(crate) fn cancelled_request(message: &Value) -> Option<RequestId> {
    if message.get("method").and_then(Value::as_str) != Some("notifications/cancelled")
        || message.get("id").is_some()
    {
        return None;
    }
    RequestId::deserialize(message.get("params")?.get("requestId")?).ok()
}

#[cfg(feature = "http")]
pub(crate) use http::serve as serve_http_listen;

#[cfg(feature = "http")]
mod http {
    use std::{convert::Infallible, time::Duration};

    use axum::{
        body::{Body, Bytes},
        extract::Request,
        http::{HeaderValue, Method, StatusCode, header},
        response::{IntoResponse, Response},
    };
    use rmcp::transport::streamable_http_server::{
        StreamableHttpService, session::local::LocalSessionManager,
    };
    use serde_json::Value;

    use super::{Refusal, Subscription, open};
    use crate::server::{Engine, Owner, guard, negotiation::Checked};

    /// An SSE comment this often keeps an idle stream open through proxies.
    const KEEP_ALIVE: Duration = Duration::from_secs(15);

    /// Serves one task listen over Streamable HTTP: the `Host` and `Origin` checks rmcp's
    /// service makes, then the stream as `text/event-stream` (or the refusal as one JSON
    /// error, HTTP 400).
    pub(crate) async fn serve<S>(
        engine: &Engine,
        service: &StreamableHttpService<S, LocalSessionManager>,
        request: Request,
    ) -> Response
    where
        S: rmcp::ServerHandler + Clone + Send + Sync + 'static,
    {
        // rmcp's service checks `Host` and `Origin` before anything else and answers any
        // method other than POST 405: a PUT of the same headers runs exactly its checks.
        let mut probe = axum::http::Request::builder()
            .method(Method::PUT)
            .uri(request.uri().clone())
            .body(Body::empty())
            .expect("a request of a valid method and uri");
        *probe.headers_mut() = request.headers().clone();
        let checked_headers = service.handle(probe).await;
        if checked_headers.status() != StatusCode::METHOD_NOT_ALLOWED {
            return checked_headers.into_response();
        }
        let (parts, body) = request.into_parts();
        let Some(checked) = parts.extensions.get::<Checked>().cloned() else {
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        };
        let bytes = match axum::body::to_bytes(body, usize::MAX).await {
            Ok(bytes) => bytes,
            Err(_) => return StatusCode::BAD_REQUEST.into_response(),
        };
        let message: Value = match guard::parse(&bytes) {
            Ok(message) => message,
            Err(error) => return refuse((None, error)),
        };
        if let Err(refusal) = check_headers(&parts.headers, &message) {
            return refuse(refusal);
        }
        let owner = parts.extensions.get::<Owner>();
        match open(engine, &message, &checked, owner).await {
            Ok(subscription) => sse(subscription),
            Err(refusal) => refuse(refusal),
        }
    }

    /// `Mcp-Method`, when sent, must name the body's method, and `MCP-Protocol-Version`,
    /// when sent, the version of its `_meta` (`-32020` otherwise).
    // docs/protocol.md C31-C36.
    fn check_headers(headers: &axum::http::HeaderMap, message: &Value) -> Result<(), Refusal> {
        let id = guard::request_id(message);
        let mismatch = |what: String| {
            (
                id.clone(),
                rmcp::model::ErrorData::new(
                    rmcp::model::ErrorCode(-32020),
                    format!("Header mismatch: {what}"),
                    None,
                ),
            )
        };
        if let Some(method) = headers.get("mcp-method")
            && method.as_bytes() != b"subscriptions/listen"
        {
            return Err(mismatch(format!(
                "the Mcp-Method header `{}` does not name the body's method `subscriptions/listen`",
                String::from_utf8_lossy(method.as_bytes())
            )));
        }
        let meta_version = message
            .get("params")
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
            .and_then(Value::as_str);
        if let (Some(header), Some(meta)) = (headers.get("mcp-protocol-version"), meta_version)
            && header.as_bytes() != meta.as_bytes()
        {
            return Err(mismatch(format!(
                "the MCP-Protocol-Version header `{}` is not the request's _meta protocol version `{meta}`",
                String::from_utf8_lossy(header.as_bytes())
            )));
        }
        Ok(())
    }

    fn refuse((id, error): Refusal) -> Response {
        let mut response = Response::new(Body::from(guard::error_response(id, error)));
        *response.status_mut() = StatusCode::BAD_REQUEST;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }

    /// The stream as server-sent events, one JSON-RPC message per event. Dropped when the
    /// client closes the connection, which ends the subscription.
    fn sse(subscription: Subscription) -> Response {
        let events = futures::stream::unfold(Some(subscription), |subscription| async move {
            let mut subscription = subscription?;
            let event = match tokio::time::timeout(KEEP_ALIVE, subscription.next()).await {
                Ok(Some(message)) => {
                    let mut event = b"data: ".to_vec();
                    event.extend_from_slice(&serde_json::to_vec(&message).unwrap_or_default());
                    event.extend_from_slice(b"\n\n");
                    event
                }
                Ok(None) => return None,
                Err(_) => b":\n\n".to_vec(),
            };
            Some((Ok::<_, Infallible>(Bytes::from(event)), Some(subscription)))
        });
        let mut response = Response::new(Body::from_stream(events));
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        response
    }
}

#[cfg(feature = "stdio")]
pub(crate) use stdio::Listens;

#[cfg(feature = "stdio")]
mod stdio {
    use std::collections::HashMap;

    use rmcp::model::RequestId;
    use serde_json::Value;
    use tokio::sync::mpsc;
    use tokio_util::sync::CancellationToken;

    use super::{Refusal, open};
    use crate::server::{Engine, negotiation::Checked};

    /// The task listen streams of one stdio connection, by subscription id. Dropping it
    /// (the input ended) ends them all.
    #[derive(Default)]
    pub(crate) struct Listens {
        open: HashMap<RequestId, CancellationToken>,
    }

    impl Drop for Listens {
        fn drop(&mut self) {
            for cancel in self.open.values() {
                cancel.cancel();
            }
        }
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
            self.open.retain(|_, cancel| !cancel.is_cancelled());
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
            if let Some(replaced) = self.open.insert(id, cancel) {
                // A client reusing the id of an open stream (C1 forbids it) ends the old one.
                replaced.cancel();
            }
            Ok(())
        }

        /// Ends the stream of `id` (a `notifications/cancelled` for it): nothing more is
        /// sent on it. Whether `id` was one of these streams.
        pub(crate) fn cancel(&mut self, id: &RequestId) -> bool {
            match self.open.remove(id) {
                Some(cancel) => {
                    cancel.cancel();
                    true
                }
                None => false,
            }
        }
    }
}
