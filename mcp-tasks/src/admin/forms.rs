//! The web view's forms about one task (see `web.rs` for how each is guarded): cancel and
//! fail a live task, move one to this server's version of its tool, retry or fork one that
//! failed or was cancelled. Each answers with the task's page (the new task's, for a retry
//! or a fork), or an error page that says what went wrong.

use axum::{
    Router,
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Path, Request},
    http::{HeaderMap, HeaderValue, StatusCode, Uri, header},
    response::{IntoResponse, Response},
    routing::post,
};

use super::{
    guard::Client,
    html::{encode, error_page, escape},
    query,
    state::{Admin, Failure},
};
use crate::store::admin::TaskDetail;

pub(super) fn routes() -> Router<Admin> {
    Router::new()
        .route("/admin/tasks/{id}/cancel", post(cancel_form))
        .route("/admin/tasks/{id}/fail", post(fail_form))
        .route("/admin/tasks/{id}/version", post(version_form))
        .route("/admin/tasks/{id}/retry", post(retry_form))
        .route("/admin/tasks/{id}/fork", post(retry_form))
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
        let ours = admin
            .engine
            .toolkit()
            .get(&task.tool)
            .map(|r| r.definition.version());
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
        Some("none") | None => {}
        Some(_) => return false,
    }
    match (text(header::ORIGIN), text(header::HOST)) {
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_some_and(|(_, authority)| authority == host),
        (Some(_), None) => false,
        (None, _) => true,
    }
}

/// A form about one task that passed both guards (see `web.rs`): sent from this origin
/// (checked before its body is read), with the task's form token. Otherwise the error page
/// that says why.
struct TaskForm {
    admin: Admin,
    client: Client,
    id: String,
    fields: Vec<(String, String)>,
}

impl FromRequest<Admin> for TaskForm {
    type Rejection = Response;

    async fn from_request(request: Request, admin: &Admin) -> Result<Self, Response> {
        let forbidden = |why| error_page(&Failure::Forbidden(why));
        let (mut parts, body) = request.into_parts();
        if !same_origin(&parts.headers) {
            return Err(forbidden(
                "this form may only be sent from the admin view's own pages",
            ));
        }
        let Ok(client) = Client::from_request_parts(&mut parts, admin).await;
        let Path(id) = Path::<String>::from_request_parts(&mut parts, admin)
            .await
            .map_err(IntoResponse::into_response)?;
        let body = Bytes::from_request(Request::from_parts(parts, body), admin)
            .await
            .map_err(IntoResponse::into_response)?;
        let fields: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
        let token = fields.iter().find(|(key, _)| key == "csrf");
        if !token.is_some_and(|(_, token)| admin.credential.accepts_form_token(&id, token)) {
            return Err(forbidden(
                "the form's token is missing or wrong: \
                 open the task's page again and use its button",
            ));
        }
        Ok(Self {
            admin: admin.clone(),
            client,
            id,
            fields,
        })
    }
}

impl TaskForm {
    /// The value of field `name`, if sent.
    fn field(&self, name: &str) -> Option<&str> {
        let field = self.fields.iter().find(|(key, _)| key == name);
        field.map(|(_, value)| value.as_str())
    }
}

/// To the page of task `id`.
fn see_task(id: &str) -> Response {
    let location = format!("/admin/tasks/{}", encode(id));
    (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
}

/// The task's page once `done` succeeded, else the error page.
fn to_task<T>(id: &str, done: Result<T, Failure>) -> Response {
    done.map_or_else(|failure| error_page(&failure), |_| see_task(id))
}

async fn cancel_form(form: TaskForm) -> Response {
    let path = "/admin/tasks/{id}/cancel";
    let cancelled = form.admin.cancel(&form.id, form.client, path).await;
    to_task(&form.id, cancelled)
}

async fn fail_form(form: TaskForm) -> Response {
    let reason = form
        .field("reason")
        .map(str::trim)
        .filter(|r| !r.is_empty());
    let failed = form.admin.fail(&form.id, reason, form.client).await;
    to_task(&form.id, failed)
}

async fn version_form(form: TaskForm) -> Response {
    let moved = form.admin.set_version(&form.id, None, form.client).await;
    to_task(&form.id, moved)
}

/// A retry of the form's task (on the fork form, from its step): to the new task's page.
async fn retry_form(uri: Uri, form: TaskForm) -> Response {
    let fork = uri.path().ends_with("/fork");
    let retried = async {
        let step = fork.then(|| query::step(form.field("step"))).transpose()?;
        form.admin.retry(&form.id, step, form.client).await
    };
    retried
        .await
        .map_or_else(|failure| error_page(&failure), |new| see_task(&new))
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
