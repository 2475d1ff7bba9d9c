//! The web view of the admin API: server-rendered HTML, no JavaScript, nothing loaded from
//! outside the binary. A list of tasks with the filters and the status counts, refreshing
//! itself every few seconds; a task's detail with a cancel button, or (a failed or cancelled
//! task) a retry button and a fork form.
//!
//! A browser sends the admin credential as the password of HTTP Basic (any user name). It
//! sends it with every request to the site, also one another site's page makes it send, so
//! every form is guarded twice: the request must come from this origin (`Origin`, or
//! `Sec-Fetch-Site`), and carry the form's token, derived from the credential and the task
//! (another site cannot compute it). Everything shown is escaped: status messages, tool names,
//! owners and ids are data from users.

use axum::{
    Router,
    body::Bytes,
    extract::{Path, RawQuery, Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
    routing::{get, post},
};

use super::{
    guard::{Checked, Client},
    query,
    state::{Admin, Failure},
};
use crate::{
    clock::rfc3339,
    store::{
        Outcome,
        admin::{Cancelled, StatusCounts, TaskDetail, TaskFilter, TaskSummary, status_word},
        status::STATUSES,
    },
};

/// Seconds between two refreshes of the list.
const REFRESH_SECONDS: u32 = 5;

/// The pages.
pub(super) fn routes() -> Router<Admin> {
    Router::new()
        .route("/admin", get(list_page))
        .route("/admin/", get(list_page))
        .route("/admin/tasks/{id}", get(detail_page))
        .route("/admin/tasks/{id}/cancel", post(cancel_form))
        .route("/admin/tasks/{id}/retry", post(retry_form))
        .route("/admin/tasks/{id}/fork", post(fork_form))
}

/// The pages take the credential as HTTP Basic's password (or as a bearer token); without
/// it they answer 401 with a Basic challenge, so a browser asks for it.
pub(super) async fn basic_or_bearer(
    State(admin): State<Admin>,
    request: Request,
    next: Next,
) -> Response {
    match admin.check(&request, true) {
        Checked::Throttled(wait) => {
            let failure = Failure::Throttled(wait);
            let mut response = error_page(&failure);
            failure.add_retry_after(&mut response);
            response
        }
        Checked::Accepted => {
            let mut response = next.run(request).await;
            let headers = response.headers_mut();
            // No script, no frame, nothing from elsewhere; forms only to this origin.
            headers.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; \
                     form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
                ),
            );
            headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
            // The admin pages' addresses (task ids) go to no other site; within this one a
            // form's request keeps its `Origin` (with `no-referrer` Chromium sends `null`).
            headers.insert(
                header::REFERRER_POLICY,
                HeaderValue::from_static("same-origin"),
            );
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        _ => {
            let mut response = page(
                StatusCode::UNAUTHORIZED,
                "Sign in",
                "<p>The admin view needs the admin credential: give it as the password (any user \
                 name).</p>",
                None,
            );
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"mcp-tasks admin\", charset=\"UTF-8\""),
            );
            response
        }
    }
}

/// `text` with the five characters that mean something in HTML escaped.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes a path segment or query value.
fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.3em}table{border-collapse:collapse;margin:.8em 0}\
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}\
th{background:#f3f3f3}td.t{white-space:nowrap}td.n{text-align:right;font-variant-numeric:tabular-nums}\
.working{color:#05a}.input_required{color:#a60}.completed{color:#080}.failed{color:#c00}\
.cancelled{color:#777}form.filters label{margin-right:.8em}input{width:9em}\
pre{background:#f7f7f7;padding:.5em;white-space:pre-wrap;word-break:break-all}\
button{font-size:1em;padding:.3em 1em}";

fn page(status: StatusCode, title: &str, body: &str, refresh: Option<u32>) -> Response {
    let refresh = refresh
        .map(|s| format!("<meta http-equiv=\"refresh\" content=\"{s}\">"))
        .unwrap_or_default();
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">{refresh}\
         <title>{} · mcp-tasks admin</title><style>{STYLE}</style></head><body>\
         <h1>{}</h1>{body}</body></html>",
        escape(title),
        escape(title)
    );
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        html,
    )
        .into_response()
}

fn error_page(failure: &Failure) -> Response {
    page(
        failure.status(),
        "Error",
        &format!(
            "<p class=\"error\">{}</p><p><a href=\"/admin/\">All tasks</a></p>",
            escape(&failure.message())
        ),
        None,
    )
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
    let value = |name: &str| {
        pairs
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, v)| escape(v))
            .unwrap_or_default()
    };
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
        format!(
            "<label>{label} <input name=\"{name}\" value=\"{}\" placeholder=\"{hint}\"></label>",
            value(name)
        )
    };
    format!(
        "<form class=\"filters\" method=\"get\" action=\"/admin/\">\
         <label>status <select name=\"status\">{options}</select></label>{}{}{}{}{}{}{}\
         <button type=\"submit\">Filter</button> <a href=\"/admin/\">clear</a></form>",
        field("tool", "tool", "name"),
        field("owner", "owner", "principal"),
        field("instance", "instance", "id"),
        field("stalled", "stalled for", "1h"),
        field("created_after", "created after", "2h or RFC 3339"),
        field("created_before", "created before", ""),
        parked_field(filter.parked),
    )
}

