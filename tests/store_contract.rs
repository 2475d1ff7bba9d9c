//! The store contract suite: one set of checks, generic over `S: TaskStore`, run against
//! every store. Each check names the docs/protocol.md rule (or store invariant) it holds the store to.
#![allow(
    deprecated,
    reason = "roots/list is deprecated by SEP-2577 yet part of the 2026-07-28 wire; it is the simplest input request"
)]

use std::{sync::Arc, time::Duration};

use mcp_tasks::{
    MemoryStore, SqliteStore, TaskStore,
    store::{
        Created, NewTask, Outcome, PARKED_FOR_ANSWER, Step, StoreError, Transition, Wait,
        admin::{TaskFilter, TaskQuery},
    },
};
use rmcp::model::{InputRequest, InputResponses, JsonObject, ListRootsRequest, TaskStatus};
use serde_json::json;

fn new_task(id: &str, ttl: Option<Duration>) -> NewTask {
    NewTask::new(Arc::from(id), Arc::from("alice"), Arc::from("tool"))
        .with_ttl(ttl)
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

/// Runs every check against stores made by `make`. Time must be paused.
async fn contract<S: TaskStore>(make: impl Fn() -> S) {
    create_then_get(make()).await;
    state_machine(make()).await;
    timestamps(make()).await;
    input_keys(make()).await;
    cancel_intent(make()).await;
    replay_data(make()).await;
    expiry(make()).await;
    idempotent_creation(make()).await;
    huge_deadlines(make()).await;
    trace_context(make()).await;
    finished_per_owner(make()).await;
    parking(make()).await;
    asked_at_step(make()).await;
    nul_characters(make()).await;
}

/// Text with a NUL character, which a Postgres text column cannot hold: a status message
/// reads back with U+FFFD in the NUL's place, and so does a failed task's status message,
/// while its error (stored as JSON, the NUL escaped) and a step's value read back as given;
/// the task ends on every store.
async fn nul_characters(store: impl TaskStore) {
    let queued = new_task("nul", None).with_status_message(Some("queued\0".into()));
    store.create(queued).await.unwrap();
    let task = store.get("nul").await.unwrap().unwrap();
    assert_eq!(task.status_message.as_deref(), Some("queued\u{fffd}"));
    let half = Transition::StatusMessage(Some("half\0way".into()));
    store.apply("nul", None, half).await.unwrap();
    let task = store.get("nul").await.unwrap().unwrap();
    assert_eq!(task.status_message.as_deref(), Some("half\u{fffd}way"));
    let step = Step::new(1, "fetch", json!({ "text": "a\0b" }));
    store.save_step("nul", step.clone()).await.unwrap();
    let recoverable = store.recoverable().await.unwrap();
    assert_eq!(recoverable[0].steps, vec![step]);
    let error = object(json!({ "code": -32603, "message": "bad\0byte" }));
    let failed = Outcome::Failed(error.clone());
    store
        .apply("nul", None, Transition::Finish(failed))
        .await
        .unwrap();
    let task = store.get("nul").await.unwrap().unwrap();
    assert_eq!(task.status, TaskStatus::Failed);
    assert_eq!(task.status_message.as_deref(), Some("bad\u{fffd}byte"));
    assert_eq!(task.outcome, Some(Outcome::Failed(error)));
}

/// When each question was asked (how many steps the run had begun): kept by key for a
/// question asked after the first step began, with its answer, by a task that failed, as the
/// operator's detail shows it (a fork reads it there); dropped with the answers by a task
/// that completed; given to a task created with answers.
async fn asked_at_step(store: impl TaskStore) {
    let admin = store.admin().expect("every store has the operator's view");
    for id in ["fails", "completes"] {
        store.create(new_task(id, None)).await.unwrap();
        let mut answers = InputResponses::new();
        for (key, at_step) in [("first", 0), ("second", 2)] {
            let ask = Transition::RequestInput {
                key: key.to_owned(),
                request: roots_request(),
                at_step,
            };
            store.apply(id, None, ask).await.unwrap();
            answers.insert(key.into(), json!({ "roots": [] }));
        }
        store.deliver_input(id, answers).await.unwrap();
    }
    let asked = |detail: Option<mcp_tasks::store::admin::TaskDetail>| {
        let detail = detail.expect("the task");
        (detail.asked_at_step, detail.answers.len())
    };
    let second = mcp_tasks::store::AskedAtStep::from([("second".to_owned(), 2)]);
    assert_eq!(
        asked(admin.detail("fails").await.unwrap()),
        (second.clone(), 2)
    );
    // A question still open when the task fails goes with the end; the answers stay.
    let open = Transition::RequestInput {
        key: "third".to_owned(),
        request: roots_request(),
        at_step: 0,
    };
    store.apply("fails", None, open).await.unwrap();
    let error = object(json!({ "code": -32603, "message": "upstream down" }));
    store.finish("fails", Outcome::Failed(error)).await.unwrap();
    store
        .finish(
            "completes",
            Outcome::Completed(object(json!({ "content": [] }))),
        )
        .await
        .unwrap();
    assert_eq!(
        asked(admin.detail("fails").await.unwrap()),
        (second.clone(), 2),
        "a failed task keeps its history for a retry or fork"
    );
    let failed = admin.detail("fails").await.unwrap().expect("the task");
    assert!(failed.questions.is_empty(), "{:?}", failed.questions);
    assert!(failed.task.input_requests.is_empty(), "{failed:?}");
    assert_eq!(
        asked(admin.detail("completes").await.unwrap()),
        (Default::default(), 0)
    );
    let mut answers = InputResponses::new();
    answers.insert("second".into(), json!({ "roots": [] }));
    let fork = new_task("fork", None)
        .with_answers(answers)
        .with_asked_at_step(second.clone());
    store.create(fork).await.unwrap();
    assert_eq!(asked(admin.detail("fork").await.unwrap()), (second, 1));
}

/// Parked tasks: a park is refused once what the task waits for came (its answer, a
/// cancel); it changes nothing `tasks/get` shows but its park; a parked task is not
/// recoverable (it runs nowhere by design) and the admin filter finds it. An answer, a cancel
/// or its timer wakes it: a single-process store hands it over once, unparked, with its
/// replay data (a cluster store wakes it through its claims: `tests/parking.rs`).
async fn parking(store: impl TaskStore) {
    assert!(
        store.parks(),
        "every store of this crate keeps parked tasks"
    );
    let hour = Some(Duration::from_secs(3600));
    let park = |id: &'static str, wait: Wait| {
        let store = &store;
        async move { store.apply(id, None, Transition::Park(wait)).await }
    };
    store.create(new_task("asks", hour)).await.unwrap();
    store
        .request_input("asks", "k", roots_request())
        .await
        .unwrap();
    assert!(matches!(
        park("asks", Wait::answer("other")).await,
        Err(StoreError::Woken)
    ));
    let before = store.get("asks").await.unwrap().unwrap();
    park("asks", Wait::answer("k")).await.unwrap();
    let parked = store.get("asks").await.unwrap().unwrap();
    assert_eq!(parked.parked_until_ms, Some(PARKED_FOR_ANSWER));
    assert_eq!(parked.waits_for(), Some("answer"));
    let mut shown = parked.clone();
    shown.parked_until_ms = None;
    assert_eq!(shown, before, "a park changes nothing tasks/get shows");
    store.create(new_task("runs", hour)).await.unwrap();
    store.create(new_task("naps", hour)).await.unwrap();
    let created = store.get("naps").await.unwrap().unwrap().created_at_ms;
    park("naps", Wait::until(created + 60_000)).await.unwrap();
    store.create(new_task("cancelled", hour)).await.unwrap();
    store.request_cancel("cancelled").await.unwrap();
    assert!(matches!(
        park("cancelled", Wait::until(created + 1)).await,
        Err(StoreError::Woken)
    ));
    store.finish("runs", Outcome::Cancelled).await.unwrap();
    assert!(matches!(
        park("runs", Wait::answer("k")).await,
        Err(StoreError::Terminal(_))
    ));

    let recoverable: Vec<String> = store
        .recoverable()
        .await
        .unwrap()
        .iter()
        .map(|t| t.id.to_string())
        .collect();
    assert_eq!(
        recoverable,
        ["cancelled"],
        "parked tasks are not recoverable"
    );
    if let Some(admin) = store.admin() {
        let page = admin
            .list(&TaskQuery::new(TaskFilter::new().parked_only()))
            .await
            .unwrap();
        let mut listed: Vec<&str> = page.tasks.iter().map(|t| &*t.task.id).collect();
        listed.sort_unstable();
        assert_eq!(listed, ["asks", "naps"]);
    }
    assert_eq!(store.parked_count().await.unwrap(), Some(2));
    if store.cluster().is_some() {
        return;
    }
    // The parked tasks' owners, by id, a page at a time (what a restart holds for quotas).
    let first = store.parked_owners(None, 1).await.unwrap();
    let rest = store.parked_owners(Some(&first[0].0), 10).await.unwrap();
    let owners: Vec<(&str, &str)> = first
        .iter()
        .chain(&rest)
        .map(|(id, owner)| (&**id, &**owner))
        .collect();
    let owner = &*store.get("asks").await.unwrap().unwrap().owner;
    assert_eq!(owners, [("asks", owner), ("naps", owner)]);
    assert_eq!(store.next_wake().await.unwrap(), Some(created + 60_000));
    assert!(
        store.wake(None, 10).await.unwrap().is_empty(),
        "nothing is due"
    );
    let mut answer = InputResponses::new();
    answer.insert("k".into(), json!({ "roots": [] }));
    store.deliver_input("asks", answer.clone()).await.unwrap();
    assert_eq!(
        store.get("asks").await.unwrap().unwrap().waits_for(),
        Some("wake-up")
    );
    let woken = store.wake(Some("asks"), 1).await.unwrap();
    assert_eq!(woken.len(), 1);
    assert!(woken[0].woken && !woken[0].cancel_requested);
    assert_eq!(woken[0].woken_by_timer_ms, None, "an answer woke it");
    assert_eq!(woken[0].answers, answer);
    assert!(
        store.wake(None, 10).await.unwrap().is_empty(),
        "a task is woken once"
    );
    assert_eq!(
        store.get("asks").await.unwrap().unwrap().parked_until_ms,
        None
    );

    tokio::time::advance(Duration::from_secs(61)).await;
    let woken = store.wake(None, 10).await.unwrap();
    assert_eq!(
        woken.iter().map(|t| &*t.id).collect::<Vec<_>>(),
        ["naps"],
        "its timer"
    );
    assert_eq!(woken[0].woken_by_timer_ms, Some(created + 60_000));
    assert!(store.parked_owners(None, 10).await.unwrap().is_empty());
    assert_eq!(store.next_wake().await.unwrap(), None);

    store.create(new_task("waits", hour)).await.unwrap();
    park("waits", Wait::until(u64::MAX / 4)).await.unwrap();
    store.request_cancel("waits").await.unwrap();
    let woken = store.wake(Some("waits"), 1).await.unwrap();
    assert!(
        woken.len() == 1 && woken[0].cancel_requested,
        "a cancel wakes it"
    );
}

