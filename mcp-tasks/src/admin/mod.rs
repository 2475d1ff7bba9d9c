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
//! Wrong credentials are throttled per client address: after 10 within a minute
//! ([`AdminCredential::with_throttle`]), that address gets `429` with `Retry-After` until the
//! minute is over, the right credential included. Every wrong credential, cancel, failure,
//! version change, retry, fork and purge is logged as a `tracing` event with the target [`AUDIT_TARGET`] (`mcp_tasks::audit`) and
//! the fields `event`, `who`, `client` (the address), `path`, and `task_id` and `outcome`, or
//! `before_ms` and `purged`; `failures` for a failed login. The client address is the
//! connection's peer: [`serve_http`](crate::serve_http) provides it, and `axum::serve`
//! does with `into_make_service_with_connect_info::<std::net::SocketAddr>()` (as below);
//! without it every client shares one count. Behind a proxy every client is the proxy's
//! address, so the count is shared too: throttle at the proxy as well.
//!
//! | method and path | answers |
//! | --- | --- |
//! | `GET /admin/api/tasks` | a page of tasks, newest first: `{"tasks": [...], "nextCursor": ...}` |
//! | `GET /admin/api/counts` | how many tasks have each status, with the same filters |
//! | `GET /admin/api/tasks/{id}` | one task in detail: steps, questions and answers (`askedAtStep`: for each question asked after the first step began, a number N: a fork from step N or an earlier one asks it again), lease and epoch, result or error |
//! | `POST /admin/api/tasks/{id}/cancel` | records a cancel for any owner's task and signals its work |
//! | `POST /admin/api/tasks/{id}/fail` | ends a live task `failed` (`reason=` says why, shown in its error); its code never runs again |
//! | `POST /admin/api/tasks/{id}/retry` | a new task that replays a failed or cancelled task's steps and answers and goes on from its last step: `{"newTaskId": ...}` |
//! | `POST /admin/api/tasks/{id}/fork` | the same from step `step=N` (the steps before it are kept, step `N` runs again, and the questions asked after step `N-1` began are asked again) |
//! | `POST /admin/api/tasks/{id}/version` | moves a live task to another version of its tool (`to=`, by default this server's): it is replayed by that version from then on |
//! | `POST /admin/api/purge` | removes finished tasks (`before=` an instant or `older_than=` a duration) |
//!
//! Filters (query parameters, each optional, all must hold): `status` (one or several,
//! comma-separated), `tool`, `owner`, `instance`, `created_after`, `created_before` (epoch
//! milliseconds, an RFC 3339 time, or a duration ago such as `2h`), `stalled` (a duration:
//! live and unchanged for longer; durations as `#[task_tool]` takes them, [`crate::duration`]:
//! `90s`, `1h30m`, `7d`), `parked` (`true`: only tasks parked while they wait, each listed
//! with `parked: {waitsFor, untilMs, until}`), and for lists `limit` (1 to 500) and `cursor` (a page's
//! `nextCursor`, with the same filters). A bad or unknown parameter answers `400` with
//! `{"error": {"parameter": ..., "message": ...}}`. Every parameter goes in the query string:
//! the API reads no body, and a request with one answers `400` (a purge's filter sent in a
//! body would otherwise be left out, and every finished task purged).
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
//! axum::serve(
//!     listener,
//!     app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
//! )
//! .await
//! # }
//! ```

use std::sync::Arc;

use axum::{
    Router,
    extract::{Path, RawQuery, Request, State},
    http::{StatusCode, Uri, header},
    middleware::{Next, from_fn_with_state},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::{Value, json};

use crate::{
    Engine,
    clock::{Clock, rfc3339},
    store::{
        Outcome, TaskSnapshot,
        admin::{self, TaskDetail, status_word},
        status::STATUSES,
    },
};

mod credential;
mod forms;
mod guard;
mod html;
mod query;
mod state;
mod web;

pub use credential::{AdminCredential, CredentialError, MIN_CREDENTIAL_LEN};
pub use guard::AUDIT_TARGET;
use guard::{Checked, Client};
use query::LIST_PARAMS;
use state::{Admin, Failure, json_response};

/// Where [`router`] answers: every admin path starts with it.
pub const ADMIN_PATH: &str = "/admin";

/// The admin API and web view of `engine`'s store, at [`ADMIN_PATH`], behind `credential`.
/// Merge it with the MCP router ([`http_router`](crate::http_router)); it answers nothing
/// outside [`ADMIN_PATH`].
pub fn router(engine: &Engine, credential: AdminCredential) -> Router {
    let state = Admin {
        engine: engine.clone(),
        throttle: Arc::default(),
        credential: Arc::new(credential),
        clock: Clock::new(),
    };
    let api = Router::new()
        .route("/admin/api/tasks", get(list))
        .route("/admin/api/counts", get(counts))
        .route("/admin/api/tasks/{id}", get(detail))
        .route("/admin/api/tasks/{id}/cancel", post(cancel))
        .route("/admin/api/tasks/{id}/fail", post(fail))
        .route("/admin/api/tasks/{id}/version", post(set_version))
        .route("/admin/api/tasks/{id}/retry", post(retry))
        .route("/admin/api/tasks/{id}/fork", post(retry))
        .route("/admin/api/purge", post(purge))
        // `route_layer`, not `layer`: the credential guards these routes only, so a path of
        // the merged router that none of them matches (`/favicon.ico`) stays a plain 404.
        .route_layer(from_fn_with_state(state.clone(), bearer_only));
    let web = web::routes().route_layer(from_fn_with_state(state.clone(), web::basic_or_bearer));
    api.merge(web).with_state(state)
}

/// The JSON API takes the bearer credential only: a browser sends HTTP Basic on its own to
/// any page of the site, which would let another site's form reach the API. It reads no
/// body: one sent is refused, so that a filter put there (a purge's `older_than`) is not
/// silently left out.
async fn bearer_only(State(admin): State<Admin>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let body = headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|length| length != "0");
    match admin.check(&request, false) {
        Checked::Accepted if body => Failure::Body.into_response(),
        Checked::Accepted => next.run(request).await,
        Checked::Refused => Failure::Unauthorized.into_response(),
        Checked::Throttled(wait) => Failure::Throttled(wait).into_response(),
    }
}

