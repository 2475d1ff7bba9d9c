//! An independent client listening to our server: tower-mcp 0.25.0's `McpClient` (its own
//! Streamable HTTP transport, 2026-07-28 wire, the Tasks extension declared) opens
//! `subscriptions/listen` with `taskIds` on an mcp-tasks server and follows a task by what
//! we push (docs/protocol.md R39-R44, C22-C26).
//!
//! What it shows: their client accepts our acknowledgement (naming only the task it may
//! follow, not an unknown id), reads each `notifications/tasks` as a valid `DetailedTask`
//! with our subscription id on it, sees every status message change in order and then the
//! terminal state with the result (equal to what their `tasks/get` reads), nothing after,
//! and ends the stream with its own cancel.

use std::{
    sync::{Arc, LazyLock, Mutex},
    time::Duration,
};

use mcp_tasks::{Engine, HttpOptions, TaskContext, TaskServer, ToolError, task_tool, toolkit};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};
use tower_mcp::{
    ClientHandler, HttpClientTransport, McpClient, ProtocolSupport,
    client::{ServerNotification, TaskAwareCallToolOutcome},
    extension::ExtensionDeclaration,
    protocol::{RequestId, SubscriptionFilter, TASKS_EXTENSION_ID},
};

/// One step of `stepper` per permit.
static GATE: LazyLock<Arc<Semaphore>> = LazyLock::new(|| Arc::new(Semaphore::new(0)));

/// Sets its status message to "step 1" .. "step `steps`", one per permit, then ends after
/// one more permit.
#[task_tool(mode = "required", poll_interval = "10s", ttl = "10m")]
async fn stepper(ctx: TaskContext, steps: u32) -> Result<String, ToolError> {
    for n in 1..=steps {
        GATE.acquire().await.expect("gate").forget();
        ctx.status(format!("step {n}")).await;
    }
    GATE.acquire().await.expect("gate").forget();
    Ok(format!("done after {steps} steps"))
}

/// The one step of `marker`.
static MARK: LazyLock<Arc<Semaphore>> = LazyLock::new(|| Arc::new(Semaphore::new(0)));

/// Sets its status message to "mark" after one permit of [`MARK`], then ends after one
/// more: a change the test makes after the ones it forbids, so that what is forbidden had
/// its chance to come first.
#[task_tool(mode = "required", poll_interval = "10s", ttl = "10m")]
async fn marker(ctx: TaskContext) -> Result<String, ToolError> {
    MARK.acquire().await.expect("mark").forget();
    ctx.status("mark").await;
    MARK.acquire().await.expect("mark").forget();
    Ok("marked".to_owned())
}

/// Every notification their client hands its handler, with the subscription it came on.
struct Recorder(Mutex<mpsc::UnboundedSender<(Option<RequestId>, ServerNotification)>>);

#[async_trait::async_trait]
impl ClientHandler for Recorder {
    async fn on_notification(&self, notification: ServerNotification) {
        let item = match notification {
            ServerNotification::Subscription {
                subscription_id,
                notification,
            } => (Some(subscription_id), *notification),
            other => (None, other),
        };
        let _ = self.0.lock().unwrap().send(item);
    }
}

