//! The example server as a user deploys it (`mcp-tasks-example-http`, bearer tokens, the
//! admin view on its own listener), tried as an attacker would: a huge or deeply nested
//! `_meta`, one owner firing 20,000 instant tasks while another still gets served, slow
//! clients holding connections, notices forged on the database channel, unknown paths with
//! the admin router mounted, and a public bind without authentication. Real processes, real
//! sockets on 127.0.0.1, real Postgres and `psql`.

mod common;
#[path = "support/postgres.rs"]
mod pg;

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpStream},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex, mpsc},
    time::{Duration, Instant},
};

use common::{Http, PATIENCE, Patience, TASKS, V2026, meta};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tasks-example-http");
const ALICE: &str = "alice-0123456789abcdef";
const BOB: &str = "bob-0123456789abcdef";
const ADMIN: &str = "0123456789abcdef-admin";

/// A running example server; killed on drop.
struct Example {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    mcp: String,
    /// `http://127.0.0.1:PORT`, the admin listener, when `--admin-bind` was given.
    admin: Option<String>,
    /// Every stderr line, for the failure messages.
    log: Arc<Mutex<Vec<String>>>,
}

impl Example {
    /// Starts the example with `args` (and bearer tokens for alice and bob), waits for the
    /// addresses it prints.
    fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        let tokens = format!("alice:{ALICE},bob:{BOB}");
        let mut child = Command::new(BIN)
            .args(args)
            .env("MCP_TASKS_TOKENS", tokens)
            .env("MCP_TASKS_ADMIN_TOKEN", ADMIN)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let wants_admin = args.contains(&"--admin-bind");
        let (sender, addresses) = mpsc::channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix("serving the admin view on ") {
                    let url = rest.split(' ').next().unwrap_or_default();
                    let _ = sender.send(("admin", url.trim_end_matches("/admin").to_owned()));
                } else if let Some(url) = line.strip_prefix("serving MCP on ") {
                    let _ = sender.send(("mcp", url.to_owned()));
                }
                kept.lock().unwrap().push(line);
            }
        });
        let (mut mcp, mut admin) = (None, None);
        while mcp.is_none() || (wants_admin && admin.is_none()) {
            match addresses.recv_timeout(PATIENCE) {
                Ok(("mcp", url)) => mcp = Some(url),
                Ok((_, url)) => admin = Some(url),
                Err(_) => {
                    let _ = child.kill();
                    panic!(
                        "{args:?}: the example did not serve: {:?}\n{}",
                        child.wait(),
                        log.lock().unwrap().join("\n")
                    );
                }
            }
        }
        Self {
            child,
            mcp: mcp.unwrap(),
            admin,
            log,
        }
    }

    /// A JSON-RPC peer calling as the owner of `token`.
    fn peer(&self, token: &str) -> Http {
        Http {
            url: self.mcp.clone(),
            client: reqwest::Client::new(),
            extra: vec![("authorization", format!("Bearer {token}"))],
            next_id: 0,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.mcp
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .parse()
            .unwrap()
    }

    /// `GET` on the admin API with the admin credential.
    async fn admin_get(&self, path_and_query: &str) -> Value {
        let admin = self.admin.as_ref().expect("started with --admin-bind");
        let response = reqwest::Client::new()
            .get(format!("{admin}{path_and_query}"))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path_and_query}");
        response.json().await.unwrap()
    }

    /// How many tasks of `owner` the store holds, by status.
    async fn counts(&self, owner: &str) -> Value {
        self.admin_get(&format!("/admin/api/counts?owner={owner}"))
            .await
    }

    /// The process's resident memory, in KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

