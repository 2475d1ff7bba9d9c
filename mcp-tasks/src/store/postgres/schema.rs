//! The schema of [`PostgresStore`](super::PostgresStore): created and migrated by the store,
//! versioned in its `meta` table, one step per version, each step in one transaction.

use deadpool_postgres::Object;
use tokio_postgres::Transaction;

use super::{ConfigError, PgError, StoreError};

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 8;

/// Version 1. JSON fields are kept as `TEXT`, exactly as serde_json wrote them (numbers come
/// back bit for bit). `purge_at_ms` is NULL exactly while the task is live (a finished task
/// without a TTL gets `i64::MAX`), so the partial indexes below hold only what their queries
/// look for: live deadlines (expiry), purge times (purging), lease deadlines (takeover) and
/// queued tasks (workers).
const SCHEMA_V1: &str = "
CREATE TABLE meta (
    name   TEXT PRIMARY KEY,
    value  BIGINT NOT NULL
);
CREATE TABLE tasks (
    id                  TEXT PRIMARY KEY,
    owner               TEXT NOT NULL,
    tool                TEXT NOT NULL,
    tool_version        TEXT NOT NULL,
    status              TEXT NOT NULL,
    status_message      TEXT,
    created_at_ms       BIGINT NOT NULL,
    last_updated_at_ms  BIGINT NOT NULL,
    ttl_ms              BIGINT,
    poll_interval_ms    BIGINT,
    arguments           TEXT NOT NULL,
    request_meta        TEXT NOT NULL,
    input_requests      TEXT NOT NULL,
    used_keys           TEXT NOT NULL,
    answers             TEXT NOT NULL,
    answer_seq          BIGINT NOT NULL,
    outcome             TEXT,
    cancel_requested    BOOLEAN NOT NULL,
    deadline_ms         BIGINT,
    purge_at_ms         BIGINT,
    runner              TEXT,
    epoch               BIGINT NOT NULL,
    lease_until_ms      BIGINT,
    idempotency_key     TEXT
);
CREATE INDEX tasks_live_deadline ON tasks (deadline_ms)
    WHERE purge_at_ms IS NULL AND deadline_ms IS NOT NULL;
CREATE INDEX tasks_purge ON tasks (purge_at_ms) WHERE purge_at_ms IS NOT NULL;
CREATE INDEX tasks_lease ON tasks (lease_until_ms)
    WHERE purge_at_ms IS NULL AND runner IS NOT NULL;
