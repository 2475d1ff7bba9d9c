//! Patches: [`TaskContext::patched`] and [`TaskContext::deprecate_patch`], which let a
//! tool's code change while tasks recorded by the old code still replay through it.

use super::{Failure, TaskContext};

/// The name of the marker step that records patch `name` (a run of the new code passed it).
fn marker(name: &str) -> String {
    format!("patched:{name}")
}

impl TaskContext {
    /// Whether this run takes the new code of patch `name`: `true` for a run that reaches
    /// this point in code that has the patch, `false` while replaying a history recorded
    /// before the patch existed. Wrap the changed code in it, and a tool can change a step,
    /// add one or remove one while its older tasks keep replaying the path they took:
    ///
    /// ```
    /// use mcp_tasks::{TaskContext, ToolError, task_tool};
    ///
    /// /// Exports a workspace. Version 2 notifies the owner once the export is done; tasks
    /// /// started by version 1 replay without the notification step.
    /// #[task_tool(restart = "resume", version = "1")]
    /// async fn export(ctx: TaskContext, workspace: String) -> Result<String, ToolError> {
    ///     let url: String = ctx
    ///         .step("export", || async { format!("https://files.example/{workspace}.zip") })
    ///         .await?;
    ///     if ctx.patched("notify-owner").await? {
    ///         ctx.step("notify", || async { /* send the mail */ }).await?;
    ///     }
    ///     Ok(url)
    /// }
    /// # let _ = mcp_tasks::toolkit![export];
    /// ```
    ///
    /// A run that passes the patch stores a marker step (named `patched:<name>`), so the
    /// answer is the same in every later replay of that task. A replay of an older history
    /// finds one of its own steps where the marker would be and answers `false`, storing
    /// nothing; a history that ends before this point (the old code had not got here)
    /// takes the new code from here on. Keep the tool's [`version`](crate::ToolDefinition::version)
    /// fixed (`#[task_tool(version = "1")]`): by default a change to the tool's code is a new
    /// version, and tasks of another version are not replayed at all.
    ///
    /// Once no task that started before the patch is left, replace the call with
    /// [`deprecate_patch`](Self::deprecate_patch) and keep only the new code; once no task
    /// that passed the patch is left either, remove that call too.
    ///
    /// An inline call (no task, nothing to replay) answers `true` and stores nothing; like a
    /// step, a patch makes a pending call a task.
    ///
    /// # Errors
    /// As for [`step`](Self::step): the marker cannot be stored, or the task ended.
    pub async fn patched(&self, name: &str) -> Result<bool, Failure> {
        let marker = marker(name);
        // A history from before the patch has its own step here. A task that passed the patch
        // before, a first run, or a run past the end of a recorded history: the new code.
        if self.host.peek_step().is_some_and(|stored| stored != marker) {
            return Ok(false);
        }
        self.step(&marker, || async { true }).await
    }

    /// The call that stands where [`patched`](Self::patched) stood, once every task that
    /// started before patch `name` has ended: it consumes the patch's marker in the tasks
    /// that stored one (so their later steps keep their places) and stores nothing in new
    /// ones. Remove it once the tasks that passed the patch have ended too.
    ///
    /// ```
    /// use mcp_tasks::{TaskContext, ToolError, task_tool};
    ///
    /// #[task_tool(restart = "resume", version = "1")]
    /// async fn export(ctx: TaskContext, workspace: String) -> Result<String, ToolError> {
    ///     let url: String = ctx
    ///         .step("export", || async { format!("https://files.example/{workspace}.zip") })
    ///         .await?;
    ///     ctx.deprecate_patch("notify-owner");
    ///     ctx.step("notify", || async { /* send the mail */ }).await?;
    ///     Ok(url)
    /// }
    /// # let _ = mcp_tasks::toolkit![export];
    /// ```
    pub fn deprecate_patch(&self, name: &str) {
        if self.host.peek_step().as_deref() == Some(marker(name).as_str()) {
            let _ = self.host.next_step();
        }
    }
}
