//! Steps under a rate limit: [`TaskContext::step_limited`].

use std::future::Future;

use super::{Failure, TaskContext};
use crate::{clock::system_now_ms as now_ms, rate::Limiter};

impl TaskContext {
    /// Runs `work` as a [step](Self::step) once `limiter` has room: every step run under a
    /// limiter of one name counts against its [`Rate`](crate::rate::Rate), in every task,
    /// and on a shared store on every instance (the starts are logged in the store, by its
    /// clock, under a lock per limiter). So an upstream API's limit holds however many
    /// tasks and instances call it.
    ///
    /// ```
    /// use mcp_tasks::{TaskContext, ToolError, rate::{Limiter, Rate}, task_tool};
    ///
    /// /// Fetches a repository's issues, at most 10 calls a minute to the upstream API
    /// /// across every task and instance, and 2 a minute for any one repository.
    /// #[task_tool(mode = "required", restart = "resume")]
    /// async fn issues(ctx: TaskContext, repo: String) -> Result<String, ToolError> {
    ///     let upstream = Limiter::new("github", Rate::per_minute(10));
    ///     let page: String = ctx
    ///         .step_limited(&upstream, "fetch", || async { format!("issues of {repo}") })
    ///         .await?;
    ///     let per_repo = Limiter::new("github-repo", Rate::per_minute(2)).keyed(&repo);
    ///     ctx.step_limited(&per_repo, "fetch again", || async {}).await?;
    ///     Ok(page)
    /// }
    /// # let _ = mcp_tasks::toolkit![issues];
    /// ```
    ///
    /// While the limiter's window is full the task waits as on a durable
    /// [sleep](Self::sleep) until a place frees (a long wait parks the task: it holds its
    /// row, not memory), then takes the place and runs `work`. A replay that finds the step
    /// stored returns its result and takes no place; a run that took a place and stopped
    /// before storing the step takes another when it runs the step again, so a run of
    /// `work` never goes without a place.
    ///
    /// # Errors
    /// [`Failure::Cancelled`] when the task is cancelled or expires while it waits; a
    /// `-32603` error when the store cannot count the limiter's starts; otherwise as for
    /// [`step`](Self::step).
    pub async fn step_limited<T, F, Fut>(
        &self,
        limiter: &Limiter,
        name: &str,
        work: F,
    ) -> Result<T, Failure>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        // A replay that has this step returns its result: no place is taken.
        if self.host.peek_step().is_none() {
            loop {
                if self.is_cancelled() {
                    return Err(Failure::Cancelled);
                }
                let Some(wait) = self.host.take_rate(limiter).await? else {
                    break;
                };
                let wait = crate::clock::millis(wait);
                self.sleep_to(now_ms().saturating_add(wait)).await?;
            }
        }
        self.step(name, work).await
    }
}
