//! The push benchmark (issue 22): task status pushed on `subscriptions/listen` streams,
//! against `bench-ours --owner-per-token 1` (Streamable HTTP, 2026-07-28 wire, one keep-alive
//! HTTP/1.1 connection per task, each owner holding at most 50 streams).
//!
//! ```text
//! bench-push --url http://127.0.0.1:8101/mcp --mode latency --streams 1000 --server-pid P
//! ```
//!
//! Modes:
//! - `latency`: `--streams N` tasks of `ticker_task`, each followed on its own listen
//!   stream. Each task changes its status message `--ticks` times, `--every-ms` apart, the
//!   tasks' changes spread evenly over that period; a message is the server's wall clock
//!   just before the change, so the latency is from the change to the notification read by
//!   this client. Prints p50/p99/max of those latencies.
//! - `follow`: `--streams N` tasks of `noop_task(--sleep-ms)` at once, each followed to its
//!   end either by polling `tasks/get` every `--poll-ms` (`--how poll`) or on a listen stream
//!   (`--how listen`). Prints the requests and the server CPU per completed task.
//! - `memory`: `--streams N` tasks that sleep `--sleep-ms`, then one listen stream each;
//!   the server's resident set before and after the streams are open (bytes per stream).
//!
//! Prints one JSON line.

use std::{
    io,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::{Request, client::conn::http1::SendRequest};
use hyper_util::rt::TokioIo;
use mcp_tasks_bench::Args;
use serde_json::{Value, json};
use tokio::net::TcpStream;

const META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench-push","version":"0.1.0"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

/// Streams one owner holds at most in this benchmark (the server allows 64).
const STREAMS_PER_OWNER: usize = 50;

fn err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Latency,
    Follow,
    Memory,
}

#[derive(Debug, Clone)]
struct Config {
    addr: String,
    host: String,
    path: String,
    mode: Mode,
    listen: bool,
    streams: usize,
    ticks: u32,
    every: Duration,
    sleep_ms: u64,
    poll: Duration,
    server_pid: Option<u32>,
}

impl Config {
    fn from_args(args: &Args) -> io::Result<Self> {
        args.only(&[
            "url",
            "mode",
            "how",
            "streams",
            "ticks",
            "every-ms",
            "sleep-ms",
            "poll-ms",
            "server-pid",
        ])?;
        let url = args.get("url").unwrap_or("http://127.0.0.1:8101/mcp");
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| err("--url must be http://127.0.0.1:PORT/PATH (no TLS)"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if !authority.starts_with("127.0.0.1:") {
            return Err(err("--url must point at 127.0.0.1 (loopback only)"));
        }
        let mode = match args.get("mode").unwrap_or("latency") {
            "latency" => Mode::Latency,
            "follow" => Mode::Follow,
            "memory" => Mode::Memory,
            other => return Err(err(format!("--mode {other}: latency|follow|memory"))),
        };
        let listen = match args.get("how").unwrap_or("listen") {
            "listen" => true,
            "poll" => false,
            other => return Err(err(format!("--how {other}: listen|poll"))),
        };
        Ok(Self {
            addr: authority.to_owned(),
            host: authority.to_owned(),
            path: format!("/{path}"),
            mode,
            listen,
            streams: args.parsed("streams", 1000)?.max(1),
            ticks: args.parsed("ticks", 10)?,
            every: Duration::from_millis(args.parsed("every-ms", 1000)?.max(1)),
            sleep_ms: args.parsed("sleep-ms", 10_000)?,
            poll: Duration::from_millis(args.parsed("poll-ms", 1000)?),
            server_pid: args
                .get("server-pid")
                .map(str::parse)
                .transpose()
                .map_err(err)?,
        })
    }
}

/// One keep-alive connection of one owner.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
    path: String,
    token: String,
    next_id: u64,
    requests: u64,
}

/// An open listen stream: the response body, read event by event.
struct Listen {
    body: hyper::body::Incoming,
    buffer: BytesMut,
}

impl Listen {
    /// The next JSON-RPC message of the stream; `None` when it ended.
    async fn next(&mut self) -> Result<Option<Value>, String> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let event = self.buffer.split_to(end + 2);
                let data: Vec<u8> = event[..]
                    .split(|b| *b == b'\n')
                    .filter_map(|line| line.strip_prefix(b"data:"))
                    .flat_map(|d| d.trim_ascii().to_vec())
                    .collect();
                if data.first() == Some(&b'{') {
                    return serde_json::from_slice(&data)
                        .map(Some)
                        .map_err(|e| e.to_string());
                }
                continue;
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => return Err(e.to_string()),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
            }
        }
    }
}