impl Drop for Example {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "the example's stderr:\n{}",
                self.log.lock().unwrap().join("\n")
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The total of a counts answer.
fn total(counts: &Value) -> u64 {
    counts["total"]
        .as_u64()
        .unwrap_or_else(|| panic!("counts: {counts}"))
}

/// Polls `tasks/get` until `done` holds for the task object.
async fn wait_for(peer: &mut Http, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let patience = Patience::new(format!("task {id}: {what}"));
    loop {
        let (_, response) = peer.rpc("tasks/get", json!({ "taskId": id }), TASKS).await;
        if done(&response["result"]) {
            return response["result"].clone();
        }
        patience.wait().await;
    }
}

/// Sends `payload` on `channel` with the machine's `psql`, as any role that can connect to
/// the database could.
fn psql_notify(url: &str, channel: &str, payload: &str) {
    let status = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c"])
        .arg(format!("SELECT pg_notify('{channel}', '{payload}')"))
        .stdout(Stdio::null())
        .status()
        .expect("psql runs (Debian's postgresql-client)");
    assert!(status.success(), "psql NOTIFY {payload}: {status}");
}

/// Notices forged on the cluster's channel move nothing: a forged cancel leaves the work
/// running, a forged answer answers nothing, forged change and queue notices change no
/// task. A genuine cancel sent after them (same channel, so after them in order) is the
/// sync point.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_notices_move_nothing() {
    let Some(db) = pg::Db::new().await else {
        return;
    };
    let key = "0123456789abcdef0123456789abcdef";
    let server = Example::start(
        &[
            "--port",
            "0",
            "--store",
            &db.url,
            "--schema",
            &db.schema,
            "--request-state-key",
            key,
            "--admin-bind",
            "127.0.0.1:0",
        ],
        &[],
    );
    let mut alice = server.peer(ALICE);
    let long = alice
        .call_task("import_rows", json!({ "batches": 1, "batch_ms": 600_000 }))
        .await;
    let asking = alice
        .call_task("import_rows", json!({ "batches": 1, "confirm": true }))
        .await;
    wait_for(&mut alice, &long, "importing", |t| {
        t["statusMessage"]
            .as_str()
            .is_some_and(|m| m.starts_with("importing"))
    })
    .await;
    let asked = wait_for(&mut alice, &asking, "input_required", |t| {
        t["status"] == "input_required"
    })
    .await;
    let before = [
        server.admin_get(&format!("/admin/api/tasks/{long}")).await,
        server
            .admin_get(&format!("/admin/api/tasks/{asking}"))
            .await,
    ];

    let channel = format!("mcp_tasks.{}", db.schema);
    for id in [&long, &asking] {
        for payload in [
            format!("c:{id}"),
            format!("a:1:{id}"),
            format!("u:{id}"),
            format!("q:{id}"),
        ] {
            psql_notify(&db.url, &channel, &payload);
        }
    }
    // The sync point: a real cancel of a third task, announced on the same channel.
    // (A question: the work waits on it and sees the cancel at once.)
    let third = alice
        .call_task("import_rows", json!({ "batches": 1, "confirm": true }))
        .await;
    wait_for(&mut alice, &third, "input_required", |t| {
        t["status"] == "input_required"
    })
    .await;
    let (_, cancelled) = alice
        .rpc("tasks/cancel", json!({ "taskId": third }), TASKS)
        .await;
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    wait_for(&mut alice, &third, "cancelled", |t| {
        t["status"] == "cancelled"
    })
    .await;

    let after = [
        server.admin_get(&format!("/admin/api/tasks/{long}")).await,
        server
            .admin_get(&format!("/admin/api/tasks/{asking}"))
            .await,
    ];
    assert_eq!(before, after, "a forged notice changed a task");
    let (_, still) = alice
        .rpc("tasks/get", json!({ "taskId": asking }), TASKS)
        .await;
    assert_eq!(still["result"]["status"], "input_required", "{still}");
    assert_eq!(still["result"]["inputRequests"], asked["inputRequests"]);
    let (_, running) = alice
        .rpc("tasks/get", json!({ "taskId": long }), TASKS)
        .await;
    assert_eq!(running["result"]["status"], "working", "{running}");
}

