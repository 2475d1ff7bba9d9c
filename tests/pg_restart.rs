//! A Postgres restart under a running cluster (issue 21): `pg_ctl restart -m fast` of a
//! throwaway cluster of the test's own ([`pg::OwnCluster`]) while 100 tasks run on two
//! in-process instances, and calls keep arriving on both.
//!
//! What must hold: every acknowledged change is present afterwards (each task id a call
//! answered exists and ends as it should; each step a tool saw stored is stored); both
//! instances reconnect, pool and `LISTEN`, within a bound (printed); no task is lost or run
//! twice (each step's side effect ran exactly once: the lease, 10 s, outlasts the restart, so
//! nothing is taken over); wake-ups resume: answers and cancels sent to the other instance
//! after the restart reach the work (the re-read covers notifications lost in the gap).

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use common::{Http, TASKS};
use mcp_tasks::{
    ClusterConfig, Engine, PostgresStore, State, TaskContext, TaskServer, ToolError, task_tool,
    toolkit,
};
use rmcp::model::{ElicitationAction, ElicitationSchema, ErrorData};
use serde_json::{Value, json};

/// Bound on reconnection after the server is back: pool and LISTEN.
const RECONNECT_BOUND: Duration = Duration::from_secs(10);
/// Bound on a wake-up sent after the restart reaching the work.
const WAKEUP_BOUND: Duration = Duration::from_secs(5);

/// Each step whose result the store acknowledged, as `(task, seq)`, with who ran it.
#[derive(Clone)]
struct Journal {
    who: &'static str,
    runs: Arc<Mutex<Vec<(String, u32)>>>,
    stored: Arc<Mutex<Vec<(String, u32)>>>,
}

/// `steps` steps of `step_ms`; with `ask`, a question after the first one.
#[task_tool(mode = "required", restart = "resume", poll_interval = "50ms")]
async fn steady(
    ctx: TaskContext,
    State(journal): State<Journal>,
    steps: u32,
    step_ms: u64,
    ask: bool,
) -> Result<String, ToolError> {
    for seq in 1..=steps {
        if ctx.is_cancelled() {
            return Err(ToolError::cancelled());
        }
        let (runs, step_ctx) = (journal.runs.clone(), ctx.clone());
        ctx.step(&format!("s{seq}"), || async move {
            tokio::time::sleep(Duration::from_millis(step_ms)).await;
            let task = step_ctx.task_id().unwrap_or_default().to_owned();
            runs.lock().unwrap().push((task, seq));
        })
        .await?;
        let task = ctx.task_id().unwrap_or_default().to_owned();
        journal.stored.lock().unwrap().push((task, seq));
        if ask && seq == 1 {
            let schema = ElicitationSchema::builder()
                .required_bool("go")
                .build()
                .map_err(|e| ToolError::rpc(ErrorData::internal_error(e.to_string(), None)))?;
            let answer = ctx.elicit_form("go on?", schema).await?;
            if answer.action != ElicitationAction::Accept {
                return Ok("declined".to_owned());
            }
        }
    }
    Ok(format!("{steps} steps by {}", journal.who))
}

async fn instance(url: &str, journal: &Journal) -> Http {
    let store = PostgresStore::builder(url)
        .with_schema("restart")
        .with_pool_size(4)
        .with_connect_timeout(Duration::from_secs(2))
        .with_application_name(format!("restart-{}", journal.who))
        .connect()
        .await
        .expect("connect");
    let engine = Engine::builder(toolkit![steady].unwrap().with_state(journal.clone()))
        .with_store(store)
        .with_instance_id(journal.who)
        .with_cluster(
            ClusterConfig::default()
                .with_lease(Duration::from_secs(10))
                .with_renewal(Duration::from_secs(1))
                .with_claim_interval(Duration::from_millis(250))
                .with_reread_interval(Duration::from_secs(1)),
        )
        .build();
    engine.start().expect("start the cluster loops");
    Http::start(TaskServer::from_engine(engine)).await
}

