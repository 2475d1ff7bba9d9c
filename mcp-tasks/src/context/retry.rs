//! Steps that retry on their own: [`RetryPolicy`] and [`TaskContext::retry_step`].

use std::{fmt::Display, future::Future, time::Duration};

use serde::{Deserialize, Serialize};

use super::{StepError, TaskContext};
use crate::clock::{millis, system_now_ms as now_ms};

/// How a [retried step](TaskContext::retry_step) tries again: how many attempts in all, and
/// the wait before each new one (exponential backoff from `initial` to `max`, less a random
/// part of up to `jitter` of it so that many tasks failing together do not retry together).
///
/// The default: 5 attempts, 1 s, doubling, at most 5 minutes, jitter 0.2.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    attempts: u32,
    initial: Duration,
    factor: f64,
    max: Duration,
    jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 5,
            initial: Duration::from_secs(1),
            factor: 2.0,
            max: Duration::from_secs(300),
            jitter: 0.2,
        }
    }
}

impl RetryPolicy {
    /// The default policy with `attempts` attempts in all (at least 1: the first run).
    #[must_use]
    pub fn attempts(attempts: u32) -> Self {
        Self {
            attempts: attempts.max(1),
            ..Self::default()
        }
    }

    /// Waits `initial` before the second attempt, multiplied by `factor` (at least 1) before
    /// each later one, never more than `max`.
    #[must_use]
    pub fn with_backoff(mut self, initial: Duration, factor: f64, max: Duration) -> Self {
        self.initial = initial;
        self.factor = if factor.is_finite() {
            factor.max(1.0)
        } else {
            1.0
        };
        self.max = max.max(initial);
        self
    }

    /// Takes a random part of up to `jitter` (0 to 1; 0 for none) off each wait.
    #[must_use]
    pub fn with_jitter(mut self, jitter: f64) -> Self {
        self.jitter = if jitter.is_finite() {
            jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self
    }

    /// How many attempts in all.
    #[must_use]
    pub fn max_attempts(&self) -> u32 {
        self.attempts
    }

    /// The wait after failed attempt `attempt` (1 for the first), before jitter.
    #[must_use]
    pub fn delay_after(&self, attempt: u32) -> Duration {
        let exponent = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let secs = self.initial.as_secs_f64() * self.factor.powi(exponent);
        if secs.is_finite() && secs < self.max.as_secs_f64() {
            Duration::from_secs_f64(secs)
        } else {
            self.max
        }
    }

    /// [`delay_after`](Self::delay_after) less its random part.
    fn jittered(&self, attempt: u32) -> Duration {
        let delay = self.delay_after(attempt);
        if self.jitter == 0.0 {
            return delay;
        }
        // Without randomness the wait is simply not shortened.
        let unit = getrandom::u32().map_or(0.0, |n| f64::from(n) / f64::from(u32::MAX));
        delay.mul_f64(1.0 - self.jitter * unit)
    }
}

/// What one attempt of a retried step stored.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Attempt<T> {
    /// It succeeded: the step's result.
    Done(T),
    /// It failed with `error`; the next attempt runs at `retry_at` (epoch milliseconds).
    Failed { error: String, retry_at: u64 },
}