/// The `parked` filter: any task, or only the parked ones.
fn parked_field(parked: bool) -> String {
    let selected = if parked { " selected" } else { "" };
    format!(
        "<label>parked <select name=\"parked\"><option value=\"\">any</option>\
         <option value=\"true\"{selected}>only parked</option></select></label>"
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
    match list_html(&admin, raw.as_deref()).await {
        Ok(response) => response,
        Err(failure) => error_page(&failure),
    }
}

async fn list_html(admin: &Admin, raw: Option<&str>) -> Result<Response, Failure> {
    let pairs = query::pairs(raw);
    query::only(&pairs, &query::LIST_PARAMS)?;
    let query = query::list(&pairs, admin.now_ms())?;
    let store = admin.admin_store()?;
    // The counts show every status under the other filters.
    let mut others = query.filter.clone();
    others.statuses.clear();
    let counts = store.count(&others).await?;
    let page_of = store.list(&query).await?;
    // The other filters, as a query string prefix for the status links.
    let base: String = pairs
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "status" | "cursor"))
        .map(|(key, value)| format!("{}={}&amp;", encode(key), encode(value)))
        .collect();
    let rows: String = page_of.tasks.iter().map(task_row).collect();
    let next = match &page_of.next_cursor {
        Some(cursor) => {
            let kept: String = pairs
                .iter()
                .filter(|(key, _)| key != "cursor")
                .map(|(key, value)| format!("{}={}&amp;", encode(key), encode(value)))
                .collect();
            format!(
                "<p><a class=\"next\" href=\"/admin/?{kept}cursor={}\">Next page</a></p>",
                encode(cursor.as_str())
            )
        }
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

async fn detail_page(State(admin): State<Admin>, Path(id): Path<String>) -> Response {
    let detail = match admin.admin_store() {
        Ok(store) => store.detail(&id).await.map_err(Failure::from),
        Err(failure) => Err(failure),
    };
    match detail {
        Ok(Some(detail)) => detail_html(&admin, &detail),
        Ok(None) => error_page(&Failure::NotFound),
        Err(failure) => error_page(&failure),
    }
}

fn json_block(value: &impl serde::Serialize) -> String {
    format!(
        "<pre>{}</pre>",
        escape(&serde_json::to_string_pretty(value).unwrap_or_default())
    )
}

fn detail_html(admin: &Admin, detail: &TaskDetail) -> Response {
    let task = &detail.task;
    let word = status_word(task.status);
    let mut rows = String::new();
    let mut row = |name: &str, value: String| {
        rows.push_str(&format!("<tr><th>{name}</th><td>{value}</td></tr>"));
    };
    row("task", escape(&task.id));
    row(
        "status",
        format!("<span class=\"{word}\" id=\"status\">{word}</span>"),
    );
    row("tool", escape(&task.tool));
    row("owner", escape(&task.owner));
    row(
        "message",
        format!(
            "<span id=\"message\">{}</span>",
            escape(task.status_message.as_deref().unwrap_or(""))
        ),
    );
    row("created", rfc3339(task.created_at_ms));
    row("last change", rfc3339(task.last_updated_at_ms));
    row(
        "ttl",
        task.ttl_ms
            .map_or("none".to_owned(), |ms| format!("{ms} ms")),
    );
    row("cancel asked", task.cancel_requested.to_string());
    if !detail.origin.tool_version.is_empty() {
        row("tool version", escape(&detail.origin.tool_version));
    }
    if let Some(trace) = &detail.origin.trace_context {
        row("traceparent", escape(trace.traceparent()));
    }
    if let Some(lease) = &detail.lease {
        row(
            "lease",
            format!(
                "{} at epoch {}{}",
                escape(lease.instance.as_deref().unwrap_or("queued")),
                lease.epoch,
                lease
                    .until_ms
                    .map(|ms| format!(", until {}", rfc3339(ms)))
                    .unwrap_or_default()
            ),
        );
    }
    let mut body = format!("<table class=\"detail\">{rows}</table>");
    if !task.status.is_terminal() {
        body.push_str(&format!(
            "<form method=\"post\" action=\"/admin/tasks/{}/cancel\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <button type=\"submit\" id=\"cancel\">Cancel this task</button></form>",
            encode(&task.id),
            admin.credential.form_token(&task.id)
        ));
    }
    if crate::store::record::keeps_history(task.status) && !detail.origin.tool_version.is_empty() {
        let (id, csrf) = (encode(&task.id), admin.credential.form_token(&task.id));
        let last = detail.steps.len();
        body.push_str(&format!(
            "<form method=\"post\" action=\"/admin/tasks/{id}/retry\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <button type=\"submit\" id=\"retry\">Retry from its last step</button></form>\
             <form method=\"post\" action=\"/admin/tasks/{id}/fork\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <label>Fork from step <input type=\"number\" name=\"step\" min=\"0\" \
             max=\"{last}\" value=\"0\"></label> \
             <button type=\"submit\" id=\"fork\">Fork</button></form>"
        ));
    }
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
        body.push_str(&format!(
            "<h2>Open questions</h2>{}",
            json_block(&detail.questions)
        ));
    }
    if !detail.answers.is_empty() {
        body.push_str(&format!("<h2>Answers</h2>{}", json_block(&detail.answers)));
    }
    match &task.outcome {
        Some(Outcome::Failed(error)) => {
            body.push_str(&format!("<h2>Error</h2>{}", json_block(error)));
        }
        Some(Outcome::Completed(result)) => {
            body.push_str(&format!("<h2>Result</h2>{}", json_block(result)));
        }
        _ => {}
    }
    if !detail.origin.arguments.is_empty() {
        body.push_str(&format!(
            "<h2>Arguments</h2>{}",
            json_block(&detail.origin.arguments)
        ));
    }
    body.push_str("<p><a href=\"/admin/\">All tasks</a></p>");
    let refresh = (!task.status.is_terminal()).then_some(REFRESH_SECONDS);
    page(StatusCode::OK, &format!("Task {}", task.id), &body, refresh)
}

