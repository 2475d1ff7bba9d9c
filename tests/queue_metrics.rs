//! The queue metrics by owner bucket (`ClusterConfig::with_owner_buckets`): the queue depth
//! and the claim lag of a Postgres task space, labelled by tool and by the bucket the
//! application derives from each owner, never by owner id; and in one process, the tasks a
//! tool's limit holds back. Its own binary: the recorder is global (installed once, shared
//! by the tests when they run in one process).

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use common::{Http, Patience};
use mcp_tasks::{
    ClusterConfig, Engine, HttpOptions, State, StaticTokens, TaskServer, ToolError, task_tool,
    toolkit,
};
use serde_json::json;
use tokio::sync::Semaphore;

const TOKENS: &str = "trial-1:TOKEN_T1,trial-2:TOKEN_T2,acme:TOKEN_ACME";

/// Holds until the test lets it go.
#[task_tool(mode = "required", poll_interval = "50ms")]
async fn hold(State(gate): State<Arc<Semaphore>>) -> Result<String, ToolError> {
    gate.acquire().await.expect("open").forget();
    Ok("held".to_owned())
}

fn config() -> ClusterConfig {
    ClusterConfig::default()
        .with_claim_interval(Duration::from_millis(50))
        .with_owner_buckets(|owner: &str| {
            if owner.starts_with("trial-") {
                "trial"
            } else {
                "paid"
            }
            .to_owned()
        })
}

/// The page's samples: series (as printed, labels sorted as the exporter prints them) to
/// value.
async fn scrape(url: &str) -> BTreeMap<String, f64> {
    let page = reqwest::get(url).await.unwrap().text().await.unwrap();
    page.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a sample line");
            (series.to_owned(), value.parse().unwrap_or(f64::NAN))
        })
        .collect()
}

fn depth(page: &BTreeMap<String, f64>, bucket: &str) -> f64 {
    depth_of(page, "hold", bucket)
}

fn depth_of(page: &BTreeMap<String, f64>, tool: &str, bucket: &str) -> f64 {
    let key = format!("mcp_tasks_queue_depth{{tool=\"{tool}\",owner_bucket=\"{bucket}\"}}");
    page.get(&key).copied().unwrap_or(f64::NAN)
}

fn lag_count(page: &BTreeMap<String, f64>, bucket: &str) -> f64 {
    lag_count_of(page, "hold", bucket)
}

fn lag_count_of(page: &BTreeMap<String, f64>, tool: &str, bucket: &str) -> f64 {
    let key =
        format!("mcp_tasks_claim_lag_seconds_count{{tool=\"{tool}\",owner_bucket=\"{bucket}\"}}");
    page.get(&key).copied().unwrap_or(0.0)
}

/// The process's recorder, installed by the first test that asks, and a page of its
/// samples served on this test's runtime: its url.
async fn metrics_page() -> String {
    static HANDLE: std::sync::OnceLock<mcp_tasks::metrics::PrometheusHandle> =
        std::sync::OnceLock::new();
    let handle = HANDLE
        .get_or_init(|| mcp_tasks::metrics::install_prometheus().expect("the first recorder"))
        .clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, mcp_tasks::metrics::prometheus_router(handle)).await
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_metrics_are_labelled_by_owner_bucket() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let metrics = metrics_page().await;
    let gate = Arc::new(Semaphore::new(0));
    // A front that records the calls queued, and an instance that runs one at a time.
    let front = Engine::builder(toolkit![hold].expect("toolkit").with_state(gate.clone()))
        .with_shared_store(Arc::new(db.store().await.expect("connect")))
        .with_cluster(config().with_queued_calls(true).with_execution(false))
        .build();
    let options = HttpOptions::new().with_static_tokens(StaticTokens::parse(TOKENS).unwrap());
    let front = Http::start_router(mcp_tasks::http_router(
        TaskServer::from_engine(front),
        options,
    ))
    .await
    .url;
    let runner = Engine::builder(toolkit![hold].expect("toolkit").with_state(gate.clone()))
        .with_store(db.store().await.expect("connect"))
        .with_max_running(1)
        .with_cluster(config())
        .build_worker()
        .start()
        .expect("the worker starts");
    for (token, calls) in [("TOKEN_T1", 3), ("TOKEN_T2", 2), ("TOKEN_ACME", 2)] {
        for _ in 0..calls {
            Http::to(&front)
                .bearing(token)
                .call_task("hold", json!({}))
                .await;
        }
    }
    // One runs; six wait, counted by bucket: 5 trial and 2 paid tasks, less the one running.
    let patience = Patience::new("six tasks queued in the samples");
    let page = loop {
        let page = scrape(&metrics).await;
        if depth(&page, "trial") + depth(&page, "paid") == 6.0 {
            break page;
        }
        patience.wait().await;
    };
    assert!(
        depth(&page, "trial") >= 4.0 && depth(&page, "paid") >= 1.0,
        "{page:?}"
    );
    for series in page.keys() {
        for owner in ["trial-1", "trial-2", "acme"] {
            assert!(!series.contains(owner), "an owner id as a label: {series}");
        }
    }
    // All run; the queue drains in each bucket, and each claim's lag is in its bucket.
    gate.add_permits(7);
    let patience = Patience::new("the queue drained, every claim's lag recorded");
    loop {
        let page = scrape(&metrics).await;
        if depth(&page, "trial") == 0.0
            && depth(&page, "paid") == 0.0
            && lag_count(&page, "trial") == 5.0
            && lag_count(&page, "paid") == 2.0
        {
            break;
        }
        patience.wait().await;
    }
    runner.shutdown(Duration::from_secs(5)).await;
}

/// One at a time; holds until the test lets it go.
#[task_tool(mode = "required", concurrency = 1, poll_interval = "50ms")]
async fn pace(State(gate): State<Arc<Semaphore>>) -> Result<String, ToolError> {
    gate.acquire().await.expect("open").forget();
    Ok("paced".to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tasks_held_back_in_one_process_are_its_queue() {
    let metrics = metrics_page().await;
    let gate = Arc::new(Semaphore::new(0));
    let server = TaskServer::new(toolkit![pace].expect("toolkit").with_state(gate.clone()));
    let url = Http::start(server).await.url;
    for _ in 0..5 {
        Http::to(&url).call_task("pace", json!({})).await;
    }
    // One runs; four are held back.
    let patience = Patience::new("four tasks held in the samples");
    while depth_of(&scrape(&metrics).await, "pace", "all") != 4.0 {
        patience.wait().await;
    }
    gate.add_permits(5);
    let patience = Patience::new("the held tasks started, each one's wait recorded");
    loop {
        let page = scrape(&metrics).await;
        if depth_of(&page, "pace", "all") == 0.0 && lag_count_of(&page, "pace", "all") == 4.0 {
            break;
        }
        patience.wait().await;
    }
}
