//! The claim statements of [`PostgresStore`](super::PostgresStore): lapsed leases, and
//! queued tasks in either [`ClaimOrder`], keeping the tools' concurrency and rate limits
//! (counted in the rate log, `rate_log.rs`).

use std::{collections::HashMap, time::Duration};

use super::{
    PostgresStore,
    pool::Tx,
    rate_log::{LOCK_TOOLS, LOG_STARTS, PRUNE_KEYS, RECENT, RateWindow, key_room_in, window_ms},
    row::{PgRow, db_now_ms, int, text},
};
use crate::store::{Claim, ClaimOrder, StoreError, codec::Columns};

pub(super) type Params<'a> = Vec<&'a (dyn tokio_postgres::types::ToSql + Sync)>;

/// Takes the rows of `c` (`id`, `parked`) for `$1`, with a lease of `$2` milliseconds and
/// the further changes `$set`, and returns the columns in the order the store's
/// [`ClusterStore::claim`](crate::store::ClusterStore::claim) reads them: the codec's recovery
/// columns (of `t`), then the lease's. A queued task's claim (`queued`) clears its "queued"
/// status message and counts as its change at `$3`.
macro_rules! take {
    (queued) => {
        take!("status_message = NULL, last_updated_at_ms = $3, ")
    };
    ($set:literal) => {
        concat!(
            " UPDATE tasks t SET runner = $1, epoch = t.epoch + 1, ",
            $set,
            "lease_until_ms = ",
            db_now_ms!(),
            " + $2 FROM c WHERE t.id = c.id RETURNING t.id, t.owner, t.tool, t.answers, \
             t.cancel_requested, ",
            crate::store::row::origin_columns!(),
            ", t.epoch, c.parked"
        )
    };
}

/// The tasks the claiming instance runs ([`Claim::versions`](crate::store::Claim::versions)):
/// with tools `$t` (NULL: every task), each task's tool among them and its version the one
/// beside it in versions `$v`; and a task whose cancel was asked for, which the claimer
/// ends `cancelled` without running it (`runtime/recover.rs`), once it has waited `$g`
/// milliseconds ([`Claim::cancel_grace`](crate::store::Claim::cancel_grace)) since it could
/// be claimed (its last change, or its lease's end): first an instance of its version may
/// take it, whose replay runs the tool's own handling of the cancel.
macro_rules! routed {
    ($t:literal, $v:literal, $g:literal) => {
        concat!(
            " AND (",
            $t,
            "::text[] IS NULL OR tool_version = (",
            $v,
            "::text[])[array_position(",
            $t,
            "::text[], tool)] OR (cancel_requested AND \
             greatest(last_updated_at_ms, coalesce(lease_until_ms, 0)) < ",
            db_now_ms!(),
            " - ",
            $g,
            "::int8))"
        )
    };
}

/// Takes up to `$4` live tasks whose lease lapsed (and whose TTL has not), for `$1`: also
/// the parked tasks that are woken (their lease deadline is their wake-up time), taken out
/// of their park. Only tasks this instance runs (`$5` to `$7`: [`routed`]).
pub(super) const CLAIM_LAPSED: &str = concat!(
    "WITH c AS (SELECT id, parked_until_ms AS parked FROM tasks \
     WHERE purge_at_ms IS NULL AND runner IS NOT NULL AND lease_until_ms < ",
    db_now_ms!(),
    " AND (deadline_ms IS NULL OR deadline_ms > $3)",
    routed!("$5", "$6", "$7"),
    " ORDER BY lease_until_ms LIMIT $4 FOR UPDATE SKIP LOCKED)",
    take!("parked_until_ms = NULL, ")
);

/// Takes up to `$4` live tasks that have no runner, oldest first, for `$1`
/// ([`ClaimOrder::OldestFirst`]); only tasks this instance runs (`$5` to `$7`: [`routed`]).
macro_rules! claim_oldest {
    ($tools:expr) => { concat!(
    "WITH c AS (SELECT id, NULL::bigint AS parked FROM tasks WHERE purge_at_ms IS NULL AND runner IS NULL \
     AND (deadline_ms IS NULL OR deadline_ms > $3)", routed!("$5", "$6", "$7"), $tools, " ORDER BY created_at_ms LIMIT $4 \
     FOR UPDATE SKIP LOCKED)",
    take!(queued)
) };
}

