//! The rate log of [`PostgresStore`](super::PostgresStore) (`rate_log`, schema 7): the
//! starts of the rate-limited tools, of each key of a per-key rate, and of the step
//! limiters, each counted within its window by the database's clock under an advisory lock;
//! and that lock, which every claim taking a limited tool's tasks holds too.

use super::row::db_now_ms;

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

/// A rate's window in milliseconds, as the rate log's statements bind it.
pub(super) fn window_ms(rate: crate::rate::Rate) -> i64 {
    i64::try_from(crate::clock::millis(rate.per())).unwrap_or(i64::MAX)
}