/// With the admin router mounted, a path that is neither MCP's nor the admin's is `404` on
/// both listeners, without a credential prompt.
#[tokio::test]
async fn unknown_paths_are_not_found_without_a_prompt() {
    let server = Example::start(&["--port", "0", "--admin-bind", "127.0.0.1:0"], &[]);
    let http = reqwest::Client::new();
    let mcp_base = server.mcp.trim_end_matches("/mcp").to_owned();
    let admin_base = server.admin.clone().unwrap();
    for base in [&mcp_base, &admin_base] {
        for path in ["/", "/wp-login.php", "/admin.php", "/mcpx", "/.env"] {
            let response = http.get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(response.status().as_u16(), 404, "{base}{path}");
            assert!(
                response.headers().get("www-authenticate").is_none(),
                "{base}{path} prompts for a credential"
            );
        }
    }
}

/// A bind beyond loopback without authentication does not start; with tokens it does.
#[test]
fn an_anonymous_public_bind_refuses_to_start() {
    let output = Command::new(BIN)
        .args(["--bind", "0.0.0.0:0"])
        .env_remove("MCP_TASKS_TOKENS")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--allow-anonymous"), "{stderr}");
    assert!(stderr.contains("--tokens"), "{stderr}");
    // The same address with tokens (as `Example::start` gives them) serves.
    let server = Example::start(&["--bind", "0.0.0.0:0"], &[]);
    assert!(server.mcp.starts_with("http://0.0.0.0:"), "{}", server.mcp);
}

/// A `_meta` too big or too deep is refused with `-32602` naming it, and creates no task.
#[tokio::test]
async fn a_huge_or_deep_meta_is_refused_and_kept_nowhere() {
    let server = Example::start(&["--port", "0", "--admin-bind", "127.0.0.1:0"], &[]);
    let mut alice = server.peer(ALICE);
    let call = json!({ "name": "import_rows", "arguments": { "batches": 0 } });

    let mut huge = meta(TASKS);
    huge["padding"] = json!("x".repeat(3 << 20));
    // (100 levels: deeper than any JSON parser here takes, 128, is a parse error instead.)
    let mut deep = json!("bottom");
    for _ in 0..100 {
        deep = json!({ "d": deep });
    }
    let mut nested = meta(TASKS);
    nested["nested"] = deep;
    for (what, meta) in [("huge", huge), ("deep", nested)] {
        let (_, answer) = alice.rpc_meta("tools/call", call.clone(), meta).await;
        assert_eq!(answer["error"]["code"], -32602, "{what}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("params._meta"), "{what}: {message}");
    }
    assert_eq!(
        total(&server.counts("alice").await),
        0,
        "a refused call made a task"
    );
    // The same call with an ordinary `_meta` is served.
    let id = alice
        .call_task("import_rows", json!({ "batches": 0 }))
        .await;
    wait_for(&mut alice, &id, "completed", |t| t["status"] == "completed").await;
}

/// One owner firing 20,000 instant tasks: the other owner's calls are all served while it
/// lasts, the flooding owner's finished tasks are trimmed to the per-owner bound (10,000 by
/// default), and the process's memory stays bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_owner_flooding_instant_tasks_leaves_the_others_served() {
    const FLOOD: usize = 20_000;
    const BOUND: u64 = 10_000;
    let server = Example::start(&["--port", "0", "--admin-bind", "127.0.0.1:0"], &[]);
    let rss_before = server.rss_kib();
    let flood_url = server.mcp.clone();
    let flood = tokio::spawn(async move {
        let client = reqwest::Client::new();
        let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let workers = (0..16).map(|_| {
            let (client, url, sent) = (client.clone(), flood_url.clone(), sent.clone());
            tokio::spawn(async move {
                let mut refused = 0usize;
                while sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < FLOOD {
                    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": { "name": "import_rows", "arguments": { "batches": 0 },
                                    "_meta": meta(TASKS) } });
                    let response = client
                        .post(&url)
                        .bearer_auth(ALICE)
                        .header("content-type", "application/json")
                        .header("accept", "application/json, text/event-stream")
                        .header("mcp-protocol-version", V2026)
                        .header("mcp-method", "tools/call")
                        .header("mcp-name", "import_rows")
                        .body(body.to_string())
                        .send()
                        .await
                        .unwrap();
                    let text = response.text().await.unwrap();
                    if !text.contains("taskId") {
                        refused += 1;
                    }
                }
                refused
            })
        });
        let mut refused = 0;
        for worker in workers.collect::<Vec<_>>() {
            refused += worker.await.unwrap();
        }
        refused
    });

    // Bob, meanwhile: each of his calls is served, and quickly.
    let mut bob = server.peer(BOB);
    let mut slowest = Duration::ZERO;
    let mut served = 0;
    while !flood.is_finished() || served < 5 {
        let started = Instant::now();
        let id = bob.call_task("import_rows", json!({ "batches": 0 })).await;
        wait_for(&mut bob, &id, "completed", |t| t["status"] == "completed").await;
        slowest = slowest.max(started.elapsed());
        served += 1;
    }
    let refused = flood.await.unwrap();
    assert_eq!(refused, 0, "instant tasks never reach the live-task quota");
    assert!(
        slowest < Duration::from_secs(5),
        "bob waited {slowest:?} for a task during the flood"
    );

    // The flooding owner's finished tasks are trimmed to the bound at the next sweeps;
    // bob's are untouched.
    let patience = Patience::new("alice's finished tasks trimmed to the bound");
    loop {
        let kept = total(&server.counts("alice").await);
        if kept <= BOUND {
            assert!(
                kept >= BOUND - 100,
                "more than the oldest were removed: {kept}"
            );
            break;
        }
        patience.wait().await;
    }
    assert_eq!(total(&server.counts("bob").await), served as u64);
    let rss = server.rss_kib();
    eprintln!("served bob {served} times, slowest {slowest:?}; rss {rss_before} -> {rss} KiB");
    assert!(
        rss < rss_before + 256 * 1024,
        "the flood grew the process by {} KiB",
        rss - rss_before
    );
}