/// Takes up to `$4` live tasks that have no runner, for `$1`, owners taking turns
/// ([`ClaimOrder::OwnersTakeTurns`]): the owners with queued tasks after `$5` (the owner this
/// store served last), then from the first owner up to `$5`, at most `$4` of them, are
/// visited in that order (a skip scan of `tasks_queued_owner`, one index probe per owner);
/// each takes its oldest task, or up to its weight (`$6`, `$7`), a turn. With fewer owners
/// than slots, the owners take further turns, and when the owners' candidates are fewer than
/// `$4`, the `$4` oldest tasks (whoever's) are the last candidates, so a claim fills whenever
/// enough is queued. Candidates are locked as they are read, skipping rows another claim
/// holds, so claims on several instances run at once and never pick the same task. The last
/// column is the owner served last (in the last turn): the next claim's `$5`. Only tasks this
/// instance runs (`$8` to `$10`: [`routed`]).
macro_rules! claim_by_turns {
    ($tools:expr) => { concat!(
    "WITH RECURSIVE after_turn(owner, pos) AS ( \
       SELECT (SELECT q.owner FROM tasks q WHERE q.purge_at_ms IS NULL AND q.runner IS NULL \
               AND q.owner > $5", routed!("$8", "$9", "$10"), $tools, " ORDER BY q.owner LIMIT 1), 1::bigint \
       UNION ALL \
       SELECT (SELECT q.owner FROM tasks q WHERE q.purge_at_ms IS NULL AND q.runner IS NULL \
               AND q.owner > a.owner", routed!("$8", "$9", "$10"), $tools, " ORDER BY q.owner LIMIT 1), a.pos + 1 \
       FROM after_turn a WHERE a.owner IS NOT NULL AND a.pos < $4), \
     up_to_turn(owner, pos) AS ( \
       SELECT (SELECT q.owner FROM tasks q WHERE q.purge_at_ms IS NULL AND q.runner IS NULL \
               AND q.owner <= $5", routed!("$8", "$9", "$10"), $tools, " ORDER BY q.owner LIMIT 1), \
              (SELECT count(owner) FROM after_turn) + 1 \
       UNION ALL \
       SELECT (SELECT q.owner FROM tasks q WHERE q.purge_at_ms IS NULL AND q.runner IS NULL \
               AND q.owner > u.owner AND q.owner <= $5", routed!("$8", "$9", "$10"), $tools, " ORDER BY q.owner LIMIT 1), u.pos + 1 \
       FROM up_to_turn u WHERE u.owner IS NOT NULL AND u.pos < $4), \
     visited AS ( \
       SELECT v.owner, v.pos, coalesce(w.weight, 1) AS weight \
       FROM (SELECT owner, pos FROM after_turn UNION ALL SELECT owner, pos FROM up_to_turn) v \
       LEFT JOIN unnest($6::text[], $7::int4[]) AS w(owner, weight) ON w.owner = v.owner \
       WHERE v.owner IS NOT NULL AND v.pos <= $4), \
     share AS (SELECT ceil($4::bigint::float8 / greatest(count(*), 1))::bigint AS turns FROM visited), \
     heads AS ( \
       SELECT h.id, h.owner, h.created_at_ms FROM visited v CROSS JOIN share s \
       CROSS JOIN LATERAL (SELECT q.id, q.owner, q.created_at_ms FROM tasks q \
         WHERE q.owner = v.owner AND q.purge_at_ms IS NULL AND q.runner IS NULL \
         AND (q.deadline_ms IS NULL OR q.deadline_ms > $3)", routed!("$8", "$9", "$10"), $tools, " \
         ORDER BY q.created_at_ms, q.id LIMIT s.turns * v.weight FOR UPDATE SKIP LOCKED) h), \
     candidates AS ( \
       SELECT id, owner, created_at_ms FROM heads \
       UNION \
       SELECT o.id, o.owner, o.created_at_ms FROM (SELECT q.id, q.owner, q.created_at_ms \
         FROM tasks q WHERE q.purge_at_ms IS NULL AND q.runner IS NULL \
         AND (q.deadline_ms IS NULL OR q.deadline_ms > $3)", routed!("$8", "$9", "$10"), $tools, " ORDER BY q.created_at_ms LIMIT $4 \
         FOR UPDATE SKIP LOCKED) o WHERE (SELECT count(*) FROM heads) < $4), \
     picked AS ( \
       SELECT c.id, v.owner, v.pos, ceil(row_number() OVER (PARTITION BY c.owner \
         ORDER BY c.created_at_ms, c.id)::float8 / coalesce(v.weight, 1)) AS turn \
       FROM candidates c LEFT JOIN visited v ON v.owner = c.owner \
       ORDER BY turn, v.pos NULLS LAST, c.created_at_ms, c.id LIMIT $4), \
     c AS (SELECT id, NULL::bigint AS parked FROM tasks \
       WHERE id = ANY(ARRAY(SELECT id FROM picked)))",
    take!(queued),
    ", (SELECT owner FROM picked WHERE pos IS NOT NULL ORDER BY turn DESC, pos DESC LIMIT 1)"
) };
}

