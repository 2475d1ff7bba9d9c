//! Rate limits: a [`Rate`] (at most so many starts in any window of a given length), for a
//! tool's tasks (`#[task_tool(rate = "10/1m")]`) or for one step run under a named
//! [`Limiter`] ([`TaskContext::step_limited`](crate::TaskContext::step_limited)).
//!
//! On a shared store (Postgres) a limit holds across every instance: each start is logged
//! in the store, under a lock per limiter, and counted over the window by the database's
//! clock. On a single-process store (memory, SQLite) it holds in the process.

use std::{
    collections::{HashMap, VecDeque},
    fmt,
    str::FromStr,
    sync::Arc,
    time::{Duration, Instant},
};

use parking_lot::Mutex;

/// At most [`count`](Rate::count) starts in any window of length [`per`](Rate::per): a
/// sliding window, so no 60 seconds ever hold more than 10 starts of `10/1m`, and a burst of
/// 10 at once is allowed.
///
/// Written `"<count>/<duration>"` in `#[task_tool(rate = ..)]` and [`Rate::parse`], with the
/// duration grammar of `ttl` (`"10/1m"`, `"3/1s"`, `"100/1h30m"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    count: u32,
    per: Duration,
}

impl Rate {
    /// At most `count` starts (at least 1) in any window of length `per` (at least 1 ms).
    #[must_use]
    pub const fn new(count: u32, per: Duration) -> Self {
        let count = if count == 0 { 1 } else { count };
        let per = if per.is_zero() {
            Duration::from_millis(1)
        } else {
            per
        };
        Self { count, per }
    }

    /// At most `count` starts a second.
    #[must_use]
    pub const fn per_second(count: u32) -> Self {
        Self::new(count, Duration::from_secs(1))
    }

    /// At most `count` starts a minute.
    #[must_use]
    pub const fn per_minute(count: u32) -> Self {
        Self::new(count, Duration::from_secs(60))
    }

    /// At most `count` starts an hour.
    #[must_use]
    pub const fn per_hour(count: u32) -> Self {
        Self::new(count, Duration::from_secs(3600))
    }

    /// The most starts in one window.
    #[must_use]
    pub const fn count(&self) -> u32 {
        self.count
    }

    /// The window's length.
    #[must_use]
    pub const fn per(&self) -> Duration {
        self.per
    }

    /// Parses `"<count>/<duration>"`, e.g. `"10/1m"`.
    ///
    /// # Errors
    /// A message that says what to write instead.
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some((count, per)) = text.split_once('/') else {
            return Err(format!(
                "invalid rate `{text}`: write a count, a slash and a window, e.g. `\"10/1m\"` \
                 (at most 10 starts in any minute)"
            ));
        };
        let Some(count) = count.parse::<u32>().ok().filter(|&n| n > 0) else {
            return Err(format!(
                "invalid rate `{text}`: the count before the slash must be a whole number above \
                 zero, e.g. `\"10/1m\"`"
            ));
        };
        let ms = crate::duration::parse(per).map_err(|e| format!("invalid rate `{text}`: {e}"))?;
        Ok(Self::new(count, Duration::from_millis(ms)))
    }
}

impl FromStr for Rate {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Self::parse(text)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per = crate::duration::format(crate::clock::millis(self.per));
        write!(f, "{}/{per}", self.count)
    }
}

/// A named rate limit that steps run under
/// ([`TaskContext::step_limited`](crate::TaskContext::step_limited)): every step run under
/// a limiter of one name counts against its [`Rate`], in every task and (on a shared store)
/// on every instance. Name it after what it protects (`"github"`); a per-key limit is a
/// limiter per key ([`Limiter::keyed`]).
///
/// ```
/// use mcp_tasks::rate::{Limiter, Rate};
///
/// let github = Limiter::new("github", Rate::per_minute(10));
/// let per_workspace = github.keyed("ws-42"); // "github/ws-42": 10 a minute for each workspace
/// assert_eq!(per_workspace.name(), "github/ws-42");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limiter {
    name: Arc<str>,
    rate: Rate,
}

