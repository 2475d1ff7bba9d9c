//! Task status pushed across instances (issue 22, "Every instance"): three engines on one
//! Postgres schema, each served over Streamable HTTP on 127.0.0.1, listen streams on every
//! instance, and the work of each task running on one of them. Every listener sees every
//! change of its tasks (each status, status message, input request, answer and the end with
//! its result), in order, exactly once, and nothing after the end, whichever instance ran
//! the work; the changes reach the other instances by `LISTEN`/`NOTIFY` only (the engines'
//! periodic re-read runs, and cannot stand in for a lost announcement: it re-reads only the
//! work running here and tells no listen stream).
//!
//! `owners_hear_only_their_own_tasks_on_every_instance`: under real tokens, a listener never
//! hears of another owner's task, whether its work runs on the listener's instance or on
//! another.
//!
//! `a_stream_hears_what_changed_while_its_instance_was_cut_off`: an instance whose store
//! connections are cut (a proxy closes them and holds new ones) misses the announcement of a
//! change; once they are back, its listen streams get the change (the store's listener
//! reports the gap, and the dispatcher reads every followed task again).
//!
//! `one_read_per_change_per_instance`: thirty streams on one instance following one task whose
//! work runs on another cost that instance one store read per change, not thirty.
//!
//! `push_latency_across_instances` (ignored; run with `--release --ignored`) measures the
//! time from a status change on one instance to its notification at a client of another.

mod common;
#[path = "support/postgres.rs"]
mod pg;
#[path = "support/proxy.rs"]
mod proxy;
#[path = "support/read_hook.rs"]
mod read_hook;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{Http, TASKS, first_input_key, gate, pass};
use mcp_tasks::{
    Engine, HttpOptions, StaticTokens, TaskContext, TaskServer, ToolError, task_tool, toolkit,
};
use serde_json::{Value, json};
use tokio::time::Instant;

// ---------------------------------------------------------------------------------------
// A tool paced by the test: each change waits for one permit of its gate.

/// Per permit: status "step 1" .. "step `steps`", then a question, then (after the answer
/// and one more permit) its end.
#[task_tool(mode = "required", poll_interval = "20ms", ttl = "10m")]
async fn paced(ctx: TaskContext, gate: String, steps: u32) -> Result<String, ToolError> {
    for n in 1..=steps {
        pass(&gate).await;
        ctx.status(format!("step {n}")).await;
    }
    pass(&gate).await;
    let name = common::ask_name(&ctx).await?;
    pass(&gate).await;
    Ok(format!("hello {name} after {steps} steps"))
}

/// Three engines on `db`'s schema, each with an HTTP server; periodic re-reads every 100 ms,
/// far below the test's bound on a notification.
async fn three_instances(db: &pg::Db) -> (Vec<Engine>, Vec<Http>) {
    let mut engines = Vec::new();
    let mut servers = Vec::new();
    for name in ["a", "b", "c"] {
        let store = db.store().await.expect("connect");
        let engine = Engine::builder(toolkit![paced].expect("a toolkit"))
            .with_store(store)
            .with_instance_id(format!("instance-{name}"))
            .with_cluster(
                mcp_tasks::ClusterConfig::default()
                    .with_reread_interval(Duration::from_millis(100)),
            )
            .build();
        engine.start().expect("start");
        servers.push(Http::start(TaskServer::from_engine(engine.clone())).await);
        engines.push(engine);
    }
    (engines, servers)
}

/// Every message one listen stream received, in order, read by a task of its own.
#[derive(Clone, Default)]
struct Heard(Arc<Mutex<Vec<(Instant, Value)>>>);

impl Heard {
    fn messages(&self) -> Vec<Value> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, m)| m.clone())
            .collect()
    }

    /// The `notifications/tasks` of `task`, in order.
    fn of(&self, task: &str) -> Vec<Value> {
        self.messages()
            .into_iter()
            .filter(|m| m["method"] == "notifications/tasks" && m["params"]["taskId"] == task)
            .map(|m| detailed(m["params"].clone()))
            .collect()
    }
}

