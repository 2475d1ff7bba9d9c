//! Input a tool asks the client for: the kinds of input, the keys a tool may choose
//! ([`check_key`]), [`Keyed`], and the check that the client declared the kind it is asked.

use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationSchema, ErrorData, InputRequest, ListRootsResult, Request, RequestNoParam,
};
use tracing::Instrument as _;

use super::{Ask, Failure, InputKind, TaskContext};
use crate::errors;

/// A form elicitation of `message` with `schema`.
pub(super) fn form(message: String, schema: ElicitationSchema) -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    }
}

/// The longest input-request key a tool may choose, in bytes.
pub const MAX_INPUT_KEY_LEN: usize = 64;

/// Checks a key a tool chose for an input request: 1 to [`MAX_INPUT_KEY_LEN`] characters,
/// each an ASCII letter, digit, `_`, `-` or `.`, and not of the form of the keys the context
/// generates (`elicit-N`, `sample-N`, `roots-N`), so a chosen key never collides with one.
pub(crate) fn check_key(key: &str) -> Result<(), ErrorData> {
    let problem = if key.is_empty() {
        "it is empty".to_owned()
    } else if key.len() > MAX_INPUT_KEY_LEN {
        format!(
            "it is {} bytes long, more than {MAX_INPUT_KEY_LEN}",
            key.len()
        )
    } else if let Some(c) = key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        format!("it contains {c:?}; a key is ASCII letters, digits, `_`, `-` and `.`")
    } else if InputKind::ALL.iter().any(|kind| {
        key.strip_prefix(kind.key_prefix())
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }) {
        "it has the form of a generated key (`elicit-N`, `sample-N`, `roots-N`)".to_owned()
    } else {
        return Ok(());
    };
    Err(errors::bad_input_key(key, &problem))
}

impl TaskContext {
    pub(super) async fn ask_elicit(
        &self,
        params: ElicitRequestParams,
        before_task: bool,
        key: Option<String>,
    ) -> Result<ElicitResult, Failure> {
        let request = InputRequest::Elicitation(Request::new(params));
        let ask = Ask::new(InputKind::Elicitation, request, before_task, key);
        self.input(ask, "ElicitResult").await
    }

    pub(super) async fn ask_sample(
        &self,
        params: CreateMessageRequestParams,
        key: Option<String>,
    ) -> Result<CreateMessageResult, Failure> {
        let request = InputRequest::CreateMessage(Request::new(params));
        let ask = Ask::new(InputKind::Sampling, request, false, key);
        self.input(ask, "CreateMessageResult").await
    }

    pub(super) async fn ask_roots(&self, key: Option<String>) -> Result<ListRootsResult, Failure> {
        let request = InputRequest::ListRoots(RequestNoParam::default());
        let ask = Ask::new(InputKind::Roots, request, false, key);
        self.input(ask, "ListRootsResult").await
    }

    /// Asks, once the key and the client's capability are checked; the answer decoded as
    /// `what` (a `-32602` error naming it when it does not fit).
    async fn input<T: serde::de::DeserializeOwned>(
        &self,
        ask: Ask,
        what: &str,
    ) -> Result<T, Failure> {
        if let Some(key) = &ask.key {
            check_key(key)?;
        }
        let (capability, declared) = ask.kind.capability(self.host.client_capabilities());
        if !declared {
            return Err(errors::client_capability_required(capability).into());
        }
        let span = tracing::info_span!("input", key = ask.key.as_deref());
        serde_json::from_value(self.host.input(ask).instrument(span).await?)
            .map_err(|e| Failure::Error(errors::bad_client_answer(what, &e)))
    }
}

/// Input under a key the tool chose: what [`TaskContext::keyed`] returns. Each method asks
/// as its [`TaskContext`] namesake does, under this key.
#[derive(Debug, Clone)]
#[must_use = "a key asks nothing until one of its methods is awaited"]
pub struct Keyed<'a> {
    pub(super) ctx: &'a TaskContext,
    pub(super) key: String,
}

impl Keyed<'_> {
    /// The key.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// [`TaskContext::elicit`] under this key.
    ///
    /// # Errors
    /// As [`TaskContext::elicit`], and a `-32603` error naming the key when it is not a valid
    /// key or this call asked under it before ([`TaskContext::keyed`]).
    pub async fn elicit(self, params: ElicitRequestParams) -> Result<ElicitResult, Failure> {
        self.ctx.ask_elicit(params, false, Some(self.key)).await
    }

    /// [`TaskContext::elicit_before_task`] under this key.
    ///
    /// # Errors
    /// As [`Keyed::elicit`].
    pub async fn elicit_before_task(
        self,
        params: ElicitRequestParams,
    ) -> Result<ElicitResult, Failure> {
        self.ctx.ask_elicit(params, true, Some(self.key)).await
    }

    /// [`TaskContext::elicit_form`] under this key.
    ///
    /// # Errors
    /// As [`Keyed::elicit`].
    pub async fn elicit_form(
        self,
        message: impl Into<String>,
        schema: ElicitationSchema,
    ) -> Result<ElicitResult, Failure> {
        self.elicit(form(message.into(), schema)).await
    }

    /// [`TaskContext::elicit_form_before_task`] under this key.
    ///
    /// # Errors
    /// As [`Keyed::elicit`].
    pub async fn elicit_form_before_task(
        self,
        message: impl Into<String>,
        schema: ElicitationSchema,
    ) -> Result<ElicitResult, Failure> {
        self.elicit_before_task(form(message.into(), schema)).await
    }

    /// [`TaskContext::sample`] under this key.
    ///
    /// # Errors
    /// As [`Keyed::elicit`], with `sampling` as the capability.
    pub async fn sample(
        self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, Failure> {
        self.ctx.ask_sample(params, Some(self.key)).await
    }

    /// [`TaskContext::roots`] under this key.
    ///
    /// # Errors
    /// As [`Keyed::elicit`], with `roots` as the capability.
    pub async fn roots(self) -> Result<ListRootsResult, Failure> {
        self.ctx.ask_roots(Some(self.key)).await
    }
}