/// The claim statements of queued tasks, by order: of every queued task, or of those a
/// [`Filter`] allows (its tools and priority bound from `$8` or `$11` on).
const CLAIM_OLDEST: &str = claim_oldest!("");
const CLAIM_OLDEST_FILTERED: &str = claim_oldest!(
    " AND tool <> ALL($8::text[]) AND ($9::text IS NULL OR tool = $9) \
     AND ($10::int2 IS NULL OR priority = $10)"
);
const CLAIM_BY_TURNS: &str = claim_by_turns!("");
const CLAIM_BY_TURNS_FILTERED: &str = claim_by_turns!(
    " AND tool <> ALL($11::text[]) AND ($12::text IS NULL OR tool = $12) \
     AND ($13::int2 IS NULL OR priority = $13)"
);

/// Takes the queued tasks `$5` (those a tool's per-key limits let start, in the order
/// [`KEY_ELIGIBLE`] gave them) that are still queued and live, up to `$4`, for `$1`.
const CLAIM_IDS: &str = concat!(
    "WITH c AS (SELECT id, NULL::bigint AS parked FROM tasks WHERE id = ANY($5::text[]) \
     AND purge_at_ms IS NULL AND runner IS NULL AND (deadline_ms IS NULL OR deadline_ms > $3) \
     ORDER BY array_position($5::text[], id) LIMIT $4 FOR UPDATE SKIP LOCKED)",
    take!(queued)
);

/// The queued tasks of the tool `$1` (of priority `$3`, unless NULL; not past their TTL at
/// `$4`) that its per-key limits let start, with their keys: for each key, its oldest
/// tasks, as many as the key has places: below the per-key concurrency limit `$2` (unless
/// NULL) by the tool's tasks of that key that hold a runner, and below the per-key rate `$5`
/// (unless NULL) by the key's starts within the last `$7` milliseconds (logged under `$6`,
/// the tool's prefix, followed by the key). Keys are compared as text, a task without one
/// as the empty key (equality joins: hashed, where `IS NOT DISTINCT FROM` made the planner
/// compare every queued task with every key). At most `$8` of them: each key's first eligible
/// task, oldest key first, then each key's second, and so on (the claim takes no more, and a
/// short list keeps the claim's filter on it cheap). Only tasks this instance runs (`$9`
/// to `$11`: [`routed`]).
const KEY_ELIGIBLE: &str = concat!(
    "WITH held AS (SELECT coalesce(limit_key, '') AS k, count(*) AS n FROM tasks \
       WHERE $2::int8 IS NOT NULL AND tool = $1 AND purge_at_ms IS NULL AND runner IS NOT NULL \
       GROUP BY 1), \
     queued AS (SELECT id, limit_key, coalesce(limit_key, '') AS k, created_at_ms, \
       row_number() OVER (PARTITION BY coalesce(limit_key, '') ORDER BY created_at_ms, id) AS rn \
       FROM tasks WHERE tool = $1 AND purge_at_ms IS NULL \
       AND runner IS NULL AND ($3::int2 IS NULL OR priority = $3) \
       AND (deadline_ms IS NULL OR deadline_ms > $4)",
    routed!("$9", "$10", "$11"),
    "), \
     started AS (SELECT k.k, count(*) AS n FROM (SELECT DISTINCT k FROM queued) k \
       JOIN rate_log r ON $5::int8 IS NOT NULL AND r.limiter = $6 || k.k \
       AND r.at_ms > ",
    db_now_ms!(),
    " - $7::int8 GROUP BY k.k) \
     SELECT q.id, q.limit_key FROM queued q \
     LEFT JOIN held h ON h.k = q.k \
     LEFT JOIN started s ON s.k = q.k \
     WHERE ($2::int8 IS NULL OR q.rn <= $2 - coalesce(h.n, 0)) \
     AND ($5::int8 IS NULL OR q.rn <= $5 - coalesce(s.n, 0)) \
     ORDER BY q.rn, q.created_at_ms, q.id LIMIT $8"
);