impl TaskContext {
    /// A fallible [step](Self::try_step) that tries again, up to `policy`'s attempts, after
    /// an `Err` that `retryable` accepts (`|_| true` retries every error). Each failed attempt is stored with its error's text
    /// and the time of the next attempt, and the wait before it is a
    /// [durable sleep](Self::sleep): a task replayed after a restart or a takeover goes on
    /// with the attempt it was at and the wait that is left, not from the first attempt.
    /// While it waits, the task's status message says which attempt failed, why, and when
    /// the next one runs (`tasks/get` and the operator's view show it).
    ///
    /// Each attempt is one step, named `name` and the attempt's number (`fetch (attempt 2)`),
    /// so a step's position in the task counts attempts. The last failure and an error that
    /// `retryable` refuses are not stored: as with [`try_step`](Self::try_step), a replay runs
    /// that attempt again.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_tasks::{RetryPolicy, TaskContext, ToolError, task_tool};
    ///
    /// /// Fetches a quote from a flaky upstream, up to 4 times.
    /// #[task_tool(restart = "resume")]
    /// async fn quote(ctx: TaskContext, symbol: String) -> Result<String, ToolError> {
    ///     let policy = RetryPolicy::attempts(4)
    ///         .with_backoff(Duration::from_millis(1), 2.0, Duration::from_millis(10));
    ///     let price: u64 = ctx
    ///         .retry_step("fetch quote", &policy, |_| true, || async { Ok::<_, String>(42) })
    ///         .await?;
    ///     Ok(format!("{symbol}: {price}"))
    /// }
    /// # let _ = mcp_tasks::toolkit![quote];
    /// ```
    ///
    /// # Errors
    /// [`StepError::Work`] with the error of the last attempt, or the first error that
    /// `retryable` refuses; [`StepError::Failure`] as for [`step`](Self::step), and
    /// [`Failure::Cancelled`](super::Failure::Cancelled) when the task is cancelled or expires
    /// while it waits for the next attempt.
    pub async fn retry_step<T, E, F, Fut>(
        &self,
        name: &str,
        policy: &RetryPolicy,
        retryable: impl Fn(&E) -> bool,
        mut work: F,
    ) -> Result<T, StepError<E>>
    where
        T: Serialize + serde::de::DeserializeOwned,
        E: Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let last = policy.max_attempts();
        for attempt in 1..=last {
            let step_name = format!("{name} (attempt {attempt})");
            let stored = self
                .try_step(&step_name, || async {
                    match work().await {
                        Ok(value) => Ok(Attempt::Done(value)),
                        Err(error) if attempt < last && retryable(&error) => {
                            // Counted where it ran, not again by a replay.
                            crate::metrics::step_retried(self.host.tool());
                            let wait_ms = millis(policy.jittered(attempt));
                            Ok(Attempt::Failed {
                                error: error.to_string(),
                                retry_at: now_ms().saturating_add(wait_ms),
                            })
                        }
                        // The last attempt's error, or one not retryable: not stored.
                        Err(error) => Err(error),
                    }
                })
                .await?;
            let (error, retry_at) = match stored {
                Attempt::Done(value) => return Ok(value),
                Attempt::Failed { error, retry_at } => (error, retry_at),
            };
            let left = retry_at.saturating_sub(now_ms());
            if left > 0 {
                self.status(format!(
                    "{name}: attempt {attempt} of {last} failed ({error}); attempt {} in {}",
                    attempt + 1,
                    crate::duration::format(left)
                ))
                .await;
            }
            self.sleep_to(retry_at).await.map_err(StepError::Failure)?;
        }
        unreachable!("the last attempt returns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_by_its_factor_up_to_its_maximum() {
        let policy = RetryPolicy::attempts(10).with_backoff(
            Duration::from_millis(100),
            3.0,
            Duration::from_secs(2),
        );
        let delays: Vec<u128> = (1..=5).map(|n| policy.delay_after(n).as_millis()).collect();
        assert_eq!(delays, [100, 300, 900, 2000, 2000]);
        assert_eq!(policy.delay_after(u32::MAX), Duration::from_secs(2));
    }

    #[test]
    fn jitter_only_shortens_a_wait_and_by_at_most_its_share() {
        let policy = RetryPolicy::attempts(3)
            .with_backoff(Duration::from_secs(10), 1.0, Duration::from_secs(10))
            .with_jitter(0.5);
        for _ in 0..200 {
            let wait = policy.jittered(1);
            assert!(
                wait <= Duration::from_secs(10) && wait >= Duration::from_secs(5),
                "{wait:?}"
            );
        }
        let exact = policy.with_jitter(0.0);
        assert_eq!(exact.jittered(1), Duration::from_secs(10));
    }

    #[test]
    fn settings_out_of_range_are_clamped() {
        let policy = RetryPolicy::attempts(0)
            .with_backoff(Duration::from_secs(2), 0.5, Duration::from_secs(1))
            .with_jitter(f64::NAN);
        assert_eq!(policy.max_attempts(), 1);
        assert_eq!(policy.delay_after(3), Duration::from_secs(2));
        assert_eq!(policy.jitter, 0.0);
    }
}
