//! `mcp-tasks`: call MCP tools from a terminal and follow their tasks to the end.
//!
//! See `mcp-tasks --help` and the README. Exit codes: 0 completed, 1 the tool reported an
//! error (`isError`), 2 the task failed, 3 cancelled, 4 usage, connection or protocol error.

#![forbid(unsafe_code)]

mod admin;
mod args;
mod prompt;

use std::{io::IsTerminal, io::Write, process::ExitCode, time::Duration};

use futures::StreamExt;
use mcp_tasks::{
    Mode,
    client::{Call, ClientError, Endpoint, TaskClient, TaskEnd, TaskHandle},
};
use rmcp::model::{CallToolResult, ContentBlock, DetailedTask, TaskStatus};

use args::Command;

const COMPLETED: u8 = 0;
const TOOL_ERROR: u8 = 1;
const FAILED: u8 = 2;
const CANCELLED: u8 = 3;
const ERROR: u8 = 4;

/// How long to watch a task after `tasks/cancel` before giving up on seeing it end.
const AFTER_CANCEL: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> ExitCode {
    let command = match args::parse(std::env::args_os()) {
        Ok(command) => command,
        Err(args::Stop::Info(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(args::Stop::Usage(text)) => {
            eprint!("{text}");
            return ExitCode::from(ERROR);
        }
    };
    if let Command::Admin(admin) = command {
        return match admin::run(admin).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("mcp-tasks admin: {}", report(&error));
                ExitCode::from(ERROR)
            }
        };
    }
    let interrupts = Interrupts::new();
    let code = match run(command, interrupts).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("mcp-tasks: {}", report(&error));
            ERROR
        }
    };
    let _ = std::io::stdout().flush();
    ExitCode::from(code)
}