/// Opens a listen stream on `server` for `tasks`, as subscription `id`; its messages land in
/// the returned [`Heard`] as they arrive.
async fn listen(server: &Http, id: &str, tasks: &[String]) -> Heard {
    let mut response = server.open_listen(json!(id), tasks).await;
    assert_eq!(response.status(), 200, "listen {id}");
    let heard = Heard::default();
    let into = heard.clone();
    tokio::spawn(async move {
        let mut buffer = String::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            buffer.push_str(std::str::from_utf8(&chunk).unwrap());
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                for line in event.lines() {
                    if let Some(data) = line.strip_prefix("data:") {
                        let message: Value = serde_json::from_str(data.trim()).unwrap();
                        into.0.lock().unwrap().push((Instant::now(), message));
                    }
                }
            }
        }
    });
    heard
}

/// The `DetailedTask` of a notification or a `tasks/get` result, without `_meta` and
/// `resultType`.
fn detailed(mut object: Value) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.remove("_meta");
        map.remove("resultType");
    }
    object
}

async fn call(server: &mut Http, gate: &str, steps: u32) -> String {
    let (_, created) = server
        .rpc(
            "tools/call",
            json!({ "name": "paced", "arguments": { "gate": gate, "steps": steps } }),
            TASKS,
        )
        .await;
    created["result"]["task"]["taskId"]
        .as_str()
        .or(created["result"]["taskId"].as_str())
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned()
}

async fn get(server: &mut Http, task: &str) -> Value {
    let (_, got) = server
        .rpc("tasks/get", json!({ "taskId": task }), TASKS)
        .await;
    assert!(got.get("result").is_some(), "tasks/get: {got}");
    detailed(got["result"].clone())
}

/// One owner's view of an instance: its HTTP server, under the owner's bearer token.
fn as_owner(server: &Http, token: &str) -> Http {
    Http {
        url: server.url.clone(),
        client: reqwest::Client::new(),
        extra: vec![("authorization", format!("Bearer {token}"))],
        next_id: 0,
    }
}

/// Waits until `heard` has the end (`completed`) of `task`.
async fn until_completed(heard: &Heard, task: &str, who: &str) {
    let patience = common::Patience::new(format!("{who} hears {task} complete"));
    while !heard
        .of(task)
        .iter()
        .any(|change| change["status"] == "completed")
    {
        patience.wait().await;
    }
}

/// Drives `paced` task `task` (1 step) to its end: its status, its question, its answer by
/// its owner (`server`), its end.
async fn run_to_the_end(server: &mut Http, gate_name: &str, task: &str) {
    gate(gate_name).add_permits(2);
    let patience = common::Patience::new(format!("{task} asks"));
    let asking = loop {
        let now = get(server, task).await;
        if now["status"] == "input_required" {
            break now;
        }
        patience.wait().await;
    };
    let key = first_input_key(&asking);
    let (_, answered) = server
        .rpc(
            "tasks/update",
            json!({ "taskId": task, "inputResponses": {
                key: { "action": "accept", "content": { "name": "Ada" } } } }),
            TASKS,
        )
        .await;
    assert!(answered.get("result").is_some(), "{answered}");
    gate(gate_name).add_permits(1);
}

