//! One trace from call to result, on Postgres, with the task taken over by a second
//! instance (issue 23, item 2).
//!
//! Two engines, A and B, in this process share one Postgres schema and one OpenTelemetry
//! tracer provider whose exporter keeps the spans in memory. A `TaskClient` call under a
//! client-side `call` span sends that span's `traceparent` in `_meta`; the task starts on A,
//! runs its first step there and waits in its second; A shuts down (its lease released for
//! another instance), B claims the task, replays it (the first step from the store), runs the
//! second step, asks its question (answered by a client of B) and stores the result. Every
//! exported span of that journey (call, the task on A and on B, the steps, the question, the
//! result) carries the client's trace id, and both task spans are children of the call.

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{
    sync::{Arc, Mutex, OnceLock},
    time::{Duration, Instant},
};

use mcp_tasks::{
    ClusterConfig, Engine, State, TaskContext, TaskServer, ToolError, client::TaskClient,
    task_tool, toolkit, trace::TraceContext,
};
use opentelemetry::{
    Value as OtelValue,
    trace::{SpanId, TracerProvider as _},
};
use opentelemetry_sdk::{
    error::OTelSdkResult,
    trace::{SdkTracerProvider, SpanData, SpanExporter},
};
use rmcp::model::{ElicitResult, ElicitationAction, ElicitationSchema};
use serde_json::json;
use tracing::Instrument as _;
use tracing_subscriber::layer::SubscriberExt as _;

/// An exporter that keeps every span it is given (the SDK's own in-memory exporter sits
/// behind its `testing` feature, which brings metrics and logs along).
#[derive(Debug, Clone, Default)]
struct InMemory(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for InMemory {
    async fn export(&self, mut batch: Vec<SpanData>) -> OTelSdkResult {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .append(&mut batch);
        Ok(())
    }
}

impl InMemory {
    fn finished(&self) -> Vec<SpanData> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// The one exporter of this test binary, behind the global subscriber (the work of both
/// engines runs on the runtime's worker threads).
fn exporter() -> InMemory {
    static EXPORTER: OnceLock<InMemory> = OnceLock::new();
    EXPORTER
        .get_or_init(|| {
            let exporter = InMemory::default();
            let provider = SdkTracerProvider::builder()
                .with_simple_exporter(exporter.clone())
                .build();
            let subscriber = tracing_subscriber::registry()
                .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("trace-test")));
            tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
            exporter
        })
        .clone()
}

/// Opens the second step on the instance it belongs to (never on A).
#[derive(Clone)]
struct Gate(Arc<tokio::sync::watch::Sender<bool>>);

impl Gate {
    fn new(open: bool) -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(open)))
    }
}

/// Two steps, then a question, then the result.
#[task_tool(mode = "required", restart = "resume", poll_interval = "20ms")]
async fn journey(ctx: TaskContext, State(gate): State<Gate>) -> Result<String, ToolError> {
    let packed = ctx.step("pack", || async { "packed".to_owned() }).await?;
    let mut open = gate.0.subscribe();
    let shipped = ctx
        .step("ship", || async move {
            let _ = open.wait_for(|open| *open).await;
            "shipped".to_owned()
        })
        .await?;
    let schema = ElicitationSchema::builder()
        .required_bool("ok")
        .build()
        .map_err(|e| ToolError::new(format!("schema: {e:?}")))?;
    let answer = ctx.elicit_form("Deliver?", schema).await?;
    Ok(format!("{packed}, {shipped}, {:?}", answer.action))
}

/// An engine on `db` as instance `name`, served over HTTP.
async fn instance(db: &pg::Db, name: &str, gate: &Gate) -> (Engine, common::Http) {
    let engine = Engine::builder(toolkit![journey].unwrap().with_state(gate.clone()))
        .with_store(db.store().await.expect("connect"))
        .with_instance_id(name)
        .with_cluster(
            ClusterConfig::default()
                .with_lease(Duration::from_secs(30))
                .with_claim_interval(Duration::from_millis(50)),
        )
        .build();
    engine.start().expect("start the cluster loops");
    let http = common::Http::start(TaskServer::from_engine(engine.clone())).await;
    (engine, http)
}

