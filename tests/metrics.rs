//! The operators' metrics (issue 23), scraped over HTTP from a real server on 127.0.0.1: a
//! Prometheus recorder is installed (`metrics::install_prometheus`), its scrape route
//! (`metrics::prometheus_router`) is merged beside the MCP router, and a mix of tasks runs:
//! completed, failed, cancelled, `input_required` then answered, expired, an inline call and
//! a refused bad request. The page is scraped while tasks run and wait (the gauges) and after
//! (the counters and histogram counts), and every value is what the test did. Then, on
//! Postgres, several instances in this process: queued tasks claimed by an executing
//! instance (queue depth, claim lag, queued wake-ups), a write refused as fenced after the
//! task's epoch moved on (a lost lease), a lease not renewed in time, a cancel wake-up, and
//! the listener's connection killed (a missed wake-up).
//!
//! Every metric in the table of docs/guide/07-operating.md must be on the page at the end
//! (the cluster ones only when the Postgres part ran).
//!
//! No label carries a task id or an owner (a series per task or per caller would grow the
//! page without bound and show who calls what): every label is one of a known few, and no
//! value names a task of the run or its owner.
//!
//! One test function: the recorder is global to the process, so the parts run in order.

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{collections::BTreeMap, time::Duration};

use common::{Http, PLAIN, Patience, TASKS, first_input_key, first_text};
use mcp_tasks::{
    ClusterConfig, Engine, HttpOptions, State, StaticTokens, TaskContext, TaskServer, ToolError,
    task_tool, toolkit,
};
use rmcp::model::ErrorData;
use serde_json::{Value, json};

/// Says something visible, then completes.
#[task_tool(mode = "required", poll_interval = "20ms")]
async fn steady(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.status("half way").await;
    Ok("done".to_owned())
}

/// Fails with a JSON-RPC error during execution: `failed`.
#[task_tool(mode = "required", poll_interval = "20ms")]
async fn broken() -> Result<String, ToolError> {
    Err(ToolError::rpc(ErrorData::internal_error(
        "broken on purpose",
        None,
    )))
}

/// Waits to be cancelled, and honours it.
#[task_tool(mode = "required", poll_interval = "20ms")]
async fn stoppable(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// Asks one question, then completes with the answer.
#[task_tool(mode = "required", poll_interval = "20ms")]
async fn asking(ctx: TaskContext) -> Result<String, ToolError> {
    let name = common::ask_name(&ctx).await?;
    Ok(format!("hi {name}"))
}

/// Never ends on its own: it expires at the end of its TTL.
#[task_tool(mode = "required", ttl = "1s", poll_interval = "20ms")]
async fn lingering(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// Sleeps `ms` durably; parked once it has slept 100 ms.
#[task_tool(
    mode = "required",
    restart = "resume",
    park_after = "100ms",
    poll_interval = "20ms"
)]
async fn dozing(ctx: TaskContext, ms: u64) -> Result<String, ToolError> {
    ctx.sleep("doze", Duration::from_millis(ms)).await?;
    Ok(format!("dozed {ms} ms"))
}

/// Answers inline (the caller does not declare the extension).
#[task_tool]
async fn echo(text: String) -> String {
    text
}

/// The scrape page, parsed: `name{label="v",...}` (labels sorted) to value.
#[derive(Debug)]
struct Page(BTreeMap<String, f64>);

