//! The `mcp-tasks` binary against the example server on Streamable HTTP (127.0.0.1:0):
//! output, prompts answered on stdin, exit codes (0 completed, 1 isError, 2 failed,
//! 3 cancelled, 4 usage, 5 connection), Ctrl-C (SIGINT) → `tasks/cancel` → exit 3.

#[path = "support/example.rs"]
mod example;

use std::{process::Stdio, time::Duration};

use mcp_tasks::{
    ArgumentError, Failure, Mode, TaskContext, TaskServer, TaskTool, ToolDefinition, ToolFuture,
};
use rmcp::{
    ErrorData,
    model::{ErrorCode, JsonObject},
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tasks");

/// A task that ends `failed` with a JSON-RPC error.
struct Explode;

impl TaskTool for Explode {
    fn definition(&self) -> ToolDefinition {
        let schema = match json!({ "type": "object" }) {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        };
        ToolDefinition::new("explode", schema).with_mode(Mode::Required)
    }
    fn call(&self, _ctx: TaskContext, _args: JsonObject) -> Result<ToolFuture, ArgumentError> {
        Ok(Box::pin(async {
            Err(Failure::Error(ErrorData::new(
                ErrorCode(-32050),
                "boom",
                Some(json!({ "why": "on purpose" })),
            )))
        }))
    }
}

/// Paced by [`PACED`]: after one permit sets its status message to "half way", after one
/// more ends with "paced done". Its poll interval is 10 s: a client that polls sees each
/// change up to 10 s late.
struct Paced;

static PACED: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(0);

impl TaskTool for Paced {
    fn definition(&self) -> ToolDefinition {
        let schema = match json!({ "type": "object" }) {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        };
        ToolDefinition::new("paced", schema)
            .with_mode(Mode::Required)
            .with_poll_interval(Duration::from_secs(10))
    }
    fn call(&self, ctx: TaskContext, _args: JsonObject) -> Result<ToolFuture, ArgumentError> {
        Ok(Box::pin(async move {
            PACED.acquire().await.expect("open").forget();
            ctx.status("half way").await;
            PACED.acquire().await.expect("open").forget();
            Ok(rmcp::model::CallToolResult::success(vec![
                rmcp::model::ContentBlock::text("paced done"),
            ]))
        }))
    }
}

/// The example server (plus `explode` and `paced`) on a free port; returns its URL.
async fn start(step: Duration) -> String {
    let toolkit = example::toolkit(step)
        .with_tool(Explode)
        .and_then(|toolkit| toolkit.with_tool(Paced))
        .expect("valid tools");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(mcp_tasks::serve_http(
        listener,
        TaskServer::new(toolkit),
        mcp_tasks::HttpOptions::new(),
    ));
    url
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs the binary to its end with `stdin` as input (bounded).
async fn run(args: &[&str], stdin: &str) -> Run {
    let mut child = tokio::process::Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the mcp-tasks binary runs");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("mcp-tasks ends")
        .unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

type StderrLines = tokio::io::Lines<BufReader<tokio::process::ChildStderr>>;

/// Starts the binary and reads its stderr until a line satisfies `until`; returns the child,
/// the lines read and the rest of stderr.
async fn start_until(
    args: &[&str],
    until: impl Fn(&str) -> bool,
) -> (tokio::process::Child, Vec<String>, StderrLines) {
    let mut child = tokio::process::Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the mcp-tasks binary runs");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            let done = until(&line);
            seen.push(line);
            if done {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "never saw the expected line in {seen:#?}");
    (child, seen, lines)
}

fn task_id(lines: &[String]) -> String {
    lines
        .iter()
        .find_map(|l| {
            l.strip_prefix("task ")
                .and_then(|rest| rest.split_whitespace().next())
        })
        .expect("a `task <id>` line")
        .to_owned()
}

async fn finish(
    mut child: tokio::process::Child,
    mut lines: StderrLines,
    seen: &mut Vec<String>,
) -> i32 {
    let status = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            seen.push(line);
        }
        child.wait().await
    })
    .await
    .expect("mcp-tasks ends")
    .unwrap();
    status.code().unwrap_or(-1)
}

