//! The web view of the admin API: server-rendered HTML, no JavaScript, nothing loaded from
//! outside the binary. A list of tasks with the filters and the status counts, refreshing
//! itself every few seconds; a task's detail with its forms (`forms.rs`): cancel, fail and
//! move a live task, retry or fork a failed or cancelled one.
//!
//! A browser sends the admin credential as the password of HTTP Basic (any user name). It
//! sends it with every request to the site, also one another site's page makes it send, so
//! every form is guarded twice: the request must come from this origin (`Origin`, or
//! `Sec-Fetch-Site`), and carry the form's token, derived from the credential and the task
//! (another site cannot compute it). Everything shown is escaped: status messages, tool names,
//! owners and ids are data from users.

use axum::{
    Router,
    extract::{Path, RawQuery, Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::Response,
    routing::get,
};

use super::{
    guard::Checked,
    html::{encode, error_page, escape, page},
    query,
    state::{Admin, Failure},
};
use crate::{
    clock::rfc3339,
    store::{
        Outcome,
        admin::{StatusCounts, TaskDetail, TaskFilter, TaskSummary, status_word},
        status::STATUSES,
    },
};

/// Seconds between two refreshes of the list.
const REFRESH_SECONDS: u32 = 5;

pub(super) fn routes() -> Router<Admin> {
    Router::new()
        .route("/admin", get(list_page))
        .route("/admin/", get(list_page))
        .route("/admin/tasks/{id}", get(detail_page))
        .merge(super::forms::routes())
}

/// The pages take the credential as HTTP Basic's password (or as a bearer token); without
/// it they answer 401 with a Basic challenge, so a browser asks for it.
pub(super) async fn basic_or_bearer(
    State(admin): State<Admin>,
    request: Request,
    next: Next,
) -> Response {
    match admin.check(&request, true) {
        Checked::Throttled(wait) => error_page(&Failure::Throttled(wait)),
        Checked::Accepted => {
            let mut response = next.run(request).await;
            for (name, value) in [
                // No script, no frame, nothing from elsewhere; forms only to this origin.
                (
                    header::CONTENT_SECURITY_POLICY,
                    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; \
                     form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
                ),
                (header::X_FRAME_OPTIONS, "DENY"),
                // The admin pages' addresses (task ids) go to no other site; within this one a
                // form's request keeps its `Origin` (with `no-referrer` Chromium sends `null`).
                (header::REFERRER_POLICY, "same-origin"),
                (header::CACHE_CONTROL, "no-store"),
            ] {
                response
                    .headers_mut()
                    .insert(name, HeaderValue::from_static(value));
            }
            response
        }
        Checked::Refused => {
            let body = "<p>The admin view needs the admin credential: give it as the password \
                        (any user name).</p>";
            let mut response = page(StatusCode::UNAUTHORIZED, "Sign in", body, None);
            let challenge = "Basic realm=\"mcp-tasks admin\", charset=\"UTF-8\"";
            let challenge = HeaderValue::from_static(challenge);
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
            response
        }
    }
}

fn counts_table(counts: &StatusCounts, base: &str) -> String {
    let mut cells = String::new();
    for status in STATUSES {
        let word = status_word(status);
        cells.push_str(&format!(
            "<tr><th><a class=\"{word}\" href=\"/admin/?{base}status={word}\">{word}</a></th>\
             <td class=\"n\" data-status=\"{word}\">{}</td></tr>",
            counts.get(status)
        ));
    }
    format!(
        "<table class=\"counts\"><tr><th>status</th><th>tasks</th></tr>{cells}\
         <tr><th>total</th><td class=\"n\" data-status=\"total\">{}</td></tr></table>",
        counts.total()
    )
}

fn filter_form(filter: &TaskFilter, pairs: &[(String, String)]) -> String {
    let mut options = String::from("<option value=\"\">any</option>");
    for status in STATUSES {
        let word = status_word(status);
        let selected = if filter.statuses == [status] {
            " selected"
        } else {
            ""
        };
        options.push_str(&format!("<option{selected}>{word}</option>"));
    }
    let field = |name: &str, label: &str, hint: &str| {
        let value = pairs.iter().find(|(key, _)| key == name);
        format!(
            "<label>{label} <input name=\"{name}\" value=\"{}\" placeholder=\"{hint}\"></label>",
            value.map(|(_, v)| escape(v)).unwrap_or_default()
        )
    };
    let parked = if filter.parked { " selected" } else { "" };
    format!(
        "<form class=\"filters\" method=\"get\" action=\"/admin/\">\
         <label>status <select name=\"status\">{options}</select></label>{}{}{}{}{}{}\
         <label>parked <select name=\"parked\"><option value=\"\">any</option>\
         <option value=\"true\"{parked}>only parked</option></select></label>\
         <button type=\"submit\">Filter</button> <a href=\"/admin/\">clear</a></form>",
        field("tool", "tool", "name"),
        field("owner", "owner", "principal"),
        field("instance", "instance", "id"),
        field("stalled", "stalled for", "1h"),
        field("created_after", "created after", "2h or RFC 3339"),
        field("created_before", "created before", ""),
    )
}

fn task_row(summary: &TaskSummary) -> String {
    let task = &summary.task;
    let word = status_word(task.status);
    format!(
        "<tr class=\"task\" data-task-id=\"{id}\" data-tool=\"{tool}\" data-status=\"{word}\">\
         <td><a href=\"/admin/tasks/{link}\">{id}</a></td><td class=\"{word}\">{word}{cancel}{parked}</td>\
         <td>{tool}</td><td>{owner}</td><td>{instance}</td><td class=\"t\">{updated}</td>\
         <td class=\"message\">{message}</td></tr>",
        id = escape(&task.id),
        link = encode(&task.id),
        tool = escape(&task.tool),
        owner = escape(&task.owner),
        instance = escape(summary.instance.as_deref().unwrap_or("")),
        updated = rfc3339(task.last_updated_at_ms),
        message = escape(task.status_message.as_deref().unwrap_or("")),
        cancel = if task.cancel_requested && !task.status.is_terminal() {
            " (cancel asked)"
        } else {
            ""
        },
        parked = match (task.waits_for(), task.parked_until_ms) {
            (Some("timer"), Some(until)) => format!(" (parked until {})", rfc3339(until)),
            (Some(waits_for), _) => format!(" (parked: {waits_for})"),
            (None, _) => String::new(),
        },
    )
}

async fn list_page(State(admin): State<Admin>, RawQuery(raw): RawQuery) -> Response {
    list_html(&admin, raw.as_deref())
        .await
        .unwrap_or_else(|failure| error_page(&failure))
}

async fn list_html(admin: &Admin, raw: Option<&str>) -> Result<Response, Failure> {
    let pairs = query::pairs(raw, &query::LIST_PARAMS)?;
    let query = query::list(&pairs, admin.clock.now_ms())?;
    let store = admin.admin_store()?;
    // The counts show every status under the other filters.
    let mut others = query.filter.clone();
    others.statuses.clear();
    let counts = store.count(&others).await?;
    let page_of = store.list(&query).await?;
    // The other filters, for the status links.
    let base = query_prefix(&pairs, &["status", "cursor"]);
    let rows: String = page_of.tasks.iter().map(task_row).collect();
    let next = match &page_of.next_cursor {
        Some(cursor) => format!(
            "<p><a class=\"next\" href=\"/admin/?{}cursor={}\">Next page</a></p>",
            query_prefix(&pairs, &["cursor"]),
            encode(cursor.as_str())
        ),
        None => String::new(),
    };
    let body = format!(
        "{}{}<table class=\"tasks\"><tr><th>task</th><th>status</th><th>tool</th><th>owner</th>\
         <th>instance</th><th>last change</th><th>message</th></tr>{rows}</table>{next}\
         <p>{} on this page; refreshes every {REFRESH_SECONDS} s.</p>",
        filter_form(&query.filter, &pairs),
        counts_table(&counts, &base),
        page_of.tasks.len(),
    );
    Ok(page(StatusCode::OK, "Tasks", &body, Some(REFRESH_SECONDS)))
}

/// The pairs not named in `skip`, as the start of a query string (each ends in `&amp;`).
fn query_prefix(pairs: &[(String, String)], skip: &[&str]) -> String {
    pairs
        .iter()
        .filter(|(key, _)| !skip.contains(&key.as_str()))
        .map(|(key, value)| format!("{}={}&amp;", encode(key), encode(value)))
        .collect()
}

async fn detail_page(State(admin): State<Admin>, Path(id): Path<String>) -> Response {
    let detail = async { (admin.admin_store()?.detail(&id).await?).ok_or(Failure::NotFound) };
    detail
        .await
        .map_or_else(|failure| error_page(&failure), |d| detail_html(&admin, &d))
}

fn json_block(value: &impl serde::Serialize) -> String {
    format!(
        "<pre>{}</pre>",
        escape(&serde_json::to_string_pretty(value).unwrap_or_default())
    )
}

/// A heading over `value` as JSON.
fn section(title: &str, value: &impl serde::Serialize) -> String {
    format!("<h2>{title}</h2>{}", json_block(value))
}

fn detail_html(admin: &Admin, detail: &TaskDetail) -> Response {
    let task = &detail.task;
    let word = status_word(task.status);
    let mut rows = String::new();
    let mut row = |name: &str, value: String| {
        rows.push_str(&format!("<tr><th>{name}</th><td>{value}</td></tr>"));
    };
    let message = escape(task.status_message.as_deref().unwrap_or(""));
    let ttl = task
        .ttl_ms
        .map_or("none".to_owned(), |ms| format!("{ms} ms"));
    let status = format!("<span class=\"{word}\" id=\"status\">{word}</span>");
    row("task", escape(&task.id));
    row("status", status);
    row("tool", escape(&task.tool));
    row("owner", escape(&task.owner));
    row("message", format!("<span id=\"message\">{message}</span>"));
    row("created", rfc3339(task.created_at_ms));
    row("last change", rfc3339(task.last_updated_at_ms));
    row("ttl", ttl);
    row("cancel asked", task.cancel_requested.to_string());
    if !detail.origin.tool_version.is_empty() {
        row("tool version", escape(&detail.origin.tool_version));
    }
    if let Some(trace) = &detail.origin.trace_context {
        row("traceparent", escape(trace.traceparent()));
    }
    if let Some(lease) = &detail.lease {
        let runner = escape(lease.instance.as_deref().unwrap_or("queued"));
        let until = lease
            .until_ms
            .map_or(String::new(), |ms| format!(", until {}", rfc3339(ms)));
        row("lease", format!("{runner} at epoch {}{until}", lease.epoch));
    }
    let mut body = format!("<table class=\"detail\">{rows}</table>");
    body.push_str(&super::forms::controls(admin, detail));
    if !detail.steps.is_empty() {
        body.push_str("<h2>Steps done</h2><table><tr><th>#</th><th>name</th><th>value</th></tr>");
        for step in &detail.steps {
            body.push_str(&format!(
                "<tr><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
                step.seq,
                escape(&step.name),
                json_block(&step.value)
            ));
        }
        body.push_str("</table>");
    }
    if !detail.questions.is_empty() {
        body.push_str(&section("Open questions", &detail.questions));
    }
    if !detail.answers.is_empty() {
        body.push_str(&section("Answers", &detail.answers));
    }
    if !detail.asked_at_step.is_empty() {
        let again: Vec<String> = detail
            .asked_at_step
            .iter()
            .map(|(key, step)| {
                let key = escape(key);
                format!("<code>{key}</code> by a fork from step {step} or an earlier one")
            })
            .collect();
        let again = again.join("; ");
        body.push_str(&format!(
            "<p class=\"asked\">Asked again: {again} (a fork from step 0 asks every question \
             again).</p>"
        ));
    }
    match &task.outcome {
        Some(Outcome::Failed(error)) => body.push_str(&section("Error", error)),
        Some(Outcome::Completed(result)) => body.push_str(&section("Result", result)),
        _ => {}
    }
    if !detail.origin.arguments.is_empty() {
        body.push_str(&section("Arguments", &detail.origin.arguments));
    }
    body.push_str("<p><a href=\"/admin/\">All tasks</a></p>");
    let refresh = (!task.status.is_terminal()).then_some(REFRESH_SECONDS);
    page(StatusCode::OK, &format!("Task {}", task.id), &body, refresh)
}
