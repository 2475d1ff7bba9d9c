//! Answering the server's questions: elicitation, sampling and roots handlers.
//!
//! The same handlers answer input in three places: the `inputRequests` of a task (answered
//! with `tasks/update`), an `input_required` answer to `tools/call` before any task exists
//! (the call is sent again with the answers), and a plain server→client request on a legacy
//! connection.
//!
//! A handler returns `Ok(Some(answer))` to answer now, or `Ok(None)` to answer later: the
//! key stays outstanding and the handler is asked again on a later poll (this is how an
//! application answers part of the requests of one snapshot).
//!
//! | kind | no handler | handler fails |
//! | --- | --- | --- |
//! | `elicitation/create` | declined with `{"action":"cancel"}` | `{"action":"cancel"}`, logged |
//! | `sampling/createMessage` | [`ClientError::NoHandler`] | [`ClientError::Handler`] |
//! | `roots/list` | [`ClientError::NoHandler`] | [`ClientError::Handler`] |
//!
//! Elicitation is always declared in the client capabilities (declining is always a valid
//! answer); sampling and roots only when a handler is registered, so a conforming server
//! does not ask for them otherwise.

// For maintainers: answers go in one tasks/update (docs/protocol.md R30-R32), a subset of the
// keys is fine (R27), multi round-trip requests (C20), capabilities asked for only when
// declared (C18).

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{
    ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationCapability, FormElicitationCapability,
    InputRequest, ListRootsResult, RootsCapabilities, SamplingCapability,
};
use serde::Deserialize as _;
use serde_json::Value;

use super::ClientError;
pub use super::error::InputError;

/// What a handler returns: `Some` answers now, `None` leaves the request for a later poll.
pub type InputAnswer<T> = Result<Option<T>, InputError>;

/// Why `value` is not a value of the form field `property` (one of the `properties` of an
/// elicitation's `requestedSchema`), if it is not, as "must be ..." words: the check the
/// server makes of each field of an accepted answer. A `property` that is not the schema of
/// a form's field is no check.
#[must_use]
pub fn form_field_problem(property: &Value, value: &Value) -> Option<String> {
    let field = rmcp::model::PrimitiveSchemaDefinition::deserialize(property).ok()?;
    crate::context::answer::field_problem(&field, value)
}

/// Where an input request came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputScope {
    /// An `input_required` answer to `tools/call` of `tool`, before any task exists.
    Call {
        /// The tool called.
        tool: String,
    },
    /// The `inputRequests` of a task.
    Task {
        /// The task.
        task_id: String,
    },
    /// A server→client request outside the tasks extension (legacy connections).
    Request,
}

/// What a handler knows about the request it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InputContext {
    /// The server's key for the request (empty for [`InputScope::Request`]).
    pub key: String,
    /// Where it came from.
    pub scope: InputScope,
}

type ElicitFn = Arc<
    dyn Fn(ElicitRequestParams, InputContext) -> BoxFuture<'static, InputAnswer<ElicitResult>>
        + Send
        + Sync,
>;
type SampleFn = Arc<
    dyn Fn(
            CreateMessageRequestParams,
            InputContext,
        ) -> BoxFuture<'static, InputAnswer<CreateMessageResult>>
        + Send
        + Sync,
>;
type RootsFn =
    Arc<dyn Fn(InputContext) -> BoxFuture<'static, InputAnswer<ListRootsResult>> + Send + Sync>;

#[derive(Clone, Default)]
pub(crate) struct InputHandlers {
    pub(super) elicitation: Option<ElicitFn>,
    pub(super) sampling: Option<SampleFn>,
    pub(super) roots: Option<RootsFn>,
}

impl std::fmt::Debug for InputHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputHandlers")
            .field("elicitation", &self.elicitation.is_some())
            .field("sampling", &self.sampling.is_some())
            .field("roots", &self.roots.is_some())
            .finish()
    }
}

