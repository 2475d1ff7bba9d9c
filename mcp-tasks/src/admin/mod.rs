//! The admin API: what the people who run a server see and steer, over HTTP, apart from MCP.
//!
//! The wire has no `tasks/list` (one caller never enumerates another's tasks), so an
//! operator's questions (how many tasks run, wait for input or fail, per tool and instance;
//! which are stalled; why did this one fail; cancel that one) are answered here, on the
//! server side, from the store ([`store::admin`](crate::store::admin)): the same data on
//! every store.
//!
//! [`router`] is an axum router to mount beside the MCP one (it is never served on the MCP
//! path), behind a credential of its own ([`AdminCredential`]): never a user's token, and a
//! user's token is never accepted here. Every admin request without it answers `401`; a path
//! outside [`ADMIN_PATH`] is not the admin router's (merged, it stays a plain `404`).
//!
//! | method and path | answers |
//! | --- | --- |
//! | `GET /admin/api/tasks` | a page of tasks, newest first: `{"tasks": [...], "nextCursor": ...}` |
//! | `GET /admin/api/counts` | how many tasks have each status, with the same filters |
//! | `GET /admin/api/tasks/{id}` | one task in detail: steps, questions and answers, lease and epoch, result or error |
//! | `POST /admin/api/tasks/{id}/cancel` | records a cancel for any owner's task and signals its work |
//! | `POST /admin/api/purge` | removes finished tasks (`before=` an instant or `older_than=` a duration) |
//!
//! Filters (query parameters, each optional, all must hold): `status` (one or several,
//! comma-separated), `tool`, `owner`, `instance`, `created_after`, `created_before` (epoch
//! milliseconds, an RFC 3339 time, or a duration ago such as `2h`), `stalled` (a duration:
//! live and unchanged for longer; durations as `#[task_tool]` takes them, [`crate::duration`]:
//! `90s`, `1h30m`, `7d`), and for lists `limit` (1 to 500) and `cursor` (a page's
//! `nextCursor`, with the same filters). A bad or unknown parameter answers `400` with
//! `{"error": {"parameter": ..., "message": ...}}`.
//!
//! ```no_run
//! # async fn run(toolkit: mcp_tasks::Toolkit) -> std::io::Result<()> {
//! use mcp_tasks::{HttpOptions, TaskServer, admin::{self, AdminCredential}};
//!
//! let server = TaskServer::new(toolkit);
//! let credential = AdminCredential::new(std::env::var("ADMIN_TOKEN").unwrap_or_default())
//!     .expect("ADMIN_TOKEN: at least 16 characters");
//! let app = mcp_tasks::http_router(server.clone(), HttpOptions::default())
//!     .merge(admin::router(server.engine(), credential));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await
//! # }
//! ```

use std::sync::Arc;

use axum::{
    Router,
    extract::{Path, RawQuery, Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use base64::{Engine as _, engine::general_purpose::STANDARD_PAD_INDIFFERENT as BASE64};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::{
    Engine,
    clock::{Clock, rfc3339},
    store::{
        AdminStore, Outcome, StoreError, TaskStore,
        admin::{self, Cancelled, StatusCounts, TaskDetail, TaskSummary, status_word},
    },
};

mod query;
mod web;

use query::{BadParam, LIST_PARAMS};

/// Where [`router`] answers: every admin path starts with it.
pub const ADMIN_PATH: &str = "/admin";

/// Shortest admin credential [`AdminCredential::new`] takes, in bytes.
pub const MIN_CREDENTIAL_LEN: usize = 16;

/// The admin API's own secret: `Authorization: Bearer <it>` on the JSON API, the password of
/// HTTP Basic (any user name) in a browser. Kept only as its SHA-256 digest, compared in
/// constant time.
#[derive(Clone)]
pub struct AdminCredential {
    digest: [u8; 32],
}

impl std::fmt::Debug for AdminCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminCredential(..)")
    }
}

/// An admin credential that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialError {
    /// Too short to be a secret.
    #[error(
        "the admin credential has {0} bytes: give at least 16 random characters (for example \
         `openssl rand -hex 32`), never a user's token"
    )]
    TooShort(usize),
}

