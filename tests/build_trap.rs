//! The build-per-request trap (guide 01, "The trap: build the engine once"), built on
//! purpose: rmcp's `StreamableHttpService` calls its factory for every request, and this
//! factory builds a new `TaskServer` (a new engine and memory store) each time. The server
//! logs a warning naming the guide page, and the `tasks/get` that follows a created task
//! answers `-32602` with a message that names the common causes. Its own process: the
//! warnings are captured by a global `tracing` subscriber.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use mcp_tasks::{
    TaskContext, TaskServer, ToolError,
    client::{Call, ClientError, TaskClient},
    task_tool, toolkit,
};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tracing_subscriber::{Layer, layer::SubscriberExt};

#[path = "support/postgres.rs"]
mod pg;

/// The warnings of this process: one global subscriber for both tests.
fn warnings() -> &'static Warnings {
    static WARNINGS: std::sync::OnceLock<Warnings> = std::sync::OnceLock::new();
    WARNINGS.get_or_init(|| {
        let warnings = Warnings::default();
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(warnings.clone()),
        )
        .expect("the first subscriber");
        warnings
    })
}

/// Runs for a while, so its engine (and its store) stay alive.
#[task_tool(mode = "required")]
async fn reindex(ctx: TaskContext, collection: String) -> Result<String, ToolError> {
    ctx.until_cancelled(tokio::time::sleep(Duration::from_secs(30)))
        .await?;
    Ok(collection)
}

/// The message of every warning, wherever it was logged.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        if *event.metadata().level() == tracing::Level::WARN {
            let mut message = Message(String::new());
            event.record(&mut message);
            self.0.lock().unwrap().push(message.0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_built_per_request_is_warned_about_and_explained() {
    let warnings = warnings();

    // Wrong on purpose: a new engine, and a new memory store, for every request.
    let service = StreamableHttpService::new(
        || Ok(TaskServer::new(toolkit![reindex].expect("valid tools"))),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let client = TaskClient::builder()
        .connect_http(&url)
        .await
        .expect("connect");
    let mut ids = Vec::new();
    for collection in ["a", "b", "c"] {
        let args = serde_json::json!({ "collection": collection });
        match client.call("reindex", args.as_object().cloned()).await {
            Ok(Call::Task(task)) => ids.push(task.id().to_owned()),
            other => panic!("a task, not {other:?}"),
        }
    }
    let lost = match client.task(&ids[0]).await {
        Err(ClientError::Rpc { error, .. }) => error,
        other => panic!("the task is unknown to the next request's engine, not {other:?}"),
    };
    assert_eq!(lost.code.0, -32602);
    assert!(
        lost.message.starts_with("tasks/get: task not found. ")
            && lost
                .message
                .contains("builds a new engine for each request")
            && lost.message.contains("docs/guide/08-troubleshooting.md"),
        "{}",
        lost.message
    );

    let warned = warnings.0.lock().unwrap().clone();
    let trap: Vec<&String> = warned
        .iter()
        .filter(|w| w.contains("docs/guide/01-rmcp-server.md"))
        .collect();
    assert_eq!(trap.len(), 1, "one warning at the 3rd build: {warned:#?}");
    assert!(
        trap[0].contains("engine built per request") && trap[0].contains("build the engine once"),
        "{}",
        trap[0]
    );
}

/// An instance on a shared store built without a request-state key says so (its sealed
/// state would be refused by the other instances); with one it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_on_a_shared_store_without_a_request_state_key_warns() {
    let warnings = warnings();
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let about_key = |warned: &[String]| {
        warned
            .iter()
            .filter(|w| w.contains("request-state key") && w.contains("05-several-instances"))
            .count()
    };
    let before = about_key(&warnings.0.lock().unwrap());
    let keyed = mcp_tasks::Engine::builder(toolkit![reindex].expect("valid tools"))
        .with_store(db.store().await.expect("the store connects"))
        .with_request_state_key(
            mcp_tasks::RequestStateKey::new("0123456789abcdef0123456789abcdef").unwrap(),
        )
        .build();
    assert_eq!(about_key(&warnings.0.lock().unwrap()), before);
    let unkeyed = mcp_tasks::Engine::builder(toolkit![reindex].expect("valid tools"))
        .with_store(db.store().await.expect("the store connects"))
        .build();
    assert_eq!(about_key(&warnings.0.lock().unwrap()), before + 1);
    drop((keyed, unkeyed));
}
