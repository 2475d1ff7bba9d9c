//! The schema of [`SqliteStore`](super::SqliteStore)'s file and its migrations.

use rusqlite::Connection;

use super::backend;
use crate::store::{ConfigError, StoreError};

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 7;

const SCHEMA_V1: &str = "
CREATE TABLE tasks (
    id                  TEXT PRIMARY KEY,
    owner               TEXT NOT NULL,
    tool                TEXT NOT NULL,
    tool_version        TEXT NOT NULL,
    status              TEXT NOT NULL,
    status_message      TEXT,
    created_at_ms       INTEGER NOT NULL,
    last_updated_at_ms  INTEGER NOT NULL,
    ttl_ms              INTEGER,
    poll_interval_ms    INTEGER,
    arguments           TEXT NOT NULL,
    request_meta        TEXT NOT NULL,
    input_requests      TEXT NOT NULL,
    used_keys           TEXT NOT NULL,
    answers             TEXT NOT NULL,
    outcome             TEXT,
    cancel_requested    INTEGER NOT NULL,
    deadline_ms         INTEGER,
    purge_at_ms         INTEGER
) WITHOUT ROWID;
CREATE INDEX tasks_live_deadline ON tasks (deadline_ms) WHERE purge_at_ms IS NULL AND deadline_ms IS NOT NULL;
CREATE INDEX tasks_purge ON tasks (purge_at_ms) WHERE purge_at_ms IS NOT NULL;
CREATE INDEX tasks_live ON tasks (status) WHERE status IN ('working', 'input_required');
CREATE TABLE steps (
    task_id  TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    name     TEXT NOT NULL,
    value    TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
) WITHOUT ROWID;
";

/// Schema 1 → 2: creates write one B-tree, not four. Schema 1 kept three indexes, each
/// written by every create; schema 2 indexes finished tasks only (by purge time, for
/// purging), while the writer keeps the live ones in memory ([`LiveSet`]) and recovery
/// scans the table from `meta.live_from`, an id below every live task. A NULL
/// `purge_at_ms` now means exactly "live": a finished task without a TTL, NULL in schema 1,
/// gets [`NEVER`].
const MIGRATE_V1_TO_V2: &str = "
DROP INDEX tasks_live_deadline;
DROP INDEX tasks_purge;
DROP INDEX tasks_live;
UPDATE tasks SET purge_at_ms = 9223372036854775807
    WHERE purge_at_ms IS NULL AND status NOT IN ('working', 'input_required');
CREATE INDEX tasks_purge ON tasks (purge_at_ms) WHERE purge_at_ms IS NOT NULL;
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
INSERT INTO meta (name, value) VALUES ('live_from', '');
";

/// Schema 2 → 3: idempotency keys (store invariant 9). One row per task created with a key,
/// (owner, tool, key) → task id, so a create without a key still writes only the `tasks`
/// B-tree. The index by task id lets a purge remove a task's key with it.
const MIGRATE_V2_TO_V3: &str = "
CREATE TABLE idempotency (
    owner    TEXT NOT NULL,
    tool     TEXT NOT NULL,
    key      TEXT NOT NULL,
    task_id  TEXT NOT NULL,
    PRIMARY KEY (owner, tool, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_task ON idempotency (task_id);
";

/// Schema 3 → 4: the W3C trace context of the call that created the task (a JSON object
/// with `traceparent` and maybe `tracestate`, validated and bounded before it is written;
/// NULL without one, and for every task created before).
const MIGRATE_V3_TO_V4: &str = "ALTER TABLE tasks ADD COLUMN trace_context TEXT;";

/// Schema 4 → 5: the finished tasks of an owner by creation time, for the per-owner bound on
/// finished tasks (`Limits::with_max_finished_tasks_per_owner`) the sweep keeps.
const MIGRATE_V4_TO_V5: &str = "CREATE INDEX tasks_owner_finished ON tasks (owner, created_at_ms, id) \
     WHERE purge_at_ms IS NOT NULL;";

/// Schema 5 → 6: parked tasks (`TaskContext` parks a task that waits long): until when
/// each waits, NULL for every task that is not parked, and the parked ones by that time, for
/// the wake-ups that are due (a create writes nothing to the index).
const MIGRATE_V5_TO_V6: &str = "ALTER TABLE tasks ADD COLUMN parked_until_ms INTEGER; \
     CREATE INDEX tasks_parked ON tasks (parked_until_ms) WHERE parked_until_ms IS NOT NULL;";

/// Schema 6 → 7: when each question was asked (a JSON object, key → how many steps the run
/// had begun), for an operator's fork; `{}` for every task stored before, whose questions
/// count as asked before the first step.
const MIGRATE_V6_TO_V7: &str =
    "ALTER TABLE tasks ADD COLUMN asked_at_step TEXT NOT NULL DEFAULT '{}';";

/// `MIGRATIONS[v]` takes a file from schema `v` to `v + 1` (`0` is a new, empty file).
const MIGRATIONS: [&str; 7] = [
    SCHEMA_V1,
    MIGRATE_V1_TO_V2,
    MIGRATE_V2_TO_V3,
    MIGRATE_V3_TO_V4,
    MIGRATE_V4_TO_V5,
    MIGRATE_V5_TO_V6,
    MIGRATE_V6_TO_V7,
];

pub(super) fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(backend)?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::Config(ConfigError::new(format!(
            "the task database was written by a newer build (schema version {version}; this \
             build knows up to {SCHEMA_VERSION}); it is left untouched: open it with a newer \
             build, or use another file"
        ))));
    }
    for (from, step) in MIGRATIONS
        .iter()
        .enumerate()
        .skip(usize::try_from(version).unwrap_or(0))
    {
        let to = from + 1;
        // Each step and its version number commit together: a crash leaves the file at one
        // version or the next, never in between.
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {step} PRAGMA user_version = {to}; COMMIT;"
        ))
        .map_err(|error| {
            let _ = conn.execute_batch("ROLLBACK");
            StoreError::backend(format!(
                "could not migrate the task database from schema version {from} to {to}: \
                     {error}"
            ))
        })?;
    }
    Ok(())
}
