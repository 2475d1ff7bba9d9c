//! Clock skew in a cluster (issue 21, item 5): one clock for deadlines, the database's.
//!
//! Three engines on one Postgres schema, in this process: A's clock is right, B's runs
//! [`SKEW_MS`] ahead and C's as far behind (`PostgresBuilder::with_local_clock_offset_ms`,
//! as a host whose clock is wrong reads it). Every instance creates tasks, runs them and
//! sweeps expiry. What must hold:
//! - no early expiry: `work` tasks (TTL 8 s, one 3 s step) all complete, on every instance,
//!   whichever instance's sweep or read sees them; a read on any instance while they run
//!   says `working`;
//! - expiry on time: `wait` tasks (TTL 3 s, work that never ends on its own) expire no
//!   sooner than their TTL after they were created and within the sweep's reach after it;
//! - one clock: every task's `createdAt` is the real time of its creation (this host's
//!   clock is the database server's), whatever the creating instance's clock says;
//! - no early claim and no lost task: each task ends on the instance that created it
//!   (epoch 1, never taken over) and every instance finds every task.
//!
//! Without the store's correction (the offset measured against the server at connect), B's
//! sweep expires A's tasks 6 s early and C writes deadlines 6 s early, so both fail.

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{Http, TASKS};
use mcp_tasks::{ClusterConfig, Engine, PostgresStore, TaskContext, TaskServer, ToolError};
use mcp_tasks::{task_tool, toolkit};
use serde_json::{Value, json};

/// How far B's clock runs ahead and C's behind.
const SKEW_MS: i64 = 6_000;
/// Tasks of each tool created on each instance.
const PER_INSTANCE: usize = 3;

/// One step of 3 s, well within its 8 s TTL.
#[task_tool(
    mode = "required",
    restart = "resume",
    ttl = "8s",
    poll_interval = "50ms"
)]
async fn work(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.step("sleep", || async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        "slept".to_owned()
    })
    .await?;
    Ok("done".to_owned())
}

/// Runs until its 3 s TTL ends it (or 60 s pass).
#[task_tool(
    mode = "required",
    restart = "resume",
    ttl = "3s",
    poll_interval = "50ms"
)]
async fn wait(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.until_cancelled(tokio::time::sleep(Duration::from_secs(60)))
        .await
        .map_err(|_| ToolError::cancelled())?;
    Ok("never expired".to_owned())
}

fn wall_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// Epoch milliseconds of an RFC 3339 UTC timestamp as the server writes it
/// (`2026-08-01T10:00:00.123Z`).
fn parse_rfc3339(text: &str) -> u64 {
    let (date, time) = text.trim_end_matches('Z').split_once('T').unwrap();
    let mut d = date.split('-').map(|p| p.parse::<i64>().unwrap());
    let (y, m, day) = (d.next().unwrap(), d.next().unwrap(), d.next().unwrap());
    let (hms, ms) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.split(':').map(|p| p.parse::<i64>().unwrap());
    let (h, min, s) = (t.next().unwrap(), t.next().unwrap(), t.next().unwrap());
    // Days from civil (Howard Hinnant).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + min * 60 + s;
    u64::try_from(secs * 1000 + ms.parse::<i64>().unwrap()).unwrap()
}

async fn instance(db: &pg::Db, name: &'static str, offset_ms: i64) -> Http {
    let store: PostgresStore = db
        .builder()
        .with_local_clock_offset_ms(offset_ms)
        .connect()
        .await
        .expect("connect");
    let engine = Engine::builder(toolkit![work, wait].unwrap())
        .with_store(store)
        .with_instance_id(name)
        .with_cluster(
            ClusterConfig::default()
                .with_lease(Duration::from_secs(3))
                .with_renewal(Duration::from_millis(500))
                .with_claim_interval(Duration::from_millis(100))
                .with_reread_interval(Duration::from_millis(500)),
        )
        .build();
    engine.start().expect("start the cluster loops");
    Http::start(TaskServer::from_engine(engine)).await
}

