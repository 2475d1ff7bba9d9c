//! The load generator: MCP Streamable HTTP, 2026-07-28 wire (per-request `_meta`,
//! `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` headers), one keep-alive HTTP/1.1
//! connection per client, each client sending one request at a time.
//!
//! ```text
//! bench-load --url http://127.0.0.1:8101/mcp --mode task --clients 16 --duration-secs 10
//! ```
//!
//! Modes:
//! - `task`: `tools/call` declaring the extension, then `tasks/get` until the task is terminal
//!   (first poll at once, or after `--poll-first-ms`; then every `--poll-every-ms`).
//! - `get`: first creates `--prefill K` tasks (and waits until they are completed), then
//!   `tasks/get` on random ids among them. With `--server-pid P` it also reads the server's
//!   resident set before and after the prefill (bytes per retained task).
//! - `create`: `tools/call` declaring the extension, nothing else.
//! - `inline`: `tools/call` without the extension (an ordinary call).
//!
//! `--owners N` gives client `i` the bearer token `owner-{i mod N}` (for a server that takes
//! each token as its owner: `bench-ours --owner-per-token`), so N owners share the load.
//!
//! Every run is bounded both in time (`--duration-secs`) and in operations (`--count`).
//! Prints one JSON line on stdout; with `--server-pid P` it includes the CPU seconds the
//! server used during the measured phase (`server_cpu_s`), next to the generator's own, and
//! always how many answers of that phase came as SSE (`sse_answers`; the others were one
//! `application/json` body), so a run shows which transport setting it measured.

use std::{
    io,
    sync::{
        Arc,
        atomic::{AtomicI64, Ordering},
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, client::conn::http1::SendRequest};
use hyper_util::rt::TokioIo;
use mcp_tasks_bench::{Args, TOOL};
use serde::Deserialize;
use serde_json::json;
use tokio::net::TcpStream;

const META_TASKS: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench-load","version":"0.1.0"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;
const META_PLAIN: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench-load","version":"0.1.0"},"io.modelcontextprotocol/clientCapabilities":{}}"#;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Task,
    Get,
    Create,
    Inline,
}

#[derive(Debug)]
struct Config {
    addr: String,
    host: String,
    path: String,
    mode: Mode,
    clients: usize,
    duration: Duration,
    count: i64,
    poll_first: Duration,
    poll_every: Duration,
    task_timeout: Duration,
    call_params_task: String,
    call_params_plain: String,
    prefill: usize,
    warmup: usize,
    server_pid: Option<u32>,
    /// How many owners the clients are spread over (`--owners`); `None`: no token.
    owners: Option<usize>,
}

