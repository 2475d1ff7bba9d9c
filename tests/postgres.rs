//! `PostgresStore` against a real Postgres server (tests/support/postgres.rs says which):
//! bad input, schema versions, a connection terminated mid-run, idempotent creates, and two or
//! more stores on one schema acting as the instances of a cluster (leases, claims, fencing,
//! wake-ups, expiry). The store contract itself runs in tests/store_contract.rs.
#![allow(
    deprecated,
    reason = "roots/list is deprecated by SEP-2577 yet part of the 2026-07-28 wire; it is the simplest input request"
)]

use std::{collections::HashSet, sync::Arc, time::Duration};

use mcp_tasks::{
    MemoryStore, PostgresStore, TaskStore,
    store::{
        Claim, ClusterStore, Created, Lease, NewTask, Notice, Outcome, Step, StoreError,
        Transition, postgres::SCHEMA_VERSION,
    },
};
use rmcp::model::{InputRequest, InputResponses, JsonObject, ListRootsRequest, TaskStatus};
use serde_json::json;

#[path = "support/postgres.rs"]
mod pg;
#[path = "support/writes.rs"]
mod writes;
use writes::Writes;

/// An input request under `key`, as a transition.
fn ask(key: &str) -> Transition {
    Transition::RequestInput {
        key: key.to_owned(),
        request: roots_request(),
        at_step: 0,
    }
}

fn new_task(id: &str) -> NewTask {
    NewTask::new(Arc::from(id), Arc::from("alice"), Arc::from("tool"))
        .with_poll_interval(Duration::from_millis(500))
}

fn roots_request() -> InputRequest {
    InputRequest::ListRoots(ListRootsRequest {
        method: Default::default(),
        extensions: Default::default(),
    })
}

fn object(value: serde_json::Value) -> JsonObject {
    value.as_object().cloned().unwrap_or_default()
}