/// The priorities of the queued tasks, highest first (a skip scan of
/// `tasks_queued_priority`, one probe per priority), each with its oldest task's creation.
const LEVELS: &str = "WITH RECURSIVE l(p) AS ( \
       SELECT (SELECT priority FROM tasks WHERE purge_at_ms IS NULL AND runner IS NULL \
               ORDER BY priority DESC LIMIT 1) \
       UNION ALL \
       SELECT (SELECT priority FROM tasks WHERE purge_at_ms IS NULL AND runner IS NULL \
               AND priority < l.p ORDER BY priority DESC LIMIT 1) FROM l WHERE l.p IS NOT NULL) \
     SELECT l.p, (SELECT min(created_at_ms) FROM tasks WHERE purge_at_ms IS NULL \
       AND runner IS NULL AND priority = l.p) FROM l WHERE l.p IS NOT NULL";

/// The tasks of each tool `$1` that hold a runner (running, or parked in their wait).
const RUNNING: &str = "SELECT tool, count(*) FROM tasks WHERE tool = ANY($1) \
     AND purge_at_ms IS NULL AND runner IS NOT NULL GROUP BY tool";

/// What a claim binds for [`routed`], in its order: the tools and versions (both NULL for a
/// claim of every task), and the cancel grace in milliseconds.
pub(super) struct Routing<'c>(Option<&'c [String]>, Option<&'c [String]>, i64);

impl<'c> Routing<'c> {
    pub(super) fn of(claim: &Claim<'c>) -> Self {
        let columns = claim.versions.map(crate::store::ToolVersions::columns);
        let (tools, versions) = columns.unzip();
        let grace_ms = i64::try_from(claim.cancel_grace.as_millis()).unwrap_or(i64::MAX);
        Self(tools, versions, grace_ms)
    }

    /// The three parameters.
    pub(super) fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 3] {
        [&self.0, &self.1, &self.2]
    }
}

/// What every statement of one claim binds first: `$1` to `$3`.
pub(super) struct Bound<'a> {
    pub(super) instance: &'a str,
    pub(super) lease_ms: i64,
    pub(super) now: i64,
}

/// Which queued tasks one claim statement may take.
struct Filter<'a> {
    /// Not these tools (the limited ones, in the claim of every other tool).
    excluded: &'a [&'a str],
    /// Only this tool (one limited tool's free places).
    only: Option<&'a str>,
    /// Only this priority.
    level: Option<i16>,
}