/// Owner isolation across instances, under real tokens: alice's task runs on instance a,
/// bob's on instance b; bob listens for both tasks on a and on b, alice for both on b. Each
/// acknowledgement names only the listener's own task, and each stream carries only its own
/// task's changes, to the end: alice's task ends first, and bob's streams, which hear bob's
/// end after it, never heard of alice's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_hear_only_their_own_tasks_on_every_instance() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let tokens = StaticTokens::parse("alice:TOKEN_A,bob:TOKEN_B").expect("tokens");
    let mut servers = Vec::new();
    let mut engines = Vec::new();
    for name in ["a", "b"] {
        let engine = Engine::builder(toolkit![paced].expect("a toolkit"))
            .with_store(db.store().await.expect("connect"))
            .with_instance_id(format!("owners-{name}"))
            .build();
        engine.start().expect("start");
        let router = mcp_tasks::http_router(
            TaskServer::from_engine(engine.clone()),
            HttpOptions::new().with_static_tokens(tokens.clone()),
        );
        servers.push(Http::start_router(router).await);
        engines.push(engine);
    }
    let mut alice_a = as_owner(&servers[0], "TOKEN_A");
    let mut bob_b = as_owner(&servers[1], "TOKEN_B");
    let (gate_alice, gate_bob) = (
        format!("owners-alice-{}", std::process::id()),
        format!("owners-bob-{}", std::process::id()),
    );
    let alices = call(&mut alice_a, &gate_alice, 1).await;
    let bobs = call(&mut bob_b, &gate_bob, 1).await;
    let both = [alices.clone(), bobs.clone()];
    let bob_on_a = listen(&as_owner(&servers[0], "TOKEN_B"), "bob-a", &both).await;
    let bob_on_b = listen(&bob_b, "bob-b", &both).await;
    let alice_on_b = listen(&as_owner(&servers[1], "TOKEN_A"), "alice-b", &both).await;
    let patience = common::Patience::new("every listen acknowledged");
    while [&bob_on_a, &bob_on_b, &alice_on_b]
        .iter()
        .any(|heard| heard.messages().is_empty())
    {
        patience.wait().await;
    }
    for (heard, own, who) in [
        (&bob_on_a, &bobs, "bob on a"),
        (&bob_on_b, &bobs, "bob on b"),
        (&alice_on_b, &alices, "alice on b"),
    ] {
        let ack = &heard.messages()[0];
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{who}"
        );
        assert_eq!(
            ack["params"]["notifications"],
            json!({ "taskIds": [own] }),
            "{who}: only the owner's own task is followed"
        );
    }

    run_to_the_end(&mut alice_a, &gate_alice, &alices).await;
    until_completed(&alice_on_b, &alices, "alice on b").await;
    run_to_the_end(&mut bob_b, &gate_bob, &bobs).await;
    until_completed(&bob_on_a, &bobs, "bob on a").await;
    until_completed(&bob_on_b, &bobs, "bob on b").await;
    for (heard, own, other, who) in [
        (&bob_on_a, &bobs, &alices, "bob on a"),
        (&bob_on_b, &bobs, &alices, "bob on b"),
        (&alice_on_b, &alices, &bobs, "alice on b"),
    ] {
        let messages = heard.messages();
        assert!(
            messages
                .iter()
                .all(|m| m.to_string().find(other.as_str()).is_none()),
            "{who} heard of another owner's task: {messages:?}"
        );
        // Its own task's status, question, answer and end.
        assert!(heard.of(own).len() >= 3, "{who}: {messages:?}");
    }
    for engine in engines {
        engine.shutdown(Duration::from_secs(1)).await;
    }
}

/// See the module docs. The re-read interval is far above the test's bounds: only the
/// announcement, or the catch-up after the listener's reconnect, can deliver the change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_hears_what_changed_while_its_instance_was_cut_off() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let proxy = proxy::Proxy::to_url(&db.url).await;
    let config = mcp_tasks::ClusterConfig::default().with_reread_interval(Duration::from_secs(120));
    let mut servers = Vec::new();
    let mut engines = Vec::new();
    for (name, store) in [
        ("a", db.store().await.expect("a connects")),
        (
            "b",
            db.builder_via(proxy.url(&db.url))
                .connect()
                .await
                .expect("b connects through the proxy"),
        ),
    ] {
        let engine = Engine::builder(toolkit![paced].expect("a toolkit"))
            .with_store(store)
            .with_instance_id(format!("cut-{name}"))
            .with_cluster(config.clone())
            .build();
        engine.start().expect("start");
        servers.push(Http::start(TaskServer::from_engine(engine.clone())).await);
        engines.push(engine);
    }
    let gate_name = format!("cut-{}", std::process::id());
    let task = call(&mut servers[0], &gate_name, 2).await;
    let heard = listen(&servers[1], "cut", std::slice::from_ref(&task)).await;
    let raw = db.raw().await;
    let listening = || db.listeners(&raw);
    let patience = common::Patience::new("two listeners and the acknowledgement");
    while listening().await < 2 || heard.messages().is_empty() {
        patience.wait().await;
    }
    // b cut off: every connection closed, new ones held.
    let accepted = proxy.accepted();
    proxy.blackhole();
    proxy.sever();
    let patience = common::Patience::new("b's listener gone");
    while listening().await > 1 {
        patience.wait().await;
    }
    gate(&gate_name).add_permits(1);
    let patience = common::Patience::new("the change stored");
    while get(&mut servers[0], &task).await["statusMessage"] != "step 1" {
        patience.wait().await;
    }
    let patience = common::Patience::new("b to reconnect");
    while proxy.accepted() == accepted {
        patience.wait().await;
    }
    assert!(
        heard
            .of(&task)
            .iter()
            .all(|change| change["statusMessage"] != "step 1"),
        "not heard while b was cut off"
    );
    let healed = Instant::now();
    proxy.heal();
    let patience = common::Patience::new("the stream on b hears the change");
    while !heard
        .of(&task)
        .iter()
        .any(|change| change["statusMessage"] == "step 1")
    {
        patience.wait().await;
    }
    eprintln!(
        "the change made while b was cut off reached its stream {} ms after the connection \
         came back",
        healed.elapsed().as_millis()
    );
    gate(&gate_name).add_permits(8);
    for engine in engines {
        engine.shutdown(Duration::from_secs(1)).await;
    }
}

