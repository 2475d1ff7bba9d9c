//! The rmcp client handler: what the server asks the client outside a task (plain
//! server-to-client requests) goes to the same input handlers.

use rmcp::{
    ClientHandler, ErrorData, RoleClient,
    model::{
        ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
        ElicitResult, ListRootsResult,
    },
    service::RequestContext,
};

use super::input::{self, InputContext, InputHandlers, InputScope};

/// The rmcp client handler: forwards plain server→client requests to the input handlers.
pub(super) struct Handler {
    pub(super) handlers: InputHandlers,
    pub(super) config: ClientConfig,
}

fn request_cx() -> InputContext {
    InputContext {
        key: String::new(),
        scope: InputScope::Request,
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
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
            .unwrap_or_else(input::elicitation_cancelled))
    }

    #[allow(deprecated, reason = "sampling still works on the 2026-07-28 wire")]
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        match self.handlers.sample(params, request_cx()).await {
            Ok(Some(result)) => Ok(result),
            Ok(None) => Err(ErrorData::internal_error(
                "no answer to the sampling request",
                None,
            )),
            Err(error) => Err(ErrorData::internal_error(error.to_string(), None)),
        }
    }

    #[allow(deprecated, reason = "roots still work on the 2026-07-28 wire")]
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        match self.handlers.list_roots(request_cx()).await {
            Ok(Some(result)) => Ok(result),
            Ok(None) => Err(ErrorData::internal_error("no answer to roots/list", None)),
            Err(error) => Err(ErrorData::internal_error(error.to_string(), None)),
        }
    }
}