/// The ids of `ids` that `store` still holds, in order.
async fn present(store: &impl TaskStore, ids: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for id in ids {
        if store.get(id).await.unwrap().is_some() {
            found.push(id.clone());
        }
    }
    found
}

/// The bound on an owner's finished tasks ([`NewTask::max_finished_per_owner`]): an owner
/// that creates far more short tasks than its bound keeps, after each sweep, exactly its
/// newest finished ones (by creation; one without a TTL is no exception); its live task and
/// another owner's finished tasks are never removed, and the other owner is still served.
async fn finished_per_owner(store: impl TaskStore) {
    const BOUND: usize = 5;
    let task = |id: &str, owner: &str, ttl| {
        NewTask::new(Arc::from(id), Arc::from(owner), Arc::from("tool"))
            .with_ttl(ttl)
            .with_max_finished_per_owner(BOUND)
    };
    let hour = Some(Duration::from_secs(3600));
    store.create(task("bob-0", "bob", hour)).await.unwrap();
    store.finish("bob-0", Outcome::Cancelled).await.unwrap();
    store.create(task("m-live", "mallory", hour)).await.unwrap();
    store
        .create(task("m-forever", "mallory", None))
        .await
        .unwrap();
    store.finish("m-forever", Outcome::Cancelled).await.unwrap();
    let ids: Vec<String> = (0..60).map(|i| format!("m-{i:02}")).collect();
    for (i, id) in ids.iter().enumerate() {
        tokio::time::advance(Duration::from_millis(1)).await;
        store.create(task(id, "mallory", hour)).await.unwrap();
        store.finish(id, Outcome::Cancelled).await.unwrap();
        if i % 20 == 19 {
            store.expire_due().await.unwrap();
            let kept = present(&store, &ids[..=i]).await;
            assert_eq!(kept, ids[i + 1 - BOUND..=i], "after the sweep at {i}");
        }
    }
    assert!(
        store.get("m-forever").await.unwrap().is_none(),
        "the oldest finished goes"
    );
    assert!(
        store.get("m-live").await.unwrap().is_some(),
        "a live task stays"
    );
    store.create(task("bob-1", "bob", hour)).await.unwrap();
    store.expire_due().await.unwrap();
    assert_eq!(
        present(&store, &["bob-0".into(), "bob-1".into()]).await,
        ["bob-0", "bob-1"],
        "another owner is untouched and served"
    );
    assert_eq!(present(&store, &ids).await, ids[ids.len() - BOUND..]);

    // A burst: the owner creates past its bound while every task runs, a sweep finds nothing
    // finished to remove, and then the tasks end and the owner creates no more. The next
    // sweeps still trim it to its bound.
    let burst: Vec<String> = (0..12).map(|i| format!("t-{i:02}")).collect();
    for id in &burst {
        tokio::time::advance(Duration::from_millis(1)).await;
        store.create(task(id, "trent", hour)).await.unwrap();
    }
    store.expire_due().await.unwrap();
    assert_eq!(present(&store, &burst).await, burst, "live tasks all stay");
    for id in &burst {
        store.finish(id, Outcome::Cancelled).await.unwrap();
    }
    store.expire_due().await.unwrap();
    assert_eq!(
        present(&store, &burst).await,
        burst[burst.len() - BOUND..],
        "the burst is trimmed once it has ended"
    );
}