impl Conn {
    async fn connect(config: &Config, owner: usize) -> io::Result<Self> {
        let tcp = TcpStream::connect(&config.addr).await?;
        tcp.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(err)?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Self {
            sender,
            host: config.host.clone(),
            path: config.path.clone(),
            token: format!("owner-{owner}"),
            next_id: 0,
            requests: 0,
        })
    }

    async fn send(
        &mut self,
        method: &str,
        name: &str,
        params: &str,
    ) -> Result<hyper::Response<hyper::body::Incoming>, String> {
        self.next_id += 1;
        self.requests += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"{method}","params":{params}}}"#,
            self.next_id
        );
        let mut request = Request::post(&self.path)
            .header("host", &self.host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {}", self.token))
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method);
        if !name.is_empty() {
            request = request.header("mcp-name", name);
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        self.sender.ready().await.map_err(|e| e.to_string())?;
        self.sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())
    }

    /// One request answered by one message (JSON body or an SSE stream of one answer).
    async fn call(&mut self, method: &str, name: &str, params: &str) -> Result<Value, String> {
        let response = self.send(method, name, params).await?;
        let status = response.status();
        let sse = response
            .headers()
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        let mut answer = if sse {
            let mut listen = Listen {
                body: response.into_body(),
                buffer: BytesMut::new(),
            };
            let mut answer = Value::Null;
            while let Some(message) = listen.next().await? {
                if message.get("id").is_some() {
                    answer = message;
                    break;
                }
            }
            answer
        } else {
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            serde_json::from_slice(&bytes).map_err(|e| format!("HTTP {status}: {e}"))?
        };
        match answer.get_mut("result") {
            Some(result) => Ok(result.take()),
            None => Err(format!("HTTP {status}: {answer}")),
        }
    }

    async fn create(&mut self, tool: &str, arguments: &Value) -> Result<String, String> {
        let params = format!(r#"{{"name":"{tool}","arguments":{arguments},"_meta":{META}}}"#);
        let created = self.call("tools/call", tool, &params).await?;
        created["taskId"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("no task created: {created}"))
    }

    async fn get(&mut self, id: &str) -> Result<Value, String> {
        let params = format!(r#"{{"taskId":"{id}","_meta":{META}}}"#);
        self.call("tasks/get", id, &params).await
    }

    /// Opens a listen stream on task `id`; returns once the acknowledgement agreed it.
    async fn listen(&mut self, id: &str) -> Result<Listen, String> {
        let params = format!(r#"{{"_meta":{META},"notifications":{{"taskIds":["{id}"]}}}}"#);
        let response = self.send("subscriptions/listen", "", &params).await?;
        let status = response.status();
        let mut listen = Listen {
            body: response.into_body(),
            buffer: BytesMut::new(),
        };
        let first = listen
            .next()
            .await?
            .ok_or_else(|| format!("HTTP {status}: the stream ended before its acknowledgement"))?;
        if first["params"]["notifications"]["taskIds"][0].as_str() != Some(id) {
            return Err(format!("HTTP {status}: not agreed: {first}"));
        }
        Ok(listen)
    }
}

fn is_terminal(status: &Value) -> bool {
    matches!(status.as_str(), Some("completed" | "failed" | "cancelled"))
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

/// What one task's client measured.
#[derive(Default)]
struct Outcome {
    latencies_us: Vec<u32>,
    notifications: u64,
    requests: u64,
    completed: bool,
    error: Option<String>,
}

/// Follows task `id` on `listen` to its terminal state; the latency of each tick.
async fn read_until_terminal(listen: &mut Listen, opened: u128, out: &mut Outcome) {
    loop {
        match listen.next().await {
            Ok(Some(message)) => {
                if message["method"] != "notifications/tasks" {
                    continue;
                }
                let received = now_nanos();
                out.notifications += 1;
                let task = &message["params"];
                if let Some(sent) = task["statusMessage"]
                    .as_str()
                    .and_then(|m| m.parse::<u128>().ok())
                    .filter(|sent| *sent > opened)
                    && task["status"] == "working"
                {
                    let us = received.saturating_sub(sent) / 1000;
                    out.latencies_us.push(u32::try_from(us).unwrap_or(u32::MAX));
                }
                if is_terminal(&task["status"]) {
                    out.completed = task["status"] == "completed";
                    return;
                }
            }
            Ok(None) => {
                out.error = Some("the stream ended before the terminal state".into());
                return;
            }
            Err(e) => {
                out.error = Some(e);
                return;
            }
        }
    }
}

async fn one_task(config: Config, index: usize, start_at: tokio::time::Instant) -> Outcome {
    let mut out = Outcome::default();
    let result: Result<(), String> = async {
        let mut conn = Conn::connect(&config, index / STREAMS_PER_OWNER)
            .await
            .map_err(|e| e.to_string())?;
        tokio::time::sleep_until(start_at).await;
        match config.mode {
            Mode::Latency => {
                let spread = config.every.as_millis() as usize * index / config.streams;
                let arguments = json!({
                    "offset_ms": spread,
                    "ticks": config.ticks,
                    "every_ms": config.every.as_millis() as u64,
                });
                let id = conn.create("ticker_task", &arguments).await?;
                let opened = now_nanos();
                let mut listen = conn.listen(&id).await?;
                read_until_terminal(&mut listen, opened, &mut out).await;
            }
            Mode::Follow => {
                let arguments = json!({ "sleep_ms": config.sleep_ms });
                let id = conn.create("noop_task", &arguments).await?;
                if config.listen {
                    let mut listen = conn.listen(&id).await?;
                    read_until_terminal(&mut listen, u128::MAX, &mut out).await;
                } else {
                    loop {
                        tokio::time::sleep(config.poll).await;
                        let task = conn.get(&id).await?;
                        if is_terminal(&task["status"]) {
                            out.completed = task["status"] == "completed";
                            break;
                        }
                    }
                }
            }
            Mode::Memory => unreachable!("memory mode has its own driver"),
        }
        out.requests = conn.requests;
        Ok(())
    }
    .await;
    if let Err(e) = result {
        out.error = Some(e);
    }
    out
}

/// Nearest-rank percentile, or null.
fn pct(v: &[u32], q: f64) -> Value {
    if v.is_empty() {
        return Value::Null;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    json!(v[rank - 1])
}

/// User plus system CPU seconds of a process (`/proc/PID/stat`, 100 ticks/s).
fn cpu_secs(pid: u32) -> io::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    #[allow(clippy::cast_precision_loss)]
    Ok((ticks(11) + ticks(12)) as f64 / 100.0)
}

fn rss_bytes(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| err("no VmRSS"))
}

async fn tasks(config: &Config) -> io::Result<Value> {
    let cpu_before = config.server_pid.map(cpu_secs).transpose()?;
    // Every connection is made first; the tasks start together.
    let start_at = tokio::time::Instant::now() + Duration::from_secs(2);
    let started = Instant::now();
    let handles: Vec<_> = (0..config.streams)
        .map(|i| tokio::spawn(one_task(config.clone(), i, start_at)))
        .collect();
    let mut latencies = Vec::new();
    let (mut notifications, mut requests, mut completed, mut errors) = (0, 0, 0u64, 0u64);
    let mut first_error = None;
    for handle in handles {
        let out = handle.await.map_err(err)?;
        latencies.extend(out.latencies_us);
        notifications += out.notifications;
        requests += out.requests;
        completed += u64::from(out.completed);
        if let Some(e) = out.error {
            errors += 1;
            first_error.get_or_insert(e);
        }
    }
    let secs = started.elapsed().as_secs_f64() - 2.0;
    let server_cpu = match (config.server_pid, cpu_before) {
        (Some(pid), Some(before)) => Some(cpu_secs(pid)? - before),
        _ => None,
    };
    latencies.sort_unstable();
    #[allow(clippy::cast_precision_loss)]
    let per_task = |n: f64| (n / completed.max(1) as f64 * 1000.0).round() / 1000.0;
    #[allow(clippy::cast_precision_loss)]
    Ok(json!({
        "mode": format!("{:?}", config.mode).to_lowercase(),
        "how": if config.mode == Mode::Follow { json!(if config.listen { "listen" } else { "poll" }) } else { Value::Null },
        "streams": config.streams,
        "secs": (secs * 1000.0).round() / 1000.0,
        "completed": completed,
        "errors": errors,
        "notifications": notifications,
        "requests": requests,
        "requests_per_task": per_task(requests as f64),
        "latency_samples": latencies.len(),
        "latency_p50_us": pct(&latencies, 0.50),
        "latency_p99_us": pct(&latencies, 0.99),
        "latency_max_us": latencies.last(),
        "server_cpu_s": server_cpu.map(|c| (c * 100.0).round() / 100.0),
        "server_cpu_us_per_task": server_cpu.map(|c| (c * 1e6 / completed.max(1) as f64).round()),
        "first_error": first_error,
    }))
}

/// `--streams` tasks, then one listen stream each; RSS before and after.
async fn memory(config: &Config) -> io::Result<Value> {
    let pid = config
        .server_pid
        .ok_or_else(|| err("--mode memory needs --server-pid"))?;
    let mut conns = Vec::with_capacity(config.streams);
    let mut ids = Vec::with_capacity(config.streams);
    let arguments = json!({ "sleep_ms": config.sleep_ms });
    for i in 0..config.streams {
        let mut conn = Conn::connect(config, i / STREAMS_PER_OWNER).await?;
        ids.push(conn.create("noop_task", &arguments).await.map_err(err)?);
        conns.push(conn);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = rss_bytes(pid)?;
    let mut streams = Vec::with_capacity(config.streams);
    for (conn, id) in conns.iter_mut().zip(&ids) {
        let mut listen = conn.listen(id).await.map_err(err)?;
        // The task's state at once: the stream is set up on the server.
        let state = listen.next().await.map_err(err)?;
        if state.is_none() {
            return Err(err("a stream ended before the task's first state"));
        }
        streams.push(listen);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rss_bytes(pid)?;
    #[allow(clippy::cast_precision_loss)]
    let per_stream = (after as f64 - before as f64) / streams.len() as f64;
    Ok(json!({
        "mode": "memory",
        "streams": streams.len(),
        "rss_before": before,
        "rss_after": after,
        "bytes_per_stream": per_stream.round(),
    }))
}

fn main() -> io::Result<()> {
    let args = Args::parse()?;
    let config = Config::from_args(&args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        match config.mode {
            Mode::Memory => memory(&config).await,
            _ => tasks(&config).await,
        }
    })?;
    println!("{report}");
    Ok(())
}