/// `tools/call` of `steady`: the task id, or the error the instance answered.
async fn call(http: &mut Http, steps: u32, step_ms: u64, ask: bool) -> Result<String, Value> {
    let (_, response) = http
        .rpc(
            "tools/call",
            json!({ "name": "steady", "arguments": {
                "steps": steps, "step_ms": step_ms, "ask": ask } }),
            TASKS,
        )
        .await;
    response["result"]["taskId"]
        .as_str()
        .map(str::to_owned)
        .ok_or(response)
}

async fn rpc(http: &mut Http, method: &str, params: Value) -> Value {
    http.rpc(method, params, TASKS).await.1
}

/// Polls `tasks/get` on `http` until `done` holds, at most `bound`; the task.
async fn wait(http: &mut Http, id: &str, bound: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let response = rpc(http, "tasks/get", json!({ "taskId": id })).await;
        let task = &response["result"];
        if done(task) {
            return task.clone();
        }
        assert!(
            started.elapsed() < bound,
            "task {id} after {bound:?}: {response}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn terminal(task: &Value) -> bool {
    matches!(
        task["status"].as_str(),
        Some("completed" | "failed" | "cancelled")
    )
}

/// Another client of the server `http` talks to.
fn client_of(http: &Http) -> Http {
    Http {
        url: http.url.clone(),
        client: reqwest::Client::new(),
        extra: Vec::new(),
        next_id: 0,
    }
}

/// The `LISTEN` connections open on the server now.
async fn listening(url: &str) -> i64 {
    let Ok((client, connection)) = tokio_postgres::connect(url, tokio_postgres::NoTls).await else {
        return 0;
    };
    tokio::spawn(connection);
    client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'",
            &[],
        )
        .await
        .map_or(0, |row| row.get(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_postgres_restart_loses_nothing_and_the_instances_reconnect() {
    let Some(mut cluster) = pg::OwnCluster::init() else {
        return;
    };
    cluster.start();
    let url = cluster.url("");
    let journals = ["a", "b"].map(|who| Journal {
        who,
        runs: Arc::default(),
        stored: Arc::default(),
    });
    let mut http = Vec::new();
    for journal in &journals {
        http.push(instance(&url, journal).await);
    }
    let [mut a, mut b] = <[Http; 2]>::try_from(http).ok().unwrap();

    // 100 tasks: 80 that run 8 steps, 10 that ask a question after their first step, 10
    // long ones to cancel; half created on each instance. `home[id]` is the creating one.
    let mut plain = Vec::new();
    let mut asking = Vec::new();
    let mut long = Vec::new();
    let mut home = HashMap::new();
    for i in 0..100u32 {
        let (at, name) = if i.is_multiple_of(2) {
            (&mut a, 0)
        } else {
            (&mut b, 1)
        };
        let id = match i % 10 {
            0 => call(at, 2, 100, true).await,
            1 => call(at, 200, 100, false).await,
            _ => call(at, 8, 500, false).await,
        }
        .expect("created before the restart");
        home.insert(id.clone(), name);
        match i % 10 {
            0 => asking.push(id),
            1 => long.push(id),
            _ => plain.push(id),
        }
    }
    // Every asking task waits for its answer before the restart.
    for id in &asking {
        let at = if home[id] == 0 { &mut a } else { &mut b };
        wait(at, id, Duration::from_secs(20), |t| {
            t["status"] == "input_required"
        })
        .await;
    }
    assert_eq!(listening(&url).await, 2, "both instances listen");

    // Calls keep arriving on both instances through the restart.
    let stop = tokio_util::sync::CancellationToken::new();
    let traffic = {
        let (mut a, mut b) = (client_of(&a), client_of(&b));
        let stop = stop.clone();
        tokio::spawn(async move {
            let (mut acknowledged, mut refused) = (Vec::new(), 0usize);
            let mut i = 0usize;
            while !stop.is_cancelled() {
                let at = if i.is_multiple_of(2) { &mut a } else { &mut b };
                match call(at, 2, 50, false).await {
                    Ok(id) => acknowledged.push((id, i % 2)),
                    Err(_) => refused += 1,
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (acknowledged, refused)
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;

    let restart_began = Instant::now();
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.restart();
        cluster
    })
    .await
    .unwrap();
    let back = Instant::now();
    let restart_took = back - restart_began;

    // Reconnection: each instance creates a task again (its pool), both listen again.
    let mut pool_back = [None, None];
    let mut listen_back = None;
    while pool_back.iter().any(Option::is_none) || listen_back.is_none() {
        for (n, at) in [&mut a, &mut b].into_iter().enumerate() {
            if pool_back[n].is_none() && call(at, 1, 10, false).await.is_ok() {
                pool_back[n] = Some(back.elapsed());
            }
        }
        if listen_back.is_none() && listening(&url).await == 2 {
            listen_back = Some(back.elapsed());
        }
        assert!(
            back.elapsed() < RECONNECT_BOUND,
            "not reconnected {RECONNECT_BOUND:?} after the restart: pool {pool_back:?}, \
             listen {listen_back:?}; server log: {}",
            cluster.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.cancel();
    let (acknowledged, refused) = traffic.await.unwrap();

    // Every step a long task's tool saw stored is in the database (a finished task's steps
    // go with it, so the long ones, still running, are the ones to look at).
    let stored: HashSet<(String, u32)> = journals
        .iter()
        .flat_map(|j| j.stored.lock().unwrap().clone())
        .filter(|(id, _)| long.contains(id))
        .collect();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let in_db: HashSet<(String, u32)> = client
        .query(
            "SELECT task_id, seq FROM restart.steps WHERE task_id = ANY($1)",
            &[&long],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), u32::try_from(r.get::<_, i64>(1)).unwrap()))
        .collect();
    let missing: Vec<_> = stored.difference(&in_db).collect();
    assert!(
        missing.is_empty(),
        "acknowledged steps missing: {missing:?}"
    );
    assert!(
        stored.len() >= 10 * 5,
        "the long tasks stored steps through the restart: {}",
        stored.len()
    );

    // Wake-ups resume: answers and cancels sent to the other instance reach the work.
    let wakeups_sent = Instant::now();
    for id in &asking {
        let other = if home[id] == 0 { &mut b } else { &mut a };
        let task = rpc(other, "tasks/get", json!({ "taskId": id })).await;
        let key = common::first_input_key(&task["result"]);
        let answer = json!({ key: { "action": "accept", "content": { "go": true } } });
        let response = rpc(
            other,
            "tasks/update",
            json!({ "taskId": id, "inputResponses": answer }),
        )
        .await;
        assert!(response.get("error").is_none(), "{response}");
    }
    for id in &long {
        let other = if home[id] == 0 { &mut b } else { &mut a };
        let response = rpc(other, "tasks/cancel", json!({ "taskId": id })).await;
        assert!(response.get("error").is_none(), "{response}");
    }
    for id in &long {
        let task = wait(&mut a, id, WAKEUP_BOUND, terminal).await;
        assert_eq!(task["status"], "cancelled", "{task}");
    }
    let cancels_took = wakeups_sent.elapsed();

    // Everything ends as it should, every step's side effect ran once.
    let bound = Duration::from_secs(30);
    for id in plain.iter().chain(&asking) {
        let task = wait(&mut b, id, bound, terminal).await;
        assert_eq!(task["status"], "completed", "{id}: {task}");
    }
    for (id, _) in &acknowledged {
        let task = wait(&mut a, id, bound, terminal).await;
        assert_eq!(task["status"], "completed", "acknowledged {id}: {task}");
    }
    let mut runs: HashMap<(String, u32), usize> = HashMap::new();
    for journal in &journals {
        for run in journal.runs.lock().unwrap().iter() {
            *runs.entry(run.clone()).or_default() += 1;
        }
    }
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "steps run more than once: {twice:?}");
    for id in plain.iter() {
        for seq in 1..=8 {
            assert_eq!(runs.get(&(id.clone(), seq)), Some(&1), "{id} step {seq}");
        }
    }
    eprintln!(
        "restart took {restart_took:?}; pool back after {:?} (a) and {:?} (b), LISTEN after \
         {:?}; {} calls acknowledged and {refused} refused during the restart; cancels sent \
         after it all honoured within {cancels_took:?}",
        pool_back[0].unwrap(),
        pool_back[1].unwrap(),
        listen_back.unwrap(),
        acknowledged.len()
    );
    drop(cluster);
}