impl InputHandlers {
    /// The capabilities these handlers let the client declare (without the extension).
    pub(crate) fn capabilities(&self) -> ClientCapabilities {
        let mut capabilities = ClientCapabilities::default();
        let mut elicitation = ElicitationCapability::default();
        elicitation.form = Some(FormElicitationCapability::default());
        capabilities.elicitation = Some(elicitation);
        capabilities.sampling = self.sampling.is_some().then(SamplingCapability::default);
        capabilities.roots = self.roots.is_some().then(RootsCapabilities::default);
        capabilities
    }

    /// An elicitation answer: declined with cancel when there is no handler, when it fails,
    /// and when it accepts a form with content that does not fit the form (which the server
    /// would refuse, or ask again round after round).
    pub(crate) async fn elicit(
        &self,
        params: ElicitRequestParams,
        cx: InputContext,
    ) -> Option<ElicitResult> {
        if let Some(handler) = &self.elicitation {
            let key = cx.key.clone();
            let schema = match &params {
                ElicitRequestParams::FormElicitationParams {
                    requested_schema, ..
                } => Some(requested_schema.clone()),
                _ => None,
            };
            match handler(params, cx).await {
                Ok(Some(answer))
                    if answer.action == ElicitationAction::Accept
                        && let Some(schema) = &schema
                        && let Some(problem) = crate::context::answer::form_problem(
                            schema,
                            answer.content.as_ref(),
                        ) =>
                {
                    tracing::warn!(
                        key,
                        problem,
                        "elicitation handler's answer does not fit the form; answering cancel"
                    );
                }
                Ok(answer) => return answer,
                Err(error) => {
                    tracing::warn!(key, %error, "elicitation handler failed; answering cancel");
                }
            }
        }
        Some(ElicitResult::new(ElicitationAction::Cancel))
    }

    pub(crate) async fn sample(
        &self,
        params: CreateMessageRequestParams,
        cx: InputContext,
    ) -> Result<Option<CreateMessageResult>, ClientError> {
        let key = cx.key.clone();
        let answer = self.sampling.as_ref().map(|handler| handler(params, cx));
        required("sampling/createMessage", key, answer).await
    }

    pub(crate) async fn list_roots(
        &self,
        cx: InputContext,
    ) -> Result<Option<ListRootsResult>, ClientError> {
        let key = cx.key.clone();
        let answer = self.roots.as_ref().map(|handler| handler(cx));
        required("roots/list", key, answer).await
    }

    /// The answer to one embedded input request, as the JSON that goes into
    /// `inputResponses`; `None` when the handler answers later.
    pub(crate) async fn answer(
        &self,
        key: &str,
        request: &InputRequest,
        scope: InputScope,
    ) -> Result<Option<Value>, ClientError> {
        let cx = InputContext {
            key: key.to_owned(),
            scope,
        };
        let value = match request {
            InputRequest::Elicitation(request) => self
                .elicit(request.params.clone(), cx)
                .await
                .map(serde_json::to_value),
            InputRequest::CreateMessage(request) => self
                .sample(request.params.clone(), cx)
                .await?
                .map(serde_json::to_value),
            InputRequest::ListRoots(_) => self.list_roots(cx).await?.map(serde_json::to_value),
            _ => {
                return Err(ClientError::InvalidResponse {
                    method: "tasks/get",
                    reason: format!("input request `{key}` has a method this client does not know"),
                });
            }
        };
        value
            .transpose()
            .map_err(|error| ClientError::InvalidResponse {
                method: "tasks/update",
                reason: format!("the answer to `{key}` does not serialize: {error}"),
            })
    }
}

/// The answer of a handler for a kind that cannot be declined (sampling, roots): `answer` is
/// `None` when no handler is registered.
async fn required<T>(
    method: &'static str,
    key: String,
    answer: Option<BoxFuture<'static, InputAnswer<T>>>,
) -> Result<Option<T>, ClientError> {
    let Some(answer) = answer else {
        return Err(ClientError::NoHandler { key, method });
    };
    answer.await.map_err(|source| ClientError::Handler {
        key,
        method,
        source,
    })
}
