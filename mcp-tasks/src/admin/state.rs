//! What every admin handler reads ([`Admin`]) and why an admin request fails ([`Failure`]).

use std::sync::Arc;

use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::{
    credential::{AdminCredential, presented},
    guard::{AUDIT_TARGET, Checked, Client, Throttle, retry_after_secs},
    query::BadParam,
};
use crate::{
    Engine,
    clock::Clock,
    store::{
        AdminStore, StoreError, TaskStore,
        admin::{self, Cancelled},
    },
};

/// The longest `reason` an operator's failure takes.
const MAX_REASON: usize = 500;

/// What every handler reads.
#[derive(Clone)]
pub(crate) struct Admin {
    pub(super) engine: Engine,
    pub(super) credential: Arc<AdminCredential>,
    pub(super) throttle: Arc<Throttle>,
    pub(super) clock: Clock,
}

impl Admin {
    pub(super) fn store(&self) -> &dyn TaskStore {
        &**self.engine.store()
    }

    pub(super) fn admin_store(&self) -> Result<&dyn AdminStore, Failure> {
        self.store().admin().ok_or(Failure::Unsupported)
    }

    /// Checks the credential `request` presents (HTTP Basic's password too when `basic`),
    /// through the throttle.
    pub(super) fn check(&self, request: &axum::extract::Request, basic: bool) -> Checked {
        self.throttle.check(
            &self.credential,
            presented(request.headers(), basic).as_deref(),
            Client::of(request.extensions()),
            request.uri().path(),
        )
    }

    /// Records a cancel for task `id` and signals its work, wherever it runs (a cluster
    /// store wakes the instance that runs it); an audit event says who asked, from where
    /// (`path`) and how it went.
    pub(super) async fn cancel(
        &self,
        id: &str,
        client: Client,
        path: &'static str,
    ) -> Result<Cancelled, Failure> {
        let cancelled = admin::cancel(self.store(), id).await;
        let cancelled = audit("cancel", id, client, path, cancelled, Cancelled::outcome)?;
        if matches!(cancelled, Cancelled::Requested(_)) {
            self.engine.signal_cancel(id);
        }
        Ok(cancelled)
    }

    /// Ends the live task `id` `failed` with `reason` (by default "no reason given"; its
    /// code never runs again; its work stops, here at once and on another instance of a
    /// cluster when it hears of the end); an audit event says who asked,
    /// from where and how it went.
    pub(super) async fn fail(
        &self,
        id: &str,
        reason: Option<&str>,
        client: Client,
    ) -> Result<crate::store::TaskSnapshot, Failure> {
        let reason = reason.unwrap_or("no reason given");
        if reason.len() > MAX_REASON {
            return Err(BadParam::new("reason", format!("at most {MAX_REASON} bytes")).into());
        }
        let failed = admin::fail(self.store(), id, reason).await;
        let path = "/admin/api/tasks/{id}/fail";
        let failed = audit("fail", id, client, path, failed, |_| "done")?;
        self.engine.runtime.ended_by_operator(id);
        Ok(failed)
    }

    /// Moves the live task `id` to `version` of its tool (by default this server's): a task
    /// that waited here for its version and now has this server's starts. Answers the task
    /// and whether it started here; an audit event as for [`Admin::fail`].
    pub(super) async fn set_version(
        &self,
        id: &str,
        version: Option<&str>,
        client: Client,
    ) -> Result<(crate::store::TaskSnapshot, bool), Failure> {
        let store = self.admin_store()?;
        let version = match version {
            Some(version) => version.to_owned(),
            None => {
                let task = self.store().get(id).await?.ok_or(Failure::NotFound)?;
                let registered = self.engine.toolkit().get(&task.tool);
                let ours = registered.map(|r| r.definition.version().to_owned());
                ours.ok_or_else(|| {
                    BadParam::new(
                        "to",
                        format!(
                            "this server does not offer tool `{}`: name the version with `to`",
                            task.tool
                        ),
                    )
                })?
            }
        };
        let set = store.set_tool_version(id, &version).await;
        let path = "/admin/api/tasks/{id}/version";
        let task = audit("set_version", id, client, path, set, |_| "done")?;
        Ok((task, self.engine.runtime.reversioned(id).await?))
    }