impl AdminCredential {
    /// The credential `secret` (at least [`MIN_CREDENTIAL_LEN`] bytes).
    ///
    /// # Errors
    /// [`CredentialError::TooShort`].
    pub fn new(secret: impl AsRef<str>) -> Result<Self, CredentialError> {
        let secret = secret.as_ref();
        if secret.len() < MIN_CREDENTIAL_LEN {
            return Err(CredentialError::TooShort(secret.len()));
        }
        Ok(Self {
            digest: Sha256::digest(secret.as_bytes()).into(),
        })
    }

    /// Whether `presented` is the credential, in constant time.
    fn accepts(&self, presented: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        digest.ct_eq(&self.digest).into()
    }

    /// The token of the form that cancels a task in the web view: an HMAC of the task keyed
    /// by the credential, so another site cannot forge it.
    fn form_token(&self, task_id: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.digest).expect("HMAC takes any key");
        mac.update(b"mcp-tasks admin cancel form\0");
        mac.update(task_id.as_bytes());
        let tag = mac.finalize().into_bytes();
        tag.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Whether `token` is the cancel form's token of task `task_id`, in constant time.
    fn accepts_form_token(&self, task_id: &str, token: &str) -> bool {
        token
            .as_bytes()
            .ct_eq(self.form_token(task_id).as_bytes())
            .into()
    }
}

/// What every handler reads.
#[derive(Clone)]
pub(crate) struct Admin {
    engine: Engine,
    credential: Arc<AdminCredential>,
    clock: Clock,
}

impl Admin {
    fn store(&self) -> &dyn TaskStore {
        &**self.engine.store()
    }

    fn admin_store(&self) -> Result<&dyn AdminStore, Failure> {
        self.store().admin().ok_or(Failure::Unsupported)
    }

    fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Records a cancel for task `id` and signals its work, wherever it runs (a cluster
    /// store wakes the instance that runs it).
    async fn cancel(&self, id: &str) -> Result<Cancelled, Failure> {
        let cancelled = admin::cancel(self.store(), id).await?;
        if matches!(cancelled, Cancelled::Requested(_)) {
            self.engine.signal_cancel(id);
        }
        Ok(cancelled)
    }
}

/// The admin API and web view of `engine`'s store, at [`ADMIN_PATH`], behind `credential`.
/// Merge it with the MCP router ([`http_router`](crate::http_router)); it answers nothing
/// outside [`ADMIN_PATH`].
pub fn router(engine: &Engine, credential: AdminCredential) -> Router {
    let state = Admin {
        engine: engine.clone(),
        credential: Arc::new(credential),
        clock: Clock::new(),
    };
    let api = Router::new()
        .route("/admin/api/tasks", get(list))
        .route("/admin/api/counts", get(counts))
        .route("/admin/api/tasks/{id}", get(detail))
        .route("/admin/api/tasks/{id}/cancel", post(cancel))
        .route("/admin/api/purge", post(purge))
        // `route_layer`, not `layer`: the credential guards these routes only, so a path of
        // the merged router that none of them matches (`/favicon.ico`) stays a plain 404.
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            bearer_only,
        ));
    let web = web::routes().route_layer(axum::middleware::from_fn_with_state(
        state.clone(),
        web::basic_or_bearer,
    ));
    api.merge(web).with_state(state)
}

/// The credential of a request: a bearer token, or (when `basic` is allowed) the password of
/// HTTP Basic.
fn presented(headers: &HeaderMap, basic: bool) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    if scheme.eq_ignore_ascii_case("bearer") {
        return Some(rest.trim().to_owned());
    }
    if basic && scheme.eq_ignore_ascii_case("basic") {
        let decoded = BASE64.decode(rest.trim()).ok()?;
        let text = String::from_utf8(decoded).ok()?;
        return text
            .split_once(':')
            .map(|(_, password)| password.to_owned());
    }
    None
}

/// The JSON API takes the bearer credential only: a browser sends HTTP Basic on its own to
/// any page of the site, which would let another site's form reach the API.
async fn bearer_only(State(admin): State<Admin>, request: Request, next: Next) -> Response {
    match presented(request.headers(), false) {
        Some(token) if admin.credential.accepts(&token) => next.run(request).await,
        _ => Failure::Unauthorized.into_response(),
    }
}