fn err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl Config {
    fn from_args(args: &Args) -> io::Result<Self> {
        args.only(&[
            "url",
            "mode",
            "clients",
            "duration-secs",
            "count",
            "poll-first-ms",
            "poll-every-ms",
            "task-timeout-secs",
            "arguments",
            "sleep-ms",
            "prefill",
            "warmup",
            "server-pid",
            "threads",
            "owners",
        ])?;
        let url = args.get("url").unwrap_or("http://127.0.0.1:8101/mcp");
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| err("--url must be http://127.0.0.1:PORT/PATH (no TLS)"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if !(authority.starts_with("127.0.0.1:") || authority.starts_with("localhost:")) {
            return Err(err("--url must point at 127.0.0.1 (loopback only)"));
        }
        let mode = match args.get("mode").unwrap_or("task") {
            "task" => Mode::Task,
            "get" => Mode::Get,
            "create" => Mode::Create,
            "inline" => Mode::Inline,
            other => return Err(err(format!("--mode {other}: task|get|create|inline"))),
        };
        let arguments = match args.get("arguments") {
            Some(a) => {
                let v: serde_json::Value = serde_json::from_str(a).map_err(err)?;
                if !v.is_object() {
                    return Err(err("--arguments must be a JSON object"));
                }
                v.to_string()
            }
            None => json!({ "sleep_ms": args.parsed::<u64>("sleep-ms", 0)? }).to_string(),
        };
        let count: i64 = args.parsed("count", 10_000_000)?;
        Ok(Self {
            addr: authority.replace("localhost", "127.0.0.1"),
            host: authority.to_owned(),
            path: format!("/{path}"),
            mode,
            clients: args.parsed("clients", 16)?.max(1),
            duration: Duration::from_secs_f64(args.parsed("duration-secs", 10.0)?),
            count,
            poll_first: Duration::from_millis(args.parsed("poll-first-ms", 0)?),
            poll_every: Duration::from_millis(args.parsed("poll-every-ms", 1)?),
            task_timeout: Duration::from_secs(args.parsed("task-timeout-secs", 30)?),
            call_params_task: format!(
                r#"{{"name":"{TOOL}","arguments":{arguments},"_meta":{META_TASKS}}}"#
            ),
            call_params_plain: format!(
                r#"{{"name":"{TOOL}","arguments":{arguments},"_meta":{META_PLAIN}}}"#
            ),
            prefill: args.parsed("prefill", 1000)?,
            warmup: args.parsed("warmup", 1000)?,
            owners: args
                .get("owners")
                .map(|n| n.parse::<usize>().map_err(err))
                .transpose()?
                .map(|n| n.max(1)),
            server_pid: args
                .get("server-pid")
                .map(str::parse)
                .transpose()
                .map_err(err)?,
        })
    }
}

#[derive(Deserialize)]
struct Envelope {
    result: Option<ResultBody>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ResultBody {
    #[serde(rename = "resultType")]
    result_type: Option<String>,
    #[serde(rename = "taskId")]
    task_id: Option<String>,
    status: Option<String>,
}

/// One keep-alive connection.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
    path: String,
    next_id: u64,
    /// Answers that came as `text/event-stream` rather than one `application/json` body.
    sse_answers: u64,
    /// `Bearer owner-K`, with `--owners`.
    authorization: Option<String>,
}

impl Conn {
    /// Connection `index`'s (its owner, with `--owners`).
    async fn connect(config: &Config, index: usize) -> io::Result<Self> {
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
            next_id: 0,
            sse_answers: 0,
            authorization: config
                .owners
                .map(|owners| format!("Bearer owner-{}", index % owners)),
        })
    }

    /// One JSON-RPC request; the answer's `result` (JSON body or SSE stream).
    async fn call(&mut self, method: &str, name: &str, params: &str) -> Result<ResultBody, String> {
        self.next_id += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"{method}","params":{params}}}"#,
            self.next_id
        );
        let mut request = Request::post(&self.path);
        if let Some(authorization) = &self.authorization {
            request = request.header("authorization", authorization);
        }
        let request = request
            .header("host", &self.host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .header("mcp-name", name)
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let sse = response
            .headers()
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        self.sse_answers += u64::from(sse);
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        let envelope = if sse {
            bytes
                .split(|b| *b == b'\n')
                .filter_map(|line| line.strip_prefix(b"data:"))
                .map(<[u8]>::trim_ascii)
                .filter(|data| data.first() == Some(&b'{'))
                .filter_map(|data| serde_json::from_slice::<Envelope>(data).ok())
                .find(|e| e.result.is_some() || e.error.is_some())
        } else {
            serde_json::from_slice::<Envelope>(&bytes).ok()
        };
        match envelope {
            Some(Envelope {
                result: Some(result),
                ..
            }) => Ok(result),
            Some(Envelope {
                error: Some(error), ..
            }) => Err(format!("HTTP {status}: JSON-RPC error {error}")),
            _ => Err(format!(
                "HTTP {status}: no JSON-RPC answer in {:?}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
            )),
        }
    }

    async fn get(&mut self, id: &str) -> Result<ResultBody, String> {
        let params = format!(r#"{{"taskId":"{id}","_meta":{META_TASKS}}}"#);
        self.call("tasks/get", id, &params).await
    }
}

fn is_terminal(status: Option<&str>) -> bool {
    matches!(status, Some("completed" | "failed" | "cancelled"))
}

#[derive(Default)]
struct Stats {
    tasks: u64,
    requests: u64,
    errors: u64,
    inline_answers: u64,
    not_completed: u64,
    sse_answers: u64,
    create_us: Vec<u32>,
    e2e_us: Vec<u32>,
    get_us: Vec<u32>,
    first_error: Option<String>,
}

