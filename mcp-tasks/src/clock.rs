//! Wall-clock time for task timestamps and expiry.
//!
//! A [`Clock`] reads the system time once, when it is made, and from then on advances with
//! tokio's monotonic clock. Timestamps on the wire are wall-clock (`createdAt`), yet a test
//! on paused tokio time (`tokio::time::pause` + `advance`) moves every deadline with it.
//!
//! A clock can be read with an offset ([`Clock::with_offset_ms`]): the Postgres store
//! measures its instance's clock against the database server's when it connects and reads
//! its clock corrected by the difference, so that every instance of a cluster computes TTL
//! deadlines, expiry and `createdAt` on one clock, the database's.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// Milliseconds since the Unix epoch, anchored once and advanced by tokio's clock.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    anchor_ms: u64,
    anchor: Instant,
    /// Added to every reading, in milliseconds (negative: earlier).
    offset_ms: i64,
}

impl Clock {
    /// A clock anchored at the current system time.
    #[must_use]
    pub fn new() -> Self {
        Self {
            anchor_ms: system_now_ms(),
            anchor: Instant::now(),
            offset_ms: 0,
        }
    }

    /// This clock read `offset_ms` milliseconds later (earlier when negative), on top of the
    /// offset it had.
    #[must_use]
    #[cfg(any(test, feature = "postgres"))]
    pub fn with_offset_ms(self, offset_ms: i64) -> Self {
        Self {
            offset_ms: self.offset_ms.saturating_add(offset_ms),
            ..self
        }
    }

    /// Milliseconds since the Unix epoch.
    #[must_use]
    pub fn now_ms(&self) -> u64 {
        let elapsed = Instant::now().saturating_duration_since(self.anchor);
        let local = self.anchor_ms.saturating_add(millis(elapsed));
        local.saturating_add_signed(self.offset_ms)
    }
}

/// Milliseconds since the Unix epoch of `time` (0 before the epoch, saturated far after it).
pub(crate) fn epoch_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, millis)
}

/// Milliseconds since the Unix epoch on the system clock, now: the wall clock of durable
/// timers and parked tasks' wake-ups (a [`Clock`] keeps task timestamps instead).
pub(crate) fn system_now_ms() -> u64 {
    epoch_ms(SystemTime::now())
}

/// Whole milliseconds of a duration, saturating at `u64::MAX`.
#[must_use]
pub fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The last instant RFC 3339 can write (its years have four digits):
/// `9999-12-31T23:59:59.999Z`.
const MAX_RFC3339_MS: u64 = 253_402_300_799_999;

// The wire's timestamp form: docs/protocol.md §7 item 10.
/// Formats milliseconds since the Unix epoch as RFC 3339 UTC with milliseconds,
/// e.g. `2026-08-01T10:00:00.000Z`. An instant past year 9999
/// (a corrupt stored timestamp, a saturated deadline) is written as the last one RFC 3339
/// has, never as a five-digit year and never with a panic.
///
/// Written here rather than taken from a date library: it is one total function of a `u64`
/// (the civil-from-days algorithm below), which `humantime`'s formatter is not (it takes a
/// `SystemTime`, whose arithmetic can overflow, and fails past year 9999), and `jiff` or
/// `time` would add a date library to every build for these few lines.
#[must_use]
pub fn rfc3339(epoch_ms: u64) -> String {
    let epoch_ms = epoch_ms.min(MAX_RFC3339_MS);
    let secs = epoch_ms / 1000;
    let ms = epoch_ms % 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    let (year, month, day) = civil_from_days(days);
    // Digit by digit rather than `format!`: every task on the wire carries two of these.
    let mut out = [0u8; 24];
    // Each field at its place, its digits and then the separator after it.
    for (at, mut value, width, separator) in [
        (0, year, 4, b'-'),
        (5, month, 2, b'-'),
        (8, day, 2, b'T'),
        (11, h, 2, b':'),
        (14, m, 2, b':'),
        (17, s, 2, b'.'),
        (20, ms, 3, b'Z'),
    ] {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (value % 10) as u8;
            value /= 10;
        }
        out[at + width] = separator;
    }
    // Digits and separators only: ASCII, so the check cannot fail (and costs a few
    // instructions, where collecting `char`s cost hundreds).
    std::str::from_utf8(&out).unwrap_or_default().to_owned()
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Howard Hinnant's algorithm, for non-negative day counts.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(1_785_578_400_123), "2026-08-01T10:00:00.123Z");
        assert_eq!(rfc3339(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(MAX_RFC3339_MS), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn past_year_9999_is_the_last_instant_rfc3339_has() {
        for ms in [MAX_RFC3339_MS + 1, 253_402_300_800_000, u64::MAX] {
            assert_eq!(rfc3339(ms), "9999-12-31T23:59:59.999Z", "{ms}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn advances_with_paused_tokio_time() {
        let clock = Clock::new();
        let before = clock.now_ms();
        tokio::time::advance(Duration::from_secs(90)).await;
        assert_eq!(clock.now_ms() - before, 90_000);
    }

    #[tokio::test(start_paused = true)]
    async fn an_offset_moves_every_reading() {
        let clock = Clock::new();
        let ahead = clock.with_offset_ms(5_000);
        let behind = ahead.with_offset_ms(-8_000);
        assert_eq!(ahead.now_ms() - clock.now_ms(), 5_000);
        assert_eq!(clock.now_ms() - behind.now_ms(), 3_000);
        assert_eq!(Clock::new().with_offset_ms(i64::MIN).now_ms(), 0);
    }
}