/// The creating call's trace context is stored with the task and comes back with its
/// replay data (the task's span on any instance continues it); a task created without one
/// has none.
async fn trace_context(store: impl TaskStore) {
    let trace = mcp_tasks::trace::TraceContext::parse(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        Some("vendor=x1"),
    );
    assert!(trace.is_some());
    store
        .create(new_task("traced", None).with_trace_context(trace.clone()))
        .await
        .unwrap();
    store.create(new_task("untraced", None)).await.unwrap();
    let mut recoverable = store.recoverable().await.unwrap();
    recoverable.sort_by(|a, b| a.id.cmp(&b.id));
    let contexts: Vec<_> = recoverable
        .iter()
        .map(|task| (&*task.id, task.origin.trace_context.clone()))
        .collect();
    assert_eq!(contexts, [("traced", trace), ("untraced", None)]);
}

/// Deadline arithmetic saturates (invariants 7 and 9 at the end of time): a TTL so long that
/// `createdAt + ttlMs` does not fit is a deadline that never comes; a retry within it is an
/// idempotent retry, the task never expires, and once finished it is never purged.
async fn huge_deadlines(store: impl TaskStore) {
    let forever = Some(Duration::from_millis(u64::MAX));
    let keyed = |id: &str| new_task(id, forever).with_idempotency_key(Arc::from("call-1"));
    let first = store.create(keyed("first")).await.unwrap().into_snapshot();
    assert_eq!(first.ttl_ms.map(|ttl| ttl >= i64::MAX as u64), Some(true));
    match store.create(keyed("retry")).await {
        Ok(Created::Existing(task)) => assert_eq!(&*task.id, "first"),
        other => panic!("a retry within an endless TTL answered {other:?}"),
    }
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert!(store.expire_due().await.unwrap().is_empty());
    store.finish("first", Outcome::Cancelled).await.unwrap();
    tokio::time::advance(Duration::from_secs(3600)).await;
    store.expire_due().await.unwrap();
    let task = store.get("first").await.unwrap().expect("never purged");
    assert_eq!(task.status, TaskStatus::Cancelled);
}

/// Store invariant 9 (docs/protocol.md R17 for the purged id): a create with the owner, tool
/// and idempotency key of a task created before, within that task's TTL, creates nothing and
/// answers the first task, also when the retries race each other; another owner's or tool's
/// key is another call; past the TTL, or once the first task is purged, the key starts a new
/// task.
async fn idempotent_creation(store: impl TaskStore) {
    let ttl = Some(Duration::from_secs(10));
    let keyed = |id: &str, key: &str| new_task(id, ttl).with_idempotency_key(Arc::from(key));
    let retries = futures::future::join_all(
        (0..8).map(|i| store.create(keyed(&format!("retry-{i}"), "call-1"))),
    )
    .await;
    let mut created = Vec::new();
    let mut existing = Vec::new();
    for retry in retries {
        match retry {
            Ok(Created::New(task)) => created.push(task.id.to_string()),
            Ok(Created::Existing(task)) => existing.push(task.id.to_string()),
            other => panic!("a retry failed: {other:?}"),
        }
    }
    assert_eq!(created.len(), 1, "one task for eight retries: {created:?}");
    assert!(
        existing.iter().all(|id| *id == created[0]),
        "every other retry answers the first task: {existing:?}"
    );
    let first = created.remove(0);
    for (id, owner, tool) in [("bob-1", "bob", "tool"), ("other-1", "alice", "other")] {
        store
            .create(
                NewTask::new(Arc::from(id), Arc::from(owner), Arc::from(tool))
                    .with_idempotency_key(Arc::from("call-1")),
            )
            .await
            .unwrap_or_else(|e| {
                panic!("{owner}'s {tool} with the same key is another call: {e:?}")
            });
    }
    store
        .create(new_task("unkeyed", ttl))
        .await
        .expect("a create without a key is always new");

    // A finished task still answers for its key until its TTL.
    store.create(keyed("done", "call-2")).await.unwrap();
    store.finish("done", Outcome::Cancelled).await.unwrap();
    tokio::time::advance(Duration::from_millis(9_999)).await;
    for (retry, key, answer) in [("late-1", "call-1", &*first), ("late-2", "call-2", "done")] {
        match store.create(keyed(retry, key)).await {
            Ok(Created::Existing(task)) => assert_eq!(&*task.id, answer),
            other => panic!("a retry within the TTL answered {other:?}"),
        }
    }
    assert!(
        store.get("late-1").await.unwrap().is_none(),
        "nothing created"
    );

    // Past the TTL: the first task expired (kept as `failed`), the finished one purged; both
    // keys start new tasks, which then answer for them.
    tokio::time::advance(Duration::from_millis(2)).await;
    store.expire_due().await.unwrap();
    assert!(
        store.get("done").await.unwrap().is_none(),
        "purged at its TTL"
    );
    for (id, key) in [("again-1", "call-1"), ("again-2", "call-2")] {
        match store.create(keyed(id, key)).await {
            Ok(Created::New(task)) => assert_eq!(&*task.id, id),
            other => panic!("past the TTL {key} is a new call: {other:?}"),
        }
        match store.create(keyed(&format!("{id}-retry"), key)).await {
            Ok(Created::Existing(task)) => assert_eq!(&*task.id, id),
            other => panic!("a retry of the new call answered {other:?}"),
        }
    }
    assert_eq!(
        store.get(&first).await.unwrap().unwrap().status,
        TaskStatus::Failed,
        "the expired first task stays readable"
    );
}

