//! Safe defaults at the HTTP edge (issue 30, "Safe by default"), over real sockets on
//! 127.0.0.1: an anonymous bind beyond loopback refuses to start; a client that never
//! finishes its headers is dropped; a body that does not arrive in time is answered 408 and
//! creates no task; connections beyond the cap are closed at once; task listen streams end
//! when idle, at their maximum lifetime and when their token is no longer accepted, and the
//! crate's client follows a task across such an end; the admin router throttles wrong
//! credentials and logs every failed login, cancel and purge as an audit event.

mod common;

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use common::{Http, PATIENCE, Patience, TASKS};
use mcp_tasks::{
    AuthError, Engine, HttpOptions, Owner, StaticTokens, TaskContext, TaskServer, ToolError,
    admin::{self, AUDIT_TARGET, AdminCredential},
    client::{TaskClient, TaskEnd},
    store::{NewTask, admin::TaskFilter},
    task_tool, toolkit,
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// Runs until cancelled: its task never changes on its own.
#[task_tool(mode = "required", poll_interval = "20ms", ttl = "10m")]
async fn idle(ctx: TaskContext) -> Result<String, ToolError> {
    ctx.cancelled().await;
    Ok("cancelled".into())
}

/// Takes a while, then answers.
#[task_tool(mode = "required", poll_interval = "20ms", ttl = "10m")]
async fn slow() -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_millis(800)).await;
    Ok("done".into())
}

fn engine() -> Engine {
    Engine::builder(toolkit![idle, slow].expect("a toolkit")).build()
}

/// `serve_http` of `engine` with `options` on 127.0.0.1:0; its address.
async fn serve(engine: &Engine, options: HttpOptions) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = TaskServer::from_engine(engine.clone());
    tokio::spawn(async move { mcp_tasks::serve_http(listener, server, options).await });
    addr
}

fn http(addr: SocketAddr) -> Http {
    Http {
        url: format!("http://{addr}/mcp"),
        client: reqwest::Client::new(),
        extra: Vec::new(),
        next_id: 0,
    }
}

async fn task_count(engine: &Engine) -> u64 {
    let admin = engine.store().admin().expect("the memory store has admin");
    admin.count(&TaskFilter::default()).await.unwrap().total()
}

/// Reads `connection` until the server closes it (EOF or an error), within `bound`; what
/// it sent.
async fn closed_within(connection: &mut TcpStream, bound: Duration, what: &str) -> Vec<u8> {
    let mut received = Vec::new();
    match tokio::time::timeout(bound, connection.read_to_end(&mut received)).await {
        Ok(_) => received,
        Err(_) => panic!("{what}: the server did not close the connection within {bound:?}"),
    }
}

/// `GET /healthz` on a fresh connection: the status line, or `None` when the connection was
/// closed without an answer.
async fn health(addr: SocketAddr) -> Option<String> {
    let mut connection = TcpStream::connect(addr).await.ok()?;
    connection
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut received = Vec::new();
    tokio::time::timeout(PATIENCE, connection.read_to_end(&mut received))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&received);
    text.lines()
        .next()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
}

#[tokio::test]
async fn an_anonymous_bind_beyond_loopback_refuses_to_start() {
    for with_shutdown in [false, true] {
        let listener = TcpListener::bind("0.0.0.0:0").await.unwrap();
        let server = TaskServer::from_engine(engine());
        // A server that does start never returns from `serve_http`; one with a signal that
        // is already there stops at once, and `Ok` says it started.
        let refused = if with_shutdown {
            mcp_tasks::serve_http_with_shutdown(listener, server, HttpOptions::new(), async {})
                .await
                .map(|_| ())
        } else {
            let serving = mcp_tasks::serve_http(listener, server, HttpOptions::new());
            tokio::time::timeout(PATIENCE, serving)
                .await
                .expect("serve_http answers at once")
        };
        let error = refused.expect_err("0.0.0.0 without authentication must not be served");
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
        let message = error.to_string();
        for what in ["without authentication", "with_bearer", "allow_anonymous()"] {
            assert!(message.contains(what), "the error says `{what}`: {message}");
        }
    }
}