/// Whether the request comes from a page of this origin: `Sec-Fetch-Site` says
/// `same-origin`, or (without it, or with `none`) its `Origin` names the `Host` it was sent
/// to. A request with neither header is not from a browser form of another site (browsers
/// send one of them on every cross-site POST).
fn same_origin(headers: &HeaderMap) -> bool {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    match text(header::HeaderName::from_static("sec-fetch-site")) {
        // The browser says so (a header no page can set): also when it sends `Origin: null`,
        // as Chromium does for a form of a page that sends no referrer.
        Some("same-origin") => return true,
        Some("none") => {}
        Some(_) => return false,
        None => {}
    }
    match (text(header::ORIGIN), text(header::HOST)) {
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_some_and(|(_, authority)| authority == host),
        (Some(_), None) => false,
        (None, _) => true,
    }
}

/// The fields of a form about task `id`, once it passed both guards (see the module docs):
/// sent from this origin, with the task's form token. Why not otherwise.
fn checked_form(
    admin: &Admin,
    id: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Vec<(String, String)>, &'static str> {
    if !same_origin(headers) {
        return Err("this form may only be sent from the admin view's own pages");
    }
    let fields: Vec<(String, String)> = form_urlencoded::parse(body).into_owned().collect();
    let token = fields.iter().find(|(key, _)| key == "csrf");
    if !token.is_some_and(|(_, token)| admin.credential.accepts_form_token(id, token)) {
        return Err(
            "the form's token is missing or wrong: open the task's page again and use its button",
        );
    }
    Ok(fields)
}

/// To the page of task `id`.
fn see_task(id: &str) -> Response {
    let location = format!("/admin/tasks/{}", encode(id));
    (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
}

async fn cancel_form(
    State(admin): State<Admin>,
    client: Client,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(why) = checked_form(&admin, &id, &headers, &body) {
        return error_page(&Failure::Forbidden(why));
    }
    match admin.cancel(&id, client, "/admin/tasks/{id}/cancel").await {
        Ok(Cancelled::Requested(_) | Cancelled::AlreadyEnded(_)) => see_task(&id),
        Err(failure) => error_page(&failure),
    }
}

async fn retry_form(
    State(admin): State<Admin>,
    client: Client,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    retried_page(&admin, client, &id, (&headers, &body), false).await
}

async fn fork_form(
    State(admin): State<Admin>,
    client: Client,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    retried_page(&admin, client, &id, (&headers, &body), true).await
}

/// The retry form of task `id` (`fork`: the fork form, from its `step` field): to the new
/// task's page.
async fn retried_page(
    admin: &Admin,
    client: Client,
    id: &str,
    (headers, body): (&HeaderMap, &Bytes),
    fork: bool,
) -> Response {
    let fields = match checked_form(admin, id, headers, body) {
        Ok(fields) => fields,
        Err(why) => return error_page(&Failure::Forbidden(why)),
    };
    let step = match fork {
        false => None,
        true => {
            let step = fields.iter().find(|(key, _)| key == "step");
            match query::step(step.map(|(_, step)| step.as_str())) {
                Ok(step) => Some(step),
                Err(bad) => return error_page(&Failure::BadParam(bad)),
            }
        }
    };
    match admin.retry(id, step, client).await {
        Ok(new) => see_task(&new),
        Err(failure) => error_page(&failure),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }

    #[test]
    fn only_same_origin_forms_pass() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, HeaderValue::from_static(value));
            }
            map
        };
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080")
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example")
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "null")
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "a:1"),
            ("sec-fetch-site", "cross-site")
        ])));
        assert!(same_origin(&headers(&[
            ("host", "a:1"),
            ("sec-fetch-site", "same-origin")
        ])));
        // What Chromium sends for a form of a page without a referrer.
        assert!(same_origin(&headers(&[
            ("host", "a:1"),
            ("origin", "null"),
            ("sec-fetch-site", "same-origin")
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "a:1"),
            ("origin", "null"),
            ("sec-fetch-site", "same-site")
        ])));
    }
}
