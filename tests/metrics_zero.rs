//! Every metric of the operating guide's table is on the Prometheus page of a server that has
//! done nothing yet, at 0 (issue 32): a dashboard or an alert on `tasks_input_required` or
//! `requests_refused_total` reads 0 on a healthy new server, not "no data". Its own process:
//! the recorder is global.

use std::collections::BTreeMap;

use mcp_tasks::{Engine, TaskContext, ToolError, task_tool, toolkit};

/// Waits to be cancelled.
#[task_tool(mode = "required")]
async fn waits(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Err(ToolError::cancelled())
}

/// Echoes, inline: never a task, so no task series.
#[task_tool(mode = "inline")]
async fn echo(text: String) -> String {
    text
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

/// The page's samples: series (as printed) to value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a sample line");
            (series.to_owned(), value.parse().unwrap_or(f64::NAN))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_server_shows_every_metric_at_zero() {
    let handle = mcp_tasks::metrics::install_prometheus().expect("the first recorder");
    let _engine = Engine::new(toolkit![waits, echo].expect("valid tools"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, mcp_tasks::metrics::prometheus_router(handle)).await
    });
    let page = reqwest::get(&url).await.unwrap().text().await.unwrap();
    let samples = samples(&page);

    for name in documented() {
        let series: Vec<(&String, &f64)> = samples
            .iter()
            .filter(|(series, _)| {
                let family = series.split('{').next().unwrap_or_default();
                family == name || family == format!("{name}_count")
            })
            .collect();
        assert!(!series.is_empty(), "{name} is not on the page:\n{page}");
        for (series, value) in series {
            assert_eq!(*value, 0.0, "{series} on a new server");
        }
    }
    for series in [
        r#"mcp_tasks_tasks_input_required{tool="waits"}"#,
        r#"mcp_tasks_tasks_created_total{tool="waits"}"#,
        r#"mcp_tasks_tasks_finished_total{tool="waits",status="failed"}"#,
        r#"mcp_tasks_requests_refused_total{code="-32602"}"#,
        r#"mcp_tasks_store_operation_seconds_count{operation="create"}"#,
    ] {
        assert_eq!(samples.get(series), Some(&0.0), "{series}:\n{page}");
    }
    assert!(
        !page.contains(r#"tool="echo""#),
        "an inline tool never runs as a task:\n{page}"
    );
}
