//! Durable timers: [`TaskContext::sleep`] and [`TaskContext::sleep_until`].

use std::time::{Duration, SystemTime};

use super::{Failure, TaskContext};
use crate::clock::{epoch_ms, system_now_ms as now_ms};

impl TaskContext {
    /// Sleeps for `duration`, durably: the deadline (now plus `duration`, on the wall clock)
    /// is stored as a [step](Self::step) named `name` before the sleep begins. When the task
    /// is replayed after a restart or taken over by another instance, the sleep waits only
    /// for what is left of it, and a replay that reaches a sleep whose deadline has passed
    /// goes on at once. `tokio::time::sleep` in a tool would start again from the beginning
    /// on every replay.
    ///
    /// A cancel ends the sleep at once, and so does the task's expiry (its TTL): both return
    /// [`Failure::Cancelled`]. An inline call (no task) just sleeps; a sleep makes a pending
    /// call a task, as a step does.
    ///
    /// The deadline is wall-clock time: instances that replay each other's tasks should
    /// keep their clocks in step (NTP), as they do for task expiry.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_tasks::{TaskContext, ToolError, task_tool};
    ///
    /// /// Sends a reminder an hour after it is asked to, even across restarts.
    /// #[task_tool(restart = "resume", ttl = "2h")]
    /// async fn remind(ctx: TaskContext, text: String) -> Result<String, ToolError> {
    ///     ctx.sleep("wait an hour", Duration::from_secs(3600)).await?;
    ///     Ok(format!("reminder: {text}"))
    /// }
    /// # let _ = mcp_tasks::toolkit![remind];
    /// ```
    ///
    /// # Errors
    /// [`Failure::Cancelled`] when the task is cancelled or expires during the sleep; as for
    /// [`step`](Self::step) when its deadline cannot be stored or the step at its position
    /// has another name.
    pub async fn sleep(&self, name: &str, duration: Duration) -> Result<(), Failure> {
        // Past the clock's range (`Duration::MAX`: until cancelled), the last instant it has.
        let deadline = || {
            SystemTime::now()
                .checked_add(duration)
                .map_or(u64::MAX, epoch_ms)
        };
        let deadline = self.step(name, || async move { deadline() }).await?;
        self.sleep_to(deadline).await
    }

    /// Sleeps until `deadline` (wall-clock time), durably: as [`sleep`](Self::sleep), with
    /// the deadline given instead of computed. A deadline in the past returns at once.
    ///
    /// # Errors
    /// As [`sleep`](Self::sleep).
    pub async fn sleep_until(&self, name: &str, deadline: SystemTime) -> Result<(), Failure> {
        let deadline = self
            .step(name, || async move { epoch_ms(deadline) })
            .await?;
        self.sleep_to(deadline).await
    }

    /// Waits until the stored deadline (epoch milliseconds), or a cancel.
    pub(super) async fn sleep_to(&self, deadline_ms: u64) -> Result<(), Failure> {
        let left = deadline_ms.saturating_sub(now_ms());
        if left == 0 {
            return if self.is_cancelled() {
                Err(Failure::Cancelled)
            } else {
                Ok(())
            };
        }
        // A long sleep parks the task (`runtime/park.rs`): its work is dropped, and its timer
        // wakes it to a replay that finds the deadline passed.
        let park = self.host.park(crate::store::Wait::until(deadline_ms));
        self.until_cancelled(async {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(left)) => {
                    crate::metrics::timer_fired(deadline_ms);
                }
                () = park => {}
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    #[test]
    fn epoch_ms_is_milliseconds_since_the_epoch_and_saturates() {
        assert_eq!(epoch_ms(UNIX_EPOCH), 0);
        assert_eq!(epoch_ms(UNIX_EPOCH + Duration::from_millis(1_500)), 1_500);
        assert_eq!(epoch_ms(UNIX_EPOCH - Duration::from_secs(1)), 0);
    }
}
