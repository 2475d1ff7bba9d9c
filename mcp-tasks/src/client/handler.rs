//! The rmcp client handler: what the server asks the client outside a task (plain
//! server-to-client requests) goes to the same input handlers.

use rmcp::{
    ClientHandler, ErrorData, RoleClient,
    model::{
        ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
        ElicitResult, ElicitationAction, ListRootsResult, TaskStatusNotificationParams,
    },
    service::{NotificationContext, RequestContext},
};

use super::ClientError;
use super::input::{InputContext, InputHandlers, InputScope};

pub(super) struct Handler {
    pub(super) handlers: InputHandlers,
    pub(super) config: ClientConfig,
    pub(super) followers: std::sync::Arc<super::followers::Followers>,
}

fn request_cx() -> InputContext {
    InputContext {
        key: String::new(),
        scope: InputScope::Request,
    }
}

/// A handler's answer to a plain request, or an internal error: `none` when it gave none.
fn answered<T>(answer: Result<Option<T>, ClientError>, none: &'static str) -> Result<T, ErrorData> {
    let answer = answer.map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
    answer.ok_or_else(|| ErrorData::internal_error(none, None))
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }

    /// A task state pushed on a listen stream: to the handles following that task, with
    /// its subscription id when the notification still carries one (rmcp 3.11 keeps the
    /// `_meta` of neither the params nor the context for these).
    // docs/protocol.md C24.
    async fn on_task_status(
        &self,
        params: TaskStatusNotificationParams,
        context: NotificationContext<RoleClient>,
    ) {
        let carried = params.meta.as_ref().and_then(|m| m.subscription_id());
        let subscription = carried.or_else(|| context.meta.subscription_id());
        self.followers.deliver(subscription, &params.task);
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(self
            .handlers
            .elicit(request, request_cx())
            .await
            .unwrap_or_else(|| ElicitResult::new(ElicitationAction::Cancel)))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let answer = self.handlers.sample(params, request_cx()).await;
        answered(answer, "no answer to the sampling request")
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let answer = self.handlers.list_roots(request_cx()).await;
        answered(answer, "no answer to roots/list")
    }
}