#[tokio::test]
async fn tools_and_inline_calls() {
    let url = start(Duration::from_millis(10)).await;
    let tools = run(&["tools", &url], "").await;
    assert_eq!(tools.code, 0, "{}", tools.stderr);
    assert!(tools.stdout.contains("greet\t"), "{}", tools.stdout);
    assert!(
        tools.stdout.contains("workspace_report\t"),
        "{}",
        tools.stdout
    );

    let greet = run(&["call", &url, "greet", "--arg", "name=Ada"], "").await;
    assert_eq!(
        (greet.code, greet.stdout.as_str()),
        (0, "Hello, Ada!\n"),
        "{}",
        greet.stderr
    );

    let raw = run(
        &["call", &url, "greet", "--json", r#"{"name":"Bo"}"#, "--raw"],
        "",
    )
    .await;
    assert_eq!(raw.code, 0, "{}", raw.stderr);
    let value: Value = serde_json::from_str(raw.stdout.trim()).expect("--raw prints JSON");
    assert_eq!(value["content"][0]["text"], "Hello, Bo!");

    // A tool error (isError: true) → exit 1.
    let missing = run(&["call", &url, "greet"], "").await;
    assert_eq!(missing.code, 1, "{} {}", missing.stdout, missing.stderr);
    assert!(missing.stdout.contains("name"), "{}", missing.stdout);
}

#[tokio::test]
async fn a_task_with_a_question_answered_at_the_terminal() {
    let url = start(Duration::from_millis(300)).await;
    // "maybe" is refused by the type check of the boolean field, then "yes" is accepted.
    let report = run(
        &[
            "call",
            &url,
            "workspace_report",
            "--arg",
            "workspace_id=acme",
        ],
        "maybe\nyes\n",
    )
    .await;
    assert_eq!(report.code, 0, "{}", report.stderr);
    assert_eq!(
        report.stdout,
        "Report for acme: 42 accounts (archived included)\n"
    );
    for expected in [
        "[working] scanning acme: step ",
        "[input_required] waiting for your answer",
        "? Include archived accounts?",
        "include (yes/no): ",
        "invalid: answer yes or no",
        "[completed]",
    ] {
        assert!(
            report.stderr.contains(expected),
            "`{expected}` in:\n{}",
            report.stderr
        );
    }

    // End of input declines with cancel: the report leaves archived accounts out.
    let declined = run(
        &[
            "call",
            &url,
            "workspace_report",
            "--arg",
            "workspace_id=acme",
        ],
        "",
    )
    .await;
    assert_eq!(declined.code, 0, "{}", declined.stderr);
    assert_eq!(declined.stdout, "Report for acme: 40 accounts\n");
}

#[tokio::test]
async fn failed_task_exits_2_with_the_error() {
    let url = start(Duration::from_millis(10)).await;
    let failed = run(&["call", &url, "explode"], "").await;
    assert_eq!(failed.code, 2, "{}", failed.stderr);
    assert!(
        failed.stderr.contains("failed: error -32050: boom"),
        "{}",
        failed.stderr
    );
    assert!(
        failed.stderr.contains(r#"data: {"why":"on purpose"}"#),
        "{}",
        failed.stderr
    );
}

#[tokio::test]
async fn ctrl_c_sends_tasks_cancel_and_exits_3() {
    let url = start(Duration::from_secs(5)).await;
    let args = [
        "call",
        url.as_str(),
        "workspace_report",
        "--arg",
        "workspace_id=acme",
    ];
    let (child, mut seen, lines) = start_until(&args, |l| l.starts_with("[working]")).await;
    let id = task_id(&seen);
    let pid = child.id().expect("running").to_string();
    let kill = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(kill.success());
    let code = finish(child, lines, &mut seen).await;
    assert_eq!(code, 3, "{seen:#?}");
    assert!(
        seen.iter()
            .any(|l| l.starts_with("interrupted: cancelling task")),
        "{seen:#?}"
    );
    assert!(
        seen.iter().any(|l| l == &format!("task {id} cancelled")),
        "{seen:#?}"
    );

    // The server agrees: `get` shows the task cancelled.
    let get = run(&["get", &url, &id], "").await;
    assert_eq!(get.code, 0, "{}", get.stderr);
    let snapshot: Value = serde_json::from_str(&get.stdout).expect("get prints JSON");
    assert_eq!(snapshot["status"], "cancelled");
}

/// The server pushes task status: each change is printed as it happens, not at the next
/// poll 10 s later.
#[tokio::test]
async fn pushed_updates_are_shown_as_they_happen() {
    let url = start(Duration::from_millis(300)).await;
    let args = ["call", url.as_str(), "paced"];
    let (child, mut seen, mut lines) = start_until(&args, |l| l.starts_with("task ")).await;
    // Time for the listen to be open; then the change.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let changed = std::time::Instant::now();
    PACED.add_permits(1);
    let shown = tokio::time::timeout(Duration::from_secs(5), async {
        while let Ok(Some(line)) = lines.next_line().await {
            let done = line == "[working] half way";
            seen.push(line);
            if done {
                return changed.elapsed();
            }
        }
        panic!("stderr ended: {seen:#?}");
    })
    .await
    .unwrap_or_else(|_| {
        panic!("the change shown within 5 s (the poll interval is 10 s): {seen:#?}")
    });
    assert!(shown < Duration::from_secs(2), "shown after {shown:?}");
    let ended = std::time::Instant::now();
    PACED.add_permits(1);
    let mut child = child;
    let mut output = String::new();
    tokio::io::AsyncReadExt::read_to_string(child.stdout.as_mut().unwrap(), &mut output)
        .await
        .unwrap();
    assert_eq!(finish(child, lines, &mut seen).await, 0, "{seen:#?}");
    assert_eq!(output, "paced done\n");
    assert!(
        ended.elapsed() < Duration::from_secs(5),
        "the end shown at once, not at the next poll: {:?}",
        ended.elapsed()
    );
    assert!(seen.iter().any(|l| l == "[completed]"), "{seen:#?}");
}

#[tokio::test]
async fn cancel_command_ends_a_running_call() {
    let url = start(Duration::from_secs(5)).await;
    let args = [
        "call",
        url.as_str(),
        "workspace_report",
        "--arg",
        "workspace_id=acme",
    ];
    let (child, mut seen, lines) = start_until(&args, |l| l.starts_with("task ")).await;
    let id = task_id(&seen);
    let cancel = run(&["cancel", &url, &id], "").await;
    assert_eq!(cancel.code, 0, "{}", cancel.stderr);
    assert!(cancel.stderr.contains("cancel requested"));
    assert_eq!(finish(child, lines, &mut seen).await, 3, "{seen:#?}");
}

#[tokio::test]
async fn resume_after_the_first_process_died() {
    let url = start(Duration::from_millis(300)).await;
    let args = [
        "call",
        url.as_str(),
        "workspace_report",
        "--arg",
        "workspace_id=acme",
    ];
    let (mut child, seen, _lines) = start_until(&args, |l| l.starts_with("task ")).await;
    let id = task_id(&seen);
    child.kill().await.unwrap(); // a crash, not a Ctrl-C: nothing is cancelled
    let resumed = run(&["resume", &url, &id], "y\n").await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(
        resumed.stdout,
        "Report for acme: 42 accounts (archived included)\n"
    );
}

#[tokio::test]
async fn usage_errors_exit_4_with_a_reason() {
    // A port this test holds without listening on it: nothing can take it meanwhile, and a
    // connection to it is refused (no assumption about what listens on a fixed port).
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let nobody = format!("http://{}/mcp", held.local_addr().unwrap());
    for (args, expected) in [
        (&["call"][..], "required arguments were not provided"),
        (&["call", nobody.as_str()], "`call` needs <TOOL>"),
        (&["frob", nobody.as_str()], "unrecognized subcommand 'frob'"),
        (&["get", "ftp://x", "id"], "invalid target"),
    ] {
        let run = run(args, "").await;
        assert_eq!(run.code, 4, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(expected), "{args:?}: {}", run.stderr);
    }
    // A server that is not there: a connection error, exit 5.
    let unreachable = run(&["tools", nobody.as_str()], "").await;
    assert_eq!(unreachable.code, 5, "{}", unreachable.stderr);
    // One line: what failed and why, without the client library's type names.
    assert!(
        unreachable.stderr.contains("cannot connect")
            && unreachable.stderr.contains("error sending request")
            && !unreachable.stderr.contains("rmcp::"),
        "{}",
        unreachable.stderr
    );
    let help = run(&["--help"], "").await;
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("Exit codes"), "{}", help.stdout);
}

/// An rmcp server with an rmcp `#[tool]` (`add`) beside task tools: `greet` (`mode =
/// "inline"`), `workspace_report` (optional) and `explode` (required).
#[derive(Clone)]
struct Mixed {
    tasks: mcp_tasks::Engine,
    tools: rmcp::handler::server::router::tool::ToolRouter<Self>,
}

impl AsRef<mcp_tasks::Engine> for Mixed {
    fn as_ref(&self) -> &mcp_tasks::Engine {
        &self.tasks
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

#[rmcp::tool_router]
impl Mixed {
    /// Adds two numbers.
    #[rmcp::tool]
    async fn add(
        &self,
        rmcp::handler::server::wrapper::Parameters(AddArgs { a, b }): rmcp::handler::server::wrapper::Parameters<AddArgs>,
    ) -> String {
        (a + b).to_string()
    }
}

#[rmcp::tool_handler(router = self.tools)]
impl rmcp::ServerHandler for Mixed {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            self.tasks.capabilities(
                rmcp::model::ServerCapabilities::builder()
                    .enable_tools()
                    .build(),
            ),
        )
    }

    mcp_tasks::task_methods!(tasks);
}

#[tokio::test]
async fn tools_shows_each_tools_task_support() {
    let toolkit = example::toolkit(Duration::from_millis(10))
        .with_tool(Explode)
        .expect("valid tools");
    let tasks = mcp_tasks::Engine::new(toolkit);
    tasks.start().expect("the engine starts");
    let server = Mixed {
        tools: Mixed::tool_router() + tasks.tool_router(),
        tasks,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(mcp_tasks::serve_http(
        listener,
        server,
        mcp_tasks::HttpOptions::new(),
    ));

    let tools = run(&["tools", &url], "").await;
    assert_eq!(tools.code, 0, "{}", tools.stderr);
    let mut labels: Vec<(&str, &str)> = tools
        .stdout
        .lines()
        .map(|line| {
            let mut fields = line.split('\t');
            (fields.next().unwrap(), fields.next().unwrap_or(""))
        })
        .collect();
    labels.sort();
    assert_eq!(
        labels,
        [
            ("add", "task: never"),
            ("explode", "task: required"),
            ("greet", "task: never"),
            ("workspace_report", "task: optional"),
        ],
        "{}",
        tools.stdout
    );
}

/// Imports `batches` batches of 300 ms each, as durable steps: after a restart on the same
/// SQLite file it goes on from the first batch not done.
#[cfg(feature = "sqlite")]
#[mcp_tasks::task_tool(mode = "required", restart = "resume", poll_interval = "100ms")]
async fn import(ctx: TaskContext, batches: u32) -> Result<String, mcp_tasks::ToolError> {
    for batch in 1..=batches {
        ctx.status(format!("batch {batch} of {batches}")).await;
        ctx.step(&format!("batch-{batch}"), || async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            1u32
        })
        .await?;
    }
    Ok(format!("imported {batches} batches"))
}

/// Not a test of its own: the server process that `follows_a_task_through_a_restart` starts,
/// kills (SIGKILL) and starts again, by running this test binary with this test's name and
/// `CLI_SERVER_DB` / `CLI_SERVER_PORT` set. Prints `serving <url>` once it listens.
#[cfg(feature = "sqlite")]
#[tokio::test]
#[ignore = "the server process of follows_a_task_through_a_restart"]
async fn restartable_server() {
    let (Ok(db), Ok(port)) = (
        std::env::var("CLI_SERVER_DB"),
        std::env::var("CLI_SERVER_PORT"),
    ) else {
        return;
    };
    let store = mcp_tasks::SqliteStore::open(db).expect("the SQLite file opens");
    let engine = mcp_tasks::Engine::builder(mcp_tasks::toolkit![import].expect("valid tools"))
        .with_store(store)
        .build();
    let server = TaskServer::from_engine(engine);
    server.recover().await.expect("recovery");
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}"))
        .await
        .expect("the port is free");
    println!("serving http://{}/mcp", listener.local_addr().unwrap());
    mcp_tasks::serve_http(listener, server, mcp_tasks::HttpOptions::new())
        .await
        .expect("serves");
}