/// The whole error chain, in one line.
fn chain(error: &StoreError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

macro_rules! db {
    () => {
        match pg::Db::new().await {
            Some(db) => db,
            None => return,
        }
    };
}

// ---------------------------------------------------------------------------------------
// Bad input.

#[tokio::test]
async fn a_wrong_url_is_a_clear_error() {
    let error = PostgresStore::connect("postgres//nohost")
        .await
        .unwrap_err();
    let text = chain(&error);
    assert!(matches!(error, StoreError::Config(_)), "{text}");
    assert!(!error.is_retryable(), "{text}");
    assert!(text.contains("is not a valid Postgres URL"), "{text}");
    assert!(
        text.contains("postgres://USER"),
        "says what a URL looks like: {text}"
    );
}

#[tokio::test]
async fn an_unreachable_server_is_a_clear_error() {
    // Port 1 on loopback: nothing listens there, the connect is refused at once.
    let error = PostgresStore::builder("postgres://postgres:secret@127.0.0.1:1/test")
        .with_connect_timeout(Duration::from_secs(3))
        .connect()
        .await
        .unwrap_err();
    let text = chain(&error);
    assert!(matches!(error, StoreError::Backend(_)), "{text}");
    assert!(
        error.is_retryable(),
        "a refused connection may succeed later: {text}"
    );
    assert!(
        text.contains(
            "could not connect to the Postgres server at postgres://postgres:***@127.0.0.1:1/test"
        ),
        "{text}"
    );
    assert!(
        !text.contains("secret"),
        "the password is not echoed: {text}"
    );
}

#[tokio::test]
async fn a_bad_schema_name_is_refused_before_connecting() {
    let error = PostgresStore::builder(pg::DEFAULT_URL)
        .with_schema("Robert'); DROP TABLE tasks;--")
        .connect()
        .await
        .unwrap_err();
    let text = chain(&error);
    assert!(matches!(error, StoreError::Config(_)), "{text}");
    assert!(
        text.contains("is not a valid task store schema name"),
        "{text}"
    );
}

/// The expiry sweep's purge time saturates: with an endless retention an expired task is
/// kept as `failed` for ever, and the statement that expires it does not overflow.
#[tokio::test]
async fn an_endless_retention_keeps_expired_tasks() {
    let db = db!();
    let store = db
        .builder()
        .with_expired_retention(Duration::MAX)
        .connect()
        .await
        .unwrap();
    store
        .create(new_task("brief").with_ttl(Some(Duration::from_millis(50))))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let expired = store.expire_due().await.unwrap();
    assert_eq!(
        expired.iter().map(|id| &**id).collect::<Vec<_>>(),
        ["brief"]
    );
    let task = store.get("brief").await.unwrap().expect("kept");
    assert_eq!(task.status, TaskStatus::Failed);
    assert!(store.expire_due().await.unwrap().is_empty());
}

/// A status this build does not know, written behind the store's back, is an error on every
/// read and change, never read as some other status (such as `cancelled`).
#[tokio::test]
async fn an_unknown_stored_status_is_an_error() {
    let db = db!();
    let store = db.store().await.unwrap();
    store.create(new_task("odd")).await.unwrap();
    let raw = db.raw().await;
    raw.execute("UPDATE tasks SET status = 'paused' WHERE id = 'odd'", &[])
        .await
        .unwrap();
    let read = store.get("odd").await;
    let cancel = store.request_cancel("odd").await;
    for result in [read.map(drop), cancel] {
        let error = result.expect_err("an unknown status is not read");
        let text = chain(&error);
        assert!(matches!(error, StoreError::Backend(_)), "{text}");
        assert!(text.contains("unknown task status `paused`"), "{text}");
        assert!(!error.is_retryable(), "{text}");
    }
}

/// A schema written by a newer build is refused with a clear error and left as it is.
#[tokio::test]
async fn a_newer_schema_is_refused_and_left_untouched() {
    let db = db!();
    let store = db.store().await.unwrap();
    store.create(new_task("kept")).await.unwrap();
    drop(store);
    let raw = db.raw().await;
    let version: i64 = raw
        .query_one("SELECT value FROM meta WHERE name = 'schema_version'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        version, SCHEMA_VERSION,
        "a new schema is at this build's version"
    );
    raw.execute(
        "UPDATE meta SET value = $1 WHERE name = 'schema_version'",
        &[&(SCHEMA_VERSION + 1)],
    )
    .await
    .unwrap();
    let error = db.store().await.unwrap_err();
    let text = chain(&error);
    assert!(matches!(error, StoreError::Config(_)), "{text}");
    assert!(
        text.contains(&format!(
            "written by a newer build (schema version {}",
            SCHEMA_VERSION + 1
        )),
        "{text}"
    );
    assert!(text.contains("left untouched"), "{text}");
    let after: i64 = raw
        .query_one("SELECT value FROM meta WHERE name = 'schema_version'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(after, SCHEMA_VERSION + 1, "the version is not rewritten");
    let rows: i64 = raw
        .query_one("SELECT count(*) FROM tasks", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1, "the task is still there");
}

/// Every field survives a new store on the same schema (another process, a restart).
#[tokio::test]
async fn every_field_is_persisted() {
    let db = db!();
    let store = db.store().await.unwrap();
    let meta = object(json!({ "protocolVersion": "2026-07-28" }));
    let args = object(json!({ "n": 3, "x": 0.30000000000000004 }));
    store
        .create(
            new_task("run")
                .with_ttl(Some(Duration::from_secs(600)))
                .with_status_message(Some("starting".into()))
                .with_arguments(args.clone())
                .with_request_meta(meta.clone())
                .with_tool_version(Arc::from("2.1")),
        )
        .await
        .unwrap();
    store
        .request_input("run", "k1", roots_request())
        .await
        .unwrap();
    store
        .request_input("run", "k2", roots_request())
        .await
        .unwrap();
    let mut answer = InputResponses::new();
    answer.insert("k1".into(), json!({ "roots": [] }));
    store.deliver_input("run", answer.clone()).await.unwrap();
    store
        .save_step("run", Step::new(1, "fetch", json!({ "rows": 7 })))
        .await
        .unwrap();
    store.request_cancel("run").await.unwrap();
    let result =
        object(json!({ "content": [], "structuredContent": { "big": 1e300, "tiny": 5e-324 } }));
    store.create(new_task("done")).await.unwrap();
    store
        .finish("done", Outcome::Completed(result.clone()))
        .await
        .unwrap();
    let before = (
        store.get("run").await.unwrap(),
        store.get("done").await.unwrap(),
    );
    drop(store);

    let again = db.store().await.unwrap();
    let after = (
        again.get("run").await.unwrap(),
        again.get("done").await.unwrap(),
    );
    assert_eq!(before, after);
    let run = after.0.unwrap();
    assert_eq!(run.status, TaskStatus::InputRequired);
    assert_eq!(run.input_requests.keys().collect::<Vec<_>>(), ["k2"]);
    assert!(run.cancel_requested);
    assert_eq!(run.status_message.as_deref(), Some("starting"));
    assert_eq!(run.ttl_ms, Some(600_000));
    assert_eq!(after.1.unwrap().outcome, Some(Outcome::Completed(result)));
    let recoverable = again.recoverable().await.unwrap();
    assert_eq!(recoverable.len(), 1);
    let task = &recoverable[0];
    assert_eq!(
        (
            &*task.origin.tool_version,
            &task.origin.arguments,
            &task.origin.request_meta
        ),
        ("2.1", &args, &meta)
    );
    assert_eq!(task.answers, answer);
    assert_eq!(
        task.steps,
        vec![Step::new(1, "fetch", json!({ "rows": 7 }))]
    );
    assert!(matches!(
        again.request_input("run", "k1", roots_request()).await,
        Err(StoreError::KeyReused(_))
    ));
}

/// A task that completed keeps no replay data (tool version, arguments, the request's
/// `_meta`, steps) on disk, whichever way it completed: the general write, the batched
/// fenced finish; a failed or cancelled task keeps all of it for an operator's retry,
/// whichever way it ended (the expiry sweep included), as a live task does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_task_keeps_no_replay_data() {
    let db = db!();
    let store = db.store().await.unwrap();
    let with_origin = |id: &str| {
        new_task(id)
            .with_arguments(object(json!({ "n": 3 })))
            .with_request_meta(object(json!({ "protocolVersion": "2026-07-28" })))
            .with_tool_version(Arc::from("2.1"))
    };
    // Leased first: the others are created queued, and the claim takes the oldest.
    let lease = create_leased(&store, with_origin("fenced"), "a", Duration::from_secs(30)).await;
    let failing = create_leased(
        &store,
        with_origin("fenced-failed"),
        "a",
        Duration::from_secs(30),
    )
    .await;
    let step = Step::new(0, "fetch", json!(1));
    store
        .under(&failing, Transition::SaveStep(step))
        .await
        .unwrap();
    for id in ["cancelled", "finished", "live"] {
        store.create(with_origin(id)).await.unwrap();
        let step = Step::new(0, "fetch", json!(1));
        store
            .apply(id, None, Transition::SaveStep(step))
            .await
            .unwrap();
    }
    let done = || Outcome::Completed(object(json!({ "content": [] })));
    store.finish("finished", done()).await.unwrap();
    store.finish("cancelled", Outcome::Cancelled).await.unwrap();
    store
        .under(&lease, Transition::Finish(done()))
        .await
        .unwrap();
    // Through the batched finish too.
    let error = object(json!({ "code": -32603, "message": "upstream down" }));
    store
        .under(&failing, Transition::Finish(Outcome::Failed(error)))
        .await
        .unwrap();
    store
        .create(with_origin("expired").with_ttl(Some(Duration::from_millis(1))))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    store.expire_due().await.unwrap();

    let raw = db.raw().await;
    let rows: Vec<(String, String, String, String, String)> = raw
        .query(
            "SELECT id, status, tool_version, arguments, request_meta FROM tasks ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
        .collect();
    let ended = |id: &str| {
        let empty = (String::new(), "{}".into(), "{}".into());
        (id.into(), "completed".into(), empty.0, empty.1, empty.2)
    };
    let kept = |id: &str, status: &str| {
        let n = r#"{"n":3}"#.into();
        let meta = r#"{"protocolVersion":"2026-07-28"}"#.into();
        (id.into(), status.into(), "2.1".into(), n, meta)
    };
    assert_eq!(
        rows,
        [
            kept("cancelled", "cancelled"),
            kept("expired", "failed"),
            ended("fenced"),
            kept("fenced-failed", "failed"),
            ended("finished"),
            kept("live", "working"),
        ]
    );
    let steps: Vec<String> = (raw.query("SELECT task_id FROM steps ORDER BY task_id", &[]))
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        steps,
        ["cancelled", "fenced-failed", "live"],
        "a completed task's steps go"
    );
}

// ---------------------------------------------------------------------------------------
// A dropped connection in the middle of a run.

/// What one task's run was told by the store.
#[derive(Default)]
struct Acks {
    created: bool,
    step: bool,
    finished: bool,
}

/// Tasks run (create, a step, finish) from several callers while every backend of the
/// store's pool is terminated again and again. Each operation succeeds or fails with a
/// `Backend` error that says what happened; afterwards every acknowledged change is there,
/// nothing is half-written, and the store goes on working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_backend_loses_no_task() {
    let db = db!();
    let store = Arc::new(db.store().await.unwrap());
    let raw = db.raw().await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut callers = Vec::new();
    for caller in 0..6 {
        let (store, stop) = (Arc::clone(&store), Arc::clone(&stop));
        callers.push(tokio::spawn(async move {
            let mut runs = Vec::new();
            let mut errors = Vec::new();
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let id = format!("c{caller}-{n}");
                let mut acks = Acks::default();
                let result = object(json!({ "content": [], "structuredContent": { "id": id } }));
                match store
                    .create(new_task(&id).with_arguments(object(json!({ "n": n }))))
                    .await
                {
                    Ok(_) => acks.created = true,
                    Err(e) => errors.push(e),
                }
                if acks.created {
                    match store.save_step(&id, Step::new(1, "s", json!(n))).await {
                        Ok(()) => acks.step = true,
                        Err(e) => errors.push(e),
                    }
                    match store.finish(&id, Outcome::Completed(result)).await {
                        Ok(()) => acks.finished = true,
                        Err(e) => errors.push(e),
                    }
                }
                runs.push((id, n, acks));
            }
            (runs, errors)
        }));
    }
    let mut terminated = 0;
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let killed = raw
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                &[&db.schema],
            )
            .await
            .unwrap();
        terminated += killed.len();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut runs, mut errors) = (Vec::new(), Vec::new());
    for caller in callers {
        let (r, e) = caller.await.expect("no caller panicked");
        runs.extend(r);
        errors.extend(e);
    }
    eprintln!(
        "{} runs, {} errors, {terminated} backends terminated; e.g. {:?}",
        runs.len(),
        errors.len(),
        errors.first().map(chain)
    );
    assert!(terminated >= 6, "backends were terminated ({terminated})");
    assert!(
        !errors.is_empty(),
        "some operations met a terminated backend"
    );
    for error in &errors {
        let text = chain(error);
        assert!(matches!(error, StoreError::Backend(_)), "{text}");
        assert!(error.code().is_some() || error.is_retryable(), "{text}");
        assert!(
            text.contains("terminat") || text.contains("closed") || text.contains("connection"),
            "the error says the connection was lost: {text}"
        );
    }
    let mut checked = 0;
    for (id, n, acks) in &runs {
        let task = store.get(id).await.expect("reads work after the run");
        let Some(task) = task else {
            assert!(!acks.created, "{id}: an acknowledged create is stored");
            continue;
        };
        checked += 1;
        let result = object(json!({ "content": [], "structuredContent": { "id": id } }));
        match task.status {
            TaskStatus::Completed => {
                assert_eq!(
                    task.outcome,
                    Some(Outcome::Completed(result)),
                    "{id}: whole"
                );
            }
            TaskStatus::Working => {
                assert!(!acks.finished, "{id}: an acknowledged finish is stored");
                let recovery = store.recoverable().await.unwrap();
                let mine = recovery
                    .iter()
                    .find(|r| &*r.id == id)
                    .expect("live: recoverable");
                assert_eq!(
                    mine.origin.arguments,
                    object(json!({ "n": n })),
                    "{id}: arguments whole"
                );
                if acks.step {
                    assert_eq!(mine.steps, vec![Step::new(1, "s", json!(n))], "{id}");
                }
            }
            other => panic!("{id}: unexpected status {other:?}"),
        }
    }
    let acked = runs.iter().filter(|(_, _, a)| a.created).count();
    assert!(
        acked > 20 && checked >= acked,
        "{acked} acknowledged, {checked} stored"
    );
    // The pool heals: a new run goes through.
    store.create(new_task("after")).await.unwrap();
    store.finish("after", Outcome::Cancelled).await.unwrap();
}