/// Replay data: answers and steps stay with a running task (also as `stored_answers`);
/// re-asking an outstanding key is a no-op; recoverable lists exactly the running tasks.
async fn replay_data(store: impl TaskStore) {
    store
        .create(new_task("run", None).with_arguments(object(json!({ "n": 3 }))))
        .await
        .unwrap();
    store.create(new_task("ended", None)).await.unwrap();
    store.finish("ended", Outcome::Cancelled).await.unwrap();
    store
        .request_input("run", "k1", roots_request())
        .await
        .unwrap();
    store
        .request_input("run", "k1", roots_request())
        .await
        .unwrap();
    let mut answer = InputResponses::new();
    answer.insert("k1".into(), json!({ "roots": [] }));
    store.deliver_input("run", answer.clone()).await.unwrap();
    store
        .save_step("run", Step::new(1, "fetch", json!({ "rows": 7 })))
        .await
        .unwrap();
    let recoverable = store.recoverable().await.unwrap();
    assert_eq!(recoverable.len(), 1, "only running tasks");
    let task = &recoverable[0];
    assert_eq!(&*task.id, "run");
    assert_eq!(&*task.owner, "alice");
    assert_eq!(task.origin.arguments, object(json!({ "n": 3 })));
    assert_eq!(task.answers, answer);
    assert_eq!(store.stored_answers("run").await.unwrap(), answer);
    assert!(store.stored_answers("ended").await.unwrap().is_empty());
    assert!(matches!(
        store.stored_answers("unknown").await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(
        task.steps,
        vec![Step::new(1, "fetch", json!({ "rows": 7 }))]
    );
    assert!(matches!(
        store
            .save_step("ended", Step::new(1, "x", json!(null)))
            .await,
        Err(StoreError::Terminal(TaskStatus::Cancelled))
    ));
}

/// R10: create returns only once get succeeds; the seed is `working`; ids are unique.
async fn create_then_get(store: impl TaskStore) {
    let created = store
        .create(new_task("a", None))
        .await
        .unwrap()
        .into_snapshot();
    assert_eq!(created.status, TaskStatus::Working);
    let got = store
        .get("a")
        .await
        .unwrap()
        .expect("R10: visible right after create");
    assert_eq!(got, created);
    assert_eq!(&*got.owner, "alice");
    assert_eq!(got.ttl_ms, None, "unlimited ttl is ttlMs: null");
    assert_eq!(got.poll_interval_ms, Some(500));
    assert!(store.get("missing").await.unwrap().is_none());
    // Several at once: in the order asked, `None` for an unknown id.
    let ids: [Arc<str>; 3] = [Arc::from("a"), Arc::from("missing"), Arc::from("a")];
    assert_eq!(
        store.get_many(&ids).await.unwrap(),
        [Some(created.clone()), None, Some(created.clone())]
    );
    assert!(store.get_many(&[]).await.unwrap().is_empty());
    assert!(matches!(
        store.create(new_task("a", None)).await,
        Err(StoreError::DuplicateId)
    ));
}

/// R56: working ↔ input_required → one terminal state that never changes.
async fn state_machine(store: impl TaskStore) {
    store.create(new_task("t", None)).await.unwrap();
    store
        .request_input("t", "k1", roots_request())
        .await
        .unwrap();
    assert_eq!(
        store.get("t").await.unwrap().unwrap().status,
        TaskStatus::InputRequired
    );
    let mut answer = InputResponses::new();
    answer.insert("k1".into(), json!({ "roots": [] }));
    store.deliver_input("t", answer).await.unwrap();
    assert_eq!(
        store.get("t").await.unwrap().unwrap().status,
        TaskStatus::Working
    );

    // Numbers must come back exactly, whatever form the store keeps the result in.
    let result = object(json!({ "content": [], "isError": false,
        "structuredContent": { "x": 0.30000000000000004, "big": 1e300, "tiny": 5e-324, "n": -7 } }));
    store
        .finish("t", Outcome::Completed(result.clone()))
        .await
        .unwrap();
    let done = store.get("t").await.unwrap().unwrap();
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(done.outcome, Some(Outcome::Completed(result)));
    for attempt in [
        store.finish("t", Outcome::Cancelled).await,
        store.set_status_message("t", Some("late".into())).await,
        store.request_input("t", "k2", roots_request()).await,
    ] {
        assert!(
            matches!(attempt, Err(StoreError::Terminal(TaskStatus::Completed))),
            "{attempt:?}"
        );
    }
    assert_eq!(
        store.get("t").await.unwrap().unwrap(),
        done,
        "terminal state is stable"
    );
    assert!(
        store
            .get("t")
            .await
            .unwrap()
            .unwrap()
            .input_requests
            .is_empty()
    );
    assert!(matches!(
        store.finish("nope", Outcome::Cancelled).await,
        Err(StoreError::NotFound)
    ));
}

/// R57: lastUpdatedAt moves on every change (even within one millisecond); createdAt never.
async fn timestamps(store: impl TaskStore) {
    let created = store
        .create(new_task("t", None))
        .await
        .unwrap()
        .into_snapshot();
    let mut last = created.last_updated_at_ms;
    for i in 0..3 {
        store
            .set_status_message("t", Some(format!("step {i}")))
            .await
            .unwrap();
        let now = store.get("t").await.unwrap().unwrap();
        assert!(now.last_updated_at_ms > last, "R57");
        assert_eq!(now.created_at_ms, created.created_at_ms, "R57");
        last = now.last_updated_at_ms;
    }
    tokio::time::advance(Duration::from_secs(5)).await;
    store.finish("t", Outcome::Cancelled).await.unwrap();
    let done = store.get("t").await.unwrap().unwrap();
    assert!(done.last_updated_at_ms >= created.created_at_ms + 5000);
    assert_eq!(done.created_at_ms, created.created_at_ms);
}

/// R26, R27, R28: keys unique for the task's life; unknown/answered keys ignored; subsets ok.
async fn input_keys(store: impl TaskStore) {
    store.create(new_task("t", None)).await.unwrap();
    store
        .request_input("t", "a", roots_request())
        .await
        .unwrap();
    store
        .request_input("t", "b", roots_request())
        .await
        .unwrap();
    let before = store.get("t").await.unwrap().unwrap();
    store
        .request_input("t", "a", roots_request())
        .await
        .expect("re-asking an outstanding key (a replay) is a no-op");
    assert_eq!(store.get("t").await.unwrap().unwrap(), before);
    let mut partial = InputResponses::new();
    partial.insert("a".into(), json!({ "roots": [] }));
    partial.insert("never".into(), json!({}));
    let accepted = store.deliver_input("t", partial.clone()).await.unwrap();
    assert_eq!(
        accepted.keys().collect::<Vec<_>>(),
        ["a"],
        "R26: unknown keys ignored"
    );
    let snapshot = store.get("t").await.unwrap().unwrap();
    assert_eq!(snapshot.status, TaskStatus::InputRequired, "R27");
    assert_eq!(snapshot.input_requests.keys().collect::<Vec<_>>(), ["b"]);
    let again = store.deliver_input("t", partial).await.unwrap();
    assert!(again.is_empty(), "R26: an answered key is ignored");
    assert!(
        matches!(
            store.request_input("t", "a", roots_request()).await,
            Err(StoreError::KeyReused(_))
        ),
        "R28: no reuse after an answer"
    );
}

/// Cancel intent is recorded and acknowledged on terminal tasks too (R35, R37).
async fn cancel_intent(store: impl TaskStore) {
    store.create(new_task("t", None)).await.unwrap();
    store.request_cancel("t").await.unwrap();
    let snapshot = store.get("t").await.unwrap().unwrap();
    assert!(snapshot.cancel_requested);
    assert_eq!(
        snapshot.status,
        TaskStatus::Working,
        "cancel does not change the status"
    );
    store.finish("t", Outcome::Cancelled).await.unwrap();
    store.request_cancel("t").await.unwrap();
    assert!(matches!(
        store.request_cancel("nope").await,
        Err(StoreError::NotFound)
    ));
}

/// R20, R17: a live task past its TTL fails ("task expired"), both on read and by the sweep;
/// a terminal task is purged at its TTL; purged ids read as unknown.
async fn expiry(store: impl TaskStore) {
    let ttl = Some(Duration::from_secs(10));
    store.create(new_task("live", ttl)).await.unwrap();
    store.create(new_task("swept", ttl)).await.unwrap();
    store.create(new_task("done", ttl)).await.unwrap();
    store.create(new_task("forever", None)).await.unwrap();
    store.finish("done", Outcome::Cancelled).await.unwrap();

    tokio::time::advance(Duration::from_millis(9_999)).await;
    assert!(
        store.expire_due().await.unwrap().is_empty(),
        "nothing expires early"
    );
    assert_eq!(
        store.get("live").await.unwrap().unwrap().status,
        TaskStatus::Working
    );

    tokio::time::advance(Duration::from_millis(2)).await;
    // A read of several applies expiry and purge that are due, as one read does.
    let many = store
        .get_many(&[Arc::from("live"), Arc::from("done")])
        .await
        .unwrap();
    assert_eq!(
        many.iter()
            .map(|task| task.as_ref().map(|task| task.status))
            .collect::<Vec<_>>(),
        [Some(TaskStatus::Failed), None]
    );
    let live = store.get("live").await.unwrap().unwrap();
    assert_eq!(live.status, TaskStatus::Failed, "expiry applies on read");
    let Some(Outcome::Failed(error)) = &live.outcome else {
        panic!("{live:?}")
    };
    assert_eq!(error["message"], "task expired");
    let swept = store.expire_due().await.unwrap();
    assert_eq!(swept.iter().map(|id| &**id).collect::<Vec<_>>(), ["swept"]);
    assert!(
        store.get("done").await.unwrap().is_none(),
        "terminal task purged at its TTL"
    );
    assert!(matches!(
        store.finish("swept", Outcome::Cancelled).await,
        Err(StoreError::Terminal(TaskStatus::Failed))
    ));

    tokio::time::advance(Duration::from_secs(3600)).await;
    store.expire_due().await.unwrap();
    assert!(
        store.get("live").await.unwrap().is_none(),
        "expired task purged after retention"
    );
    assert!(store.get("swept").await.unwrap().is_none());
    assert!(
        store.get("forever").await.unwrap().is_some(),
        "ttlMs: null never expires"
    );
}

/// Store invariants 4 and 6 for [`NewTask::answers`]: the answers a task is created with are
/// replay data from the create on, and their keys count as used. Every store keeps it.
async fn created_with_answers(store: impl TaskStore) {
    let mut answers = InputResponses::new();
    answers.insert("elicit-1".into(), json!({ "action": "accept" }));
    store
        .create(new_task("t", None).with_answers(answers.clone()))
        .await
        .unwrap();
    assert_eq!(store.stored_answers("t").await.unwrap(), answers);
    assert_eq!(store.recoverable().await.unwrap()[0].answers, answers);
    assert!(matches!(
        store.request_input("t", "elicit-1", roots_request()).await,
        Err(StoreError::KeyReused(key)) if key == "elicit-1"
    ));
    let snapshot = store.get("t").await.unwrap().unwrap();
    assert_eq!(snapshot.status, TaskStatus::Working);
    assert!(snapshot.input_requests.is_empty());
}

#[tokio::test(start_paused = true)]
async fn memory_store_keeps_the_contract() {
    contract(MemoryStore::new).await;
    created_with_answers(MemoryStore::new()).await;
}

#[path = "support/postgres.rs"]
mod pg;

/// Every check on a schema of its own; the stores connect before time is paused
/// ([`pg::Db::stores`]).
#[tokio::test]
async fn postgres_store_keeps_the_contract() {
    let Some((_dbs, stores)) = pg::Db::stores(15).await else {
        return;
    };
    tokio::time::pause();
    let stores = std::sync::Mutex::new(stores);
    contract(|| stores.lock().unwrap().pop().expect("a store per check")).await;
    let last = stores
        .lock()
        .unwrap()
        .pop()
        .expect("a store for the answers");
    created_with_answers(last).await;
}

#[path = "support/temp_db.rs"]
mod temp_db;
#[path = "support/writes.rs"]
mod writes;
use temp_db::TempDb;
use writes::Writes;

#[tokio::test(start_paused = true)]
async fn sqlite_store_keeps_the_contract() {
    let files = std::sync::Mutex::new(Vec::new());
    contract(|| {
        let db = TempDb::new("contract");
        let store = SqliteStore::open(&db.0).expect("open a fresh database");
        files.lock().unwrap().push(db);
        store
    })
    .await;
    let db = TempDb::new("answers");
    created_with_answers(SqliteStore::open(&db.0).expect("open a fresh database")).await;
}

/// A large bound on SQLite and Postgres, where a trim reads the owner's whole bound from an
/// index: an owner that creates one task a sweep is not trimmed at every sweep, but once it
/// created a sixteenth of its bound since its last trim; it never holds more than that past
/// its bound, and a trim keeps its newest finished tasks.
async fn a_large_bound_waits_for_a_worthwhile_trim(store: impl TaskStore) {
    const BOUND: usize = 64;
    let ids: Vec<String> = (0..BOUND + 12).map(|i| format!("o-{i:03}")).collect();
    let mut held = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        tokio::time::advance(Duration::from_millis(1)).await;
        let task = NewTask::new(Arc::from(id.as_str()), Arc::from("olga"), Arc::from("tool"))
            .with_ttl(Some(Duration::from_secs(3600)))
            .with_max_finished_per_owner(BOUND);
        store.create(task).await.unwrap();
        store.finish(id, Outcome::Cancelled).await.unwrap();
        if i + 1 >= BOUND {
            store.expire_due().await.unwrap();
            let kept = present(&store, &ids[..=i]).await;
            if kept.len() == BOUND {
                assert_eq!(kept, ids[i + 1 - BOUND..=i], "a trim keeps the newest");
            }
            held.push(kept.len());
        }
    }
    assert!(
        held.iter().all(|&n| n <= BOUND + BOUND / 16),
        "at most a sixteenth past the bound: {held:?}"
    );
    assert!(
        held.iter().any(|&n| n > BOUND),
        "not trimmed at every sweep: {held:?}"
    );
    assert!(
        held.iter().filter(|&&n| n == BOUND).count() > 1,
        "but trimmed: {held:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn sqlite_store_waits_for_a_worthwhile_trim() {
    let db = TempDb::new("large-bound");
    a_large_bound_waits_for_a_worthwhile_trim(SqliteStore::open(&db.0).unwrap()).await;
}

/// [`a_large_bound_waits_for_a_worthwhile_trim`] on Postgres.
#[tokio::test]
async fn postgres_store_waits_for_a_worthwhile_trim() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let store = db.store().await.expect("connect");
    tokio::time::pause();
    a_large_bound_waits_for_a_worthwhile_trim(store).await;
}

/// The bound on an owner's finished tasks after a restart: a burst created past the bound
/// before the file was closed, and ended after it was reopened, before any create brought
/// the bound, is trimmed at the sweep after the first create (of any owner).
#[tokio::test(start_paused = true)]
async fn sqlite_store_trims_a_burst_that_ends_after_reopening() {
    const BOUND: usize = 5;
    let db = TempDb::new("burst-reopen");
    let task = |id: &str, owner: &str| {
        NewTask::new(Arc::from(id), Arc::from(owner), Arc::from("tool"))
            .with_ttl(Some(Duration::from_secs(3600)))
            .with_max_finished_per_owner(BOUND)
    };
    let burst: Vec<String> = (0..12).map(|i| format!("t-{i:02}")).collect();
    {
        let store = SqliteStore::open(&db.0).unwrap();
        for id in &burst {
            tokio::time::advance(Duration::from_millis(1)).await;
            store.create(task(id, "trent")).await.unwrap();
        }
    }
    // Reopened (a restart): the burst ends before any create has carried a bound.
    let store = SqliteStore::open(&db.0).unwrap();
    for id in &burst {
        store.finish(id, Outcome::Cancelled).await.unwrap();
    }
    store.expire_due().await.unwrap();
    store.create(task("b-0", "bob")).await.unwrap();
    store.expire_due().await.unwrap();
    assert_eq!(
        present(&store, &burst).await,
        burst[burst.len() - BOUND..],
        "trimmed once a create brings the bound"
    );
}

/// The bound a runtime tells its store at start-up
/// ([`TaskStore::set_max_finished_per_owner`]), from the rows: `first` finished tasks of
/// three owners (one of them named by the empty string) under a bound of 10 that its sweep
/// never trimmed, and was dropped; `second`, over the same tasks, is told a bound of 3, and
/// its next sweep trims every owner past it without any create, and no other.
async fn told_bound(first: impl TaskStore, second: impl TaskStore) {
    const BOUND: usize = 3;
    let task = |id: &str, owner: &str| {
        NewTask::new(Arc::from(id), Arc::from(owner), Arc::from("tool"))
            .with_ttl(Some(Duration::from_secs(3600)))
            .with_max_finished_per_owner(10)
    };
    let mut all = Vec::new();
    for (owner, count) in [("", 5), ("trent", 8), ("bob", 2)] {
        for i in 0..count {
            let id = format!("{owner}-{i}");
            tokio::time::advance(Duration::from_millis(1)).await;
            first.create(task(&id, owner)).await.unwrap();
            first.finish(&id, Outcome::Cancelled).await.unwrap();
            all.push(id);
        }
    }
    drop(first);
    second.set_max_finished_per_owner(BOUND);
    second.expire_due().await.unwrap();
    let kept = [
        "-2", "-3", "-4", "trent-5", "trent-6", "trent-7", "bob-0", "bob-1",
    ];
    assert_eq!(present(&second, &all).await, kept);
}

#[tokio::test(start_paused = true)]
async fn sqlite_store_trims_to_the_bound_told_at_start_up() {
    let db = TempDb::new("told-bound");
    let open = || SqliteStore::open(&db.0).unwrap();
    told_bound(open(), open()).await;
}

/// [`told_bound`] across two stores (instances) over one Postgres task space; they connect
/// before time is paused.
#[tokio::test]
async fn postgres_store_trims_to_the_bound_told_at_start_up() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let first = db.store().await.expect("connect");
    let second = db.store().await.expect("connect");
    tokio::time::pause();
    told_bound(first, second).await;
}