async fn our_server() -> String {
    let engine = Engine::new(toolkit![stepper, marker].expect("a toolkit"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let server = TaskServer::from_engine(engine);
    tokio::spawn(mcp_tasks::serve_http(listener, server, HttpOptions::new()));
    url
}

/// The `DetailedTask` part of a task object: without `_meta` and `resultType`.
fn detailed(mut value: Value) -> Value {
    if let Some(map) = value.as_object_mut() {
        map.remove("_meta");
        map.remove("resultType");
    }
    value
}

#[tokio::test]
async fn tower_mcp_client_follows_our_task_by_listening() {
    let url = our_server().await;
    let (sender, mut notifications) = mpsc::unbounded_channel();
    let client = McpClient::builder()
        .protocol_support(ProtocolSupport::try_new(["2026-07-28"]).unwrap())
        .with_protocol_extension(ExtensionDeclaration::empty(TASKS_EXTENSION_ID).unwrap())
        .connect(HttpClientTransport::new(&url), Recorder(Mutex::new(sender)))
        .await
        .expect("their client connects to our server");
    client
        .discover("tower-mcp-interop", "0.25.0")
        .await
        .expect("server/discover");

    let created = client
        .call_tool_once_task_aware("stepper", json!({ "steps": 2 }), None, None)
        .await
        .expect("tools/call");
    let TaskAwareCallToolOutcome::Task(created) = created else {
        panic!("our server creates a task for a task-required tool: {created:?}");
    };
    let task_id = created.task.metadata.task_id.clone();
    let marked = client
        .call_tool_once_task_aware("marker", json!({}), None, None)
        .await
        .expect("tools/call");
    let TaskAwareCallToolOutcome::Task(marked) = marked else {
        panic!("our server creates a task for a task-required tool: {marked:?}");
    };
    let mark_id = marked.task.metadata.task_id.clone();

    let mut listen = client
        .listen_subscriptions(SubscriptionFilter {
            task_ids: Some(vec![
                task_id.clone(),
                mark_id.clone(),
                "no-such-task".to_owned(),
            ]),
            ..Default::default()
        })
        .await
        .expect("subscriptions/listen");
    let agreed = tokio::time::timeout(Duration::from_secs(10), listen.acknowledged())
        .await
        .expect("the acknowledgement in time")
        .expect("the acknowledgement");
    assert_eq!(
        agreed.task_ids,
        Some(vec![task_id.clone(), mark_id.clone()]),
        "only the caller's own tasks are agreed, not an unknown id"
    );
    let subscription = listen.id().clone();

    // The task's state at once, then one notification per change: read each as their
    // client does, then let the tool take its next step.
    let mut seen = Vec::new();
    let mut terminal = None;
    for step in 0..=3 {
        let (on, notification) = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match notifications.recv().await.expect("the client runs") {
                    (_, ServerNotification::SubscriptionAcknowledged { .. }) => {}
                    // The mark's own state, before its change.
                    (_, ServerNotification::FinalTaskStatusChanged(params))
                        if serde_json::to_value(&params.task).unwrap()["taskId"]
                            == json!(mark_id) => {}
                    other => break other,
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("notification {step} in time (seen: {seen:?})"));
        assert_eq!(
            on.as_ref(),
            Some(&subscription),
            "every message carries the subscription id"
        );
        let ServerNotification::FinalTaskStatusChanged(params) = notification else {
            panic!("a notifications/tasks their client reads as one: {notification:?}");
        };
        let state = serde_json::to_value(&params.task).unwrap();
        assert_eq!(state["taskId"], json!(task_id));
        seen.push((state["status"].clone(), state["statusMessage"].clone()));
        if step < 3 {
            GATE.add_permits(1);
        } else {
            terminal = Some(state);
        }
    }
    assert_eq!(
        seen,
        vec![
            (json!("working"), Value::Null),
            (json!("working"), json!("step 1")),
            (json!("working"), json!("step 2")),
            (json!("completed"), Value::Null),
        ],
        "every change, in order"
    );
    let terminal = terminal.unwrap();
    assert_eq!(
        terminal["result"]["content"][0]["text"],
        json!("done after 2 steps"),
        "the terminal notification carries the result: {terminal}"
    );
    let got = client
        .task_get_detailed(&task_id)
        .await
        .expect("their tasks/get");
    assert_eq!(
        detailed(terminal),
        detailed(serde_json::to_value(&got.task).unwrap()),
        "the pushed terminal state is what tasks/get reads"
    );

    // Nothing after the terminal state: nothing of the task before the mark's change, made
    // after it.
    MARK.add_permits(1);
    let after = tokio::time::timeout(Duration::from_secs(10), async {
        let mut after = Vec::new();
        loop {
            let (on, notification) = notifications.recv().await.expect("the client runs");
            if let ServerNotification::FinalTaskStatusChanged(params) = &notification {
                let state = serde_json::to_value(&params.task).unwrap();
                if state["taskId"] == json!(mark_id) {
                    if state["statusMessage"] == "mark" {
                        break after;
                    }
                    continue;
                }
            }
            after.push((on, notification));
        }
    })
    .await
    .expect("the mark's change in time");
    assert!(
        after.is_empty(),
        "nothing after the terminal state: {after:?}"
    );
    listen.cancel().await.expect("their client ends the stream");
    client.shutdown().await.expect("shutdown");
}