// ---------------------------------------------------------------------------------------
// Idempotent creation (invariant 9), on Postgres and in memory.

/// 16 concurrent retries of one call (same owner, tool, key; each with a new id) create one
/// task; the others answer `Existing` with it. Another owner's key is another task.
async fn idempotent_creates(store: Arc<impl TaskStore>) -> HashSet<String> {
    let key: Arc<str> = Arc::from("call-1");
    let mut retries = Vec::new();
    for i in 0..16 {
        let (store, key) = (Arc::clone(&store), Arc::clone(&key));
        retries.push(tokio::spawn(async move {
            store
                .create(
                    new_task(&format!("retry-{i}"))
                        .with_ttl(Some(Duration::from_secs(60)))
                        .with_idempotency_key(key),
                )
                .await
        }));
    }
    let mut created = Vec::new();
    let mut existing = HashSet::new();
    for retry in retries {
        match retry.await.unwrap() {
            Ok(Created::New(task)) => created.push(task.id.to_string()),
            Ok(Created::Existing(task)) => {
                existing.insert(task.id.to_string());
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(created.len(), 1, "one task for all retries: {created:?}");
    assert_eq!(
        existing.iter().collect::<Vec<_>>(),
        [&created[0]],
        "every other retry answers the task that was created"
    );
    let other_owner = NewTask::new(Arc::from("bob-1"), Arc::from("bob"), Arc::from("tool"))
        .with_idempotency_key(Arc::clone(&key));
    store
        .create(other_owner)
        .await
        .expect("another owner's key is another call");
    let other_tool = NewTask::new(Arc::from("alice-2"), Arc::from("alice"), Arc::from("other"))
        .with_idempotency_key(key);
    store
        .create(other_tool)
        .await
        .expect("another tool's key is another call");
    created.into_iter().collect()
}

#[tokio::test]
async fn postgres_idempotent_create_under_concurrent_retries() {
    let db = db!();
    let store = Arc::new(db.store().await.unwrap());
    let created = idempotent_creates(Arc::clone(&store)).await;
    let raw = db.raw().await;
    let rows: i64 = raw
        .query_one(
            "SELECT count(*) FROM tasks WHERE owner = 'alice' AND tool = 'tool'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1, "one row for {created:?}");

    // Past the first task's TTL the key is free: a new call, a new task.
    store
        .create(
            new_task("short")
                .with_ttl(Some(Duration::from_millis(300)))
                .with_idempotency_key(Arc::from("call-2")),
        )
        .await
        .unwrap();
    let retry = store
        .create(new_task("short-retry").with_idempotency_key(Arc::from("call-2")))
        .await;
    assert!(matches!(retry, Ok(Created::Existing(t)) if &*t.id == "short"));
    tokio::time::sleep(Duration::from_millis(400)).await;
    store
        .create(new_task("short-again").with_idempotency_key(Arc::from("call-2")))
        .await
        .expect("past the TTL the same key starts a new task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_idempotent_create_under_concurrent_retries() {
    let store = Arc::new(MemoryStore::new());
    idempotent_creates(Arc::clone(&store)).await;
    assert_eq!(store.len(), 3);
}

// ---------------------------------------------------------------------------------------
// Batched finishes and reads (store/postgres/batch.rs): many at once, each answered as alone.

/// 48 tasks under leases finish at once, and are read at once, through the batches: every
/// finish lands on its own task with its own outcome and message; a second finish of a task
/// sent at the same time is refused as terminal, not applied twice; a stale epoch, a
/// foreign instance and a task past its TTL are not finished by the batch statement (they
/// take the general path: fenced, fenced, expired); reads of missing ids answer `None` next
/// to found ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_finishes_and_reads_answer_each_task_as_alone() {
    let db = db!();
    let store = Arc::new(db.store().await.unwrap());
    let mut leases = Vec::new();
    for i in 0..48 {
        let task = new_task(&format!("t{i:02}"));
        leases.push(create_leased(&store, task, "a", Duration::from_secs(30)).await);
    }
    let outcome = |i: usize| {
        if i.is_multiple_of(2) {
            Outcome::Completed(object(
                json!({ "content": [{ "type": "text", "text": format!("r{i}") }] }),
            ))
        } else {
            Outcome::Failed(object(
                json!({ "code": -32603, "message": format!("e{i}") }),
            ))
        }
    };
    // Every task finished twice, all at the same moment (so that some batches hold both
    // finishes of a task).
    let mut finishes = Vec::new();
    let twice = leases
        .iter()
        .cloned()
        .enumerate()
        .flat_map(|job| [job.clone(), job]);
    for (i, lease) in twice {
        let store = Arc::clone(&store);
        finishes.push(tokio::spawn(async move {
            store.under(&lease, Transition::Finish(outcome(i))).await
        }));
    }
    let mut results = Vec::new();
    for finish in finishes {
        results.push(finish.await.unwrap());
    }
    let (ok, terminal): (Vec<_>, Vec<_>) = results.iter().partition(|r| r.is_ok());
    assert_eq!(ok.len(), 48, "one finish per task applies: {results:?}");
    assert!(
        terminal
            .iter()
            .all(|r| matches!(r, Err(StoreError::Terminal(_)))),
        "the second finish of each task is refused: {terminal:?}"
    );
    let reads = futures::future::join_all((0..50).map(|i| {
        store.get(
            if i < 48 {
                format!("t{i:02}")
            } else {
                format!("missing-{i}")
            }
            .leak(),
        )
    }))
    .await;
    for (i, read) in reads.into_iter().enumerate() {
        let read = read.unwrap();
        if i >= 48 {
            assert!(read.is_none(), "missing-{i} is not found");
            continue;
        }
        let task = read.unwrap_or_else(|| panic!("t{i:02} is found"));
        assert_eq!(&*task.id, format!("t{i:02}"));
        assert_eq!(task.outcome.as_ref(), Some(&outcome(i)), "t{i:02}");
        assert_eq!(task.status_message, outcome(i).status_message(), "t{i:02}");
    }

    // Not for the batch statement: a stale epoch, another instance, a task past its TTL.
    let first = create_leased(&store, new_task("stale"), "a", Duration::from_secs(30)).await;
    let mut stale = first.clone();
    stale.epoch += 1;
    let mut foreign = first.clone();
    foreign.instance = Arc::from("b");
    for lease in [stale, foreign] {
        assert!(
            matches!(
                store
                    .under(&lease, Transition::Finish(Outcome::Cancelled))
                    .await,
                Err(StoreError::Fenced { .. })
            ),
            "{lease:?} does not finish the task"
        );
    }
    assert_eq!(
        store.get("stale").await.unwrap().unwrap().status,
        TaskStatus::Working
    );
    let task = new_task("late").with_ttl(Some(Duration::from_millis(100)));
    let late = create_leased(&store, task, "a", Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(matches!(
        store
            .under(&late, Transition::Finish(Outcome::Cancelled))
            .await,
        Err(StoreError::Terminal(TaskStatus::Failed))
    ));
    let late = store.get("late").await.unwrap().unwrap();
    assert_eq!(
        late.status,
        TaskStatus::Failed,
        "past its TTL the task expired instead"
    );
}

/// Reads and finishes stay index lookups as the table grows from empty (the store's sessions
/// run with `enable_seqscan = off`): a prepared statement's generic plan, made while the table
/// was small, scanned the whole table on every execution until the next ANALYZE (650 scans
/// in a 5-second benchmark run of 8,000 tasks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_do_not_scan_the_table_as_it_grows() {
    let db = db!();
    let store = Arc::new(db.store().await.unwrap());
    // Batches against a nearly empty table, enough of them for every pooled connection to
    // run each statement more than five times (when Postgres may switch a prepared
    // statement to its generic plan): plans made now would scan the table.
    for round in 0..48 {
        let mut leases = Vec::new();
        for i in 0..4 {
            let task = new_task(&format!("small-{round}-{i}"));
            leases.push(create_leased(&store, task, "a", Duration::from_secs(30)).await);
        }
        let finishes = leases
            .iter()
            .map(|lease| store.under(lease, Transition::Finish(Outcome::Cancelled)));
        for done in futures::future::join_all(finishes).await {
            done.unwrap();
        }
        for _ in 0..2 {
            let reads = leases.iter().map(|lease| store.get(&lease.task_id));
            futures::future::join_all(reads).await;
        }
    }
    // The table grows to 5,000 rows.
    let creates = (0..5000).map(|i| store.create(new_task(&format!("big-{i:04}"))));
    for created in futures::future::join_all(creates).await {
        created.unwrap();
    }
    // Held by another instance, as a busy cluster's tasks are (and so not in the queue that
    // `create_leased` claims from).
    let mut held = 0;
    while held < 5000 {
        let claimed = cluster(&store)
            .claim(Claim::queued("other", Duration::from_secs(300), 1000))
            .await
            .unwrap()
            .tasks;
        assert!(
            !claimed.is_empty(),
            "only {held} of the 5,000 tasks were queued"
        );
        held += claimed.len();
    }
    let raw = db.raw().await;
    // Rows read by sequential scans. Not the number of scans: a backend publishes its counts
    // late (when idle, within 10 s), so the legitimate scans of the tiny table above may
    // still arrive; they read at most 200 rows each, a scan of the grown table 5,000.
    let scans = || async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let row = raw
            .query_one(
                "SELECT seq_tup_read FROM pg_stat_user_tables \
                 WHERE schemaname = current_schema() AND relname = 'tasks'",
                &[],
            )
            .await
            .unwrap();
        row.get::<_, i64>(0)
    };
    let mut leases = Vec::new();
    for round in 0..20 {
        for i in 0..8 {
            let task = new_task(&format!("late-{round}-{i}"));
            leases.push(create_leased(&store, task, "a", Duration::from_secs(30)).await);
        }
    }
    let before = scans().await;
    for chunk in leases.chunks(8) {
        let finishes = chunk
            .iter()
            .map(|lease| store.under(lease, Transition::Finish(Outcome::Cancelled)));
        for done in futures::future::join_all(finishes).await {
            done.unwrap();
        }
        let reads = (0..8).map(|i| store.get(if i % 2 == 0 { "big-0001" } else { "big-4999" }));
        for read in futures::future::join_all(reads).await {
            assert!(read.unwrap().is_some());
        }
    }
    let after = scans().await;
    assert!(
        after - before < 5000,
        "20 rounds of batched finishes and reads read {} rows by sequential scans of the \
         5,000-row table",
        after - before
    );
}

// ---------------------------------------------------------------------------------------
// Several stores on one schema: the instances of a cluster.

const SHORT: Duration = Duration::from_millis(300);

fn cluster(store: &PostgresStore) -> &dyn ClusterStore {
    store.cluster().expect("PostgresStore is a cluster store")
}

/// The ids of the tasks `claim` takes on `store`, sorted.
async fn claimed_ids(store: &PostgresStore, claim: Claim<'_>) -> Vec<String> {
    let mut ids: Vec<String> = (cluster(store).claim(claim).await.unwrap().tasks.into_iter())
        .map(|(task, _)| task.id.to_string())
        .collect();
    ids.sort();
    ids
}

/// Creates `task` and takes its lease for `instance`: the lease a task created by the
/// instance that runs it starts with (epoch 1).
async fn create_leased(
    store: &PostgresStore,
    task: NewTask,
    instance: &str,
    length: Duration,
) -> Lease {
    let id = Arc::clone(&task.id);
    assert!(store.create(task).await.unwrap().is_new());
    // Created queued (no runner), then claimed: the one way a task gets its first lease
    // through the public API.
    let claimed = cluster(store)
        .claim(Claim::queued(instance, length, 1))
        .await
        .unwrap()
        .tasks;
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!(
        claimed[0].0.id, id,
        "the task just created is the one claimed"
    );
    let lease = claimed[0].1.clone();
    assert_eq!(lease.epoch, 1, "a new task's first lease");
    lease
}

/// A lease lapses; of several instances claiming at once exactly one gets the task, at the
/// next epoch, with its replay data; the old holder's fenced writes are refused and change
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_lease_goes_to_exactly_one_claimer_and_fences_the_old_holder() {
    let db = db!();
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(Arc::new(db.store().await.unwrap()));
    }
    let task = new_task("t").with_arguments(object(json!({ "n": 1 })));
    let old = create_leased(&stores[0], task, "a", SHORT).await;
    stores[0]
        .under(&old, Transition::SaveStep(Step::new(1, "one", json!(1))))
        .await
        .unwrap();
    assert!(
        cluster(&stores[1])
            .claim(Claim::lapsed("b", SHORT, 10))
            .await
            .unwrap()
            .tasks
            .is_empty(),
        "a live lease is not claimed"
    );
    tokio::time::sleep(SHORT + Duration::from_millis(200)).await;

    let mut claims = Vec::new();
    for (i, store) in stores.iter().enumerate() {
        let store = Arc::clone(store);
        claims.push(tokio::spawn(async move {
            cluster(&store)
                .claim(Claim::lapsed(
                    &format!("claimer-{i}"),
                    Duration::from_secs(30),
                    10,
                ))
                .await
                .unwrap()
                .tasks
        }));
    }
    let mut won = Vec::new();
    for claim in claims {
        won.extend(claim.await.unwrap());
    }
    assert_eq!(won.len(), 1, "exactly one claimer: {won:?}");
    let (recovery, new) = won.pop().unwrap();
    assert_eq!(new.epoch, 2, "the epoch moves on");
    assert_eq!(recovery.origin.arguments, object(json!({ "n": 1 })));
    assert_eq!(recovery.steps, vec![Step::new(1, "one", json!(1))]);

    let before = stores[0].get("t").await.unwrap().unwrap();
    let a = cluster(&stores[0]);
    let refused = [
        stores[0]
            .under(&old, Transition::StatusMessage(Some("stale".into())))
            .await,
        stores[0].under(&old, ask("k")).await,
        stores[0]
            .under(&old, Transition::SaveStep(Step::new(2, "two", json!(2))))
            .await,
        stores[0]
            .under(&old, Transition::Finish(Outcome::Cancelled))
            .await,
        a.renew(&old).await.map(drop),
    ];
    for attempt in refused {
        assert!(
            matches!(
                attempt,
                Err(StoreError::Fenced {
                    held: Some(1),
                    current: 2
                })
            ),
            "{attempt:?}"
        );
    }
    assert_eq!(
        stores[0].get("t").await.unwrap().unwrap(),
        before,
        "nothing changed"
    );

    // The new holder's writes go through (the lease names the instance, whichever store
    // connection carries them).
    let b = cluster(&stores[1]);
    b.renew(&new).await.unwrap();
    stores[1]
        .under(&new, Transition::SaveStep(Step::new(2, "two", json!(2))))
        .await
        .unwrap();
    stores[1]
        .under(&new, Transition::Finish(Outcome::Cancelled))
        .await
        .unwrap();
    assert_eq!(
        stores[0].get("t").await.unwrap().unwrap().status,
        TaskStatus::Cancelled
    );
    assert!(matches!(
        b.renew(&new).await,
        Err(StoreError::Terminal(TaskStatus::Cancelled))
    ));
}

/// Claimers skip rows another instance has locked: a claim (and an expiry sweep) next to a
/// locked row returns at once with the other rows instead of waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_and_sweeps_skip_locked_rows() {
    let db = db!();
    let store = db.store().await.unwrap();
    for id in ["locked", "free"] {
        let task = new_task(id).with_ttl(Some(Duration::from_secs(600)));
        create_leased(&store, task, "gone", Duration::from_millis(50)).await;
    }
    for id in ["due-locked", "due-free"] {
        store
            .create(new_task(id).with_ttl(Some(Duration::from_millis(100))))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    for id in ["queued-locked", "queued-free"] {
        store.create(new_task(id)).await.unwrap();
    }
    let raw = db.raw().await;
    raw.batch_execute(
        "BEGIN; SELECT 1 FROM tasks WHERE id IN ('locked', 'due-locked', 'queued-locked') \
         FOR UPDATE",
    )
    .await
    .unwrap();

    let claimed = tokio::time::timeout(
        Duration::from_secs(3),
        cluster(&store).claim(Claim::lapsed("b", Duration::from_secs(30), 10)),
    )
    .await
    .expect("the claim does not wait for the locked row")
    .unwrap()
    .tasks;
    let ids: Vec<&str> = claimed.iter().map(|(r, _)| &*r.id).collect();
    assert_eq!(ids, ["free"]);
    let expired = tokio::time::timeout(Duration::from_secs(3), store.expire_due())
        .await
        .expect("the sweep does not wait for the locked row")
        .unwrap();
    assert_eq!(
        expired.iter().map(|id| &**id).collect::<Vec<_>>(),
        ["due-free"]
    );
    let queued = tokio::time::timeout(
        Duration::from_secs(3),
        cluster(&store).claim(Claim::queued("w", Duration::from_secs(30), 10)),
    )
    .await
    .expect("the worker's claim does not wait for the locked row")
    .unwrap()
    .tasks;
    assert_eq!(
        queued.iter().map(|(r, _)| &*r.id).collect::<Vec<_>>(),
        ["queued-free"]
    );

    raw.batch_execute("ROLLBACK").await.unwrap();
    let claimed = cluster(&store)
        .claim(Claim::lapsed("b", Duration::from_secs(30), 10))
        .await
        .unwrap()
        .tasks;
    assert_eq!(
        claimed.iter().map(|(r, _)| &*r.id).collect::<Vec<_>>(),
        ["locked"]
    );
    let expired = store.expire_due().await.unwrap();
    assert_eq!(
        expired.iter().map(|id| &**id).collect::<Vec<_>>(),
        ["due-locked"]
    );
}

/// Expiry sweeps running on two instances at once expire each task exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sweeps_expire_each_task_once() {
    let db = db!();
    let (a, b) = (
        Arc::new(db.store().await.unwrap()),
        Arc::new(db.store().await.unwrap()),
    );
    let mut creates = Vec::new();
    for i in 0..600 {
        let a = Arc::clone(&a);
        creates.push(tokio::spawn(async move {
            a.create(new_task(&format!("t{i:03}")).with_ttl(Some(Duration::from_millis(200))))
                .await
                .unwrap();
        }));
    }
    for create in creates {
        create.await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sweeps: Vec<_> = [&a, &b, &a, &b]
        .into_iter()
        .map(|store| {
            let store = Arc::clone(store);
            tokio::spawn(async move {
                tokio::time::timeout(Duration::from_secs(30), store.expire_due())
                    .await
                    .expect("a sweep ends")
                    .unwrap()
            })
        })
        .collect();
    let mut all = Vec::new();
    for sweep in sweeps {
        all.extend(sweep.await.unwrap());
    }
    let unique: HashSet<_> = all.iter().cloned().collect();
    assert_eq!(all.len(), 600, "each task expired once, not twice");
    assert_eq!(unique.len(), 600, "every task expired");
    let task = b.get("t123").await.unwrap().unwrap();
    assert_eq!(task.status, TaskStatus::Failed);
}

/// An answer stored through instance A wakes instance B, which runs the task, by NOTIFY
/// (the store itself re-reads nothing); so does a cancel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_reach_the_instance_holding_the_lease() {
    let db = db!();
    let a = db.store().await.unwrap();
    let b = db.store().await.unwrap();
    // Leased before the listener starts, so its announcement as queued is not heard.
    let lease = create_leased(&b, new_task("t"), "b", Duration::from_secs(30)).await;
    let mut wakeups = cluster(&b).wakeups();
    // Let the listener connect and LISTEN.
    tokio::time::sleep(Duration::from_millis(500)).await;
    b.under(&lease, ask("k")).await.unwrap();
    // A change of what `tasks/get` answers is announced to every instance's listen streams.
    let wakeup = tokio::time::timeout(Duration::from_secs(5), wakeups.recv())
        .await
        .expect("the input request's notification arrives")
        .unwrap();
    assert_eq!(wakeup, Notice::Changed("t".into()));

    let mut answer = InputResponses::new();
    answer.insert("k".into(), json!({ "roots": [] }));
    assert_eq!(a.deliver_input("t", answer).await.unwrap().len(), 1);
    let wakeup = tokio::time::timeout(Duration::from_secs(5), wakeups.recv())
        .await
        .expect("the answer's notification arrives")
        .unwrap();
    assert!(matches!(wakeup, Notice::Answers { task_id, .. } if &*task_id == "t"));

    a.request_cancel("t").await.unwrap();
    let wakeup = tokio::time::timeout(Duration::from_secs(5), wakeups.recv())
        .await
        .expect("the cancel's notification arrives")
        .unwrap();
    assert_eq!(wakeup, Notice::Cancel("t".into()));

    // A task with no runner is announced to workers, and exactly one worker claims it.
    a.create(new_task("queued")).await.unwrap();
    let wakeup = tokio::time::timeout(Duration::from_secs(5), wakeups.recv())
        .await
        .expect("the queued task is announced")
        .unwrap();
    assert_eq!(wakeup, Notice::Queued("queued".into()));
    let (x, y) = tokio::join!(
        cluster(&a).claim(Claim::queued("a", Duration::from_secs(30), 10)),
        cluster(&b).claim(Claim::queued("b", Duration::from_secs(30), 10)),
    );
    let claimed: Vec<_> = (x.unwrap().tasks.into_iter())
        .chain(y.unwrap().tasks)
        .collect();
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!((&*claimed[0].0.id, claimed[0].1.epoch), ("queued", 1));
}

/// The listening connection is terminated: the store reconnects and listens again, and what
/// is notified then reaches it. (What was notified while no one listened is the runtime's
/// to re-read: `tests/lifecycle_postgres.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_reconnects() {
    let db = db!();
    let a = db.store().await.unwrap();
    let b = db.store().await.unwrap();
    // Leased before the listener starts, so its announcement as queued is not heard.
    let lease = create_leased(&b, new_task("t"), "b", Duration::from_secs(30)).await;
    let mut wakeups = cluster(&b).wakeups();
    b.under(&lease, ask("k")).await.unwrap();
    let raw = db.raw().await;
    let mut killed = 0;
    for _ in 0..50 {
        let rows = raw
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = $1 AND query LIKE 'LISTEN%'",
                &[&db.schema],
            )
            .await
            .unwrap();
        killed += rows.len();
        if killed > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        killed, 1,
        "the listening connection was found and terminated"
    );
    let mut listening = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let rows = raw
            .query(
                "SELECT 1 FROM pg_stat_activity \
                 WHERE application_name = $1 AND query LIKE 'LISTEN%' AND state = 'idle'",
                &[&db.schema],
            )
            .await
            .unwrap();
        if !rows.is_empty() {
            listening = true;
            break;
        }
    }
    assert!(listening, "the store listens again");
    // Back, the listener says that wake-ups may have been missed while it was down (after
    // the input request's own announcement, if the old connection got it first).
    let missed = loop {
        let wakeup = tokio::time::timeout(Duration::from_secs(5), wakeups.recv())
            .await
            .expect("the reconnected listener announces the gap")
            .unwrap();
        if !matches!(wakeup, Notice::Changed(_)) {
            break wakeup;
        }
    };
    assert_eq!(missed, Notice::Missed);
    let mut answer = InputResponses::new();
    answer.insert("k".into(), json!({ "roots": [] }));
    a.deliver_input("t", answer).await.unwrap();
    let wakeup = tokio::time::timeout(Duration::from_secs(5), wakeups.recv())
        .await
        .expect("the answer notified after the reconnection arrives")
        .unwrap();
    assert!(matches!(wakeup, Notice::Answers { task_id, .. } if &*task_id == "t"));
}