/// An owner far past the bound (one lowered at a restart) is trimmed over several sweeps,
/// each removing at most 1,000 of its tasks, oldest first: `first` finished 1,010 of one
/// owner's tasks under a bound of 2,000; `second`, told a bound of 3, keeps the newest 10
/// after its first sweep and the newest 3 after its second.
async fn trimmed_in_bounded_sweeps(first: impl TaskStore, second: impl TaskStore) {
    let ids: Vec<String> = (0..1_010).map(|i| format!("t-{i:04}")).collect();
    for id in &ids {
        let task = NewTask::new(
            Arc::from(id.as_str()),
            Arc::from("trent"),
            Arc::from("tool"),
        )
        .with_ttl(Some(Duration::from_secs(3600)))
        .with_max_finished_per_owner(2_000);
        tokio::time::advance(Duration::from_millis(1)).await;
        first.create(task).await.unwrap();
        first.finish(id, Outcome::Cancelled).await.unwrap();
    }
    drop(first);
    second.set_max_finished_per_owner(3);
    second.expire_due().await.unwrap();
    assert_eq!(present(&second, &ids).await, ids[1_000..], "a first sweep");
    second.expire_due().await.unwrap();
    assert_eq!(present(&second, &ids).await, ids[1_007..], "and the next");
}

