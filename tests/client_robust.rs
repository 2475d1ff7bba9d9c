//! Client robustness (issue 12, item 8), against our server over Streamable HTTP on
//! 127.0.0.1:0:
//! - before a task exists (an `input_required` answer to `tools/call`, docs/protocol.md C20), a
//!   handler that answers "later" is asked again after a pause, without re-sending the call,
//!   and past the input wait the call fails with a clear error; it never spins through every
//!   round in milliseconds;
//! - the input keys a client answered travel in the saved task reference, so a resumed
//!   client never asks the person the same question twice, even while a server's snapshot
//!   still lists the key (R32).

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use mcp_tasks::{
    State, TaskContext, TaskServer, ToolError,
    client::{ClientError, TaskClient, TaskClientBuilder, TaskReference},
    task_tool, toolkit,
};
use rmcp::model::{ElicitResult, ElicitationAction, ElicitationSchema, TaskStatus};
use serde_json::json;

/// Counts `tools/call` rounds that reached the tool.
#[derive(Clone, Default)]
struct Rounds(Arc<AtomicUsize>);

fn yes_no() -> ElicitationSchema {
    ElicitationSchema::builder()
        .required_bool("ok")
        .build()
        .expect("schema")
}

/// Asks before any task exists (multi round-trip), then finishes as a task.
#[task_tool(mode = "required", poll_interval = "10ms")]
async fn confirm_first(
    ctx: TaskContext,
    State(rounds): State<Rounds>,
) -> Result<String, ToolError> {
    rounds.0.fetch_add(1, Ordering::SeqCst);
    let answer = ctx.elicit_form_before_task("Go ahead?", yes_no()).await?;
    Ok(format!("{:?}", answer.action))
}

/// Asks once inside the task and waits for the answer.
#[task_tool(mode = "required", poll_interval = "10ms")]
async fn ask_in_task(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.status("about to ask").await;
    let answer = ctx.elicit_form("Really?", yes_no()).await?;
    Ok(format!("{:?}", answer.action))
}

async fn serve(rounds: &Rounds) -> String {
    let toolkit = toolkit![confirm_first, ask_in_task]
        .unwrap()
        .with_state(rounds.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(mcp_tasks::serve_http(
        listener,
        TaskServer::new(toolkit),
        mcp_tasks::HttpOptions::new(),
    ));
    url
}

fn accept() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Accept).with_content(json!({ "ok": true }))
}

/// A handler that answers "later" `later` times, then accepts; records when it was asked.
fn later_then_accept(later: usize, asked: &Arc<Mutex<Vec<Instant>>>) -> TaskClientBuilder {
    let asked = asked.clone();
    TaskClient::builder()
        .with_default_poll_interval(Duration::from_millis(100))
        .with_elicitation(move |_request, _cx| {
            let asked = asked.clone();
            async move {
                let mut asked = asked.lock().unwrap();
                asked.push(Instant::now());
                Ok((asked.len() > later).then(accept))
            }
        })
}