/// How long every listener has, after a change is stored, to receive it.
const BOUND: Duration = Duration::from_secs(5);

/// Issue 22's cluster test: three instances on Postgres, listeners on each, the work of each
/// task on one instance (task `i` was called on instance `i`, which runs it) and listened
/// to on all three (two streams on each, one of which follows every task). Rounds: each
/// round makes one change to every task still live (a status message, then a question,
/// then its answer, sent to the next instance, then the end), stored before the round
/// checks that every listener received exactly that change, once, as `tasks/get` answers it.
/// The tasks have 1, 3 and 5 steps, so they end in different rounds, and the streams of the
/// ended ones are checked to stay silent about them while the others go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_listener_on_every_instance_sees_every_change_in_order() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let (engines, mut servers) = three_instances(&db).await;
    let steps = [1u32, 3, 5];
    let mut tasks = Vec::new();
    let mut gates = Vec::new();
    for (i, steps) in steps.iter().enumerate() {
        let gate = format!("cluster-{i}-{}", std::process::id());
        tasks.push(call(&mut servers[i], &gate, *steps).await);
        gates.push(gate);
    }
    // One more task on every stream, changed once after every other task ended: the end
    // of the check that nothing more comes of them.
    let mark_gate = format!("cluster-mark-{}", std::process::id());
    let mark = call(&mut servers[0], &mark_gate, 1).await;
    // Listeners: on each instance, one stream following every task and one following only
    // the task whose work runs on the next instance.
    let mut listeners: Vec<(String, Heard, Vec<usize>)> = Vec::new();
    for (n, server) in servers.iter().enumerate() {
        let all = format!("all-{n}");
        let mut followed = tasks.clone();
        followed.push(mark.clone());
        listeners.push((
            all.clone(),
            listen(server, &all, &followed).await,
            vec![0, 1, 2],
        ));
        let other = (n + 1) % 3;
        let one = format!("one-{n}");
        let heard = listen(server, &one, &[tasks[other].clone(), mark.clone()]).await;
        listeners.push((one, heard, vec![other]));
    }
    // The acknowledgement and each task's state at once.
    let mut expected: Vec<Vec<Value>> = Vec::new();
    for (i, task) in tasks.iter().enumerate() {
        expected.push(vec![get(&mut servers[i], task).await]);
    }
    wait_until_heard(&listeners, &tasks, &expected).await;
    for (name, heard, _) in &listeners {
        assert_eq!(
            heard.messages()[0]["method"],
            "notifications/subscriptions/acknowledged",
            "{name}"
        );
    }

    // Each task's changes, in order: its steps, the question, the answer, the end.
    let changes_of = |i: usize| steps[i] as usize + 3;
    let rounds = (0..3).map(changes_of).max().unwrap();
    for round in 0..rounds {
        for i in 0..3 {
            if round >= changes_of(i) {
                continue;
            }
            let answer = round == steps[i] as usize + 1;
            if answer {
                // Sent to the next instance: the work on instance `i` hears of it by NOTIFY.
                let key = first_input_key(expected[i].last().unwrap());
                let next = (i + 1) % 3;
                let (_, answered) = servers[next]
                    .rpc(
                        "tasks/update",
                        json!({ "taskId": tasks[i], "inputResponses": {
                            key: { "action": "accept", "content": { "name": "Ada" } } } }),
                        TASKS,
                    )
                    .await;
                assert!(answered.get("result").is_some(), "{answered}");
            } else {
                gate(&gates[i]).add_permits(1);
            }
        }
        // Each change stored (read back through another instance than the one running it).
        for i in 0..3 {
            if round >= changes_of(i) {
                continue;
            }
            let before = expected[i].last().unwrap().clone();
            let reader = (i + 2) % 3;
            let started = Instant::now();
            let now = loop {
                let now = get(&mut servers[reader], &tasks[i]).await;
                if now != before {
                    break now;
                }
                assert!(
                    started.elapsed() < BOUND,
                    "round {round}: task {i} did not change"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            expected[i].push(now);
        }
        wait_until_heard(&listeners, &tasks, &expected).await;
    }
    for (i, states) in expected.iter().enumerate() {
        let end = states.last().unwrap();
        assert_eq!(end["status"], "completed", "task {i}: {end}");
        assert_eq!(
            end["result"]["content"][0]["text"],
            format!("hello Ada after {} steps", steps[i]),
            "the end carries the result"
        );
    }
    // Nothing more once every task ended: the mark's change, made after every end, reaches
    // every listener, and nothing of the ended tasks came before it.
    gate(&mark_gate).add_permits(1);
    let started = Instant::now();
    while !listeners.iter().all(|(_, heard, _)| {
        heard
            .of(&mark)
            .iter()
            .any(|state| state["statusMessage"] == "step 1")
    }) {
        assert!(
            started.elapsed() < BOUND,
            "every listener hears of the mark's change"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_heard_exactly(&listeners, &tasks, &expected);
    for engine in engines {
        engine.shutdown(Duration::from_secs(1)).await;
    }
}

/// Waits until every listener received the last expected state of each of its tasks, then
/// checks it received exactly the expected states, in order.
async fn wait_until_heard(
    listeners: &[(String, Heard, Vec<usize>)],
    tasks: &[String],
    expected: &[Vec<Value>],
) {
    let started = Instant::now();
    loop {
        let caught_up = listeners.iter().all(|(_, heard, follows)| {
            follows
                .iter()
                .all(|&i| heard.of(&tasks[i]).last() == expected[i].last())
        });
        if caught_up || started.elapsed() > BOUND {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_heard_exactly(listeners, tasks, expected);
}

fn assert_heard_exactly(
    listeners: &[(String, Heard, Vec<usize>)],
    tasks: &[String],
    expected: &[Vec<Value>],
) {
    for (name, heard, follows) in listeners {
        for &i in follows {
            let got = heard.of(&tasks[i]);
            let statuses = |states: &[Value]| -> Vec<String> {
                states
                    .iter()
                    .map(|s| format!("{} {}", s["status"], s["statusMessage"]))
                    .collect()
            };
            assert!(
                got == expected[i],
                "listener {name}, task {i}: heard {:?}, expected {:?}",
                statuses(&got),
                statuses(&expected[i])
            );
        }
        for message in heard.messages() {
            assert_eq!(
                message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
                name.as_str(),
                "{message}"
            );
        }
    }
}

/// No read storm: instance A runs a task's work; instance B holds thirty listen streams
/// following it (and runs nothing). Each of ten status changes reaches all thirty streams,
/// and costs B one store read: the dispatcher reads a changed task once for every stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_read_per_change_per_instance() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let (engines, mut servers) = three_instances(&db).await;
    let gets = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = gets.clone();
    let counting = read_hook::ReadHook {
        inner: db.store().await.expect("connect"),
        before_get: Arc::new(move |_: &str| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(std::future::ready(()))
        }),
    };
    let listening = Engine::builder(toolkit![paced].expect("a toolkit"))
        .with_store(counting)
        .with_instance_id("instance-listening")
        .with_cluster(mcp_tasks::ClusterConfig::default().with_execution(false))
        .build();
    listening.start().expect("start");
    let b = Http::start(TaskServer::from_engine(listening.clone())).await;
    let gate_name = format!("reads-{}", std::process::id());
    const CHANGES: u32 = 10;
    const STREAMS: usize = 30;
    let task = call(&mut servers[0], &gate_name, CHANGES).await;
    let mut streams = Vec::new();
    for n in 0..STREAMS {
        streams.push(listen(&b, &format!("s{n}"), std::slice::from_ref(&task)).await);
    }
    let first = get(&mut servers[0], &task).await;
    let mut expected = vec![vec![first]];
    let listeners: Vec<(String, Heard, Vec<usize>)> = streams
        .into_iter()
        .enumerate()
        .map(|(n, heard)| (format!("s{n}"), heard, vec![0]))
        .collect();
    let tasks = vec![task.clone()];
    wait_until_heard(&listeners, &tasks, &expected).await;
    let before = gets.load(std::sync::atomic::Ordering::SeqCst);
    for n in 1..=CHANGES {
        gate(&gate_name).add_permits(1);
        let started = Instant::now();
        let now = loop {
            let now = get(&mut servers[0], &task).await;
            if now["statusMessage"] == format!("step {n}") {
                break now;
            }
            assert!(started.elapsed() < BOUND, "step {n} not stored");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        expected[0].push(now);
        wait_until_heard(&listeners, &tasks, &expected).await;
    }
    let reads = gets.load(std::sync::atomic::Ordering::SeqCst) - before;
    assert!(
        (1..=CHANGES as usize).contains(&reads),
        "{reads} store reads on the listening instance for {CHANGES} changes pushed to {STREAMS} streams"
    );
    listening.shutdown(Duration::from_millis(200)).await;
    for engine in engines {
        engine.shutdown(Duration::from_millis(200)).await;
    }
}

/// Push latency across instances: the work runs on instance A, a client listens on B; the
/// time from the status change (measured as the moment the tool's `ctx.status(..)` write
/// returned on A) to the notification's arrival at the client. Prints p50/p99.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: cargo test --release --test push_cluster -- --ignored --nocapture"]
async fn push_latency_across_instances() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let (engines, mut servers) = three_instances(&db).await;
    let samples: usize = std::env::var("PUSH_SAMPLES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(500);
    let gate_name = format!("latency-{}", std::process::id());
    let steps = u32::try_from(samples).unwrap();
    let task = call(&mut servers[0], &gate_name, steps).await;
    let heard = listen(&servers[1], "bench", std::slice::from_ref(&task)).await;
    // The acknowledgement and the first state.
    let started = Instant::now();
    while heard.messages().len() < 2 {
        assert!(started.elapsed() < BOUND);
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut latencies = Vec::with_capacity(samples);
    for n in 1..=samples {
        let before = heard.0.lock().unwrap().len();
        let sent = Instant::now();
        gate(&gate_name).add_permits(1);
        let wanted = format!("step {n}");
        let arrived = loop {
            let found = heard.0.lock().unwrap()[before..]
                .iter()
                .find(|(_, m)| m["params"]["statusMessage"] == wanted.as_str())
                .map(|(at, _)| *at);
            if let Some(at) = found {
                break at;
            }
            assert!(sent.elapsed() < BOUND, "step {n} not pushed");
            // The arrival time is taken by the stream's reader as it arrives, not here.
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        // From the permit: the tool's write (a commit on Postgres) is included.
        latencies.push(arrived - sent);
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "push latency across instances (status change on A -> notification at a client of B), {samples} samples: p50 {:?}, p99 {:?}, max {:?}",
        at(0.5),
        at(0.99),
        latencies.last().unwrap()
    );
    for engine in engines {
        engine.shutdown(Duration::from_millis(200)).await;
    }
}