#[tokio::test(start_paused = true)]
async fn sqlite_store_trims_far_past_the_bound_in_bounded_sweeps() {
    let db = TempDb::new("bounded-trims");
    let open = || SqliteStore::open(&db.0).unwrap();
    trimmed_in_bounded_sweeps(open(), open()).await;
}

/// [`trimmed_in_bounded_sweeps`] across two Postgres instances.
#[tokio::test]
async fn postgres_store_trims_far_past_the_bound_in_bounded_sweeps() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let first = db.store().await.expect("connect");
    let second = db.store().await.expect("connect");
    tokio::time::pause();
    trimmed_in_bounded_sweeps(first, second).await;
}

/// The passes over every owner that come due after a start's (`with_trim_pass_every`) are
/// made by one instance an interval: `a` and `b` share a database and both repeat every
/// second; once due, `a` makes the first and trims what a third instance left past the
/// bound. `b`'s pass, due too, waits for its turn (its owner stays past the bound), and is
/// made once the interval since `a`'s has gone by.
#[tokio::test]
async fn postgres_instances_take_turns_at_the_passes_over_every_owner() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let every = Duration::from_secs(1);
    let instance = || db.builder().with_trim_pass_every(every).connect();
    let (a, b) = (instance().await.unwrap(), instance().await.unwrap());
    let other = db.store().await.expect("connect");
    for store in [&a, &b] {
        store.set_max_finished_per_owner(3);
        store.expire_due().await.unwrap();
    }
    let leave = |owner: &'static str| {
        let other = &other;
        async move {
            let ids: Vec<String> = (0..6).map(|i| format!("{owner}-{i}")).collect();
            for id in &ids {
                let task = NewTask::new(Arc::from(id.as_str()), Arc::from(owner), Arc::from("t"))
                    .with_ttl(Some(Duration::from_secs(3600)));
                other.create(task).await.unwrap();
                other.finish(id, Outcome::Cancelled).await.unwrap();
            }
            ids
        }
    };
    tokio::time::sleep(every + Duration::from_millis(100)).await;
    let xavier = leave("xavier").await;
    a.expire_due().await.unwrap();
    assert_eq!(present(&a, &xavier).await, xavier[3..], "a's turn");
    let yolanda = leave("yolanda").await;
    b.expire_due().await.unwrap();
    assert_eq!(present(&b, &yolanda).await, yolanda, "b waits for its turn");
    tokio::time::sleep(every + Duration::from_millis(100)).await;
    b.expire_due().await.unwrap();
    assert_eq!(present(&b, &yolanda).await, yolanda[3..], "b's turn");
}