impl Page {
    fn parse(text: &str) -> Self {
        let mut map = BTreeMap::new();
        for line in text.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').expect("a sample line");
            let value: f64 = value.parse().unwrap_or(f64::NAN);
            let key = match series.split_once('{') {
                None => series.to_owned(),
                Some((name, labels)) => {
                    let labels = labels.strip_suffix('}').expect("closed labels");
                    let mut labels: Vec<&str> = labels.split(',').collect();
                    labels.sort_unstable();
                    format!("{name}{{{}}}", labels.join(","))
                }
            };
            map.insert(key, value);
        }
        Self(map)
    }

    /// The value of `name` with exactly `labels`; 0 when the series is not on the page.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let mut labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        labels.sort_unstable();
        let key = if labels.is_empty() {
            name.to_owned()
        } else {
            format!("{name}{{{}}}", labels.join(","))
        };
        self.0.get(&key).copied().unwrap_or(0.0)
    }

    /// Every series of metric `name` (as printed) with its value.
    fn series<'a>(&'a self, name: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
        self.0
            .iter()
            .filter(move |(key, _)| key.split('{').next() == Some(name))
            .map(|(key, value)| (key.as_str(), *value))
    }

    /// Whether any series of metric `name` (a histogram's `_count` too) is on the page.
    fn has(&self, name: &str) -> bool {
        self.0.keys().any(|key| {
            let series = key.split('{').next().unwrap_or_default();
            series == name || series == format!("{name}_count")
        })
    }

    /// Fails naming the series when a label is not one of the known few, or when a label's
    /// value names one of `ids` (task ids) or `owners`.
    fn assert_no_task_or_owner_label(&self, ids: &[String], owners: &[&str]) {
        const LABELS: [&str; 9] = [
            "tool",
            "version",
            "owner_bucket",
            "status",
            "operation",
            "le",
            "reason",
            "kind",
            "code",
        ];
        assert!(!ids.is_empty() && !owners.is_empty());
        for series in self.0.keys() {
            let Some((_, labels)) = series.split_once('{') else {
                continue;
            };
            for label in labels.trim_end_matches('}').split(',') {
                let (name, value) = label.split_once('=').expect("a label");
                assert!(LABELS.contains(&name), "unexpected label {name}: {series}");
                let value = value.trim_matches('"');
                for named in ids.iter().map(String::as_str).chain(owners.iter().copied()) {
                    assert!(!value.contains(named), "{series} names {named}");
                }
            }
        }
    }

    /// The sum over every series of `name` whose labels include `labels`.
    fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let wanted: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        self.0
            .iter()
            .filter(|(key, _)| {
                let (series, rest) = key.split_once('{').unwrap_or((key.as_str(), ""));
                series == name && wanted.iter().all(|w| rest.contains(w.as_str()))
            })
            .map(|(_, v)| *v)
            .sum()
    }
}

/// The metrics in the documented table.
fn documented() -> Vec<String> {
    let guide = include_str!("../docs/guide/07-operating.md");
    let names: Vec<String> = guide
        .lines()
        .filter_map(|line| line.strip_prefix("| `mcp_tasks_"))
        .filter_map(|rest| rest.split_once('`'))
        .map(|(name, _)| format!("mcp_tasks_{name}"))
        .collect();
    assert!(
        names.len() >= 15,
        "the metrics table was not found: {names:?}"
    );
    names
}

async fn scrape(base: &str) -> Page {
    let response = reqwest::get(format!("{base}/metrics"))
        .await
        .expect("scrape");
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    Page::parse(&response.text().await.unwrap())
}

fn task_id(response: &Value) -> String {
    assert_eq!(response["result"]["resultType"], "task", "{response}");
    response["result"]["taskId"].as_str().unwrap().to_owned()
}

/// The owner of the memory part's calls.
const OWNER: &str = "owner-metrics-7f3a";