/// Owners take turns at the queued tasks (the default claim order): each claim serves the
/// owners after the one this store served last, in owner order, their oldest task each,
/// with further turns while slots are left; an owner with a weight of 2 takes two a turn;
/// the turns carry over from claim to claim, and each instance keeps its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_take_turns_at_the_queued_tasks() {
    let db = db!();
    let (a, b) = (db.store().await.unwrap(), db.store().await.unwrap());
    for (owner, n) in [("ann", 6), ("bea", 6), ("cy", 2)] {
        for i in 0..n {
            let task = NewTask::new(format!("{owner}{i}").into(), owner.into(), "tool".into());
            a.create(task).await.unwrap();
        }
    }
    let bea_two: [(Arc<str>, u32); 1] = [(Arc::from("bea"), 2)];
    async fn claim(store: &PostgresStore, n: usize, weights: &[(Arc<str>, u32)]) -> Vec<String> {
        let claim = Claim::queued("x", Duration::from_secs(30), n)
            .with_order(mcp_tasks::ClaimOrder::OwnersTakeTurns, weights);
        claimed_ids(store, claim).await
    }
    // A turn each, then Ann's second turn.
    assert_eq!(claim(&a, 4, &[]).await, ["ann0", "ann1", "bea0", "cy0"]);
    // The turns go on after Ann.
    assert_eq!(claim(&a, 2, &[]).await, ["bea1", "cy1"]);
    // Cy has nothing left: after Cy, the turns start again from Ann, twice around.
    assert_eq!(claim(&a, 3, &[]).await, ["ann2", "ann3", "bea2"]);
    // Another instance starts its own turns, from the first owner.
    assert_eq!(claim(&b, 1, &[]).await, ["ann4"]);
    // Here, after Ann comes Bea, who takes two a turn with a weight of 2 (Ann's turn would
    // come second).
    assert_eq!(claim(&a, 2, &bea_two).await, ["bea3", "bea4"]);
    assert_eq!(claim(&a, 10, &[]).await, ["ann5", "bea5"]);
    assert!(claim(&a, 10, &[]).await.is_empty());
}