impl Stats {
    fn error(&mut self, e: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(e);
        }
    }

    fn merge(&mut self, other: Stats) {
        self.tasks += other.tasks;
        self.requests += other.requests;
        self.errors += other.errors;
        self.inline_answers += other.inline_answers;
        self.not_completed += other.not_completed;
        self.sse_answers += other.sse_answers;
        self.create_us.extend(other.create_us);
        self.e2e_us.extend(other.e2e_us);
        self.get_us.extend(other.get_us);
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// Nearest-rank percentile in microseconds, or null.
fn pct(v: &mut [u32], q: f64) -> serde_json::Value {
    if v.is_empty() {
        return serde_json::Value::Null;
    }
    v.sort_unstable();
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    json!(v[rank - 1])
}

/// A start budget shared by the clients: time and operation count.
struct Budget {
    deadline: Instant,
    left: AtomicI64,
}

impl Budget {
    fn take(&self) -> bool {
        Instant::now() < self.deadline && self.left.fetch_sub(1, Ordering::Relaxed) > 0
    }
}

async fn run_task(config: &Config, conn: &mut Conn, stats: &mut Stats, create_only: bool) {
    let start = Instant::now();
    let created = conn
        .call("tools/call", TOOL, &config.call_params_task)
        .await;
    stats.requests += 1;
    stats.create_us.push(micros(start.elapsed()));
    let created = match created {
        Ok(r) => r,
        Err(e) => return stats.error(e),
    };
    match created.result_type.as_deref() {
        Some("task") => {}
        Some("complete") => {
            // The server chose to answer inline (allowed, R2).
            stats.inline_answers += 1;
            stats.tasks += 1;
            stats.e2e_us.push(micros(start.elapsed()));
            return;
        }
        other => return stats.error(format!("unexpected resultType {other:?}")),
    }
    if create_only {
        stats.tasks += 1;
        return;
    }
    let Some(id) = created.task_id else {
        return stats.error("CreateTaskResult without taskId".into());
    };
    let mut status = created.status;
    let mut first = true;
    while !is_terminal(status.as_deref()) {
        if start.elapsed() > config.task_timeout {
            return stats.error(format!("task {id} not terminal after the task timeout"));
        }
        let wait = if first {
            config.poll_first
        } else {
            config.poll_every
        };
        first = false;
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let t = Instant::now();
        let got = conn.get(&id).await;
        stats.requests += 1;
        stats.get_us.push(micros(t.elapsed()));
        match got {
            Ok(r) => status = r.status,
            Err(e) => return stats.error(e),
        }
    }
    stats.tasks += 1;
    stats.e2e_us.push(micros(start.elapsed()));
    if status.as_deref() != Some("completed") {
        stats.not_completed += 1;
    }
}

async fn client(
    config: Arc<Config>,
    mut conn: Conn,
    budget: Arc<Budget>,
    ids: Arc<Vec<String>>,
    seed: u64,
) -> Stats {
    let mut stats = Stats::default();
    let sse_before = conn.sse_answers;
    let mut rng = seed | 1;
    while budget.take() {
        match config.mode {
            Mode::Task => run_task(&config, &mut conn, &mut stats, false).await,
            Mode::Create => run_task(&config, &mut conn, &mut stats, true).await,
            Mode::Inline => {
                let t = Instant::now();
                let r = conn
                    .call("tools/call", TOOL, &config.call_params_plain)
                    .await;
                stats.requests += 1;
                stats.create_us.push(micros(t.elapsed()));
                match r {
                    Ok(r) if r.result_type.as_deref() == Some("complete") => stats.tasks += 1,
                    Ok(r) => stats.error(format!("inline call got resultType {:?}", r.result_type)),
                    Err(e) => stats.error(e),
                }
            }
            Mode::Get => {
                // xorshift64
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                #[allow(clippy::cast_possible_truncation)]
                let id = &ids[(rng % ids.len() as u64) as usize];
                let t = Instant::now();
                let r = conn.get(id).await;
                stats.requests += 1;
                stats.get_us.push(micros(t.elapsed()));
                match r {
                    Ok(r) if r.status.as_deref() == Some("completed") => {}
                    Ok(r) => stats.error(format!("task {id} is {:?}, not completed", r.status)),
                    Err(e) => stats.error(e),
                }
            }
        }
    }
    stats.sse_answers = conn.sse_answers - sse_before;
    stats
}

/// User plus system CPU time of a process in seconds (`/proc/PID/stat`, 100 ticks/s).
fn cpu_secs(pid: &str) -> io::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line; 12 and 13 after the name.
    #[allow(clippy::cast_precision_loss)]
    Ok((ticks(11) + ticks(12)) as f64 / 100.0)
}

fn rss_bytes(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .ok_or_else(|| err("no VmRSS"))?;
    Ok(kb * 1024)
}

