//! The task client against an independent server: fastmcp-tasks 4.1.4 (PyPI),
//! running `tests/peers/fastmcp_peer.py` in a virtualenv.
//!
//! The venv is `$MCP_TASKS_FASTMCP_VENV` if set (`.ci/run` sets it and installs into it),
//! else `<target>/tmp/fastmcp-tasks-4.1.4`; it is created with `python3 -m venv` and
//! `pip install fastmcp-tasks==4.1.4` when missing. If that fails these tests fail, loudly:
//! they never skip.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::Mutex,
    time::Duration,
};

use mcp_tasks::client::{Call, TaskClient, TaskClientBuilder, TaskEnd};
use rmcp::model::{CallToolResult, ElicitResult, ElicitationAction};
use serde_json::json;

const PACKAGE: &str = "fastmcp-tasks==4.1.4";

fn venv_dir() -> PathBuf {
    std::env::var_os("MCP_TASKS_FASTMCP_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("fastmcp-tasks-4.1.4"))
}

fn run(command: &mut std::process::Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The venv's python, creating the venv and installing the peer if needed (once per run).
fn python() -> PathBuf {
    static SETUP: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut setup = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(python) = setup.as_ref() {
        return python.clone();
    }
    let venv = venv_dir();
    let python = venv.join("bin").join("python");
    let ready = std::process::Command::new(&python)
        .args([
            "-c",
            "import importlib.metadata as m, sys; sys.exit(m.version('fastmcp-tasks') != '4.1.4')",
        ])
        .status()
        .is_ok_and(|s| s.success());
    if !ready {
        run(
            std::process::Command::new("python3")
                .arg("-m")
                .arg("venv")
                .arg(&venv),
            "creating the fastmcp-tasks venv",
        );
        run(
            std::process::Command::new(&python).args(["-m", "pip", "install", "--quiet", PACKAGE]),
            "pip install fastmcp-tasks==4.1.4",
        );
    }
    *setup = Some(python.clone());
    python
}

fn script() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/fastmcp_peer.py")
}

/// fastmcp-tasks serving HTTP on a loopback port it binds itself (port 0) and reports on
/// stderr; killed when dropped.
struct Peer {
    url: String,
    child: tokio::process::Child,
    /// What it printed on stderr, for the failure message if it exits.
    stderr: std::sync::Arc<Mutex<Vec<String>>>,
}

impl Peer {
    async fn start() -> Self {
        use tokio::io::AsyncBufReadExt;
        let python = tokio::task::spawn_blocking(python)
            .await
            .expect("venv setup");
        let mut child = tokio::process::Command::new(python)
            .arg(script())
            .arg("http")
            .arg("0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the fastmcp-tasks peer");
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = Vec::new();
        let port = tokio::time::timeout(BOUND, async {
            while let Some(line) = lines.next_line().await.unwrap_or(None) {
                if let Some(port) = line.strip_prefix("listening on ") {
                    return port.trim().parse::<u16>().ok();
                }
                seen.push(line);
            }
            None
        })
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| {
            panic!(
                "the fastmcp-tasks peer reported no port:\n{}",
                seen.join("\n")
            )
        });
        // Keep draining its stderr, so it never blocks on a full pipe.
        let stderr = std::sync::Arc::new(Mutex::new(seen));
        let log = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                log.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        });
        Self {
            url: format!("http://127.0.0.1:{port}/mcp"),
            child,
            stderr,
        }
    }

    /// Connects, retrying while the Python server starts (bounded).
    async fn connect(&mut self, builder: impl Fn() -> TaskClientBuilder) -> TaskClient {
        for _ in 0..240 {
            if let Ok(Some(status)) = self.child.try_wait() {
                let stderr = self
                    .stderr
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .join("\n");
                panic!("the fastmcp-tasks peer exited ({status}):\n{stderr}");
            }
            if let Ok(client) = builder().connect_http(&self.url).await {
                return client;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!(
            "the fastmcp-tasks peer did not answer on {} within 60 s",
            self.url
        );
    }
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

fn confirming() -> TaskClientBuilder {
    TaskClient::builder().with_elicitation(|_params, _cx| async {
        Ok(Some(
            ElicitResult::new(ElicitationAction::Accept).with_content(json!({ "confirm": true })),
        ))
    })
}

const BOUND: Duration = Duration::from_secs(60);

/// R4, R18: a task created by fastmcp-tasks, polled to completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_task_to_completion() {
    let mut peer = Peer::start().await;
    let client = peer.connect(TaskClient::builder).await;
    assert!(client.server_supports_tasks());
    let args = json!({ "text": "hi", "seconds": 0.3 }).as_object().cloned();
    let Call::Task(mut task) = client.call("slow_echo", args).await.unwrap() else {
        panic!("slow_echo runs as a task for a declaring client");
    };
    assert_eq!(task.poll_interval(), Duration::from_millis(100));
    let outcome = tokio::time::timeout(BOUND, task.wait())
        .await
        .expect("bounded");
    let Ok(TaskEnd::Completed(result)) = outcome else {
        panic!("completed: {outcome:?}");
    };
    assert_eq!(text(&result), "echo: hi");
}

/// R30-R32: fastmcp-tasks asks for confirmation during the task; answered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_input_request_answered() {
    let mut peer = Peer::start().await;
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = asked.clone();
    let client = peer
        .connect(move || {
            let counter = counter.clone();
            TaskClient::builder().with_elicitation(move |_params, cx| {
                // fastmcp-tasks namespaces the tool's key (`<task>:<hash>`).
                assert!(!cx.key.is_empty());
                assert!(matches!(
                    cx.scope,
                    mcp_tasks::client::InputScope::Task { .. }
                ));
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                async {
                    Ok(Some(
                        ElicitResult::new(ElicitationAction::Accept)
                            .with_content(json!({ "confirm": true })),
                    ))
                }
            })
        })
        .await;
    let args = json!({ "filename": "a.txt" }).as_object().cloned();
    let result = tokio::time::timeout(BOUND, client.call_tool("confirm_delete", args))
        .await
        .expect("bounded")
        .unwrap();
    assert_eq!(text(&result), "deleted a.txt");
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// R34: tasks/cancel on fastmcp-tasks; the task ends cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_cancel() {
    let mut peer = Peer::start().await;
    let client = peer.connect(TaskClient::builder).await;
    let args = json!({ "text": "never", "seconds": 60 })
        .as_object()
        .cloned();
    let mut task = client
        .call("slow_echo", args)
        .await
        .unwrap()
        .into_task()
        .expect("a task");
    task.cancel().await.unwrap();
    let outcome = tokio::time::timeout(BOUND, task.wait())
        .await
        .expect("bounded");
    assert_eq!(outcome.unwrap(), TaskEnd::Cancelled);
}

/// R4, R55: a tool fastmcp never runs as a task answers inline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_inline_fallback() {
    let mut peer = Peer::start().await;
    let client = peer.connect(TaskClient::builder).await;
    let args = json!({ "name": "Ada" }).as_object().cloned();
    let Call::Inline(result) = client.call("greet", args.clone()).await.unwrap() else {
        panic!("greet is never a task");
    };
    assert_eq!(text(&result), "Hello, Ada!");
    assert_eq!(
        text(&client.call_tool("greet", args).await.unwrap()),
        "Hello, Ada!"
    );
}

/// The same peer as a stdio child process: a task with an input request, to completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_over_stdio() {
    let python = tokio::task::spawn_blocking(python)
        .await
        .expect("venv setup");
    let mut command = tokio::process::Command::new(python);
    command.arg(script()).arg("stdio").stderr(Stdio::null());
    let client = confirming()
        .connect_stdio(command)
        .await
        .expect("connect over stdio");
    let args = json!({ "filename": "b.txt" }).as_object().cloned();
    let result = tokio::time::timeout(BOUND, client.call_tool("confirm_delete", args))
        .await
        .expect("bounded")
        .unwrap();
    assert_eq!(text(&result), "deleted b.txt");
    client.close().await;
}
