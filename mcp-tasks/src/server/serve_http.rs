//! Serving over Streamable HTTP.

use std::{
    future::Future,
    io,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use axum::{
    body::{Body, Bytes},
    extract::Request,
    http::{HeaderValue, Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tokio::{net::TcpListener, time::error::Elapsed};
use tokio_util::sync::CancellationToken;

use rmcp::ServerHandler;

use super::{
    Engine, connections, guard,
    http_options::{HttpOptions, ListenBounds},
    negotiation::Checked,
    push::serve_http_listen,
    shape,
};
use crate::{Limits, ShutdownReport, errors};

/// The path [`serve_http`] and [`http_router`] answer on.
pub(crate) const MCP_PATH: &str = "/mcp";

/// The liveness endpoint of [`serve_http`] and [`http_router`]: `GET` answers `200` with
/// `{"live":true}` for as long as the process serves HTTP, draining included (an
/// orchestrator that restarts unhealthy processes must not kill one that drains). No
/// authentication, no `Host` or `Origin` check. A router that serves these paths itself
/// leaves both out with [`HttpOptions::without_health_endpoints`].
pub const LIVENESS_PATH: &str = "/healthz";

/// The readiness endpoint of [`serve_http`] and [`http_router`]: `GET` answers `200` with
/// `{"ready":true}` when this instance takes new calls, and `503` with
/// `{"ready":false,"reason":"..."}` while it drains
/// ([`serve_http_with_shutdown`]), while the served engine is not running (not
/// started, or shutting down), or while its task store does not answer a read within
/// [`READINESS_STORE_TIMEOUT`]. Point the balancer's health check here. No
/// authentication, no `Host` or `Origin` check.
pub const READINESS_PATH: &str = "/readyz";

/// How long [`READINESS_PATH`] waits for the task store to answer one read before it
/// reports the instance not ready.
pub const READINESS_STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// The id the readiness probe reads: no task has it (task ids are random), so the read is
/// an index lookup that finds nothing.
const PROBE_TASK_ID: &str = "mcp-tasks-readiness-probe";

/// The `Retry-After` (seconds) of a `tools/call` refused while the server drains.
const DRAIN_RETRY_AFTER: HeaderValue = HeaderValue::from_static("1");

/// Serves `server` at `/mcp` on `listener` until the process ends: the one entry point for
/// Streamable HTTP ([`http_router`] is the same server as an axum router, to add layers or
/// routes or to serve it yourself).
///
/// `server` is a [`TaskServer`](crate::TaskServer) or any rmcp handler of your own that
/// routes to an [`Engine`] and names it with `AsRef<Engine>` (see
/// [delegating](crate::server#delegating-from-an-existing-handler)): that engine is started
/// first ([`Engine::start`]), its [`Limits`](crate::Limits)
/// ([`EngineBuilder::with_limits`](crate::EngineBuilder::with_limits)) bound every request,
/// and it serves task listens (`subscriptions/listen` naming `taskIds`). `options` says who
/// may call (a bearer token) and from which browser origins and hosts.
///
/// Every accepted connection gets `TCP_NODELAY`: without it, SSE responses on keep-alive
/// connections stall about 40 ms each (Nagle against delayed ACK). A client has
/// [`HttpOptions::with_header_read_timeout`] to send a request's headers (30 s by default)
/// and is disconnected after it; at most [`HttpOptions::with_max_connections`] connections
/// are open at once (1024 by default), and one beyond is closed as soon as it is accepted.
///
/// Without authentication ([`HttpOptions::with_bearer`],
/// [`HttpOptions::with_static_tokens`]) it serves only a loopback listener (`127.0.0.1`,
/// `::1`): on any other address it refuses to start, unless
/// [`HttpOptions::allow_anonymous`] says that something else guards it.
///
/// ```no_run
/// # async fn run(toolkit: mcp_tasks::Toolkit) -> std::io::Result<()> {
/// use mcp_tasks::{HttpOptions, StaticTokens, TaskServer};
/// let tokens = StaticTokens::parse("alice:TOKEN_A,bob:TOKEN_B").map_err(std::io::Error::other)?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// let options = HttpOptions::new().with_static_tokens(tokens);
/// mcp_tasks::serve_http(listener, TaskServer::new(toolkit), options).await
/// # }
/// ```
///
/// # Errors
/// An I/O error of the listener; a listener on an address other than loopback without
/// authentication nor [`HttpOptions::allow_anonymous`] as [`io::ErrorKind::InvalidInput`],
/// before anything starts; an engine that was shut down
/// ([`StartError::Stopped`](crate::StartError)) as [`io::ErrorKind::Other`].
pub async fn serve_http<S>(listener: TcpListener, server: S, options: HttpOptions) -> io::Result<()>
where
    S: ServerHandler + AsRef<Engine> + Clone + Send + Sync + 'static,
{
    refuse_anonymous_bind(&listener, &options)?;
    server.as_ref().start().map_err(io::Error::other)?;
    let bounds = options.connections;
    let app = router(server, options, Draining::default());
    connections::serve(listener, app, bounds, CancellationToken::new()).await;
    Ok(())
}

/// Refuses to serve an address other than loopback without authentication, unless
/// [`HttpOptions::allow_anonymous`] says so.
fn refuse_anonymous_bind(listener: &TcpListener, options: &HttpOptions) -> io::Result<()> {
    let addr = listener.local_addr()?;
    if options.bearer.is_some() || options.anonymous || connections::is_loopback(addr) {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "refusing to serve {addr} without authentication: every caller would be \
             anonymous and share one owner's tasks and quotas. Set a bearer validator \
             (HttpOptions::with_bearer or HttpOptions::with_static_tokens), bind a loopback \
             address (127.0.0.1 or ::1), or, when something else guards this address, say so \
             with HttpOptions::allow_anonymous()"
        ),
    ))
}

/// [`serve_http`] until `signal` resolves, then a graceful stop, in this order:
///
/// 1. **Readiness goes false** ([`READINESS_PATH`] answers `503`), and every new
///    `tools/call` is refused with HTTP `503`, `Retry-After: 1` and a JSON-RPC error
///    (`-32603`, "the server is shutting down ... retry on another instance", `data:
///    {"retryable": true}`): a balancer that retries on `503` (nginx:
///    `proxy_next_upstream http_503 non_idempotent`) sends the call to another instance,
///    and a client without one can retry later.
/// 2. **The engine shuts down** with the grace period of
///    [`EngineBuilder::with_shutdown_grace`](super::EngineBuilder::with_shutdown_grace)
///    (default 10 s, see [`Engine::shutdown`]): the work running here has the grace period
///    to end on its own; what still runs then is drained: a `resume` tool's task is
///    released to another instance at once (or, on a single instance with a durable store,
///    resumed at the next start), a `fail` tool's task ends `failed` saying the server was
///    shut down. All along, everything but new `tools/call` is still served: `tasks/get`,
///    `tasks/update` (answers to the work still running here) and `tasks/cancel`.
/// 3. **HTTP stops**: no new connection is accepted, and the requests in flight finish
///    (each has up to the grace period again; a connection still open after it, such as a
///    legacy session's event stream, is closed).
///
/// Returns the engine's [`ShutdownReport`]. In a server process, pass a future
/// that resolves on SIGTERM and Ctrl-C (see the example server).
///
/// ```no_run
/// # async fn run(toolkit: mcp_tasks::Toolkit) -> std::io::Result<()> {
/// use mcp_tasks::{HttpOptions, StaticTokens, TaskServer};
/// let tokens = StaticTokens::parse("alice:TOKEN_A").map_err(std::io::Error::other)?;
/// let listener = tokio::net::TcpListener::bind("0.0.0.0:8080").await?;
/// let ctrl_c = async { tokio::signal::ctrl_c().await.ok(); };
/// let report = mcp_tasks::serve_http_with_shutdown(
///     listener, TaskServer::new(toolkit), HttpOptions::new().with_static_tokens(tokens), ctrl_c,
/// ).await?;
/// eprintln!("released {} tasks to other instances", report.released);
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// As [`serve_http`].
pub async fn serve_http_with_shutdown<S, F>(
    listener: TcpListener,
    server: S,
    options: HttpOptions,
    signal: F,
) -> io::Result<ShutdownReport>
where
    S: ServerHandler + AsRef<Engine> + Clone + Send + Sync + 'static,
    F: Future<Output = ()> + Send,
{
    refuse_anonymous_bind(&listener, &options)?;
    let engine = server.as_ref().clone();
    engine.start().map_err(io::Error::other)?;
    let draining = Draining::default();
    let bounds = options.connections;
    let app = router(server, options, draining.clone());
    let stop_http = CancellationToken::new();
    let mut serving = tokio::spawn(connections::serve(listener, app, bounds, stop_http.clone()));
    tokio::select! {
        served = &mut serving => {
            // The connection loop panicked before any signal: nothing to drain but the engine.
            engine.shutdown(Duration::ZERO).await;
            served.map_err(io::Error::other)?;
            return Ok(ShutdownReport::default());
        }
        () = signal => {}
    }
    draining.store(true, Ordering::Release);
    tracing::info!("draining: readiness is false and new tool calls are refused");
    let grace = engine.runtime.shutdown_grace;
    let report = engine.shutdown(grace).await;
    stop_http.cancel();
    match tokio::time::timeout(grace.max(Duration::from_secs(1)), &mut serving).await {
        Ok(served) => served.map_err(io::Error::other)?,
        Err(_) => {
            tracing::warn!("requests still in flight after the grace period were cut off");
            serving.abort();
        }
    }
    tracing::info!(?report, "drained and stopped");
    Ok(report)
}

/// Whether [`serve_http_with_shutdown`] got its signal: readiness is false, and new
/// `tools/call` are refused.
type Draining = Arc<AtomicBool>;

/// HTTP 503 with `Retry-After` and a JSON-RPC error saying to retry elsewhere.
fn drain_refusal(id: Option<rmcp::model::RequestId>) -> Response {
    let mut error = errors::shutting_down();
    error.data = Some(serde_json::json!({ "retryable": true }));
    let response = guard::error_reply(StatusCode::SERVICE_UNAVAILABLE, id, error);
    ([(header::RETRY_AFTER, DRAIN_RETRY_AFTER)], response).into_response()
}

/// Whether the request names `tasks/update` or `tasks/cancel` in its `Mcp-Method` header
/// (every request on the 2026-07-28 wire has one, and rmcp holds it to the body's method):
/// rmcp builds their answers, and [`with_info`] puts the server's info in them.
fn acknowledged(request: &Request) -> bool {
    request
        .headers()
        .get(guard::MCP_METHOD)
        .is_some_and(|method| method == "tasks/update" || method == "tasks/cancel")
}

/// The largest answer [`with_info`] reads: an acknowledgement is 58 bytes and its id.
const ACK_BYTES: usize = 4096;

/// `response` with the engine's server info in its result's `_meta` where it lacks it. A
/// handler returns `()` for `tasks/update` and `tasks/cancel`, so rmcp builds those
/// acknowledgements and the engine cannot put it there. Reads a whole JSON body of at most
/// [`ACK_BYTES`]; any other answer (an error, a stream) is passed on.
// docs/protocol.md C9.
async fn with_info(response: Response, engine: &Engine) -> Response {
    let size = axum::body::HttpBody::size_hint(response.body()).exact();
    let small = size.is_some_and(|n| n <= ACK_BYTES as u64);
    if !small || response.status() != StatusCode::OK || !guard::is_json(response.headers()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // A body of an exact size within the limit: a failure would be the body's own.
    let Ok(bytes) = axum::body::to_bytes(body, ACK_BYTES).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let Ok(mut message) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let meta = message
        .get_mut("result")
        .and_then(serde_json::Value::as_object_mut)
        .map(|result| {
            result
                .entry("_meta")
                .or_insert_with(|| serde_json::json!({}))
        })
        .and_then(serde_json::Value::as_object_mut);
    let Some(meta) = meta else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let held = meta.len();
    engine.join_info(meta);
    if meta.len() == held {
        return Response::from_parts(parts, Body::from(bytes));
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(message.to_string()))
}

/// A JSON body (axum's `json` feature is off).
fn json_body(value: &serde_json::Value) -> impl IntoResponse + use<> {
    ([(header::CONTENT_TYPE, guard::JSON)], value.to_string())
}

/// What [`READINESS_PATH`] answers (see there).
async fn readiness(draining: Draining, engine: Engine) -> Response {
    let not_ready = |reason: String| {
        let body = json_body(&serde_json::json!({ "ready": false, "reason": reason }));
        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    };
    if draining.load(Ordering::Acquire) {
        return not_ready("the server is draining: it is shutting down".into());
    }
    if !engine.is_running() {
        return not_ready("the engine is not running (not started, or shutting down)".into());
    }
    let millis = READINESS_STORE_TIMEOUT.as_millis();
    match tokio::time::timeout(READINESS_STORE_TIMEOUT, engine.store().get(PROBE_TASK_ID)).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => return not_ready(format!("the task store is unreachable: {error}")),
        Err(_) => return not_ready(format!("the task store did not answer within {millis} ms")),
    }
    json_body(&serde_json::json!({ "ready": true })).into_response()
}

/// An axum router serving `server` at `/mcp` with `options`, as [`serve_http`] serves it
/// (its engine started here; a failure to start, which means the engine was shut down, is
/// logged):
/// behind the bearer guard when one is set, with the request guard and the `Origin` and
/// `Host` checks always. Add your own layers to it, for example one that authenticates the
/// caller and inserts an [`Owner`](crate::Owner) into the request's extensions.
///
/// The request guard answers malformed requests and bodies over
/// [`Limits::max_request_bytes`](crate::Limits::max_request_bytes) with a JSON-RPC error
/// instead of rmcp's answer, and none of them is dispatched (see
/// [the server module](crate::server#malformed-requests)).
/// A modern request's answer is one `application/json` body unless the handler sends
/// something before it (then SSE); legacy `initialize` clients get sessions.
///
/// The router cannot see the address it is served on, so what [`serve_http`] checks there
/// is the caller's to check: serve it without authentication only on a loopback address,
/// or behind something that authenticates. It also cannot see connections: the header-read
/// deadline and the connection cap of [`HttpOptions`] are [`serve_http`]'s, and a server of
/// your own needs its own (the body deadline and the listen stream bounds hold here).
pub fn http_router<S>(server: S, options: HttpOptions) -> axum::Router
where
    S: ServerHandler + AsRef<Engine> + Clone + Send + Sync + 'static,
{
    if let Err(error) = server.as_ref().start() {
        tracing::error!(%error, "the engine of the served handler did not start");
    }
    router(server, options, Draining::default())
}

/// [`http_router`] without starting an engine: [`serve_http`] has started it already, and
/// answered a failure to start as its error.
fn router<S>(server: S, options: HttpOptions, draining: Draining) -> axum::Router
where
    S: ServerHandler + AsRef<Engine> + Clone + Send + Sync + 'static,
{
    let engine = server.as_ref().clone();
    let limits = engine.limits().clone();
    // rmcp's service, with the `Origin` and `Host` checks of `options`.
    let config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .with_max_request_body_bytes(limits.max_request_bytes());
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        options.config(config),
    );
    let mcp = Mcp(Arc::new(McpInner {
        service,
        engine: engine.clone(),
        limits,
        draining: draining.clone(),
        body_timeout: options.body_timeout,
        listen: options.listen,
    }));
    let mut router = axum::Router::new().route_service(MCP_PATH, mcp);
    if let Some(bearer) = &options.bearer {
        router = bearer.protect(router);
    }
    // Added after the guard: the metadata is what a client reads before it has a token.
    if let Some(resource) = &options.protected_resource {
        router = resource.serve(router);
    }
    if !options.health {
        return router;
    }
    // Added last: no layer above applies to them (no token, no Host or Origin check).
    let live = axum::routing::get(|| async { json_body(&serde_json::json!({ "live": true })) });
    let ready = axum::routing::get(move || readiness(draining.clone(), engine.clone()));
    router
        .route(LIVENESS_PATH, live)
        .route(READINESS_PATH, ready)
}