CREATE INDEX tasks_queued ON tasks (created_at_ms) WHERE purge_at_ms IS NULL AND runner IS NULL;
CREATE UNIQUE INDEX tasks_idempotency ON tasks (owner, tool, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE TABLE steps (
    task_id  TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    seq      BIGINT NOT NULL,
    name     TEXT NOT NULL,
    value    TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
);
INSERT INTO meta (name, value) VALUES ('schema_version', 0);
";

/// Version 2: the live tasks of an owner by an index, for the cluster-wide owner quota the
/// creates count.
const SCHEMA_V2: &str = "
CREATE INDEX tasks_owner_live ON tasks (owner)
    WHERE purge_at_ms IS NULL AND status IN ('working', 'input_required');
";

/// Version 3: the W3C trace context of the call that created the task (a JSON object with
/// `traceparent` and maybe `tracestate`, validated and bounded before it is written; NULL
/// without one, and for every task created before).
const SCHEMA_V3: &str = "ALTER TABLE tasks ADD COLUMN trace_context TEXT;";

/// Version 4: the finished tasks of an owner by creation time, for the per-owner bound on
/// finished tasks (`Limits::with_max_finished_tasks_per_owner`) the sweeps keep.
const SCHEMA_V4: &str = "CREATE INDEX tasks_owner_finished ON tasks (owner, created_at_ms, id) \
     WHERE purge_at_ms IS NOT NULL;";

/// Version 5: parked tasks (`TaskContext` parks a task that waits long): until when each
/// waits, NULL for every task that is not parked. A parked task's lease deadline is the same
/// instant (0 once an answer or a cancel wakes it), so the lapsed-lease claims, by
/// `tasks_lease`, are its wake-ups; the partial index serves the operator's filter.
const SCHEMA_V5: &str = "ALTER TABLE tasks ADD COLUMN parked_until_ms BIGINT; \
     CREATE INDEX tasks_parked ON tasks (parked_until_ms) WHERE parked_until_ms IS NOT NULL;";

/// Version 6: owners take turns at the queued tasks (`ClaimOrder::OwnersTakeTurns`): the
/// queued tasks by owner and age, for a claim's skip scan over the owners waiting and for
/// each owner's oldest; the tasks of a tool that hold a runner, which a claim counts
/// against the tool's concurrency limit; and each task's priority while queued (0 for every
/// task created before), with the queued tasks by priority and age, for the claims' scan of
/// the priorities waiting.
const SCHEMA_V6: &str = "CREATE INDEX tasks_queued_owner ON tasks (owner, created_at_ms, id) \
     WHERE purge_at_ms IS NULL AND runner IS NULL; \
     CREATE INDEX tasks_tool_running ON tasks (tool) \
     WHERE purge_at_ms IS NULL AND runner IS NOT NULL; \
     ALTER TABLE tasks ADD COLUMN priority SMALLINT NOT NULL DEFAULT 0; \
     CREATE INDEX tasks_queued_priority ON tasks (priority, created_at_ms) \
     WHERE purge_at_ms IS NULL AND runner IS NULL;";

/// Version 7: rate limits (`ToolDefinition::with_rate`, `TaskContext::step_limited`): the
/// log of starts, by key (`tool <name>` for a tool's tasks, `step <name>` for a step
/// limiter) and time (the database's clock), kept for the key's window. Per-key
/// concurrency limits (`ToolDefinition::with_key_concurrency`): each task's key, counted
/// by tool and key.
const SCHEMA_V7: &str = "CREATE TABLE rate_log (limiter TEXT NOT NULL, at_ms BIGINT NOT NULL); \
     CREATE INDEX rate_log_limiter ON rate_log (limiter, at_ms); \
     ALTER TABLE tasks ADD COLUMN limit_key TEXT; \
     CREATE INDEX tasks_tool_key ON tasks (tool, limit_key) WHERE purge_at_ms IS NULL;";

/// Version 8: when each question was asked (a JSON object, key → how many steps the run had
/// begun), for an operator's fork; `{}` for every task stored before, whose questions count
/// as asked before the first step. A constant default: no table rewrite.
const SCHEMA_V8: &str = "ALTER TABLE tasks ADD COLUMN asked_at_step TEXT NOT NULL DEFAULT '{}';";

/// `MIGRATIONS[v]` takes a schema from version `v` to `v + 1` (`0` is an empty schema).
const MIGRATIONS: [&str; 8] = [
    SCHEMA_V1, SCHEMA_V2, SCHEMA_V3, SCHEMA_V4, SCHEMA_V5, SCHEMA_V6, SCHEMA_V7, SCHEMA_V8,
];

/// Creates the schema `schema` if needed and migrates it to [`SCHEMA_VERSION`], one step per
/// transaction. Instances starting together take turns (a transaction-scoped advisory lock
/// per schema). A schema at a newer version is refused and left untouched.
pub(super) async fn migrate(client: &mut Object, schema: &str) -> Result<(), StoreError> {
    loop {
        let tx = client
            .transaction()
            .await
            .map_err(|e| PgError::query("could not begin the schema migration", e))?;
        // A failed step's transaction is rolled back as it is dropped.
        let migrated = migrate_step(&tx, schema).await?;
        let ended = if migrated {
            tx.commit().await
        } else {
            tx.rollback().await
        };
        ended.map_err(|e| PgError::query("could not commit the schema migration", e))?;
        if !migrated {
            return Ok(());
        }
    }
}

/// One migration step inside the open transaction: `true` when it migrated (commit and go
/// on), `false` when the schema is current (nothing to commit).
async fn migrate_step(client: &Transaction<'_>, schema: &str) -> Result<bool, StoreError> {
    let lock_key = format!("mcp-tasks schema {schema}");
    client
        .execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&lock_key])
        .await
        .map_err(|e| PgError::query("could not lock the schema for migration", e))?;
    let version = schema_version(client, schema).await?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::Config(ConfigError::new(format!(
            "the Postgres schema `{schema}` was written by a newer build (schema version \
             {version}; this build knows up to {SCHEMA_VERSION}); it is left untouched: use a \
             newer build or another schema"
        ))));
    }
    let Some(step) = usize::try_from(version)
        .ok()
        .and_then(|from| MIGRATIONS.get(from))
    else {
        return Ok(false);
    };
    let to = version + 1;
    let fail = |e| {
        PgError::query(
            format!(
                "could not migrate the Postgres schema `{schema}` from version {version} to {to}"
            ),
            e,
        )
    };
    client
        .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""))
        .await
        .map_err(fail)?;
    client.batch_execute(step).await.map_err(fail)?;
    client
        .execute(
            "UPDATE meta SET value = $1 WHERE name = 'schema_version'",
            &[&to],
        )
        .await
        .map_err(fail)?;
    Ok(true)
}

/// The schema's version: 0 when it (or its `meta` table) does not exist yet.
async fn schema_version(client: &Transaction<'_>, schema: &str) -> Result<i64, StoreError> {
    let read = |e| {
        PgError::query(
            format!("could not read the version of the Postgres schema `{schema}`"),
            e,
        )
    };
    let meta = format!("\"{schema}\".meta");
    let exists: bool = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&meta])
        .await
        .map_err(read)?
        .try_get(0)
        .map_err(read)?;
    if !exists {
        return Ok(0);
    }
    let row = client
        .query_opt(
            &format!("SELECT value FROM {meta} WHERE name = 'schema_version'"),
            &[],
        )
        .await
        .map_err(read)?;
    let Some(row) = row else {
        return Err(StoreError::Config(ConfigError::new(format!(
            "the Postgres schema `{schema}` has a `meta` table without a schema_version row; \
             it is not a task store schema (choose another schema)"
        ))));
    };
    row.try_get(0).map_err(read)
}