/// Creates `config.prefill` tasks over `conns`; their ids.
async fn prefill(config: &Arc<Config>, conns: Vec<Conn>) -> io::Result<(Vec<String>, Vec<Conn>)> {
    let left = Arc::new(AtomicI64::new(i64::try_from(config.prefill).map_err(err)?));
    let deadline = Instant::now() + Duration::from_secs(900);
    let mut handles = Vec::new();
    for mut conn in conns {
        let config = config.clone();
        let left = left.clone();
        handles.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            let mut failure = None;
            while left.fetch_sub(1, Ordering::Relaxed) > 0 && Instant::now() < deadline {
                match conn
                    .call("tools/call", TOOL, &config.call_params_task)
                    .await
                {
                    Ok(ResultBody {
                        task_id: Some(id), ..
                    }) => ids.push(id),
                    Ok(_) => failure = Some("prefill: the server did not create a task".into()),
                    Err(e) => failure = Some(e),
                }
                if failure.is_some() {
                    break;
                }
            }
            (ids, conn, failure)
        }));
    }
    let mut ids = Vec::with_capacity(config.prefill);
    let mut conns = Vec::new();
    for handle in handles {
        let (mut part, conn, failure) = handle.await.map_err(err)?;
        if let Some(failure) = failure {
            return Err(err(failure));
        }
        ids.append(&mut part);
        conns.push(conn);
    }
    if ids.len() != config.prefill {
        return Err(err(format!(
            "prefill: created {} of {} tasks within its time bound",
            ids.len(),
            config.prefill
        )));
    }
    // Wait until a sample of them is completed (the tool is a no-op).
    let conn = &mut conns[0];
    for id in ids.iter().rev().take(8) {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let r = conn.get(id).await.map_err(err)?;
            if r.status.as_deref() == Some("completed") {
                break;
            }
            if Instant::now() > until {
                return Err(err(format!("prefill: task {id} not completed")));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    Ok((ids, conns))
}

async fn run(config: Arc<Config>) -> io::Result<serde_json::Value> {
    let mut conns = Vec::with_capacity(config.clients);
    for index in 0..config.clients {
        conns.push(Conn::connect(&config, index).await?);
    }
    // Warm up every connection with ordinary calls (no task is created).
    for i in 0..config.warmup {
        let n = conns.len();
        conns[i % n]
            .call("tools/call", TOOL, &config.call_params_plain)
            .await
            .map_err(|e| err(format!("warm-up call failed: {e}")))?;
    }
    let mut report = json!({});
    let mut ids = Vec::new();
    if config.mode == Mode::Get {
        let before = config.server_pid.map(rss_bytes).transpose()?;
        let started = Instant::now();
        let (created, back) = prefill(&config, conns).await?;
        report["prefill"] = json!(created.len());
        report["prefill_secs"] = json!(started.elapsed().as_secs_f64());
        conns = back;
        ids = created;
        if let Some(before) = before {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let after = rss_bytes(config.server_pid.unwrap_or_default())?;
            report["rss_before"] = json!(before);
            report["rss_after"] = json!(after);
            #[allow(clippy::cast_precision_loss)]
            let per_task = (after as f64 - before as f64) / ids.len() as f64;
            report["bytes_per_task"] = json!(per_task.round());
        }
    }
    let ids = Arc::new(ids);
    let budget = Arc::new(Budget {
        deadline: Instant::now() + config.duration,
        left: AtomicI64::new(config.count),
    });
    let server_cpu = config
        .server_pid
        .map(|p| cpu_secs(&p.to_string()))
        .transpose()?;
    let client_cpu = cpu_secs("self")?;
    let started = Instant::now();
    let mut handles = Vec::new();
    for (i, conn) in conns.into_iter().enumerate() {
        handles.push(tokio::spawn(client(
            config.clone(),
            conn,
            budget.clone(),
            ids.clone(),
            0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9),
        )));
    }
    let mut stats = Stats::default();
    for handle in handles {
        stats.merge(handle.await.map_err(err)?);
    }
    let secs = started.elapsed().as_secs_f64();
    let client_cpu = cpu_secs("self")? - client_cpu;
    let server_cpu = match (config.server_pid, server_cpu) {
        (Some(pid), Some(before)) => Some(cpu_secs(&pid.to_string())? - before),
        _ => None,
    };
    #[allow(clippy::cast_precision_loss)]
    let per_sec = |n: u64| (n as f64 / secs * 10.0).round() / 10.0;
    let mode = format!("{:?}", config.mode).to_lowercase();
    let fields = json!({
        "mode": mode,
        "clients": config.clients,
        "secs": (secs * 1000.0).round() / 1000.0,
        "tasks": stats.tasks,
        "requests": stats.requests,
        "errors": stats.errors,
        "inline_answers": stats.inline_answers,
        "not_completed": stats.not_completed,
        "sse_answers": stats.sse_answers,
        "tasks_per_s": per_sec(stats.tasks),
        "requests_per_s": per_sec(stats.requests),
        "create_p50_us": pct(&mut stats.create_us, 0.50),
        "create_p99_us": pct(&mut stats.create_us, 0.99),
        "e2e_p50_us": pct(&mut stats.e2e_us, 0.50),
        "e2e_p99_us": pct(&mut stats.e2e_us, 0.99),
        "get_p50_us": pct(&mut stats.get_us, 0.50),
        "get_p99_us": pct(&mut stats.get_us, 0.99),
        "client_cpu_s": (client_cpu * 100.0).round() / 100.0,
        "server_cpu_s": server_cpu.map(|c| (c * 100.0).round() / 100.0),
        "first_error": stats.first_error,
    });
    if let (Some(r), serde_json::Value::Object(f)) = (report.as_object_mut(), fields) {
        r.extend(f);
    }
    Ok(report)
}

fn main() -> io::Result<()> {
    let args = Args::parse()?;
    let threads: usize = args.parsed("threads", 1)?;
    let config = Arc::new(Config::from_args(&args)?);
    let runtime = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()?
    };
    let report = runtime.block_on(run(config))?;
    println!("{report}");
    Ok(())
}