/// Opens a connection that sends half a request's headers and then nothing.
fn slow_client(addr: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl")
        .unwrap();
    stream
}

/// Whether the server closed `stream` (a read ends at once with EOF or a reset), waiting at
/// most `within`.
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buffer = [0u8; 1024];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            // An answer (a 408, say) before the close.
            Ok(_) => {}
            Err(error) => {
                return !matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                );
            }
        }
    }
}

/// Clients that never finish their headers are disconnected at the header deadline and do
/// not keep others from being served; connections past the cap are closed at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_and_others_served() {
    let server = Example::start(
        &[
            "--port",
            "0",
            "--header-timeout-ms",
            "1500",
            "--max-connections",
            "64",
        ],
        &[],
    );
    let addr = server.addr();
    let opened = Instant::now();
    let slow: Vec<TcpStream> = (0..40).map(|_| slow_client(addr)).collect();
    // Served while 40 slow clients hold their connections.
    let mut bob = server.peer(BOB);
    let id = bob.call_task("import_rows", json!({ "batches": 0 })).await;
    wait_for(&mut bob, &id, "completed", |t| t["status"] == "completed").await;
    assert!(
        opened.elapsed() < Duration::from_millis(1500),
        "bob was not served at once"
    );
    // Each slow client is gone at the deadline, not before and not much after.
    let slow = tokio::task::spawn_blocking(move || {
        slow.into_iter()
            .filter(|stream| {
                let mut stream = stream.try_clone().unwrap();
                !closed_within(&mut stream, Duration::from_secs(10))
            })
            .count()
    })
    .await
    .unwrap();
    assert_eq!(
        slow, 0,
        "slow clients still connected 10 s after the deadline"
    );
    assert!(
        opened.elapsed() >= Duration::from_millis(1500),
        "cut off before the deadline"
    );

    // Past the cap: 64 slow connections, then one more is closed at once.
    let held: Vec<TcpStream> = (0..64).map(|_| slow_client(addr)).collect();
    let patience = Patience::new("the 65th connection to be refused");
    loop {
        let mut extra = TcpStream::connect(addr).unwrap();
        if closed_within(&mut extra, Duration::from_millis(500)) {
            break;
        }
        // The server may not have accepted all 64 yet.
        patience.wait().await;
    }
    drop(held);
}
