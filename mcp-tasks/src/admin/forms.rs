//! The web view's forms about one task (see `web.rs` for how each is guarded): cancel and
//! fail a live task, move one to this server's version of its tool, retry or fork one that
//! failed or was cancelled. Each answers with the task's page (the new task's, for a retry
//! or a fork), or an error page that says what went wrong.

use axum::{
    Router,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};

use super::{
    guard::Client,
    html::{encode, error_page, escape},
    query,
    state::{Admin, Failure},
};
use crate::store::admin::{Cancelled, TaskDetail};

/// The forms' routes.
pub(super) fn routes() -> Router<Admin> {
    Router::new()
        .route("/admin/tasks/{id}/cancel", post(cancel_form))
        .route("/admin/tasks/{id}/fail", post(fail_form))
        .route("/admin/tasks/{id}/version", post(version_form))
        .route("/admin/tasks/{id}/retry", post(retry_form))
        .route("/admin/tasks/{id}/fork", post(fork_form))
}

/// The forms a task's page shows: for a live task cancel, fail (with a reason) and, when
/// another version of its tool than this server's recorded it, a move to this server's
/// version; for a failed or cancelled task that kept its history, retry and fork.
pub(super) fn controls(admin: &Admin, detail: &TaskDetail) -> String {
    let task = &detail.task;
    let (id, csrf) = (encode(&task.id), admin.credential.form_token(&task.id));
    let form = |action: &str, fields: &str| {
        format!(
            "<form method=\"post\" action=\"/admin/tasks/{id}/{action}\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">{fields}</form>"
        )
    };
    let mut html = String::new();
    if !task.status.is_terminal() {
        html.push_str(&form(
            "cancel",
            "<button type=\"submit\" id=\"cancel\">Cancel this task</button>",
        ));
        html.push_str(&form(
            "fail",
            "<label>Reason <input type=\"text\" name=\"reason\" maxlength=\"500\"></label> \
             <button type=\"submit\" id=\"fail\">Fail this task</button>",
        ));
        let ours = (admin.engine.toolkit().get(&task.tool)).map(|r| r.definition.version());
        let recorded = &*detail.origin.tool_version;
        if let Some(ours) = ours.filter(|ours| !recorded.is_empty() && ours != &recorded) {
            html.push_str(&form(
                "version",
                &format!(
                    "<button type=\"submit\" id=\"version\">Move to this server's version \
                     ({})</button>",
                    escape(ours)
                ),
            ));
        }
    }
    if crate::store::record::keeps_history(task.status) && !detail.origin.tool_version.is_empty() {
        let last = detail.steps.len();
        html.push_str(&form(
            "retry",
            "<button type=\"submit\" id=\"retry\">Retry from its last step</button>",
        ));
        html.push_str(&form(
            "fork",
            &format!(
                "<label>Fork from step <input type=\"number\" name=\"step\" min=\"0\" \
                 max=\"{last}\" value=\"0\"></label> \
                 <button type=\"submit\" id=\"fork\">Fork</button>"
            ),
        ));
    }
    html
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

async fn fail_form(
    State(admin): State<Admin>,
    client: Client,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let fields = match checked_form(&admin, &id, &headers, &body) {
        Ok(fields) => fields,
        Err(why) => return error_page(&Failure::Forbidden(why)),
    };
    let reason = fields.iter().find(|(key, _)| key == "reason");
    let reason = reason
        .map(|(_, reason)| reason.trim())
        .filter(|r| !r.is_empty());
    match admin.fail(&id, reason, client).await {
        Ok(_) => see_task(&id),
        Err(failure) => error_page(&failure),
    }
}

async fn version_form(
    State(admin): State<Admin>,
    client: Client,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(why) = checked_form(&admin, &id, &headers, &body) {
        return error_page(&Failure::Forbidden(why));
    }
    match admin.set_version(&id, None, client).await {
        Ok(_) => see_task(&id),
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