impl PostgresStore {
    /// Takes up to `claim.limit` queued tasks in `claim`'s order, inside `tx`: the rows of
    /// [`take`]. By priority ([`Claim::priority_aging`]): each priority waiting,
    /// the one whose oldest task has waited longest for its level first (a task gains one
    /// level for each `aging` it waited). With limited tools ([`Claim::limits`],
    /// [`Claim::rates`]), within each priority first the tasks of every other tool, then, for
    /// each limited tool, as many of its tasks as it has free places across the cluster
    /// (below its concurrency limit and its rate, counted under the tool's lock); the starts
    /// of the rate-limited tools are logged in the same transaction. With the rows, when a
    /// tool's rate or a key's is used up (it was, or this claim used it up): how long until
    /// it has room ([`Claimed::rate_room_in`](crate::store::Claimed::rate_room_in)).
    pub(super) async fn claim_queued(
        &self,
        tx: &Tx,
        claim: &Claim<'_>,
        bound: &Bound<'_>,
    ) -> Result<(Vec<tokio_postgres::Row>, Option<Duration>), StoreError> {
        let wanted = i64::try_from(claim.limit).unwrap_or(i64::MAX);
        let levels = match claim.priority_aging {
            None => vec![None],
            Some(aging) => self.levels(tx, bound.now, aging).await?,
        };
        let (free, mut windows) = self.free_places(tx, claim).await?;
        let tools: Vec<&str> = free.iter().map(|(tool, _)| *tool).collect();
        let mut free: HashMap<&str, i64> = free.into_iter().collect();
        // The rate log keys of the starts made, one per start.
        let mut started: Vec<String> = Vec::new();
        // The tools of a per-key rate whose keys let fewer tasks start than were wanted.
        let mut held_back: Vec<&str> = Vec::new();
        let mut rows = Vec::new();
        let left = |rows: &Vec<_>| wanted - i64::try_from(rows.len()).unwrap_or(i64::MAX);
        for level in levels {
            if left(&rows) <= 0 {
                break;
            }
            let filter = Filter {
                excluded: &tools,
                only: None,
                level,
            };
            let picked = self.pick(tx, claim, bound, left(&rows), filter).await?;
            rows.extend(picked);
            for tool in &tools {
                let places = free
                    .get_mut(tool)
                    .expect("every limited tool has its places");
                if left(&rows) <= 0 || *places <= 0 {
                    continue;
                }
                let key_rated = claim.key_rates.iter().any(|(t, _)| &**t == *tool);
                let keyed = key_rated || claim.key_limits.iter().any(|(t, _)| &**t == *tool);
                let wanted = left(&rows).min(*places);
                // The tasks the tool's per-key limits let start, each with its key.
                let eligible = if keyed {
                    Some(
                        self.key_eligible(tx, claim, tool, level, bound, wanted)
                            .await?,
                    )
                } else {
                    None
                };
                let fewer = |e: &Vec<_>| i64::try_from(e.len()).unwrap_or(i64::MAX) < wanted;
                if key_rated && eligible.as_ref().is_some_and(fewer) {
                    // Fewer than wanted: a key's rate may have held tasks back.
                    held_back.push(*tool);
                }
                let more = match &eligible {
                    Some(eligible) if eligible.is_empty() => continue,
                    // Few, and chosen: taken in their order (each key's oldest first).
                    Some(eligible) => {
                        let ids: Vec<&str> = eligible.iter().map(|(id, _)| &**id).collect();
                        tx.query(
                            CLAIM_IDS,
                            &[&bound.instance, &bound.lease_ms, &bound.now, &wanted, &ids],
                            "could not claim queued tasks",
                        )
                        .await?
                    }
                    None => {
                        let filter = Filter {
                            excluded: &[],
                            only: Some(tool),
                            level,
                        };
                        self.pick(tx, claim, bound, wanted, filter).await?
                    }
                };
                let taken = i64::try_from(more.len()).unwrap_or(i64::MAX);
                *places -= taken;
                // A rate-limited tool (its window): the starts used its room, and are logged.
                if let Some(window) = windows.iter_mut().find(|w| w.tool == *tool) {
                    window.room -= taken;
                    let key = crate::rate::tool_key(tool);
                    started.extend(std::iter::repeat_n(key, more.len()));
                }
                if key_rated && let Some(eligible) = &eligible {
                    // Each start logged under its key (the claimed row's id is its first
                    // column).
                    let prefix = crate::rate::tool_key_prefix(tool);
                    let by_id: HashMap<&str, &Option<String>> =
                        eligible.iter().map(|(id, key)| (&**id, key)).collect();
                    for row in &more {
                        let id = text(row, 0)?;
                        let key = by_id.get(&*id).and_then(|key| key.as_deref());
                        started.push(format!("{prefix}{}", key.unwrap_or_default()));
                    }
                }
                rows.extend(more);
            }
        }
        if !started.is_empty() {
            let context = "could not log the rate-limited tools' starts";
            tx.execute(LOG_STARTS, &[&started], context).await?;
        }
        // After the starts were logged: a key this claim used up counts.
        let key_rates = (claim.key_rates.iter()).filter(|(tool, _)| held_back.contains(&&**tool));
        let key_room = key_room_in(tx, key_rates).await?;
        let room_in = windows.iter().filter_map(RateWindow::room_in);
        Ok((rows, room_in.chain(key_room).min()))
    }