/// The server process, on `port` (0: any) with its tasks in `db`; returns it and its URL.
#[cfg(feature = "sqlite")]
async fn server_process(db: &std::path::Path, port: u16) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "restartable_server", "--ignored", "--nocapture"])
        .env("CLI_SERVER_DB", db)
        .env("CLI_SERVER_PORT", port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the server process starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(url) = line.strip_prefix("serving ") {
                return url.to_owned();
            }
        }
        panic!("the server process ended before serving");
    })
    .await
    .expect("the server serves");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

/// The CLI follows a task through a server restart (SIGKILL, then the same server on the
/// same port and SQLite file), and ends 0 with the result; with the server gone for longer
/// than `--reconnect-for`, it gives up with exit 5, one line of cause without library type
/// names, and the exact `mcp-tasks resume` command.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_task_through_a_restart() {
    let dir = std::env::temp_dir().join(format!("mcp-tasks-cli-restart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("tasks.db");
    let (mut server, url) = server_process(&db, 0).await;
    let port: u16 = url
        .trim_end_matches("/mcp")
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();

    let (child, mut seen, lines) = start_until(
        &[
            "call",
            &url,
            "import",
            "--arg",
            "batches=6",
            "--reconnect-for",
            "30s",
        ],
        |line| line.contains("batch 2 of 6"),
    )
    .await;
    server.kill().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (mut server, _) = server_process(&db, port).await;
    let code = finish(child, lines, &mut seen).await;
    let stderr = seen.join("\n");
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("reconnecting for up to 30s"), "{stderr}");
    assert!(stderr.contains("reconnected"), "{stderr}");

    // The server goes away for good: the CLI gives up after --reconnect-for.
    let (child, mut seen, lines) = start_until(
        &[
            "call",
            &url,
            "import",
            "--arg",
            "batches=20",
            "--reconnect-for",
            "2s",
        ],
        |line| line.contains("batch 1 of 20"),
    )
    .await;
    let id = task_id(&seen);
    server.kill().await.unwrap();
    let code = finish(child, lines, &mut seen).await;
    let stderr = seen.join("\n");
    assert_eq!(code, 5, "{stderr}");
    assert!(
        stderr.contains(&format!("mcp-tasks resume {url} {id}")),
        "{stderr}"
    );
    let lost = seen
        .iter()
        .find(|line| line.contains("reconnecting for up to 2s"))
        .expect("a line with the cause");
    for library in [
        "ServiceError",
        "reqwest",
        "hyper",
        "Transport",
        "rmcp",
        "Error {",
    ] {
        assert!(!lost.contains(library), "{lost}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
