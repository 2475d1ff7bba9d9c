//! Task tools inside an rmcp server of your own: [`Engine::tool_router`] routes them beside
//! rmcp `#[tool]` methods, and [`task_methods!`](crate::task_methods) answers `tasks/*`.

use rmcp::{
    handler::server::{
        router::tool::{ToolRoute, ToolRouter},
        tool::ToolCallContext,
    },
    model::CallToolRequestParams,
};

use super::Engine;

impl Engine {
    /// An rmcp [`ToolRouter`] with one route per tool of this engine, each answering through
    /// [`Engine::call_tool`] (so a client that declares the tasks extension gets a task). Add
    /// it to the router of your `#[tool_router]` methods and one `tools/list` shows both:
    ///
    /// ```
    /// use mcp_tasks::{Engine, task_tool, toolkit};
    /// use rmcp::handler::server::router::tool::ToolRouter;
    ///
    /// /// Waits, then says so.
    /// #[task_tool]
    /// async fn wait() -> String { "waited".into() }
    ///
    /// struct MyServer { tasks: Engine }
    ///
    /// let tasks = Engine::new(toolkit![wait]?);
    /// let router: ToolRouter<MyServer> = ToolRouter::new() /* + Self::tool_router() */
    ///     + tasks.tool_router();
    /// assert!(router.has_route("wait"));
    /// # Ok::<(), mcp_tasks::ToolkitError>(())
    /// ```
    ///
    /// `examples/mixed.rs` is a whole server; [`task_methods!`](crate::task_methods) writes
    /// its `tasks/*` methods.
    #[must_use]
    pub fn tool_router<S: Send + Sync + 'static>(&self) -> ToolRouter<S> {
        let mut router = ToolRouter::new();
        for definition in self.toolkit.definitions() {
            let engine = self.clone();
            router.add_route(ToolRoute::new_dyn(
                definition.tool().clone(),
                move |call: ToolCallContext<'_, S>| {
                    let engine = engine.clone();
                    Box::pin(async move {
                        let mut params = CallToolRequestParams::new(call.name.clone());
                        params.arguments = call.arguments;
                        params.input_responses = call.input_responses;
                        params.request_state = call.request_state;
                        engine.call_tool(params, &call.request_context).await
                    })
                },
            ));
        }
        router
    }
}

/// Writes the `tasks/get`, `tasks/update` and `tasks/cancel` methods of an rmcp
/// `ServerHandler` impl, answered by the [`Engine`](crate::Engine) in field `$engine`.
///
/// With [`Engine::tool_router`] for the tools and [`Engine::capabilities`] in `get_info`,
/// that is all an rmcp server needs to offer task tools beside its own:
///
/// ```
/// use mcp_tasks::Engine;
/// use rmcp::{ServerHandler, model::{ServerCapabilities, ServerConfig}};
///
/// struct MyServer { tasks: Engine }
///
/// impl ServerHandler for MyServer {
///     fn get_info(&self) -> ServerConfig {
///         ServerConfig::new(self.tasks.capabilities(ServerCapabilities::default()))
///     }
///     mcp_tasks::task_methods!(tasks);
///     // list_tools / call_tool: from a ToolRouter (rmcp's #[tool_handler]) that includes
///     // self.tasks.tool_router(), or by hand through Engine::list_tools / Engine::call_tool.
/// }
/// ```
#[macro_export]
macro_rules! task_methods {
    ($engine:ident) => {
        async fn get_task(
            &self,
            request: $crate::__private::rmcp::model::GetTaskParams,
            context: $crate::__private::rmcp::service::RequestContext<
                $crate::__private::rmcp::RoleServer,
            >,
        ) -> ::core::result::Result<
            $crate::__private::rmcp::model::GetTaskResult,
            $crate::__private::rmcp::ErrorData,
        > {
            self.$engine.get_task(request, &context).await
        }

        async fn update_task(
            &self,
            request: $crate::__private::rmcp::model::UpdateTaskParams,
            context: $crate::__private::rmcp::service::RequestContext<
                $crate::__private::rmcp::RoleServer,
            >,
        ) -> ::core::result::Result<(), $crate::__private::rmcp::ErrorData> {
            self.$engine.update_task(request, &context).await
        }

        async fn cancel_task(
            &self,
            request: $crate::__private::rmcp::model::CancelTaskParams,
            context: $crate::__private::rmcp::service::RequestContext<
                $crate::__private::rmcp::RoleServer,
            >,
        ) -> ::core::result::Result<(), $crate::__private::rmcp::ErrorData> {
            self.$engine.cancel_task(request, &context).await
        }
    };
}