async fn call(http: &mut Http, tool: &str) -> (String, u64) {
    let sent = wall_ms();
    let (_, response) = http
        .rpc(
            "tools/call",
            json!({ "name": tool, "arguments": {} }),
            TASKS,
        )
        .await;
    let id = response["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {response}"))
        .to_owned();
    (id, sent)
}

async fn get(http: &mut Http, id: &str) -> Value {
    let (_, response) = http.rpc("tasks/get", json!({ "taskId": id }), TASKS).await;
    assert!(response["result"].is_object(), "{id} found: {response}");
    response["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_instance_clocks_expire_nothing_early_and_lose_nothing() {
    let Some(db) = pg::Db::new().await else {
        eprintln!("skipped: no Postgres (MCP_TASKS_POSTGRES_URL)");
        return;
    };
    // The schema first, before three stores race to create it.
    drop(db.store().await.expect("create the schema"));
    let mut instances = vec![
        instance(&db, "a", 0).await,
        instance(&db, "b", SKEW_MS).await,
        instance(&db, "c", -SKEW_MS).await,
    ];

    let mut works = Vec::new();
    let mut waits = Vec::new();
    for _ in 0..PER_INSTANCE {
        for (at, http) in instances.iter_mut().enumerate() {
            let (id, sent) = call(http, "work").await;
            works.push((id, sent, at));
            let (id, sent) = call(http, "wait").await;
            waits.push((id, sent, at));
        }
    }
    let created = Instant::now();

    // One clock: createdAt is the real time, whichever instance wrote it.
    for (id, sent, at) in works.iter().chain(&waits) {
        let task = get(&mut instances[0], id).await;
        let created_at = parse_rfc3339(task["createdAt"].as_str().unwrap());
        let off = i64::try_from(created_at).unwrap() - i64::try_from(*sent).unwrap();
        assert!(
            (-200..1_500).contains(&off),
            "{id} created on instance {at} at {sent}: createdAt {created_at} is {off} ms off"
        );
    }

    // While the work runs (the 3 s step, the 8 s TTL), every instance reads it as working.
    while created.elapsed() < Duration::from_millis(2_000) {
        for (id, _, at) in &works {
            for http in &mut instances {
                let task = get(http, id).await;
                assert_eq!(
                    task["status"],
                    "working",
                    "{id} (created on instance {at}) {:?} after its creation: {task}",
                    created.elapsed()
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Every `work` task completes; every `wait` task expires on time.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut expired_at = vec![None; waits.len()];
    loop {
        let mut pending = 0;
        for (i, (id, _, _)) in waits.iter().enumerate() {
            if expired_at[i].is_none() {
                let task = get(&mut instances[i % 3], id).await;
                if task["status"] == "working" {
                    pending += 1;
                } else {
                    expired_at[i] = Some((wall_ms(), task));
                }
            }
        }
        for (id, _, _) in &works {
            if get(&mut instances[0], id).await["status"] == "working" {
                pending += 1;
            }
        }
        if pending == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{pending} tasks still working");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (i, (id, sent, at)) in waits.iter().enumerate() {
        let (seen, task) = expired_at[i].take().unwrap();
        assert_eq!(task["status"], "failed", "{id} expired: {task}");
        let after = seen - sent;
        assert!(
            (3_000..6_000).contains(&after),
            "{id} (created on instance {at}) seen expired {after} ms after its creation \
             (TTL 3 s): {task}"
        );
    }
    let client = db.raw().await;
    for (id, _, at) in &works {
        for http in &mut instances {
            let task = get(http, id).await;
            assert_eq!(
                task["status"], "completed",
                "{id} (created on instance {at}) completed: {task}"
            );
        }
        let row = client
            .query_one("SELECT epoch, runner FROM tasks WHERE id = $1", &[id])
            .await
            .unwrap();
        let (epoch, runner): (i64, Option<String>) = (row.get(0), row.get(1));
        assert_eq!(
            (epoch, runner.as_deref()),
            (1, Some(["a", "b", "c"][*at])),
            "{id} ran where it was created, never claimed by another instance"
        );
    }
}