    /// Locks the limited tools of `claim` (sorted, so every claim takes the locks in one
    /// order) and counts how many of each one's tasks it may start: below its concurrency
    /// limit by the tasks that hold a runner, and below its rate by the starts within its
    /// window; `(tool, places)` sorted by tool, and the window of each rate-limited tool.
    async fn free_places<'c>(
        &self,
        tx: &Tx,
        claim: &Claim<'c>,
    ) -> Result<(Vec<(&'c str, i64)>, Vec<RateWindow<'c>>), StoreError> {
        let mut places: Vec<(&str, i64)> = claim
            .limits
            .iter()
            .map(|(tool, _)| (&**tool, i64::MAX))
            .chain(claim.rates.iter().map(|(tool, _)| (&**tool, i64::MAX)))
            .chain(claim.key_limits.iter().map(|(tool, _)| (&**tool, i64::MAX)))
            .chain(claim.key_rates.iter().map(|(tool, _)| (&**tool, i64::MAX)))
            .collect();
        places.sort_unstable();
        places.dedup_by_key(|(tool, _)| *tool);
        let mut windows = Vec::new();
        if places.is_empty() {
            return Ok((places, windows));
        }
        let tools: Vec<&str> = places.iter().map(|(tool, _)| *tool).collect();
        let context = "could not lock the limited tools for a claim";
        tx.query(LOCK_TOOLS, &[&&*self.channel, &tools], context)
            .await?;
        let mut lower = |tool: &str, to: i64| {
            if let Some((_, places)) = places.iter_mut().find(|(t, _)| *t == tool) {
                *places = (*places).min(to.max(0));
            }
        };
        if !claim.limits.is_empty() {
            let concurrency: Vec<&str> = claim.limits.iter().map(|(t, _)| &**t).collect();
            let context = "could not count the limited tools' tasks";
            let running = counts(tx, RUNNING, &[&concurrency], context).await?;
            for (tool, limit) in claim.limits {
                let held = running.get(&**tool).copied().unwrap_or(0);
                lower(tool, i64::from(*limit) - held);
            }
        }
        if !claim.rates.is_empty() {
            let keys: Vec<String> = claim
                .rates
                .iter()
                .map(|(tool, _)| crate::rate::tool_key(tool))
                .collect();
            let pers: Vec<i64> = claim
                .rates
                .iter()
                .map(|(_, rate)| window_ms(*rate))
                .collect();
            let context = "could not count the rate-limited tools' starts";
            let rows = tx.query(RECENT, &[&keys, &pers], context).await?;
            let mut recent = HashMap::with_capacity(rows.len());
            for row in &rows {
                let oldest = PgRow(row).opt_int(2)?;
                recent.insert(text(row, 0)?, (int(row, 1)?, oldest, int(row, 3)?));
            }
            for (((tool, rate), key), per) in claim.rates.iter().zip(&keys).zip(&pers) {
                let (count, oldest, now) = recent.get(key).copied().unwrap_or((0, None, 0));
                let room = i64::from(rate.count()) - count;
                lower(tool, room);
                let (tool, per) = (&**tool, *per);
                windows.push(RateWindow {
                    tool,
                    room,
                    oldest,
                    now,
                    per,
                });
            }
        }
        for (tool, rate) in claim.key_rates {
            let prefix = crate::rate::tool_key_prefix(tool);
            let context = "could not prune the per-key rates' starts";
            tx.execute(PRUNE_KEYS, &[&prefix, &window_ms(*rate)], context)
                .await?;
        }
        Ok((places, windows))
    }

    /// Up to `wanted` queued tasks of `tool` (of priority `level`, if given) that its
    /// per-key concurrency limit and per-key rate (`claim`'s) let start now, by id with their
    /// keys ([`KEY_ELIGIBLE`]); read under the tool's lock.
    async fn key_eligible(
        &self,
        tx: &Tx,
        claim: &Claim<'_>,
        tool: &str,
        level: Option<i16>,
        bound: &Bound<'_>,
        wanted: i64,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let concurrency = claim.key_limits.iter().find(|(t, _)| &**t == tool);
        let rate = claim.key_rates.iter().find(|(t, _)| &**t == tool);
        let (concurrency, rate) = (concurrency.map(|c| i64::from(c.1)), rate.map(|r| r.1));
        let count = rate.map(|rate| i64::from(rate.count()));
        let per = rate.map_or(0, window_ms);
        let prefix = crate::rate::tool_key_prefix(tool);
        let routing = Routing::of(claim);
        let mut params: Params<'_> = vec![
            &tool,
            &concurrency,
            &level,
            &bound.now,
            &count,
            &prefix,
            &per,
            &wanted,
        ];
        params.extend(routing.params());
        let context = "could not count the tool's tasks by key";
        let rows = tx.query(KEY_ELIGIBLE, &params, context).await?;
        rows.iter()
            .map(|row| Ok((text(row, 0)?, PgRow(row).opt_text(1)?)))
            .collect()
    }

    /// The priorities of the queued tasks, in the order a claim by priority takes them: by
    /// level plus one for each `aging` the level's oldest task waited, highest first.
    async fn levels(
        &self,
        tx: &Tx,
        now: i64,
        aging: std::time::Duration,
    ) -> Result<Vec<Option<i16>>, StoreError> {
        let aging_ms = crate::clock::millis(aging).max(1);
        let mut levels = Vec::new();
        let context = "could not read the queued tasks' priorities";
        for row in tx.query(LEVELS, &[], context).await? {
            let level: i16 = row
                .try_get(0)
                .map_err(|e| super::PgError::query("an unreadable priority", e))?;
            let oldest = int(&row, 1).unwrap_or(now);
            let waited = u64::try_from(now.saturating_sub(oldest)).unwrap_or(0);
            let gained = i64::try_from(waited / aging_ms).unwrap_or(i64::MAX);
            levels.push((i64::from(level).saturating_add(gained), level));
        }
        levels.sort_by(|a, b| b.cmp(a));
        Ok(levels.into_iter().map(|(_, level)| Some(level)).collect())
    }
    /// One claim statement of [`PostgresStore::claim_queued`]: up to `limit` tasks that
    /// `filter` allows. Owners taking turns, the owner served last is kept for the next
    /// statement.
    async fn pick(
        &self,
        tx: &Tx,
        claim: &Claim<'_>,
        bound: &Bound<'_>,
        limit: i64,
        filter: Filter<'_>,
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let turns = claim.order != ClaimOrder::OldestFirst;
        let turn = self.turn.lock().clone();
        let owners: Vec<&str> = claim.weights.iter().map(|(o, _)| &**o).collect();
        let weights: Vec<i32> = claim
            .weights
            .iter()
            .map(|(_, w)| i32::try_from(*w).unwrap_or(i32::MAX))
            .collect();
        // A filter that allows every queued task: the statement without one serves it.
        let filtered =
            !(filter.excluded.is_empty() && filter.only.is_none() && filter.level.is_none());
        let routing = Routing::of(claim);
        let mut params: Params<'_> = vec![&bound.instance, &bound.lease_ms, &bound.now, &limit];
        if turns {
            params.extend_from_slice(&[&turn, &owners, &weights]);
        }
        params.extend(routing.params());
        if filtered {
            params.extend_from_slice(&[&filter.excluded, &filter.only, &filter.level]);
        }
        let sql = match (turns, filtered) {
            (false, false) => CLAIM_OLDEST,
            (false, true) => CLAIM_OLDEST_FILTERED,
            (true, false) => CLAIM_BY_TURNS,
            (true, true) => CLAIM_BY_TURNS_FILTERED,
        };
        let rows = tx
            .query(sql, &params, "could not claim queued tasks")
            .await?;
        if turns && let Some(row) = rows.first() {
            // The owner served last (`claim_by_turns`' last column, the same on every row).
            if let Some(last) = PgRow(row).opt_text(crate::store::codec::RECOVERY_COLUMNS + 2)? {
                *self.turn.lock() = last;
            }
        }
        Ok(rows)
    }
}

/// The rows of `sql`, a name and a count each, by name.
async fn counts(
    tx: &Tx,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    context: &str,
) -> Result<HashMap<String, i64>, StoreError> {
    let rows = tx.query(sql, params, context).await?;
    rows.iter()
        .map(|row| Ok((text(row, 0)?, int(row, 1)?)))
        .collect()
}