impl Limiter {
    /// The limiter `name`, allowing `rate`. Every use of one name should give it the same
    /// rate: each start is checked against the rate of the limiter it runs under.
    #[must_use]
    pub fn new(name: impl Into<Arc<str>>, rate: Rate) -> Self {
        Self {
            name: name.into(),
            rate,
        }
    }

    /// The limiter of one key under this one (`"<name>/<key>"`), with the same rate: a
    /// limit per workspace, per account, per owner.
    #[must_use]
    pub fn keyed(&self, key: &str) -> Self {
        Self::new(format!("{}/{key}", self.name), self.rate)
    }

    /// Its name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its rate.
    #[must_use]
    pub fn rate(&self) -> Rate {
        self.rate
    }
}

/// The log key of a tool's starts, in the store's rate log: apart from the steps' limiters
/// by its prefix.
pub(crate) fn tool_key(tool: &str) -> String {
    format!("tool {tool}")
}

/// The start of the log keys of a tool's starts by key (its per-key rate): the key follows
/// it. A tool's name has no space, so no two tools' prefixes overlap.
pub(crate) fn tool_key_prefix(tool: &str) -> String {
    format!("tool-key {tool} ")
}

/// The log key of a step limiter.
pub(crate) fn step_key(limiter: &str) -> String {
    format!("step {limiter}")
}

/// How many logs [`LocalRates`] keeps before it drops those whose window is empty.
const SWEEP_AT: usize = 1024;

/// The rate logs of one process (over a single-process store): each limiter's starts within
/// its window.
#[derive(Default)]
pub(crate) struct LocalRates {
    /// Each key's window length (of the rate it was last taken under) and its starts.
    logs: Mutex<HashMap<String, (Duration, VecDeque<Instant>)>>,
}

/// Why [`LocalRates::try_take_all`] took no start.
pub(crate) struct Refused {
    /// How long until every window has room.
    pub(crate) wait: Duration,
    /// The index of the first window that had none.
    pub(crate) first: usize,
    /// How long until that one has room.
    pub(crate) first_wait: Duration,
}

impl LocalRates {
    /// Takes one start of `key` under `rate`: `None` when taken, else how long until one is
    /// free (take again then).
    pub(crate) fn take(&self, key: &str, rate: Rate) -> Option<Duration> {
        self.try_take_all(&[(key, rate)])
            .map(|refused| refused.wait)
    }

