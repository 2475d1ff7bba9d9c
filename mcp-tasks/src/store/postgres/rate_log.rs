//! The rate log of [`PostgresStore`](super::PostgresStore) (`rate_log`, schema 7): the
//! starts of the rate-limited tools, of each key of a per-key rate, and of the step
//! limiters, each counted within its window by the database's clock under an advisory lock;
//! that lock, which every claim taking a limited tool's tasks holds too; and when a window
//! a claim found used up has room again.

use std::time::Duration;

use super::{
    pool::Tx,
    row::{PgRow, db_now_ms},
};
use crate::{
    rate::Rate,
    store::{StoreError, codec::Columns},
};

/// Locks the limited tools `$2` (sorted, so every claim takes the locks in one order) until
/// the claim commits: claims that take tasks of a limited tool run one at a time across the
/// cluster, each counting what the last one committed.
pub(super) const LOCK_TOOLS: &str =
    "SELECT pg_advisory_xact_lock(hashtext($1 || ' ' || t)) FROM unnest($2::text[]) AS t";

/// For each rate log key `$1` with its window `$2` (milliseconds), its starts within the
/// window; the starts that left their window are deleted first.
pub(super) const RECENT: &str = concat!(
    "WITH w AS (SELECT * FROM unnest($1::text[], $2::int8[]) AS w(limiter, per_ms)), \
     pruned AS (DELETE FROM rate_log r USING w WHERE r.limiter = w.limiter AND r.at_ms <= ",
    db_now_ms!(),
    " - w.per_ms) \
     SELECT w.limiter, count(r.limiter), min(r.at_ms), ",
    db_now_ms!(),
    " FROM w LEFT JOIN rate_log r ON r.limiter = w.limiter AND r.at_ms > ",
    db_now_ms!(),
    " - w.per_ms GROUP BY w.limiter"
);

/// Logs one start of each rate log key in `$1` (a key once per start), now.
pub(super) const LOG_STARTS: &str = concat!(
    "INSERT INTO rate_log (limiter, at_ms) SELECT k, ",
    db_now_ms!(),
    " FROM unnest($1::text[]) AS k"
);

/// Deletes the starts logged under the tool prefix `$1` (of a per-key rate) that left their
/// window of `$2` milliseconds: of every key, so a key whose tasks stopped coming leaves no
/// log behind.
pub(super) const PRUNE_KEYS: &str = concat!(
    "DELETE FROM rate_log WHERE starts_with(limiter, $1) AND at_ms <= ",
    db_now_ms!(),
    " - $2::int8"
);

/// For the tool `$1` of a per-key rate of `$4` starts in `$3` milliseconds (its starts
/// logged under the prefix `$2`, followed by the key): how long until the soonest of the
/// keys whose window is used up and that have tasks still queued has room, in milliseconds
/// (NULL when no key waits for room).
pub(super) const KEY_ROOM: &str = concat!(
    "SELECT min(u.first_ms) + $3::int8 - ",
    db_now_ms!(),
    " FROM (SELECT k.k, min(r.at_ms) AS first_ms FROM \
       (SELECT DISTINCT coalesce(limit_key, '') AS k FROM tasks \
        WHERE tool = $1 AND purge_at_ms IS NULL AND runner IS NULL) k \
       JOIN rate_log r ON r.limiter = $2 || k.k AND r.at_ms > ",
    db_now_ms!(),
    " - $3::int8 GROUP BY k.k HAVING count(*) >= $4::int8) u"
);

/// One rate-limited tool's window as a claim counted it (by the database's clock, in
/// milliseconds): the starts it has room for, less those the claim made.
pub(super) struct RateWindow<'c> {
    pub(super) tool: &'c str,
    pub(super) room: i64,
    /// The oldest start within the window, if any.
    pub(super) oldest: Option<i64>,
    pub(super) now: i64,
    pub(super) per: i64,
}

impl RateWindow<'_> {
    /// When the window is used up: how long until its oldest start leaves it (the starts
    /// this claim made, when it held none before). A claim then finds room, or, when more
    /// starts than the count stay in the window (a rate lowered since), a later time.
    pub(super) fn room_in(&self) -> Option<Duration> {
        (self.room <= 0).then(|| room_after(self.oldest, self.now, self.per))
    }
}

/// How long until a window of `per` milliseconds whose oldest start is `oldest` (`None`: a
/// start made at `now`) has room, at `now` (the database's clock): at least 1 ms.
pub(super) fn room_after(oldest: Option<i64>, now: i64, per: i64) -> Duration {
    let left = oldest
        .unwrap_or(now)
        .saturating_add(per)
        .saturating_sub(now);
    at_least_1ms(left)
}

/// `left` milliseconds as a wait, at least 1 ms.
fn at_least_1ms(left: i64) -> Duration {
    Duration::from_millis(u64::try_from(left.max(1)).unwrap_or(u64::MAX))
}

/// How long until the soonest key of a per-key rate of `rates` (`(tool, rate)`) whose window
/// is used up and that has tasks still queued has room ([`KEY_ROOM`], inside `tx`).
pub(super) async fn key_room_in(
    tx: &Tx,
    rates: impl Iterator<Item = &(std::sync::Arc<str>, Rate)>,
) -> Result<Option<Duration>, StoreError> {
    let mut soonest: Option<Duration> = None;
    for (tool, rate) in rates {
        let (prefix, per) = (crate::rate::tool_key_prefix(tool), window_ms(*rate));
        let count = i64::from(rate.count());
        let context = "could not read when the per-key rates have room";
        let rows = tx
            .query(KEY_ROOM, &[&&**tool, &prefix, &per, &count], context)
            .await?;
        let left = rows.first().map(|row| PgRow(row).opt_int(0)).transpose()?;
        let room = left.flatten().map(at_least_1ms);
        soonest = soonest.into_iter().chain(room).min();
    }
    Ok(soonest)
}

/// A rate's window in milliseconds, as the rate log's statements bind it.
pub(super) fn window_ms(rate: Rate) -> i64 {
    i64::try_from(crate::clock::millis(rate.per())).unwrap_or(i64::MAX)
}