fn ok(body: &Value) -> Result<Response, Failure> {
    Ok(json_response(StatusCode::OK, body))
}

/// A task of a list, as JSON.
pub(crate) fn summary_json(task: &TaskSnapshot, instance: Option<&str>) -> Value {
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
        "instance": instance,
        "parked": task.waits_for().map(|waits_for| {
            let until_ms = task.parked_until_ms.filter(|_| waits_for == "timer");
            json!({ "waitsFor": waits_for, "untilMs": until_ms, "until": until_ms.map(rfc3339) })
        }),
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
        "task": summary_json(task, detail.lease.as_ref().and_then(|l| l.instance.as_deref())),
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
        "askedAtStep": detail.asked_at_step,
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

async fn list(State(admin): State<Admin>, RawQuery(raw): RawQuery) -> Result<Response, Failure> {
    let pairs = query::pairs(raw.as_deref(), &LIST_PARAMS)?;
    let query = query::list(&pairs, admin.clock.now_ms())?;
    let page = admin.admin_store()?.list(&query).await?;
    ok(&json!({
        "tasks": page.tasks.iter().map(|t| summary_json(&t.task, t.instance.as_deref())).collect::<Vec<_>>(),
        "nextCursor": page.next_cursor.as_ref().map(admin::Cursor::as_str),
    }))
}

async fn counts(State(admin): State<Admin>, RawQuery(raw): RawQuery) -> Result<Response, Failure> {
    let pairs = query::pairs(raw.as_deref(), &LIST_PARAMS[..8])?;
    let filter = query::filter(&pairs, admin.clock.now_ms())?;
    let counts = admin.admin_store()?.count(&filter).await?;
    let mut body: serde_json::Map<_, _> = STATUSES
        .into_iter()
        .map(|status| (status_word(status).to_owned(), json!(counts.get(status))))
        .collect();
    body.insert("total".to_owned(), json!(counts.total()));
    ok(&Value::Object(body))
}

async fn detail(State(admin): State<Admin>, Path(id): Path<String>) -> Result<Response, Failure> {
    let detail = admin.admin_store()?.detail(&id).await?;
    ok(&detail_json(&detail.ok_or(Failure::NotFound)?))
}

async fn cancel(
    State(admin): State<Admin>,
    client: Client,
    Path(id): Path<String>,
) -> Result<Response, Failure> {
    let path = "/admin/api/tasks/{id}/cancel";
    let cancelled = admin.cancel(&id, client, path).await?;
    let task = cancelled.task();
    ok(&json!({
        "taskId": &*task.id,
        "outcome": cancelled.outcome(),
        "status": status_word(task.status),
    }))
}

async fn fail(
    State(admin): State<Admin>,
    client: Client,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, Failure> {
    let pairs = query::pairs(raw.as_deref(), &["reason"])?;
    let reason = query::single(&pairs, "reason")?;
    let task = admin.fail(&id, reason, client).await?;
    ok(&json!({
        "taskId": &*task.id,
        "outcome": "failed",
        "status": status_word(task.status),
        "statusMessage": task.status_message,
    }))
}

async fn set_version(
    State(admin): State<Admin>,
    client: Client,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, Failure> {
    let pairs = query::pairs(raw.as_deref(), &["to"])?;
    let to = query::single(&pairs, "to")?;
    let (task, started) = admin.set_version(&id, to, client).await?;
    ok(&json!({
        "taskId": &*task.id,
        "outcome": if started { "started" } else { "version_set" },
        "status": status_word(task.status),
    }))
}

/// A retry of task `id` as a new task; on the `fork` route, from the step its query names.
async fn retry(
    State(admin): State<Admin>,
    client: Client,
    uri: Uri,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, Failure> {
    let fork = uri.path().ends_with("/fork");
    let pairs = query::pairs(raw.as_deref(), if fork { &["step"] } else { &[] })?;
    let step = fork
        .then(|| query::step(query::single(&pairs, "step")?))
        .transpose()?;
    let new = admin.retry(&id, step, client).await?;
    let mut answer = json!({ "taskId": id, "newTaskId": &*new, "outcome": "retried" });
    if let Some(step) = step {
        answer["outcome"] = json!("forked");
        answer["fromStep"] = json!(step);
    }
    ok(&answer)
}

async fn purge(
    State(admin): State<Admin>,
    client: Client,
    RawQuery(raw): RawQuery,
) -> Result<Response, Failure> {
    let pairs = query::pairs(raw.as_deref(), &["before", "older_than"])?;
    let before = query::purge_before(&pairs, admin.clock.now_ms())?;
    let purged = admin.admin_store()?.purge_finished(before).await;
    let outcome = match &purged {
        Ok(_) => "purged".to_owned(),
        Err(error) => format!("failed: {error}"),
    };
    tracing::info!(
        target: AUDIT_TARGET,
        event = "purge",
        who = "admin",
        client = %client.describe(),
        path = "/admin/api/purge",
        before_ms = before,
        purged = purged.as_ref().ok(),
        outcome,
        "admin purge"
    );
    ok(&json!({ "purged": purged? }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