    /// Takes one start of each `(key, rate)` of `windows` at once, or none: `None` when
    /// taken, else how long until every one of them has room and which one refused first.
    pub(crate) fn try_take_all(&self, windows: &[(&str, Rate)]) -> Option<Refused> {
        let now = Instant::now();
        let mut logs = self.logs.lock();
        if logs.len() >= SWEEP_AT && windows.iter().any(|(key, _)| !logs.contains_key(*key)) {
            // Each log by its own window: a log still within it is kept.
            logs.retain(|_, (per, log)| log.back().is_some_and(|last| now - *last < *per));
        }
        let mut wait = Duration::ZERO;
        let mut first_full: Option<(usize, Duration)> = None;
        for (at, (key, rate)) in windows.iter().enumerate() {
            let (per, log) = logs.entry((*key).to_owned()).or_default();
            *per = rate.per;
            while log.front().is_some_and(|first| now - *first >= rate.per) {
                log.pop_front();
            }
            let count = usize::try_from(rate.count).unwrap_or(usize::MAX);
            if log.len() >= count {
                // The start that leaves the window first frees a place; measured from it,
                // not as an instant (`Instant + per` overflows for a long enough `per`).
                let left = rate.per.saturating_sub(now - log[log.len() - count]);
                let left = left.max(Duration::from_millis(1));
                wait = wait.max(left);
                first_full.get_or_insert((at, left));
            }
        }
        if let Some((first, first_wait)) = first_full {
            return Some(Refused {
                wait,
                first,
                first_wait,
            });
        }
        for (key, _) in windows {
            if let Some((_, log)) = logs.get_mut(*key) {
                log.push_back(now);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`Rate::parse`] as the table reads it: the count and the window in milliseconds.
    fn parse_pair(text: &str) -> Result<(u32, u64), String> {
        Rate::parse(text).map(|rate| {
            let ms = u64::try_from(rate.per().as_millis()).unwrap_or(u64::MAX);
            (rate.count(), ms)
        })
    }

    #[test]
    fn the_shared_table_of_rate_cases() {
        check_rate_table(parse_pair);
    }

    include!("../../tests/support/case_table.rs");
    include!("../../tests/support/rate_table.rs");

    #[test]
    fn parses_and_prints() {
        assert_eq!(
            Rate::parse("10/1m"),
            Ok(Rate::new(10, Duration::from_secs(60)))
        );
        assert_eq!(Rate::parse("3/1h30m").unwrap().to_string(), "3/1h30m");
        assert_eq!(Rate::per_second(5).to_string(), "5/1s");
        for bad in ["10", "0/1m", "x/1m", "-1/1m", "10/", "10/1 m", "10/1y"] {
            let error = Rate::parse(bad).unwrap_err();
            assert!(
                error.starts_with(&format!("invalid rate `{bad}`")),
                "{error}"
            );
        }
        assert!(Rate::parse("10/1 m").unwrap_err().contains("no spaces"));
    }

    #[test]
    fn windows_taken_together_take_all_or_none() {
        let rates = LocalRates::default();
        let take_all = |windows: &[_]| rates.try_take_all(windows).map(|refused| refused.wait);
        let tool = Rate::new(3, Duration::from_secs(60));
        let key = Rate::new(1, Duration::from_secs(60));
        assert_eq!(take_all(&[("tool", tool), ("tool/acme", key)]), None);
        let wait = take_all(&[("tool", tool), ("tool/acme", key)]);
        assert!(
            wait.is_some_and(|w| w > Duration::from_secs(59)),
            "{wait:?}"
        );
        // The refused start took none of the tool's places.
        assert_eq!(take_all(&[("tool", tool), ("tool/bolt", key)]), None);
        assert_eq!(take_all(&[("tool", tool), ("tool/cove", key)]), None);
        assert!(
            take_all(&[("tool", tool), ("tool/dune", key)]).is_some(),
            "the tool's window is full: three starts"
        );
    }

    #[test]
    fn a_window_past_the_clock_s_range_waits_and_does_not_panic() {
        let rates = LocalRates::default();
        let forever = Rate::new(1, Duration::MAX);
        assert_eq!(rates.take("k", forever), None);
        let wait = rates.take("k", forever);
        assert!(
            wait.is_some_and(|w| w > Duration::from_secs(1 << 40)),
            "{wait:?}"
        );
    }

    #[test]
    fn local_window_slides() {
        let rates = LocalRates::default();
        let rate = Rate::new(2, Duration::from_millis(200));
        assert_eq!(rates.take("a", rate), None);
        assert_eq!(rates.take("a", rate), None);
        let wait = rates.take("a", rate).expect("the third start waits");
        assert!(wait > Duration::from_millis(100) && wait <= Duration::from_millis(200));
        assert_eq!(rates.take("b", rate), None, "each key has its own window");
        std::thread::sleep(wait);
        assert_eq!(
            rates.take("a", rate),
            None,
            "free once the first left the window"
        );
    }

    #[test]
    fn a_sweep_keeps_each_window_by_its_own_length() {
        let rates = LocalRates::default();
        let minute = Rate::per_minute(1);
        assert_eq!(rates.take("slow", minute), None);
        // Windows that outlast the loop (a sweep within it drops none of them).
        let quick = Rate::new(1, Duration::from_millis(200));
        for i in 0..SWEEP_AT {
            assert_eq!(rates.take(&format!("quick {i}"), quick), None);
        }
        std::thread::sleep(Duration::from_millis(250));
        // A new key past the sweep's size drops the quick logs, whose windows are empty.
        assert_eq!(rates.take("another", quick), None);
        assert!(
            rates.logs.lock().len() < 10,
            "the empty windows were dropped"
        );
        assert!(
            rates.take("slow", minute).is_some(),
            "the minute's window still holds its start"
        );
    }
}