async fn client(url: &str) -> TaskClient {
    TaskClient::builder()
        .with_elicitation(|_params, _cx| async {
            Ok(Some(
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({ "ok": true })),
            ))
        })
        .connect_http(url)
        .await
        .expect("connect")
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| match &kv.value {
            OtelValue::String(s) => s.as_str().to_owned(),
            other => other.to_string(),
        })
}

fn describe(spans: &[&SpanData]) -> String {
    spans
        .iter()
        .map(|s| {
            format!(
                "{} trace={} parent={} {:?}",
                s.name,
                s.span_context.trace_id(),
                s.parent_span_id,
                s.attributes
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_taken_over_by_another_instance_is_one_trace() {
    let exporter = exporter();
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let (gate_a, gate_b) = (Gate::new(false), Gate::new(true));
    let (engine_a, a) = instance(&db, "a", &gate_a).await;
    let (_engine_b, b) = instance(&db, "b", &gate_b).await;

    // The call, under a client span: the client sends its traceparent in `_meta`.
    let call_span = tracing::info_span!("call");
    let client_a = client(&a.url).await;
    let (task, sent) = async {
        let sent = TraceContext::current().expect("the call span has an OpenTelemetry context");
        let call = client_a.call("journey", ()).await.expect("the call");
        (call.into_task().expect("a task"), sent)
    }
    .instrument(call_span.clone())
    .await;
    drop(call_span);
    let id = task.id().to_owned();

    // A runs `pack`, then waits in `ship`; once `pack` is stored, A shuts down: its
    // lease is released and B claims the task.
    let started = Instant::now();
    loop {
        let rows = db
            .raw()
            .await
            .query("SELECT 1 FROM steps WHERE task_id = $1", &[&id])
            .await
            .unwrap();
        if !rows.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "A never stored `pack`"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = engine_a.shutdown(Duration::from_millis(100)).await;
    assert_eq!(report.abandoned, 1, "{report:?}");

    let client_b = client(&b.url).await;
    let mut handle = client_b.task(&id).await.expect("B knows the task");
    let ended = tokio::time::timeout(Duration::from_secs(20), handle.wait())
        .await
        .expect("B finishes the task in time")
        .expect("the task ends");
    let result = ended.into_result(&id).expect("completed");
    assert_eq!(
        result.content[0].as_text().map(|t| t.text.as_str()),
        Some("packed, shipped, Accept"),
        "{result:?}"
    );
    let epoch: i64 = db
        .raw()
        .await
        .query_one("SELECT epoch FROM tasks WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert!(epoch >= 2, "B took the task over (epoch {epoch})");

    // The spans of the journey, as exported (a span is exported when it closes).
    let trace_id = sent.trace_id().to_owned();
    let started = Instant::now();
    let spans = loop {
        let spans = exporter.finished();
        let results = spans
            .iter()
            .filter(|s| s.name == "result" && s.span_context.trace_id().to_string() == trace_id)
            .count();
        let tasks = spans
            .iter()
            .filter(|s| s.name == "task" && attribute(s, "task_id").as_deref() == Some(&*id))
            .count();
        if (results >= 1 && tasks >= 2) || started.elapsed() > Duration::from_secs(5) {
            break spans;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let call = spans
        .iter()
        .find(|s| s.name == "call" && s.span_context.trace_id().to_string() == trace_id)
        .expect("the call span is exported");
    let in_trace = |s: &&SpanData| s.span_context.trace_id().to_string() == trace_id;
    let tasks: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.name == "task" && attribute(s, "task_id").as_deref() == Some(&*id))
        .collect();
    let on = |instance: &str| {
        tasks
            .iter()
            .copied()
            .filter(|s| attribute(s, "instance").as_deref() == Some(instance))
            .collect::<Vec<_>>()
    };
    let (on_a, on_b) = (on("a"), on("b"));
    assert!(!on_a.is_empty(), "a task span on A:\n{}", describe(&tasks));
    assert!(!on_b.is_empty(), "a task span on B:\n{}", describe(&tasks));
    for span in &tasks {
        assert!(
            in_trace(span),
            "every task span is in the client's trace {trace_id}:\n{}",
            describe(&tasks)
        );
        assert_eq!(
            span.parent_span_id,
            call.span_context.span_id(),
            "the task's span is a child of the call:\n{}",
            describe(&tasks)
        );
        assert_eq!(
            attribute(span, "traceparent").as_deref(),
            Some(sent.traceparent()),
            "the stored traceparent is a field of the span"
        );
    }
    assert_eq!(attribute(on_a[0], "epoch").as_deref(), Some("1"));
    assert_eq!(
        attribute(on_b[0], "epoch").as_deref(),
        Some(&*epoch.to_string())
    );
    // Steps, the question and the result: children of the task spans, in the same trace.
    let task_ids: Vec<SpanId> = tasks.iter().map(|s| s.span_context.span_id()).collect();
    let journey: Vec<&SpanData> = spans.iter().filter(in_trace).collect();
    let child = |name: &str, step: Option<&str>, parent: &[&SpanData]| {
        let parents: Vec<SpanId> = parent.iter().map(|s| s.span_context.span_id()).collect();
        journey.iter().copied().any(|s| {
            s.name == name
                && parents.contains(&s.parent_span_id)
                && step.is_none_or(|step| attribute(s, "step").as_deref() == Some(step))
        })
    };
    let all = describe(&journey);
    assert!(child("step", Some("pack"), &on_a), "`pack` on A:\n{all}");
    assert!(child("step", Some("ship"), &on_b), "`ship` on B:\n{all}");
    assert!(child("input", None, &on_b), "the question on B:\n{all}");
    assert!(child("result", None, &on_b), "the result on B:\n{all}");
    assert!(
        journey
            .iter()
            .filter(|s| s.name != "call")
            .all(|s| task_ids.contains(&s.parent_span_id)
                || journey
                    .iter()
                    .any(|p| p.span_context.span_id() == s.parent_span_id)),
        "no span of the journey hangs outside it:\n{all}"
    );
}

/// What a `tools/call` with `traceparent` (and `tracestate`) in its `_meta` stores: the
/// stored trace context and the stored `_meta`'s trace keys, from the task's row.
async fn stored_for(
    http: &mut common::Http,
    db: &pg::Db,
    traceparent: &str,
    tracestate: &str,
) -> (Option<serde_json::Value>, serde_json::Value) {
    let mut meta = common::meta(common::TASKS);
    meta["traceparent"] = json!(traceparent);
    meta["tracestate"] = json!(tracestate);
    let (status, created) = http
        .rpc_meta(
            "tools/call",
            json!({ "name": "journey", "arguments": {} }),
            meta,
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("the call made a task: {created}"))
        .to_owned();
    let row = db
        .raw()
        .await
        .query_one(
            "SELECT trace_context, request_meta FROM tasks WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    let trace: Option<String> = row.get(0);
    let request_meta: String = row.get(1);
    let request_meta: serde_json::Value = serde_json::from_str(&request_meta).unwrap();
    let trace_keys = json!([
        request_meta.get("traceparent"),
        request_meta.get("tracestate")
    ]);
    (
        trace.map(|t| serde_json::from_str(&t).expect("JSON")),
        trace_keys,
    )
}

/// A malformed `traceparent` never fails the call and is never stored (neither as the
/// task's trace context nor in its stored `_meta`: with the `opentelemetry` feature the
/// server's current span stands in); a valid one is stored, and a malformed or oversized
/// `tracestate` beside it is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_valid_trace_context_is_stored() {
    let _exporter = exporter();
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let gate = Gate::new(false);
    let (engine, mut http) = instance(&db, "solo", &gate).await;
    let valid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let none = json!([null, null]);

    for malformed in [
        "garbage",
        "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        &format!("{valid}{}", "0".repeat(10_000)),
    ] {
        let (trace, trace_keys) = stored_for(&mut http, &db, malformed, "a=b").await;
        assert_eq!(trace_keys, none, "{malformed:.60}");
        // Under the `opentelemetry` feature the server's own current span (rmcp's session
        // span here) stands in for a context the client did not send (validly).
        let stored = trace.map(|t| t["traceparent"].as_str().unwrap().to_owned());
        assert!(
            stored
                .as_deref()
                .is_none_or(|stored| !stored.contains("0af7651916cd43dd8448eb211c80319c")),
            "{malformed:.60} stored as {stored:?}"
        );
    }
    let stored = stored_for(&mut http, &db, valid, "rojo=00f067aa0ba902b7").await;
    assert_eq!(
        stored,
        (
            Some(json!({ "traceparent": valid, "tracestate": "rojo=00f067aa0ba902b7" })),
            none.clone()
        )
    );
    let oversized = format!("k={}", "v".repeat(1000));
    for tracestate in ["no-equals-sign", oversized.as_str()] {
        let stored = stored_for(&mut http, &db, valid, tracestate).await;
        assert_eq!(
            stored,
            (Some(json!({ "traceparent": valid })), none.clone()),
            "{tracestate:.40}"
        );
    }
    let _ = engine.shutdown(Duration::ZERO).await;
}

/// A replay at restart continues the trace too: on one SQLite file, the first engine runs
/// `pack` and shuts down mid-`ship` (the task stays as stored), the second recovers and
/// finishes it; both runs' task spans are children of the caller's span (a `traceparent`
/// sent by hand, as a client without OpenTelemetry would).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_replayed_at_restart_is_one_trace() {
    let exporter = exporter();
    let path = std::env::temp_dir().join(format!(
        "mcp-tasks-trace-{}-{}.db",
        std::process::id(),
        pg::unique_schema()
    ));
    let engine_on = |gate: &Gate| {
        Engine::builder(toolkit![journey].unwrap().with_state(gate.clone()))
            .with_store(mcp_tasks::SqliteStore::open(&path).expect("open the database"))
            .build()
    };
    let first = engine_on(&Gate::new(false));
    let mut http = common::Http::start(TaskServer::from_engine(first.clone())).await;
    let sent = "00-5b8aa5a2d2c872e8321cf37308d69df2-051581bf3cb55c13-01";
    let mut meta = common::meta(common::TASKS);
    meta["traceparent"] = json!(sent);
    let (_, created) = http
        .rpc_meta(
            "tools/call",
            json!({ "name": "journey", "arguments": {} }),
            meta,
        )
        .await;
    let id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    let started = Instant::now();
    while !exporter
        .finished()
        .iter()
        .any(|s| s.name == "step" && s.span_context.trace_id().to_string() == sent[3..35])
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "`pack` never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = first.shutdown(Duration::from_millis(100)).await;
    assert_eq!(report.abandoned, 1, "{report:?}");

    let second = engine_on(&Gate::new(true));
    assert_eq!(second.recover().await.expect("recover").resumed, 1);
    let http = common::Http::start(TaskServer::from_engine(second.clone())).await;
    let mut handle = client(&http.url).await.task(&id).await.expect("the task");
    tokio::time::timeout(Duration::from_secs(20), handle.wait())
        .await
        .expect("the replay finishes in time")
        .expect("the task ends")
        .into_result(&id)
        .expect("completed");
    let _ = second.shutdown(Duration::ZERO).await;
    let _ = std::fs::remove_file(&path);

    let spans = exporter.finished();
    let runs: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.name == "task" && attribute(s, "task_id").as_deref() == Some(&*id))
        .collect();
    assert_eq!(
        runs.len(),
        2,
        "the first run and the replay:\n{}",
        describe(&runs)
    );
    for run in &runs {
        assert_eq!(
            run.span_context.trace_id().to_string(),
            "5b8aa5a2d2c872e8321cf37308d69df2",
            "{}",
            describe(&runs)
        );
        assert_eq!(run.parent_span_id.to_string(), "051581bf3cb55c13");
        assert!(run.parent_span_is_remote, "the caller's span is remote");
    }
}