    /// Retries task `id` (`from_step: None`) or forks it from step `from_step`: a new task
    /// (`runtime/retry.rs`), whose id it answers; an audit event as for [`Admin::fail`],
    /// naming the new task too.
    pub(super) async fn retry(
        &self,
        id: &str,
        from_step: Option<usize>,
        client: Client,
    ) -> Result<std::sync::Arc<str>, Failure> {
        use crate::runtime::retry::RetryRefused;
        let retried = match self.admin_store()?.detail(id).await? {
            None => Err(Failure::NotFound),
            Some(detail) => self
                .engine
                .runtime
                .retry(detail, from_step)
                .await
                .map_err(|refused| match refused {
                    RetryRefused::Status(status) => Failure::Conflict(format!(
                        "only a failed or cancelled task can be retried or forked; this one is {}",
                        admin::status_word(status)
                    )),
                    RetryRefused::NoHistory => Failure::Conflict(
                        "the task kept no history to replay (it ended before the server kept \
                         the history of failed and cancelled tasks)"
                            .to_owned(),
                    ),
                    RetryRefused::NoSuchStep(stored) => Failure::BadParam(BadParam::new(
                        "step",
                        format!("the task stored {stored} steps: fork from a step 0 to {stored}"),
                    )),
                    RetryRefused::Store(error) => Failure::from(error),
                }),
        };
        let (event, path) = match from_step {
            None => ("retry", "/admin/api/tasks/{id}/retry"),
            Some(_) => ("fork", "/admin/api/tasks/{id}/fork"),
        };
        let retried = audit(event, id, client, path, retried, |_| "done");
        if let Ok(new) = &retried {
            tracing::info!(target: AUDIT_TARGET, event, task_id = id, new_task_id = %new,
                from_step, "admin {event}: the new task");
        }
        retried
    }
}

/// The audit event of an operator's change of task `id`, which answered `done`: its outcome
/// is `word` of what it did, or why it failed. Answers `done`.
fn audit<T>(
    event: &str,
    id: &str,
    client: Client,
    path: &'static str,
    done: Result<T, impl Into<Failure>>,
    word: impl FnOnce(&T) -> &'static str,
) -> Result<T, Failure> {
    let done = done.map_err(Into::into);
    let outcome = match &done {
        Ok(value) => word(value).to_owned(),
        Err(Failure::NotFound) => "not_found".to_owned(),
        Err(failure) => format!("failed: {}", failure.message()),
    };
    tracing::info!(
        target: AUDIT_TARGET,
        event,
        who = "admin",
        client = %client.describe(),
        path,
        task_id = id,
        outcome,
        "admin {event}"
    );
    done
}

/// Why an admin request failed, as its response says.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The task ended already (with this status): only a live task can be changed.
    Ended(rmcp::model::TaskStatus),
    /// The task is not in a state the operation takes: why.
    Conflict(String),
    Unauthorized,
    BadParam(BadParam),
    /// A request to the JSON API came with a body, which it does not read.
    Body,
    NotFound,
    Unsupported,
    Forbidden(&'static str),
    /// Too many wrong credentials from this address: wait this long.
    Throttled(std::time::Duration),
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
            StoreError::Terminal(status) => Self::Ended(status),
            error => Self::Store(error),
        }
    }
}

impl Failure {
    pub(super) fn status(&self) -> StatusCode {
        match self {
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Ended(_) | Self::Conflict(_) => StatusCode::CONFLICT,
            Self::BadParam(_) | Self::Body => StatusCode::BAD_REQUEST,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::Unsupported => StatusCode::NOT_IMPLEMENTED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::Throttled(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::Store(error) if error.is_retryable() => StatusCode::SERVICE_UNAVAILABLE,
            Self::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub(super) fn message(&self) -> String {
        match self {
            Self::Unauthorized => "the admin API needs its own credential: send \
                                   `Authorization: Bearer <admin credential>`"
                .to_owned(),
            Self::BadParam(error) => format!("query parameter `{}`: {}", error.name, error.message),
            Self::Body => "the admin API reads no body: send the parameters in the query \
                           string (for example `/admin/api/purge?older_than=7d`) and no body"
                .to_owned(),
            Self::NotFound => "no task has this id (never created, or purged)".to_owned(),
            Self::Conflict(why) => why.clone(),
            Self::Ended(status) => format!(
                "the task already ended ({}): only a working or input_required task can be \
                 changed",
                admin::status_word(*status)
            ),
            Self::Unsupported => {
                "this server's task store does not offer the admin operations".to_owned()
            }
            Self::Forbidden(why) => (*why).to_owned(),
            Self::Throttled(wait) => format!(
                "too many wrong admin credentials from this address: retry in {} s",
                retry_after_secs(*wait)
            ),
            Self::Store(error) => crate::errors::error_chain(error),
        }
    }

    /// `Retry-After` on a throttled answer.
    pub(super) fn add_retry_after(&self, response: &mut Response) {
        if let Self::Throttled(wait) = self {
            let after = HeaderValue::from(retry_after_secs(*wait));
            response.headers_mut().insert(header::RETRY_AFTER, after);
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
            let challenge = HeaderValue::from_static("Bearer realm=\"mcp-tasks admin\"");
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
        }
        self.add_retry_after(&mut response);
        response
    }
}

pub(super) fn json_response(status: StatusCode, body: &Value) -> Response {
    let headers = [
        (header::CONTENT_TYPE, "application/json"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    (status, headers, body.to_string()).into_response()
}