#[tokio::test]
async fn later_before_a_task_waits_instead_of_spinning() {
    let rounds = Rounds::default();
    let url = serve(&rounds).await;
    let asked = Arc::new(Mutex::new(Vec::new()));
    let client = later_then_accept(3, &asked)
        .connect_http(&url)
        .await
        .unwrap();
    let started = Instant::now();
    let result = client.call_tool("confirm_first", ()).await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(
        result.content[0].as_text().map(|t| t.text.as_str()),
        Some("Accept")
    );
    // Asked four times, a default poll interval apart, and the call went to the server
    // only twice: the first round and the retry with the answer.
    let asked = asked.lock().unwrap();
    assert_eq!(asked.len(), 4);
    for pair in asked.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= Duration::from_millis(90),
            "asked again after {gap:?}"
        );
    }
    assert!(elapsed >= Duration::from_millis(290), "{elapsed:?}");
    assert_eq!(rounds.0.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn later_forever_before_a_task_is_a_clear_error() {
    let rounds = Rounds::default();
    let url = serve(&rounds).await;
    let asked = Arc::new(Mutex::new(Vec::new()));
    let client = later_then_accept(usize::MAX, &asked)
        .with_max_input_wait(Duration::from_millis(350))
        .connect_http(&url)
        .await
        .unwrap();
    let started = Instant::now();
    let error = client.call_tool("confirm_first", ()).await.unwrap_err();
    let elapsed = started.elapsed();
    let ClientError::InputNotAnswered { tool, keys, waited } = &error else {
        panic!("expected InputNotAnswered, got {error:?}");
    };
    assert_eq!(tool, "confirm_first");
    assert_eq!(keys.len(), 1);
    assert!(*waited >= Duration::from_millis(350), "{waited:?}");
    assert!(error.to_string().contains("with_max_input_wait"), "{error}");
    assert!(
        elapsed >= Duration::from_millis(350) && elapsed < Duration::from_secs(5),
        "{elapsed:?}"
    );
    // One round reached the server; the handler was asked every 100 ms, not in a spin.
    assert_eq!(rounds.0.load(Ordering::SeqCst), 1);
    let asked = asked.lock().unwrap().len();
    assert!((3..=6).contains(&asked), "asked {asked} times");
}

#[tokio::test]
async fn answered_keys_travel_in_the_reference_r32() {
    let rounds = Rounds::default();
    let url = serve(&rounds).await;
    let asked = Arc::new(AtomicUsize::new(0));
    let counting = |asked: &Arc<AtomicUsize>| {
        let asked = asked.clone();
        TaskClient::builder().with_elicitation(move |_request, _cx| {
            asked.fetch_add(1, Ordering::SeqCst);
            async { Ok(Some(accept())) }
        })
    };
    // A first client answers the question and saves the reference.
    let first = counting(&asked).connect_http(&url).await.unwrap();
    let mut task = first
        .call("ask_in_task", ())
        .await
        .unwrap()
        .into_task()
        .expect("a task");
    while asked.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(task.poll_interval()).await;
        task.poll().await.unwrap();
    }
    let saved = task.reference().to_json();
    let key = task.answered_keys()[0].to_owned();
    assert!(
        saved.contains(&format!("\"answeredKeys\":[\"{key}\"]")),
        "{saved}"
    );
    let reference = TaskReference::from_json(&saved).unwrap();
    assert_eq!(reference.answered_keys.iter().collect::<Vec<_>>(), [&key]);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    first.close().await;

    // A resumed client follows it to the end without asking again.
    let asked_again = Arc::new(AtomicUsize::new(0));
    let second = counting(&asked_again).connect_http(&url).await.unwrap();
    let mut resumed = second.resume(&reference).await.unwrap();
    assert_eq!(resumed.answered_keys(), [key.as_str()]);
    let outcome = resumed.wait().await.unwrap();
    assert!(
        matches!(outcome, mcp_tasks::client::TaskEnd::Completed(_)),
        "{outcome:?}"
    );
    assert_eq!(asked_again.load(Ordering::SeqCst), 0);
}

/// A server whose snapshot still lists a key the client answered (an eventually consistent
/// store, or an answer lost between the person and the server): the resumed client does not
/// ask it again, while a client without the reference's keys would.
#[tokio::test]
async fn a_resumed_client_never_asks_an_answered_key_again_r32() {
    let rounds = Rounds::default();
    let url = serve(&rounds).await;
    let asked = Arc::new(AtomicUsize::new(0));
    let later = {
        let asked = asked.clone();
        TaskClient::builder().with_elicitation(move |_request, _cx| {
            asked.fetch_add(1, Ordering::SeqCst);
            async { Ok(None) }
        })
    };
    let client = later.connect_http(&url).await.unwrap();
    let mut task = client
        .call("ask_in_task", ())
        .await
        .unwrap()
        .into_task()
        .expect("a task");
    while task.status() != TaskStatus::InputRequired {
        tokio::time::sleep(task.poll_interval()).await;
        task.poll().await.unwrap();
    }
    let outstanding: Vec<String> = match &task.snapshot().payload {
        rmcp::model::TaskPayload::InputRequired { input_requests } => {
            input_requests.keys().cloned().collect()
        }
        other => panic!("{other:?}"),
    };
    // The person answered `outstanding` elsewhere; the reference says so.
    let reference = task.reference().with_answered_keys(outstanding);
    let before = asked.load(Ordering::SeqCst);
    let mut resumed = client.resume(&reference).await.unwrap();
    resumed.poll().await.unwrap();
    resumed.poll().await.unwrap();
    assert_eq!(
        asked.load(Ordering::SeqCst),
        before,
        "asked an answered key again"
    );
    // Control: a handle that does not know the keys asks.
    let mut fresh = client.task(task.id()).await.unwrap();
    fresh.poll().await.unwrap();
    assert_eq!(asked.load(Ordering::SeqCst), before + 1);
}

#[test]
fn old_references_still_read() {
    let old = r#"{"endpoint":{"transport":"http","url":"http://127.0.0.1:1/mcp"},"taskId":"t"}"#;
    let reference = TaskReference::from_json(old).unwrap();
    assert!(reference.answered_keys.is_empty());
    assert_eq!(reference.to_json(), old);
}
