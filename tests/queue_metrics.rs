//! The queue metrics by owner bucket (`ClusterConfig::with_owner_buckets`): the queue depth
//! and the claim lag of a Postgres task space, labelled by tool and by the bucket the
//! application derives from each owner, never by owner id. Its own process: the recorder is
//! global.

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
    let key = format!("mcp_tasks_queue_depth{{tool=\"hold\",owner_bucket=\"{bucket}\"}}");
    page.get(&key).copied().unwrap_or(f64::NAN)
}

fn lag_count(page: &BTreeMap<String, f64>, bucket: &str) -> f64 {
    let key =
        format!("mcp_tasks_claim_lag_seconds_count{{tool=\"hold\",owner_bucket=\"{bucket}\"}}");
    page.get(&key).copied().unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_metrics_are_labelled_by_owner_bucket() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let handle = mcp_tasks::metrics::install_prometheus().expect("the first recorder");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics = format!("http://{}/metrics", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, mcp_tasks::metrics::prometheus_router(handle)).await
    });
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