/// Everything survives closing and reopening the file: running tasks with their arguments,
/// answers and steps; finished tasks byte for byte.
#[tokio::test]
async fn sqlite_store_survives_reopening() {
    let db = TempDb::new("reopen");
    let result =
        object(json!({ "content": [{ "type": "text", "text": "done" }], "isError": false }));
    let (done_before, running_before) = {
        let store = SqliteStore::open(&db.0).unwrap();
        store
            .create(
                new_task("done", Some(Duration::from_secs(3600)))
                    .with_idempotency_key(Arc::from("call-1")),
            )
            .await
            .unwrap();
        store
            .finish("done", Outcome::Completed(result.clone()))
            .await
            .unwrap();
        store
            .create(
                new_task("running", None)
                    .with_arguments(object(json!({ "q": "x" })))
                    .with_request_meta(object(
                        json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28" }),
                    )),
            )
            .await
            .unwrap();
        store
            .set_status_message("running", Some("step 1".into()))
            .await
            .unwrap();
        store
            .save_step("running", Step::new(1, "one", json!([1, 2])))
            .await
            .unwrap();
        store.request_cancel("running").await.unwrap();
        (
            store.get("done").await.unwrap().unwrap(),
            store.get("running").await.unwrap().unwrap(),
        )
    };
    let page_size: i64 = rusqlite::Connection::open(&db.0)
        .unwrap()
        .pragma_query_value(None, "page_size", |r| r.get(0))
        .unwrap();
    assert_eq!(page_size, 8192, "a new file is made with 8 KiB pages");
    let store = SqliteStore::open(&db.0).unwrap();
    assert_eq!(store.get("done").await.unwrap().unwrap(), done_before);
    assert_eq!(store.get("running").await.unwrap().unwrap(), running_before);
    // A client that retries its call after the restart gets the same task (invariant 9).
    match store
        .create(new_task("retry", None).with_idempotency_key(Arc::from("call-1")))
        .await
    {
        Ok(Created::Existing(task)) => assert_eq!(task, done_before),
        other => panic!("a retry after reopening answered {other:?}"),
    }
    let recoverable = store.recoverable().await.unwrap();
    assert_eq!(recoverable.len(), 1);
    assert_eq!(
        recoverable[0].steps,
        vec![Step::new(1, "one", json!([1, 2]))]
    );
    assert_eq!(
        recoverable[0].origin.request_meta,
        object(json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28" }))
    );
}

/// A file written by a newer schema is refused with a message, and left untouched.
/// A status this build does not know, written behind the store's back, is an error, never
/// read as some other status (such as `cancelled`).
#[tokio::test]
async fn sqlite_store_refuses_an_unknown_status() {
    let db = TempDb::new("unknown-status");
    let store = SqliteStore::open(&db.0).unwrap();
    store.create(new_task("odd", None)).await.unwrap();
    rusqlite::Connection::open(&db.0)
        .unwrap()
        .execute("UPDATE tasks SET status = 'paused' WHERE id = 'odd'", [])
        .unwrap();
    for result in [
        store.get("odd").await.map(drop),
        store.request_cancel("odd").await,
    ] {
        let error = result.expect_err("an unknown status is not read");
        let text = format!("{error}: {:?}", std::error::Error::source(&error));
        assert!(matches!(error, StoreError::Backend(_)), "{text}");
        assert!(text.contains("unknown task status `paused`"), "{text}");
    }
}

#[tokio::test]
async fn sqlite_store_refuses_a_newer_schema() {
    let db = TempDb::new("newer");
    drop(SqliteStore::open(&db.0).unwrap());
    {
        let conn = rusqlite::Connection::open(&db.0).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
    }
    let error = SqliteStore::open(&db.0).unwrap_err();
    let message = format!(
        "{error}: {}",
        std::error::Error::source(&error)
            .map(ToString::to_string)
            .unwrap_or_default()
    );
    assert!(message.contains("schema version 99"), "{message}");
    assert!(
        matches!(error, StoreError::Config(_)),
        "a newer file is a configuration error, not a backend failure: {error:?}"
    );
    assert!(!error.is_retryable());
}

/// A file of schema 1 (three indexes; a finished task without a TTL had a NULL purge time)
/// is migrated to schema 2 in place: every task reads as before, and recovery finds exactly
/// the live ones.
#[tokio::test]
async fn sqlite_store_migrates_schema_1() {
    let db = TempDb::new("schema1");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    {
        // As the first release wrote it.
        let conn = rusqlite::Connection::open(&db.0).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch(
            "CREATE TABLE tasks (
                id TEXT PRIMARY KEY, owner TEXT NOT NULL, tool TEXT NOT NULL,
                tool_version TEXT NOT NULL, status TEXT NOT NULL, status_message TEXT,
                created_at_ms INTEGER NOT NULL, last_updated_at_ms INTEGER NOT NULL,
                ttl_ms INTEGER, poll_interval_ms INTEGER, arguments TEXT NOT NULL,
                request_meta TEXT NOT NULL, input_requests TEXT NOT NULL, used_keys TEXT NOT NULL,
                answers TEXT NOT NULL, outcome TEXT, cancel_requested INTEGER NOT NULL,
                deadline_ms INTEGER, purge_at_ms INTEGER
            ) WITHOUT ROWID;
            CREATE INDEX tasks_live_deadline ON tasks (deadline_ms)
                WHERE purge_at_ms IS NULL AND deadline_ms IS NOT NULL;
            CREATE INDEX tasks_purge ON tasks (purge_at_ms) WHERE purge_at_ms IS NOT NULL;
            CREATE INDEX tasks_live ON tasks (status) WHERE status IN ('working', 'input_required');
            CREATE TABLE steps (
                task_id TEXT NOT NULL, seq INTEGER NOT NULL, name TEXT NOT NULL,
                value TEXT NOT NULL, PRIMARY KEY (task_id, seq)
            ) WITHOUT ROWID;
            PRAGMA user_version = 1;",
        )
        .unwrap();
        let done = r#"{"completed":{"content":[{"type":"text","text":"done"}],"isError":false}}"#;
        let hour = 3_600_000i64;
        for (id, status, ttl, outcome, purge) in [
            ("live-ttl", "working", Some(hour), None, None),
            ("live-forever", "input_required", None, None, None),
            (
                "done-ttl",
                "completed",
                Some(hour),
                Some(done),
                Some(now + hour),
            ),
            ("done-forever", "completed", None, Some(done), None),
        ] {
            conn.execute(
                "INSERT INTO tasks VALUES (?1, 'owner', 'tool', '1', ?2, NULL, ?3, ?3, ?4, 1000, \
                 '{}', '{}', '{}', '[]', '{}', ?5, 0, ?6, ?7)",
                rusqlite::params![id, status, now, ttl, outcome, ttl.map(|t| now + t), purge],
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO steps VALUES ('live-ttl', 1, 'one', '[1,2]')",
            [],
        )
        .unwrap();
    }

    let store = SqliteStore::open(&db.0).expect("migrate schema 1");
    for (id, status) in [
        ("live-ttl", TaskStatus::Working),
        ("live-forever", TaskStatus::InputRequired),
        ("done-ttl", TaskStatus::Completed),
        ("done-forever", TaskStatus::Completed),
    ] {
        let task = store.get(id).await.unwrap().expect(id);
        assert_eq!(task.status, status, "{id}");
    }
    let mut live: Vec<_> = store
        .recoverable()
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.id.to_string(), r.steps))
        .collect();
    live.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        live,
        vec![
            ("live-forever".to_owned(), vec![]),
            (
                "live-ttl".to_owned(),
                vec![Step::new(1, "one", json!([1, 2]))]
            ),
        ]
    );
    // Schema 3 on the migrated file: idempotency keys, freed with the task they name. The
    // TTL leaves a loaded machine time for the retry to come within it.
    let keyed = |id: &str| {
        new_task(id, Some(Duration::from_millis(400))).with_idempotency_key(Arc::from("call-1"))
    };
    store.create(keyed("keyed")).await.unwrap();
    assert!(matches!(
        store.create(keyed("keyed-retry")).await,
        Ok(Created::Existing(task)) if &*task.id == "keyed"
    ));
    store.finish("keyed", Outcome::Cancelled).await.unwrap();
    tokio::time::sleep(Duration::from_millis(410)).await;
    store.expire_due().await.unwrap();
    assert!(
        store.get("keyed").await.unwrap().is_none(),
        "purged at its TTL"
    );
    drop(store);

    let conn = rusqlite::Connection::open(&db.0).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, mcp_tasks::store::sqlite::SCHEMA_VERSION);
    let keys: i64 = conn
        .query_row("SELECT count(*) FROM idempotency", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        keys, 0,
        "a purged task's idempotency key is deleted with it"
    );
    let indexes: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'tasks' AND sql IS NOT NULL")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        indexes,
        ["tasks_purge", "tasks_owner_finished", "tasks_parked"],
        "finished tasks by expiry, by owner for the bound on an owner's finished tasks, and \
         parked tasks by wake-up time (none of them written by a create)"
    );
    // An existing file keeps its page size (SQLite's default when it was made).
    let page_size: i64 = conn
        .pragma_query_value(None, "page_size", |r| r.get(0))
        .unwrap();
    assert_eq!(page_size, 4096);
}