/// A claim keeps the tools' concurrency limits across instances: with 2 of tool `scarce`'s
/// tasks already held (by another instance), a claim with a limit of 3 for it takes one more
/// of them, and every task of the other tool; the next claim takes none of `scarce` until
/// one of its tasks ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_keep_the_tools_concurrency_limits() {
    let db = db!();
    let (a, b) = (db.store().await.unwrap(), db.store().await.unwrap());
    let task = |id: &str, tool: &str| NewTask::new(id.into(), "ann".into(), tool.into());
    for i in 0..6 {
        a.create(task(&format!("s{i}"), "scarce")).await.unwrap();
    }
    for i in 0..3 {
        a.create(task(&format!("p{i}"), "plenty")).await.unwrap();
    }
    let limits: [(Arc<str>, u32); 1] = [(Arc::from("scarce"), 3)];
    let claim = |n| Claim::queued("x", Duration::from_secs(30), n).with_limits(&limits);
    // Another instance, knowing no limit, holds two of them.
    assert_eq!(
        claimed_ids(
            &b,
            Claim::queued("y", Duration::from_secs(30), 2)
                .with_order(mcp_tasks::ClaimOrder::OldestFirst, &[])
        )
        .await,
        ["s0", "s1"]
    );
    assert_eq!(claimed_ids(&a, claim(10)).await, ["p0", "p1", "p2", "s2"]);
    assert!(
        claimed_ids(&a, claim(10)).await.is_empty(),
        "scarce is at its limit"
    );
    let raw = db.raw().await;
    raw.execute(
        "UPDATE tasks SET purge_at_ms = 1, status = 'completed' WHERE id = 's0'",
        &[],
    )
    .await
    .unwrap();
    assert_eq!(
        claimed_ids(&b, claim(10)).await,
        ["s3"],
        "one ended, one more runs"
    );
}