#[tokio::test]
async fn loopback_tokens_or_the_explicit_opt_in_start() {
    let tokens = StaticTokens::parse("alice:TOKEN_ALICE_0123").unwrap();
    for (bind, options) in [
        ("127.0.0.1:0", HttpOptions::new()),
        ("0.0.0.0:0", HttpOptions::new().with_static_tokens(tokens)),
        ("0.0.0.0:0", HttpOptions::new().allow_anonymous()),
    ] {
        let listener = TcpListener::bind(bind).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = TaskServer::from_engine(engine());
        let serving = tokio::spawn(mcp_tasks::serve_http_with_shutdown(
            listener,
            server,
            options,
            async {
                stopped.await.ok();
            },
        ));
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let patience = Patience::new(format!("{bind} serving"));
        while health(addr).await.as_deref() != Some("HTTP/1.1 200 OK") {
            assert!(!serving.is_finished(), "{bind}: {:?}", serving.await);
            patience.wait().await;
        }
        stop.send(()).unwrap();
        serving.await.unwrap().expect("a clean stop");
    }
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_dropped() {
    let engine = engine();
    let options = HttpOptions::new().with_header_read_timeout(Duration::from_millis(300));
    let addr = serve(&engine, options).await;
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl")
        .await
        .unwrap();
    closed_within(&mut slow, Duration::from_secs(5), "half a header").await;
    // A client that sends its request in time is served.
    assert_eq!(health(addr).await.as_deref(), Some("HTTP/1.1 200 OK"));
}

#[tokio::test]
async fn a_keep_alive_connection_is_held_while_it_sends_requests_and_dropped_once_it_stops() {
    let engine = engine();
    let timeout = Duration::from_secs(1);
    let addr = serve(
        &engine,
        HttpOptions::new().with_header_read_timeout(timeout),
    )
    .await;
    let mut connection = TcpStream::connect(addr).await.unwrap();
    // Eight requests 250 ms apart: 2 s on one connection, two deadlines' worth, each
    // request's headers in time (with 750 ms to spare on a busy machine).
    for n in 0..8 {
        connection
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap_or_else(|e| panic!("request {n}: the connection was closed: {e}"));
        let mut answer = Vec::new();
        while !String::from_utf8_lossy(&answer).contains(r#"{"live":true}"#) {
            let mut chunk = [0u8; 1024];
            let read = tokio::time::timeout(PATIENCE, connection.read(&mut chunk))
                .await
                .unwrap_or_else(|_| panic!("request {n}: no answer"))
                .unwrap_or_else(|e| panic!("request {n}: the connection failed: {e}"));
            assert_ne!(
                read, 0,
                "request {n}: the connection was closed before its answer"
            );
            answer.extend_from_slice(&chunk[..read]);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Then half of a request's headers, and nothing more: dropped at the deadline.
    connection
        .write_all(b"GET /healthz HTTP/1.1\r\nHo")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let left = closed_within(&mut connection, Duration::from_secs(5), "a stalled request").await;
    assert!(left.is_empty(), "a stalled request is not answered");
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "dropped after its deadline, not at once: {:?}",
        started.elapsed()
    );
}

/// `POST /mcp` of `tools/list` on a fresh connection, its body sent as `chunks` with
/// `Transfer-Encoding: chunked`, a pause after each, and ended when `end`; the server's
/// whole answer.
async fn post_chunked(addr: SocketAddr, chunks: &[&[u8]], end: bool) -> String {
    let mut connection = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {}\r\n\
         Mcp-Method: tools/list\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        common::V2026,
    );
    connection.write_all(head.as_bytes()).await.unwrap();
    for chunk in chunks {
        let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat();
        connection.write_all(&framed).await.unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    if end {
        connection.write_all(b"0\r\n\r\n").await.unwrap();
    }
    let answer = closed_within(&mut connection, PATIENCE, "a chunked request").await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_body_in_several_chunks_is_read_whole_and_bounded_whole() {
    let engine = Engine::builder(toolkit![idle, slow].expect("a toolkit"))
        .with_limits(mcp_tasks::Limits::default().with_max_request_bytes(1000))
        .build();
    let addr = serve(&engine, HttpOptions::new()).await;
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": { "_meta": common::meta(TASKS) } })
    .to_string();
    let (a, rest) = body.as_bytes().split_at(10);
    let (b, c) = rest.split_at(rest.len() / 2);
    let answer = post_chunked(addr, &[a, b, c], true).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains(r#""name":"idle""#),
        "the whole body was read: {answer}"
    );
    // Then 450 bytes of padding twice: the chunks after the first are under the limit
    // together, the whole body is not. (Not ended: the answer comes before the end.)
    let pad = " ".repeat(450);
    let answer = post_chunked(
        addr,
        &[body.as_bytes(), pad.as_bytes(), pad.as_bytes()],
        false,
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.contains("larger than the limit of 1000 bytes"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_answered_408_and_creates_no_task() {
    let engine = engine();
    let options = HttpOptions::new().with_body_timeout(Duration::from_millis(300));
    let addr = serve(&engine, options).await;
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "idle", "arguments": {}, "_meta": common::meta(TASKS) } })
    .to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {}\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: idle\r\nContent-Length: {}\r\n\r\n",
        common::V2026,
        body.len()
    );
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(head.as_bytes()).await.unwrap();
    // All but the last byte: the body never completes.
    slow.write_all(&body.as_bytes()[..body.len() - 1])
        .await
        .unwrap();
    let answer = closed_within(&mut slow, Duration::from_secs(5), "an incomplete body").await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 408"),
        "a 408 answers an incomplete body: {answer}"
    );
    let json: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(json["error"]["code"], -32600, "{json}");
    assert!(
        json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not arrive in full within 300 ms"),
        "{json}"
    );
    assert_eq!(task_count(&engine).await, 0, "no task was created");
    // The same request sent whole creates its task (the count does see one).
    http(addr).call_task("idle", json!({})).await;
    assert_eq!(task_count(&engine).await, 1);
}

#[tokio::test]
async fn connections_beyond_the_cap_are_closed_at_once() {
    let engine = engine();
    let addr = serve(&engine, HttpOptions::new().with_max_connections(2)).await;
    // Two connections that send nothing hold both places (accepted in order, before the
    // third).
    let first = TcpStream::connect(addr).await.unwrap();
    let _second = TcpStream::connect(addr).await.unwrap();
    let mut third = TcpStream::connect(addr).await.unwrap();
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .ok();
    let answer = closed_within(&mut third, Duration::from_secs(5), "a third connection").await;
    assert!(answer.is_empty(), "nothing is answered beyond the cap");
    // A place given back is taken again.
    drop(first);
    let patience = Patience::new("a connection served once a place is free");
    while health(addr).await.as_deref() != Some("HTTP/1.1 200 OK") {
        patience.wait().await;
    }
}

/// Reads SSE `stream` until it ends, within `bound`; its messages.
async fn messages_until_end(mut stream: reqwest::Response, bound: Duration) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + bound;
    let mut text = String::new();
    loop {
        match tokio::time::timeout_at(deadline, stream.chunk()).await {
            Ok(Ok(Some(chunk))) => text.push_str(&String::from_utf8_lossy(&chunk)),
            Ok(Ok(None) | Err(_)) => break,
            Err(_) => panic!("the listen stream did not end within {bound:?}: {text}"),
        }
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

/// The stream's messages end with the acknowledgement, the task's state, and the graceful
/// result of listen request `id`.
fn ended_cleanly(messages: &[Value], id: u64) {
    assert_eq!(
        messages[0]["method"], "notifications/subscriptions/acknowledged",
        "{messages:?}"
    );
    assert_eq!(messages[1]["method"], "notifications/tasks", "{messages:?}");
    let last = messages.last().unwrap();
    assert_eq!(last["id"], id, "{messages:?}");
    assert_eq!(last["result"]["resultType"], "complete", "{messages:?}");
}

#[tokio::test]
async fn an_idle_listen_stream_ends_cleanly() {
    let engine = engine();
    let options = HttpOptions::new().with_listen_idle_timeout(Duration::from_millis(300));
    let mut server = http(serve(&engine, options).await);
    let task = server.call_task("idle", json!({})).await;
    let stream = server.open_listen(json!(7), &[task]).await;
    let messages = messages_until_end(stream, Duration::from_secs(10)).await;
    ended_cleanly(&messages, 7);
}

#[tokio::test]
async fn a_listen_stream_ends_at_its_maximum_lifetime() {
    let engine = engine();
    let options = HttpOptions::new().with_listen_max_lifetime(Duration::from_millis(300));
    let mut server = http(serve(&engine, options).await);
    let task = server.call_task("idle", json!({})).await;
    let stream = server.open_listen(json!(8), &[task]).await;
    let messages = messages_until_end(stream, Duration::from_secs(10)).await;
    ended_cleanly(&messages, 8);
}

#[tokio::test]
async fn a_listen_stream_ends_when_its_token_is_no_longer_accepted() {
    let engine = engine();
    let revoked = Arc::new(AtomicBool::new(false));
    let validator = {
        let revoked = revoked.clone();
        move |token: String| {
            let revoked = revoked.clone();
            async move {
                if token == "TOKEN_ALICE" && !revoked.load(Ordering::SeqCst) {
                    Ok(Owner::new("alice"))
                } else {
                    Err(AuthError::InvalidToken)
                }
            }
        }
    };
    let options = HttpOptions::new()
        .with_bearer(validator)
        .with_listen_recheck_interval(Duration::from_millis(100));
    let mut server = http(serve(&engine, options).await);
    server
        .extra
        .push(("authorization", "Bearer TOKEN_ALICE".to_owned()));
    let task = server.call_task("idle", json!({})).await;
    let body = json!({ "jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
        "params": { "_meta": common::meta(TASKS), "notifications": { "taskIds": [task] } } });
    let listen = || {
        server
            .client
            .post(&server.url)
            .bearer_auth("TOKEN_ALICE")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", common::V2026)
            .header("mcp-method", "subscriptions/listen")
            .body(body.to_string())
            .send()
    };
    let mut stream = listen().await.unwrap();
    // The acknowledgement and the task's state come, and the stream stays open through
    // checks that accept the token.
    let mut text = String::new();
    while text.matches("data: ").count() < 2 {
        let chunk = tokio::time::timeout(PATIENCE, stream.chunk()).await;
        let chunk = chunk.unwrap().unwrap().expect("the stream is open");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    revoked.store(true, Ordering::SeqCst);
    let rest = messages_until_end(stream, Duration::from_secs(10)).await;
    let last = rest.last().expect("the graceful result");
    assert_eq!(last["id"], 9);
    assert_eq!(last["result"]["resultType"], "complete");
    assert_eq!(
        listen().await.unwrap().status(),
        401,
        "the next listen is refused"
    );
}

#[tokio::test]
async fn the_client_follows_a_task_across_listen_stream_ends() {
    let engine = engine();
    // Every listen stream ends long before the task does.
    let options = HttpOptions::new().with_listen_max_lifetime(Duration::from_millis(50));
    let addr = serve(&engine, options).await;
    let client = TaskClient::builder()
        .connect_http(&format!("http://{addr}/mcp"))
        .await
        .unwrap();
    let mut task = client.call("slow", ()).await.unwrap().into_task().unwrap();
    let end = tokio::time::timeout(PATIENCE, task.wait())
        .await
        .expect("the task is followed to its end");
    let TaskEnd::Completed(result) = end.unwrap() else {
        panic!("the task completed");
    };
    assert_eq!(result.content[0].as_text().unwrap().text, "done");
}

/// The audit events seen by this thread's subscriber: each one's fields.
#[derive(Clone, Default)]
struct Audit(Arc<std::sync::Mutex<Vec<BTreeMap<String, String>>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Audit {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != AUDIT_TARGET {
            return;
        }
        struct Fields(BTreeMap<String, String>);
        impl tracing::field::Visit for Fields {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                self.0.insert(field.name().to_owned(), value.to_owned());
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.insert(field.name().to_owned(), format!("{value:?}"));
            }
        }
        let mut fields = Fields(BTreeMap::new());
        event.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }
}

impl Audit {
    fn events(&self) -> Vec<BTreeMap<String, String>> {
        self.0.lock().unwrap().clone()
    }
}

/// On the current thread (the default test runtime), so the thread's subscriber sees the
/// server's events.
#[tokio::test]
async fn the_admin_router_throttles_wrong_credentials_and_audits_logins_cancels_and_purges() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let audit = Audit::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(audit.clone()));
    const SECRET: &str = "admin-secret-0123456789";
    let engine = engine();
    let credential = AdminCredential::new(SECRET)
        .unwrap()
        .with_throttle(3, Duration::from_secs(60));
    let app = admin::router(&engine, credential);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    let store = engine.store();
    store
        .create(NewTask::new(
            Arc::from("t-cancel"),
            Arc::from("bob"),
            Arc::from("idle"),
        ))
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let base = format!("http://{addr}/admin/api");
    let cancel = client
        .post(format!("{base}/tasks/t-cancel/cancel"))
        .bearer_auth(SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status(), 200);
    let purge = client
        .post(format!("{base}/purge?older_than=1s"))
        .bearer_auth(SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(purge.status(), 200);
    let purged: Value = purge.json().await.unwrap();
    // Three wrong credentials: 401 each, then the address waits, even with the right one.
    for _ in 0..3 {
        let wrong = client
            .get(format!("{base}/tasks"))
            .bearer_auth("not-the-admin-secret")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), 401);
    }
    let throttled = client
        .get(format!("{base}/tasks"))
        .bearer_auth(SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(throttled.status(), 429);
    let retry_after: u64 = throttled.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "Retry-After {retry_after}");
    let page = client
        .get(format!("http://{addr}/admin/"))
        .basic_auth("anyone", Some(SECRET))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 429, "the web view is throttled too");

    let events = audit.events();
    let of = |event: &str| {
        events
            .iter()
            .filter(|e| e.get("event").map(String::as_str) == Some(event))
            .cloned()
            .collect::<Vec<_>>()
    };
    let client_addr = |e: &BTreeMap<String, String>| e["client"].starts_with("127.0.0.1:");
    let cancels = of("cancel");
    assert_eq!(cancels.len(), 1, "{events:?}");
    assert_eq!(cancels[0]["task_id"], "t-cancel");
    assert_eq!(cancels[0]["outcome"], "cancel_requested");
    assert_eq!(cancels[0]["who"], "admin");
    assert!(client_addr(&cancels[0]), "{cancels:?}");
    let purges = of("purge");
    assert_eq!(purges.len(), 1, "{events:?}");
    assert_eq!(purges[0]["purged"], purged["purged"].to_string());
    assert!(client_addr(&purges[0]), "{purges:?}");
    let failed = of("login_failed");
    assert_eq!(
        failed.len(),
        3,
        "one event per wrong credential: {events:?}"
    );
    for (n, event) in failed.iter().enumerate() {
        assert_eq!(event["failures"], (n + 1).to_string());
        assert_eq!(event["who"], "unknown");
        assert_eq!(event["path"], "/admin/api/tasks");
        assert!(client_addr(event), "{event:?}");
    }
}