/// Recovery finds every live task after reopening, whatever its id. The file indexes no
/// live task; recovery scans from a bound (`meta.live_from`) that the store raises as tasks
/// finish and lowers when a task is created below it.
#[tokio::test]
async fn sqlite_recovery_finds_every_live_task() {
    async fn churn(store: &SqliteStore, prefix: &str) {
        for i in 0..300 {
            let id = format!("{prefix}-{i:04}");
            store
                .create(new_task(&id, Some(Duration::from_secs(3600))))
                .await
                .unwrap();
            store.finish(&id, Outcome::Cancelled).await.unwrap();
        }
    }
    let live_from = |db: &TempDb| -> String {
        rusqlite::Connection::open(&db.0)
            .unwrap()
            .query_row("SELECT value FROM meta WHERE name = 'live_from'", [], |r| {
                r.get(0)
            })
            .unwrap()
    };
    let db = TempDb::new("live-from");
    {
        let store = SqliteStore::open(&db.0).unwrap();
        store.create(new_task("m-live", None)).await.unwrap();
        churn(&store, "n").await;
        // Raised to the oldest live task, not past it.
        assert_eq!(live_from(&db), "m-live");
        store.finish("m-live", Outcome::Cancelled).await.unwrap();
        churn(&store, "z").await;
        // Nothing live: raised past the finished ones (to the newest task at the time).
        let bound = live_from(&db);
        assert!(bound.starts_with("z-"), "{bound}");
        // Below the bound: the create lowers it in the same transaction.
        store.create(new_task("a-late", None)).await.unwrap();
        assert_eq!(live_from(&db), "a-late");
        store
            .create(new_task("zz-live", Some(Duration::from_secs(3600))))
            .await
            .unwrap();
    }
    let store = SqliteStore::open(&db.0).unwrap();
    let mut live: Vec<String> = store
        .recoverable()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id.to_string())
        .collect();
    live.sort();
    assert_eq!(live, ["a-late", "zz-live"]);
}

/// At capacity, create fails and no task is evicted; a purge frees room.
#[tokio::test(start_paused = true)]
async fn memory_store_capacity() {
    let store = MemoryStore::new().with_max_tasks(2);
    store
        .create(new_task("a", Some(Duration::from_secs(1))))
        .await
        .unwrap();
    store.create(new_task("b", None)).await.unwrap();
    assert!(matches!(
        store.create(new_task("c", None)).await,
        Err(StoreError::Full { max_tasks: 2 })
    ));
    assert!(store.get("a").await.unwrap().is_some() && store.get("b").await.unwrap().is_some());
    store.finish("a", Outcome::Cancelled).await.unwrap();
    tokio::time::advance(Duration::from_secs(2)).await;
    store.expire_due().await.unwrap();
    store.create(new_task("c", None)).await.unwrap();
    assert_eq!(store.len(), 2);
}

/// Capacity, the same for every store: `limit` tasks at most, live or finished (a finished
/// task counts until it is purged, by the sweep or by a read); one more is
/// `StoreError::Full { max_tasks }` and changes nothing; a purge makes room. No task is
/// evicted. Time must be paused.
async fn capacity(store: impl TaskStore, limit: usize) {
    assert!(limit >= 3, "the check needs room for three tasks");
    let ttl = Some(Duration::from_secs(10));
    let ids: Vec<String> = (0..limit).map(|i| format!("t{i}")).collect();
    for (i, id) in ids.iter().enumerate() {
        // t0 and t1 expire; the others never do.
        let ttl = if i < 2 { ttl } else { None };
        store.create(new_task(id, ttl)).await.unwrap();
    }
    let full = |result: Result<_, StoreError>| match result {
        Err(
            error @ StoreError::Full {
                max_tasks: capacity,
            },
        ) => {
            assert_eq!(capacity, limit);
            assert_eq!(
                error.to_string(),
                format!(
                    "the task store is full ({limit} tasks): retry once tasks finish and \
                     expire, or raise its limit"
                )
            );
        }
        other => panic!("expected StoreError::Full, got {other:?}"),
    };
    full(store.create(new_task("over", None)).await);
    assert!(
        store.get("over").await.unwrap().is_none(),
        "nothing created"
    );
    for id in &ids {
        let task = store.get(id).await.unwrap().expect("no task evicted");
        assert_eq!(task.status, TaskStatus::Working);
    }
    // A finished task still counts.
    store.finish("t1", Outcome::Cancelled).await.unwrap();
    full(store.create(new_task("over", None)).await);

    // At t1's TTL the sweep purges it (terminal) and expires t0 (which still counts).
    tokio::time::advance(Duration::from_millis(10_001)).await;
    store.expire_due().await.unwrap();
    store.create(new_task("after-sweep", None)).await.unwrap();
    full(store.create(new_task("over", None)).await);

    // After the retention for expired tasks, a read purges t0: room for one more.
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert!(store.get("t0").await.unwrap().is_none(), "t0 purged");
    store.create(new_task("after-read", None)).await.unwrap();
    full(store.create(new_task("over", None)).await);
}

#[tokio::test(start_paused = true)]
async fn memory_store_capacity_contract() {
    capacity(MemoryStore::new().with_max_tasks(3), 3).await;
}

#[tokio::test(start_paused = true)]
async fn sqlite_store_capacity_contract() {
    let db = TempDb::new("capacity");
    capacity(SqliteStore::open(&db.0).unwrap().with_max_tasks(3), 3).await;
    // The limit counts what the file holds, also across a reopen.
    let store = SqliteStore::open(&db.0).unwrap().with_max_tasks(3);
    assert!(matches!(
        store.create(new_task("reopened", None)).await,
        Err(StoreError::Full { max_tasks: 3 })
    ));
    let store = store.with_max_tasks(4);
    store.create(new_task("reopened", None)).await.unwrap();
}