/// Why an admin request failed, as its response says.
#[derive(Debug)]
pub(crate) enum Failure {
    Unauthorized,
    BadParam(BadParam),
    NotFound,
    Unsupported,
    Forbidden(&'static str),
    Store(StoreError),
}

impl From<BadParam> for Failure {
    fn from(error: BadParam) -> Self {
        Self::BadParam(error)
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound => Self::NotFound,
            error => Self::Store(error),
        }
    }
}

impl Failure {
    fn status(&self) -> StatusCode {
        match self {
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::BadParam(_) => StatusCode::BAD_REQUEST,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::Unsupported => StatusCode::NOT_IMPLEMENTED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::Store(error) if error.is_retryable() => StatusCode::SERVICE_UNAVAILABLE,
            Self::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn message(&self) -> String {
        match self {
            Self::Unauthorized => "the admin API needs its own credential: send \
                                   `Authorization: Bearer <admin credential>`"
                .to_owned(),
            Self::BadParam(error) => format!("query parameter `{}`: {}", error.name, error.message),
            Self::NotFound => "no task has this id (never created, or purged)".to_owned(),
            Self::Unsupported => {
                "this server's task store does not offer the admin operations".to_owned()
            }
            Self::Forbidden(why) => (*why).to_owned(),
            Self::Store(error) => crate::errors::error_chain(error),
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let mut error = json!({ "message": self.message() });
        if let Self::BadParam(bad) = &self {
            error["parameter"] = Value::String(bad.name.clone());
        }
        let mut response = json_response(self.status(), &json!({ "error": error }));
        if matches!(self, Self::Unauthorized) {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"mcp-tasks admin\""),
            );
        }
        response
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body.to_string(),
    )
        .into_response()
}

fn ok(body: &Value) -> Result<Response, Failure> {
    Ok(json_response(StatusCode::OK, body))
}

/// A task of a list, as JSON.
pub(crate) fn summary_json(task: &TaskSummary) -> Value {
    json!({
        "taskId": &*task.id,
        "owner": &*task.owner,
        "tool": &*task.tool,
        "status": status_word(task.status),
        "statusMessage": task.status_message,
        "createdAt": rfc3339(task.created_at_ms),
        "createdAtMs": task.created_at_ms,
        "lastUpdatedAt": rfc3339(task.last_updated_at_ms),
        "lastUpdatedAtMs": task.last_updated_at_ms,
        "ttlMs": task.ttl_ms,
        "cancelRequested": task.cancel_requested,
        "instance": task.instance.as_deref(),
    })
}

/// A task in detail, as JSON.
pub(crate) fn detail_json(detail: &TaskDetail) -> Value {
    let task = &detail.task;
    let (result, error) = match &task.outcome {
        Some(Outcome::Completed(result)) => (Some(result), None),
        Some(Outcome::Failed(error)) => (None, Some(error)),
        _ => (None, None),
    };
    json!({
        "task": summary_json(&TaskSummary::of(
            task,
            detail.lease.as_ref().and_then(|l| l.instance.clone()),
        )),
        "pollIntervalMs": task.poll_interval_ms,
        "toolVersion": &*detail.origin.tool_version,
        "arguments": detail.origin.arguments,
        "steps": detail.steps.iter().map(|step| json!({
            "seq": step.seq,
            "name": step.name,
            "value": step.value,
        })).collect::<Vec<_>>(),
        "questions": detail.questions,
        "answers": detail.answers,
        "lease": detail.lease.as_ref().map(|lease| json!({
            "instance": lease.instance.as_deref(),
            "epoch": lease.epoch,
            "untilMs": lease.until_ms,
        })),
        "result": result,
        "error": error,
        "traceContext": detail.origin.trace_context.as_ref().map(|trace| json!({
            "traceparent": trace.traceparent(),
            "tracestate": trace.tracestate(),
        })),
    })
}

fn counts_json(counts: &StatusCounts) -> Value {
    json!({
        "working": counts.working,
        "input_required": counts.input_required,
        "completed": counts.completed,
        "failed": counts.failed,
        "cancelled": counts.cancelled,
        "total": counts.total(),
    })
}

async fn list(State(admin): State<Admin>, RawQuery(raw): RawQuery) -> Result<Response, Failure> {
    let pairs = query::pairs(raw.as_deref());
    query::only(&pairs, &LIST_PARAMS)?;
    let query = query::list(&pairs, admin.now_ms())?;
    let page = admin.admin_store()?.list(&query).await?;
    ok(&json!({
        "tasks": page.tasks.iter().map(summary_json).collect::<Vec<_>>(),
        "nextCursor": page.next_cursor.as_ref().map(admin::Cursor::as_str),
    }))
}

async fn counts(State(admin): State<Admin>, RawQuery(raw): RawQuery) -> Result<Response, Failure> {
    let pairs = query::pairs(raw.as_deref());
    query::only(&pairs, &LIST_PARAMS[..7])?;
    let filter = query::filter(&pairs, admin.now_ms())?;
    let counts = admin.admin_store()?.count(&filter).await?;
    ok(&counts_json(&counts))
}

async fn detail(State(admin): State<Admin>, Path(id): Path<String>) -> Result<Response, Failure> {
    let detail = admin
        .admin_store()?
        .detail(&id)
        .await?
        .ok_or(Failure::NotFound)?;
    ok(&detail_json(&detail))
}

async fn cancel(State(admin): State<Admin>, Path(id): Path<String>) -> Result<Response, Failure> {
    let cancelled = admin.cancel(&id).await?;
    let outcome = match &cancelled {
        Cancelled::Requested(_) => "cancel_requested",
        Cancelled::AlreadyEnded(_) => "already_ended",
    };
    let task = cancelled.task();
    ok(&json!({
        "taskId": &*task.id,
        "outcome": outcome,
        "status": status_word(task.status),
    }))
}

async fn purge(State(admin): State<Admin>, RawQuery(raw): RawQuery) -> Result<Response, Failure> {
    let pairs = query::pairs(raw.as_deref());
    let before = query::purge_before(&pairs, admin.now_ms())?;
    let purged = admin.admin_store()?.purge_finished(before).await?;
    ok(&json!({ "purged": purged }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_decode() {
        let basic = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            presented(&headers, true)
        };
        assert_eq!(basic("Basic YWRtaW46c2VjcmV0").as_deref(), Some("secret"));
        // Padding is optional: `a:bc` is `YTpiYw==`.
        assert_eq!(basic("Basic YTpiYw==").as_deref(), Some("bc"));
        assert_eq!(basic("Basic YTpiYw").as_deref(), Some("bc"));
        assert_eq!(basic("Basic Y"), None);
        assert_eq!(basic("Basic a!b="), None);
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            "Basic YWRtaW46c2VjcmV0".parse().unwrap(),
        );
        assert_eq!(
            presented(&headers, false),
            None,
            "the API takes bearer only"
        );
    }

    #[test]
    fn a_credential_is_long_and_compared_whole() {
        assert_eq!(
            AdminCredential::new("short").unwrap_err(),
            CredentialError::TooShort(5)
        );
        let credential = AdminCredential::new("0123456789abcdef").unwrap();
        assert!(credential.accepts("0123456789abcdef"));
        assert!(!credential.accepts("0123456789abcdeF"));
        assert!(!credential.accepts("0123456789abcdef "));
        let token = credential.form_token("a");
        assert_ne!(token, credential.form_token("b"));
        assert!(credential.accepts_form_token("a", &token));
        assert!(!credential.accepts_form_token("b", &token));
        assert!(!credential.accepts_form_token("a", &token[1..]));
    }

    #[test]
    fn every_status_has_its_wire_word_both_ways() {
        for status in crate::store::status::STATUSES {
            let word = status_word(status);
            assert_eq!(serde_json::to_value(status).unwrap(), json!(word));
            assert_eq!(crate::store::admin::parse_status(word), Some(status));
        }
        assert_eq!(crate::store::admin::parse_status("Working"), None);
    }
}