/// Claims by priority take the highest priority waiting first, and a task that waited gains
/// a level for each `aging` it waited, so a low priority does not starve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_by_priority_age_the_waiting_tasks() {
    let db = db!();
    let store = db.store().await.unwrap();
    let create = |id: &str, priority: i16| {
        NewTask::new(id.into(), "ann".into(), "tool".into()).with_priority(priority)
    };
    async fn claim(store: &PostgresStore, n: usize, aging: Duration) -> Vec<String> {
        let claim = Claim::queued("x", Duration::from_secs(30), n).with_priorities(Some(aging));
        claimed_ids(store, claim).await
    }
    let hour = Duration::from_secs(3600);
    for (id, priority) in [("low0", 0), ("high0", 5), ("high1", 5)] {
        store.create(create(id, priority)).await.unwrap();
    }
    // The highest priority first, whatever the age.
    assert_eq!(claim(&store, 2, hour).await, ["high0", "high1"]);
    assert_eq!(claim(&store, 2, hour).await, ["low0"]);

    for id in ["old0", "old1"] {
        store.create(create(id, 0)).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    for id in ["urgent0", "urgent1"] {
        store.create(create(id, 3)).await.unwrap();
    }
    // Waiting an hour for a level, the urgent task goes first...
    assert_eq!(claim(&store, 1, hour).await, ["urgent0"]);
    // ... and at a level per 100 ms, the old ones have gained 6 levels and go first.
    assert_eq!(
        claim(&store, 2, Duration::from_millis(100)).await,
        ["old0", "old1"]
    );
}