fn peer(http: Http) -> common::Peer {
    common::Peer::Http(http)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scrape_page_counts_what_the_tasks_did() {
    let handle = mcp_tasks::metrics::install_prometheus().expect("the first recorder");
    assert!(
        mcp_tasks::metrics::install_prometheus().is_err(),
        "a second recorder is refused, not installed over the first"
    );
    let scrape_router = mcp_tasks::metrics::prometheus_router(handle);
    memory_part(scrape_router.clone()).await;
    parking_part(scrape_router.clone()).await;
    if !cluster_part(scrape_router).await {
        eprintln!("the cluster part did not run (no Postgres here)");
    }
}

/// The mix on the memory store.
async fn memory_part(scrape_router: axum::Router) {
    let engine = Engine::builder(
        toolkit![steady, broken, stoppable, asking, lingering, echo].expect("valid tools"),
    )
    .with_expiry_sweep(Duration::from_millis(100))
    .build();
    // One caller, with an owner of its own (the default owner is checked in the cluster part).
    let tokens = StaticTokens::parse(&format!("{OWNER}:TOKEN_M")).expect("a token");
    let router = mcp_tasks::http_router(
        TaskServer::from_engine(engine),
        HttpOptions::new().with_static_tokens(tokens),
    )
    .merge(scrape_router);
    let mut http = Http::start_router(router).await;
    http.extra = vec![("authorization", "Bearer TOKEN_M".to_owned())];
    let base = http.url.trim_end_matches("/mcp").to_owned();
    let mut raw = Http {
        url: http.url.clone(),
        client: reqwest::Client::new(),
        extra: http.extra.clone(),
        next_id: 1000,
    };
    let mut peer = peer(http);

    // Two completed, one failed.
    let mut ids = Vec::new();
    for tool in ["steady", "steady", "broken"] {
        ids.push(task_id(&peer.call(tool, json!({}), TASKS).await));
    }
    for id in &ids {
        peer.wait_terminal(id).await;
    }
    // One waiting to be cancelled, one asking a question, one that will expire.
    let stopping = task_id(&peer.call("stoppable", json!({}), TASKS).await);
    let asked = task_id(&peer.call("asking", json!({}), TASKS).await);
    let expiring = task_id(&peer.call("lingering", json!({}), TASKS).await);
    let waiting = peer.wait_status(&asked, "input_required").await;

    // During the run: what runs and what waits, by tool.
    let during = scrape(&base).await;
    assert_eq!(
        during.value("mcp_tasks_tasks_running", &[("tool", "stoppable")]),
        1.0
    );
    assert_eq!(
        during.value("mcp_tasks_tasks_running", &[("tool", "asking")]),
        1.0
    );
    assert_eq!(
        during.value("mcp_tasks_tasks_running", &[("tool", "steady")]),
        0.0
    );
    assert_eq!(
        during.value("mcp_tasks_tasks_input_required", &[("tool", "asking")]),
        1.0
    );
    assert_eq!(
        during.value("mcp_tasks_tasks_input_required", &[("tool", "stoppable")]),
        0.0
    );
    assert_eq!(
        during.value("mcp_tasks_tasks_created_total", &[("tool", "steady")]),
        2.0
    );
    let mut all_ids = ids.clone();
    all_ids.extend([stopping.clone(), asked.clone(), expiring.clone()]);
    during.assert_no_task_or_owner_label(&all_ids, &[OWNER]);

    // Answer, cancel, let one expire.
    let key = first_input_key(&waiting);
    let answered = peer
        .rpc(
            "tasks/update",
            json!({ "taskId": asked, "inputResponses": {
                key: { "action": "accept", "content": { "name": "Ada" } } } }),
            TASKS,
        )
        .await;
    assert!(answered.get("error").is_none(), "{answered}");
    let cancelled = peer
        .rpc("tasks/cancel", json!({ "taskId": stopping }), TASKS)
        .await;
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    assert_eq!(peer.wait_terminal(&stopping).await["status"], "cancelled");
    let done = peer.wait_terminal(&asked).await;
    assert_eq!(first_text(&done["result"]), "hi Ada");
    assert_eq!(peer.wait_terminal(&expiring).await["status"], "failed");

    // An inline call (no task) and a refused bad request (arguments as a string).
    let inline = peer.call("echo", json!({ "text": "hello" }), PLAIN).await;
    assert_eq!(first_text(&inline["result"]), "hello", "{inline}");
    let (status, refused) = raw
        .rpc(
            "tools/call",
            json!({ "name": "echo", "arguments": "{\"text\":\"x\"}" }),
            TASKS,
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{status} {refused}");

    // The gauges come back to zero once the work ended (the expired task's work stops
    // when the sweep ends it).
    let patience = Patience::new("the running gauges back to zero");
    let after = loop {
        let page = scrape(&base).await;
        if page.sum("mcp_tasks_tasks_running", &[]) == 0.0 {
            break page;
        }
        patience.wait().await;
    };
    for tool in ["steady", "broken", "stoppable", "asking", "lingering"] {
        assert_eq!(
            after.value("mcp_tasks_tasks_running", &[("tool", tool)]),
            0.0,
            "{tool}"
        );
        assert_eq!(
            after.value("mcp_tasks_tasks_input_required", &[("tool", tool)]),
            0.0,
            "{tool}"
        );
    }
    let created = [
        ("steady", 2.0),
        ("broken", 1.0),
        ("stoppable", 1.0),
        ("asking", 1.0),
        ("lingering", 1.0),
    ];
    for (tool, n) in created {
        assert_eq!(
            after.value("mcp_tasks_tasks_created_total", &[("tool", tool)]),
            n,
            "{tool}"
        );
    }
    assert_eq!(
        after.value("mcp_tasks_tasks_created_total", &[("tool", "echo")]),
        0.0
    );
    let finished = [
        ("steady", "completed", 2.0),
        ("broken", "failed", 1.0),
        ("stoppable", "cancelled", 1.0),
        ("asking", "completed", 1.0),
    ];
    for (tool, status, n) in finished {
        let labels = [("tool", tool), ("status", status)];
        assert_eq!(
            after.value("mcp_tasks_tasks_finished_total", &labels),
            n,
            "{tool} {status}"
        );
        assert_eq!(
            after.value("mcp_tasks_task_duration_seconds_count", &labels),
            n,
            "{tool}"
        );
    }
    // The expired task is counted as expired, not as finished by its work.
    assert_eq!(after.sum("mcp_tasks_tasks_finished_total", &[]), 5.0);
    assert_eq!(
        after.sum("mcp_tasks_tasks_finished_total", &[("tool", "lingering")]),
        0.0
    );
    assert_eq!(after.value("mcp_tasks_tasks_expired_total", &[]), 1.0);
    // The first visible change: steady's status, broken's and stoppable's outcome, asking's
    // question; lingering never showed one.
    for (tool, n) in [
        ("steady", 2.0),
        ("broken", 1.0),
        ("stoppable", 1.0),
        ("asking", 1.0),
        ("lingering", 0.0),
    ] {
        assert_eq!(
            after.value(
                "mcp_tasks_task_first_status_seconds_count",
                &[("tool", tool)]
            ),
            n,
            "{tool}"
        );
    }
    // Store calls: one create per task, one finish per ending work (the expired task's
    // finish is refused: it had ended already).
    assert_eq!(
        after.value(
            "mcp_tasks_store_operation_seconds_count",
            &[("operation", "create")]
        ),
        6.0
    );
    assert_eq!(
        after.value(
            "mcp_tasks_store_operation_seconds_count",
            &[("operation", "finish")]
        ),
        6.0
    );
    assert!(
        after.value(
            "mcp_tasks_store_operation_seconds_count",
            &[("operation", "get")]
        ) >= 6.0
    );
    assert!(
        after.value(
            "mcp_tasks_store_operation_seconds_count",
            &[("operation", "expire_due")]
        ) >= 1.0
    );
    // A histogram's buckets: every create took less than an hour.
    assert_eq!(
        after.value(
            "mcp_tasks_store_operation_seconds_bucket",
            &[("operation", "create"), ("le", "3600")]
        ),
        6.0
    );
    // The one refused request, by its code.
    assert_eq!(
        after.value("mcp_tasks_requests_refused_total", &[("code", "-32602")]),
        1.0
    );
    assert_eq!(after.sum("mcp_tasks_requests_refused_total", &[]), 1.0);
    after.assert_no_task_or_owner_label(&all_ids, &[OWNER]);
    // Help texts are there.
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("# HELP mcp_tasks_tasks_created_total"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE mcp_tasks_task_duration_seconds histogram"),
        "{text}"
    );
    for name in documented() {
        let cluster_only = [
            "mcp_tasks_queue_depth",
            "mcp_tasks_claim_lag_seconds",
            "mcp_tasks_leases_lost_total",
            "mcp_tasks_fenced_writes_total",
            "mcp_tasks_wakeups_received_total",
            "mcp_tasks_wakeups_missed_total",
        ];
        if !cluster_only.contains(&name.as_str()) {
            assert!(after.has(&name), "{name} is documented but not on the page");
        }
    }
}

/// Parked tasks and durable timers on the memory store: a short sleep ends in memory, a
/// longer one parks and its timer wakes it, an hour's sleep stays parked; the timer lag is
/// recorded once for each timer that went off, the parked gauge counts the one left.
async fn parking_part(scrape_router: axum::Router) {
    let engine = Engine::builder(toolkit![dozing].expect("valid tools")).build();
    let router = mcp_tasks::http_router(TaskServer::from_engine(engine), HttpOptions::new())
        .merge(scrape_router);
    let http = Http::start_router(router).await;
    let base = http.url.trim_end_matches("/mcp").to_owned();
    let mut peer = peer(http);
    let awake = task_id(&peer.call("dozing", json!({ "ms": 50 }), TASKS).await);
    let parked = task_id(&peer.call("dozing", json!({ "ms": 600 }), TASKS).await);
    let asleep = task_id(&peer.call("dozing", json!({ "ms": 3_600_000 }), TASKS).await);
    for id in [&awake, &parked] {
        let done = peer.wait_terminal(id).await;
        assert_eq!(done["status"], "completed", "{done}");
    }
    // Sampled after the timer's wake-up: the hour's sleep is the one parked task left.
    let patience = Patience::new("one parked task counted");
    let page = loop {
        let page = scrape(&base).await;
        if page.value("mcp_tasks_parked_tasks", &[]) == 1.0 {
            break page;
        }
        patience.wait().await;
    };
    assert_eq!(page.value("mcp_tasks_tasks_parked_total", &[]), 2.0);
    assert_eq!(page.value("mcp_tasks_tasks_woken_total", &[]), 1.0);
    // Two timers went off: the short sleep's in memory, the parked one's at its wake-up.
    assert_eq!(page.value("mcp_tasks_timer_lag_seconds_count", &[]), 2.0);
    // Both well within a second of their deadlines on a quiet machine; a lag of 0.6 s would
    // be a timer measured from the sleep's start.
    assert!(
        page.value("mcp_tasks_timer_lag_seconds_bucket", &[("le", "0.5")]) == 2.0,
        "{page:?}"
    );
    let cancelled = peer
        .rpc("tasks/cancel", json!({ "taskId": asleep }), TASKS)
        .await;
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    assert_eq!(peer.wait_terminal(&asleep).await["status"], "cancelled");
    let page = scrape(&base).await;
    // The cancel woke it (a replay, which ends cancelled); no timer went off.
    assert_eq!(page.value("mcp_tasks_tasks_woken_total", &[]), 2.0);
    assert_eq!(page.value("mcp_tasks_timer_lag_seconds_count", &[]), 2.0);
}

/// Waits behind a gate, then says something (a write of running work).
#[task_tool(mode = "required", poll_interval = "20ms")]
async fn gated_pg(
    ctx: TaskContext,
    State(gate): State<std::sync::Arc<tokio::sync::Notify>>,
) -> Result<String, ToolError> {
    tokio::select! {
        () = gate.notified() => {}
        () = ctx.cancelled() => return Err(ToolError::cancelled()),
    }
    ctx.status("through the gate").await;
    Ok("through".to_owned())
}

/// Completes at once.
#[task_tool(mode = "required", poll_interval = "20ms")]
async fn quick_pg() -> String {
    "quick".to_owned()
}

/// An instance on `db` named `name`, with `config`, serving HTTP with the scrape route.
async fn instance(
    db: &pg::Db,
    name: &str,
    gate: &std::sync::Arc<tokio::sync::Notify>,
    config: ClusterConfig,
    scrape_router: &axum::Router,
) -> Http {
    let store = db.store().await.expect("connect");
    let engine = Engine::builder(
        toolkit![gated_pg, quick_pg]
            .expect("valid tools")
            .with_state(gate.clone()),
    )
    .with_store(store)
    .with_instance_id(name)
    .with_cluster(config)
    .build();
    engine.start().expect("start the cluster loops");
    Http::start_router(
        mcp_tasks::http_router(TaskServer::from_engine(engine), HttpOptions::new())
            .merge(scrape_router.clone()),
    )
    .await
}

/// The cluster metrics on Postgres; `false` when Postgres is not available here.
async fn cluster_part(scrape_router: axum::Router) -> bool {
    let Some(db) = pg::Db::new().await else {
        return false;
    };
    // Each instance's tools wait behind a gate of their own.
    let gate = || std::sync::Arc::new(tokio::sync::Notify::new());
    let runner_gate = gate();
    // A front that only records (queued), a worker that claims, an instance that runs
    // its own calls under a long lease, one whose lease is never renewed.
    let front = instance(
        &db,
        "front",
        &gate(),
        ClusterConfig::default()
            .with_queued_calls(true)
            .with_execution(false),
        &scrape_router,
    )
    .await;
    let _worker = instance(
        &db,
        "worker",
        &gate(),
        ClusterConfig::default().with_claim_interval(Duration::from_millis(100)),
        &scrape_router,
    )
    .await;
    let runner = instance(
        &db,
        "runner",
        &runner_gate,
        ClusterConfig::default().with_execution(false),
        &scrape_router,
    )
    .await;
    let stalled = instance(
        &db,
        "stalled",
        &gate(),
        ClusterConfig::default()
            .with_lease(Duration::from_millis(500))
            .with_renewal(Duration::from_secs(3600))
            .with_execution(false),
        &scrape_router,
    )
    .await;
    let base = front.url.trim_end_matches("/mcp").to_owned();
    // Every instance listens before anything is queued: a wake-up sent before a listener's
    // LISTEN is not heard by it, and the count of queued wake-ups below is exact.
    let raw = db.raw().await;
    let patience = Patience::new("the four instances listening");
    loop {
        let listening = raw
            .query(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1 \
                 AND query ILIKE 'LISTEN%' AND state = 'idle'",
                &[&db.schema],
            )
            .await
            .expect("the listening connections");
        if listening.len() == 4 {
            break;
        }
        patience.wait().await;
    }
    let before = scrape(&base).await;
    let mut front = peer(front);
    let mut runner = peer(runner);
    let mut stalled = peer(stalled);

    // Three queued calls, claimed and run by the worker.
    let mut queued = Vec::new();
    for _ in 0..3 {
        queued.push(task_id(&front.call("quick_pg", json!({}), TASKS).await));
    }
    for id in &queued {
        assert_eq!(front.wait_terminal(id).await["status"], "completed");
    }
    // Every instance hears every queued wake-up: four listeners, three tasks, twelve; no
    // more (nothing else was queued or released yet).
    let heard = |page: &Page| {
        page.value("mcp_tasks_wakeups_received_total", &[("kind", "queued")])
            - before.value("mcp_tasks_wakeups_received_total", &[("kind", "queued")])
    };
    let patience = Patience::new("twelve queued wake-ups heard");
    let queued_heard = loop {
        let page = scrape(&base).await;
        if heard(&page) >= 12.0 {
            break heard(&page);
        }
        assert!(
            !patience.expired(),
            "{} queued wake-ups heard",
            heard(&page)
        );
        patience.wait().await;
    };
    assert_eq!(queued_heard, 12.0, "4 listeners x 3 queued tasks");

    // A task on the runner whose epoch moves on behind its back (as another instance's
    // takeover would): its next write is refused as fenced, and the lease is lost.
    let fenced = task_id(&runner.call("gated_pg", json!({}), TASKS).await);
    let bumped = raw
        .execute(
            "UPDATE tasks SET epoch = epoch + 1 WHERE id = $1",
            &[&fenced],
        )
        .await
        .expect("bump the epoch");
    assert_eq!(bumped, 1);
    // A task on the stalled instance: it stops itself at its lease's fence point.
    let unrenewed = task_id(&stalled.call("gated_pg", json!({}), TASKS).await);
    // A task on the runner cancelled through the front: a cancel wake-up reaches it.
    let to_cancel = task_id(&runner.call("gated_pg", json!({}), TASKS).await);
    let cancelled = front
        .rpc("tasks/cancel", json!({ "taskId": to_cancel }), TASKS)
        .await;
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    assert_eq!(
        runner.wait_terminal(&to_cancel).await["status"],
        "cancelled"
    );
    // The fenced task's work goes through its gate (only it waits there now).
    runner_gate.notify_one();
    // The listeners' connections are killed: each reconnects and reports missed wake-ups.
    let killed = raw
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1 AND query ILIKE 'LISTEN%'",
            &[&db.schema],
        )
        .await
        .expect("kill the listeners");
    assert!(!killed.is_empty(), "no listening connection found");

    let patience = Patience::new("the cluster metrics");
    let page = loop {
        let page = scrape(&base).await;
        let done = page.value("mcp_tasks_fenced_writes_total", &[])
            > before.value("mcp_tasks_fenced_writes_total", &[])
            && page.value("mcp_tasks_leases_lost_total", &[("reason", "unrenewed")]) >= 1.0
            && page.value("mcp_tasks_wakeups_missed_total", &[]) >= 1.0;
        if done {
            break page;
        }
        patience.wait().await;
    };
    // Queued: three claims, each with its lag, by tool; the queue drained.
    let quick = [("tool", "quick_pg"), ("owner_bucket", "all")];
    assert_eq!(page.value("mcp_tasks_claim_lag_seconds_count", &quick), 3.0);
    assert!(page.value("mcp_tasks_claim_lag_seconds_sum", &quick) < 30.0);
    assert!(page.has("mcp_tasks_queue_depth"));
    let patience = Patience::new("the queue depth sampled at zero");
    while scrape(&base)
        .await
        .series("mcp_tasks_queue_depth")
        .any(|(_, value)| value != 0.0)
    {
        patience.wait().await;
    }
    assert_eq!(
        page.value("mcp_tasks_tasks_created_total", &[("tool", "quick_pg")]),
        3.0
    );
    assert_eq!(
        page.value(
            "mcp_tasks_tasks_finished_total",
            &[("tool", "quick_pg"), ("status", "completed")]
        ),
        3.0
    );
    assert!(page.value("mcp_tasks_wakeups_received_total", &[("kind", "cancel")]) >= 1.0);
    // One fenced write, one lease lost to it; one lease not renewed in time.
    assert_eq!(page.value("mcp_tasks_fenced_writes_total", &[]), 1.0);
    assert_eq!(
        page.value("mcp_tasks_leases_lost_total", &[("reason", "refused")]),
        1.0
    );
    assert_eq!(
        page.value("mcp_tasks_leases_lost_total", &[("reason", "unrenewed")]),
        1.0
    );
    assert!(page.value("mcp_tasks_wakeups_missed_total", &[]) >= 1.0);
    assert!(
        page.value(
            "mcp_tasks_store_operation_seconds_count",
            &[("operation", "claim_queued")]
        ) >= 3.0
    );
    assert!(
        page.value(
            "mcp_tasks_store_operation_seconds_count",
            &[("operation", "queue_depth")]
        ) >= 1.0
    );
    let mut all_ids = queued.clone();
    all_ids.extend([fenced, unrenewed, to_cancel]);
    page.assert_no_task_or_owner_label(&all_ids, &[mcp_tasks::DEFAULT_OWNER]);
    for name in documented() {
        assert!(page.has(&name), "{name} is documented but not on the page");
    }
    true
}