/// `/mcp`: the drain check, the request guard, task listens and rmcp's Streamable HTTP
/// service, as one tower service. A request costs one `Arc` clone here: no middleware
/// stack, no boxed `Next`, no clone of rmcp's service or of the engine.
#[derive(Clone)]
struct Mcp<S>(Arc<McpInner<S>>);

struct McpInner<S> {
    service: StreamableHttpService<S, LocalSessionManager>,
    /// The served engine: it serves task listens (rmcp has no `taskIds`).
    engine: Engine,
    limits: Limits,
    draining: Draining,
    /// How long a body may take to arrive ([`HttpOptions::with_body_timeout`]).
    body_timeout: Duration,
    listen: ListenBounds,
}

impl<S> tower_service::Service<Request> for Mcp<S>
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let inner = self.0.clone();
        if acknowledged(&request) {
            // A future of its own: every other request's stays as it was.
            return Box::pin(async move {
                let response = inner.serve(request).await;
                Ok(with_info(response, &inner.engine).await)
            });
        }
        Box::pin(async move { Ok(inner.serve(request).await) })
    }
}

impl<S> McpInner<S>
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    async fn serve(&self, request: Request) -> Response {
        if request.method() != Method::POST {
            return self.service.handle(request).await.into_response();
        }
        let draining = self.draining.load(Ordering::Acquire);
        let json = guard::is_json(request.headers());
        if !draining && !json {
            return self.service.handle(request).await.into_response();
        }
        let (parts, body) = request.into_parts();
        let bytes = match self.read_body(body).await {
            Ok(Ok(bytes)) => bytes,
            // Unreadable or over the limit: nothing to serve it with while draining.
            Ok(Err(_)) | Err(_) if draining => return drain_refusal(None),
            Ok(Err(response)) => return response,
            Err(_) => return guard::body_timed_out(self.body_timeout),
        };
        // While draining a `tools/call` is refused; anything else is served as usual.
        if draining
            && let Ok(message) = shape::parse(&bytes)
            && message.get("method").and_then(|m| m.as_str()) == Some("tools/call")
        {
            return drain_refusal(shape::request_id(&message));
        }
        if !json {
            let request = Request::from_parts(parts, Body::from(bytes));
            return self.service.handle(request).await.into_response();
        }
        if guard::rmcp_first(&parts.headers, &bytes, &self.limits) {
            // One parse, rmcp's; the guard reads the body only when rmcp refused it.
            let request = Request::from_parts(parts, Body::from(bytes.clone()));
            let response = self.service.handle(request).await.into_response();
            return guard::recheck(response.status(), &bytes, &self.limits).unwrap_or(response);
        }
        let request = match guard::admit(&self.limits, parts, bytes) {
            Ok(request) => request,
            Err(refusal) => return *refusal,
        };
        let checked = request.extensions().get::<Checked>();
        if checked.is_some_and(|checked| checked.task_listen) {
            return serve_http_listen(&self.engine, &self.service, request, self.listen).await;
        }
        self.service.handle(request).await.into_response()
    }

    /// `body` in full within the body timeout; one that is here already (most are) is read
    /// without arming the timer. A function of its own: the read's state does not stay in
    /// `serve`'s future through the awaits after it (every request moves that future).
    async fn read_body(&self, body: Body) -> Result<Result<Bytes, Response>, Elapsed> {
        let mut read = std::pin::pin!(guard::read_body(body, self.limits.max_request_bytes()));
        match futures::poll!(read.as_mut()) {
            Poll::Ready(read) => Ok(read),
            Poll::Pending => tokio::time::timeout(self.body_timeout, read).await,
        }
    }
}