/// An error with its chain of causes.
fn report(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// Ctrl-C (SIGINT), registered before anything else so the first one is ours.
struct Interrupts {
    #[cfg(unix)]
    signal: tokio::signal::unix::Signal,
}

impl Interrupts {
    fn new() -> Self {
        Self {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
                .expect("a SIGINT handler can be installed"),
        }
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        {
            self.signal.recv().await;
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

async fn connect(target: &Endpoint) -> Result<TaskClient, ClientError> {
    let prompter = prompt::Prompter::new();
    TaskClient::builder()
        .with_client_info("mcp-tasks-cli", env!("CARGO_PKG_VERSION"))
        .with_elicitation(move |params, cx| {
            let prompter = prompter.clone();
            async move { prompter.elicit(params, cx).await }
        })
        .connect(target)
        .await
}

async fn run(command: Command, mut interrupts: Interrupts) -> Result<u8, ClientError> {
    match command {
        Command::Completions { shell } => {
            args::completions(shell, &mut std::io::stdout());
            Ok(COMPLETED)
        }
        // Answered in `main`, before the interrupt handler.
        Command::Admin(_) => Ok(ERROR),
        Command::Tools { target } => {
            let client = connect(&target).await?;
            let tasks = client.server_supports_tasks();
            for tool in client.list_tools().await? {
                // What the tool declares; a server without the extension runs nothing as a task.
                let mode = if tasks { Mode::of(&tool) } else { Mode::Inline };
                let mode = format!("task: {}", mode.label());
                let description = tool.description.as_deref().unwrap_or("");
                println!("{}\t{mode}\t{description}", tool.name);
            }
            client.close().await;
            Ok(COMPLETED)
        }
        Command::Get { target, task_id } => {
            let client = connect(&target).await?;
            let task = client.task(&task_id).await?;
            println!(
                "{}",
                serde_json::to_string_pretty(task.snapshot()).unwrap_or_default()
            );
            client.close().await;
            Ok(COMPLETED)
        }
        Command::Cancel { target, task_id } => {
            let client = connect(&target).await?;
            client.cancel_task(&task_id).await?;
            eprintln!("cancel requested for task {task_id}");
            client.close().await;
            Ok(COMPLETED)
        }
        Command::Resume {
            target,
            task_id,
            raw,
        } => {
            let client = connect(&target).await?;
            let mut task = client.task(&task_id).await?;
            let code = follow(&mut task, &target, raw, &mut interrupts).await;
            client.close().await;
            code
        }
        Command::Call {
            target,
            tool,
            args,
            json,
            raw,
        } => {
            let client = connect(&target).await?;
            let schema = if args.is_empty() {
                None
            } else {
                client
                    .list_tools()
                    .await?
                    .into_iter()
                    .find(|t| t.name == tool)
                    .map(|t| (*t.input_schema).clone())
            };
            let arguments = args::arguments(json, &args, schema.as_ref());
            let call = tokio::select! {
                call = client.call(&tool, Some(arguments)) => call?,
                () = interrupts.next() => {
                    eprintln!("\ninterrupted before the server answered");
                    client.close().await;
                    return Ok(CANCELLED);
                }
            };
            let code = match call {
                Call::Inline(result) => Ok(print_result(&result, raw)),
                Call::Task(mut task) => follow(&mut task, &target, raw, &mut interrupts).await,
                _ => Ok(ERROR),
            };
            client.close().await;
            code
        }
    }
}

/// A status line: overwritten in place on a terminal, one line per change otherwise.
struct StatusLine {
    terminal: bool,
    last: Option<(TaskStatus, Option<String>)>,
}

impl StatusLine {
    fn show(&mut self, snapshot: &DetailedTask) {
        let key = (snapshot.status(), snapshot.task.status_message.clone());
        if self.last.as_ref() == Some(&key) {
            return;
        }
        let status = serde_json::to_value(snapshot.status())
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let line = match &key.1 {
            Some(message) => format!("[{status}] {message}"),
            None => format!("[{status}]"),
        };
        let mut err = std::io::stderr().lock();
        if self.terminal {
            let _ = write!(err, "\r\x1b[2K{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
        self.last = Some(key);
    }

    fn end(&self) {
        if self.terminal && self.last.is_some() {
            eprintln!();
        }
    }
}

async fn follow(
    task: &mut TaskHandle,
    target: &Endpoint,
    raw: bool,
    interrupts: &mut Interrupts,
) -> Result<u8, ClientError> {
    eprintln!(
        "task {id} (resume: mcp-tasks resume {target} {id})",
        id = task.id()
    );
    let mut line = StatusLine {
        terminal: std::io::stderr().is_terminal(),
        last: None,
    };
    let interrupted = {
        let mut updates = std::pin::pin!(task.updates());
        loop {
            tokio::select! {
                update = updates.next() => match update {
                    Some(Ok(snapshot)) => line.show(&snapshot),
                    Some(Err(error)) => { line.end(); return Err(error); }
                    None => break false,
                },
                () = interrupts.next() => break true,
            }
        }
    };
    if interrupted {
        line.end();
        eprintln!("interrupted: cancelling task {}", task.id());
        task.cancel().await?;
        let watched = tokio::select! {
            outcome = tokio::time::timeout(AFTER_CANCEL, task.wait()) => outcome.ok(),
            () = interrupts.next() => None,
        };
        return match watched {
            Some(Ok(outcome)) => Ok(print_outcome(outcome, task.id(), raw)),
            Some(Err(error)) => Err(error),
            None => {
                eprintln!("cancel requested; the task has not ended yet");
                Ok(CANCELLED)
            }
        };
    }
    line.end();
    let outcome = task
        .outcome()?
        .ok_or_else(|| ClientError::InvalidResponse {
            method: "tasks/get",
            reason: "the task stopped changing before it ended".to_owned(),
        })?;
    Ok(print_outcome(outcome, task.id(), raw))
}

fn print_outcome(outcome: TaskEnd, task_id: &str, raw: bool) -> u8 {
    match outcome {
        TaskEnd::Completed(result) => print_result(&result, raw),
        TaskEnd::Failed(error) => {
            eprintln!(
                "task {task_id} failed: error {}: {}",
                error.code.0, error.message
            );
            if let Some(data) = &error.data {
                eprintln!("  data: {data}");
            }
            if raw {
                println!("{}", serde_json::to_string(&error).unwrap_or_default());
            }
            FAILED
        }
        TaskEnd::Cancelled => {
            eprintln!("task {task_id} cancelled");
            CANCELLED
        }
        _ => ERROR,
    }
}

fn print_result(result: &CallToolResult, raw: bool) -> u8 {
    if raw {
        println!("{}", serde_json::to_string(result).unwrap_or_default());
    } else {
        for block in &result.content {
            match block {
                ContentBlock::Text(text) => println!("{}", text.text),
                ContentBlock::Image(image) => {
                    println!(
                        "[image {}, {} base64 bytes]",
                        image.mime_type,
                        image.data.len()
                    );
                }
                ContentBlock::Audio(audio) => {
                    println!(
                        "[audio {}, {} base64 bytes]",
                        audio.mime_type,
                        audio.data.len()
                    );
                }
                other => println!("{}", serde_json::to_string(other).unwrap_or_default()),
            }
        }
        if result.content.is_empty()
            && let Some(structured) = &result.structured_content
        {
            println!("{structured}");
        }
    }
    if result.is_error == Some(true) {
        eprintln!("the tool reported an error");
        TOOL_ERROR
    } else {
        COMPLETED
    }
}
