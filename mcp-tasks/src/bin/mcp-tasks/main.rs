//! `mcp-tasks`: call MCP tools from a terminal and follow their tasks to the end.
//!
//! See `mcp-tasks --help` (which ends with what each exit code below means) and the README.

#![forbid(unsafe_code)]

mod admin;
mod admin_api;
mod args;
mod printable;
mod prompt;
mod steer;

use std::{error::Error, io::IsTerminal, io::Write, process::ExitCode, time::Duration};

use futures::StreamExt;
use mcp_tasks::{
    Mode,
    client::{Call, ClientError, Endpoint, TaskClient, TaskEnd, TaskHandle},
};
use rmcp::model::{CallToolResult, ContentBlock, DetailedTask, TaskStatus};

use args::{Command, Follow};
use printable::printable;

const COMPLETED: u8 = 0;
const TOOL_ERROR: u8 = 1;
const FAILED: u8 = 2;
const CANCELLED: u8 = 3;
const ERROR: u8 = 4;
const CONNECTION: u8 = 5;
const PROTOCOL: u8 = 6;

/// The first pause before reconnecting, doubled after each failed attempt up to the last.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(5));

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
                eprintln!("mcp-tasks admin: {}", chain(&error));
                ExitCode::from(ERROR)
            }
        };
    }
    let code = match run(command, Interrupts::new()).await {
        Ok(code) => code,
        Err(error) if lost(&error) => {
            eprintln!("mcp-tasks: {}", cause(&error));
            CONNECTION
        }
        Err(error) => {
            eprintln!("mcp-tasks: {}", chain(&error));
            PROTOCOL
        }
    };
    let _ = std::io::stdout().flush();
    ExitCode::from(code)
}

/// `error` and its causes, made printable.
fn chain(error: &dyn Error) -> String {
    printable(&mcp_tasks::__private::error_chain(error)).into_owned()
}

/// Whether `error` is the connection failing (not the server answering).
fn lost(error: &ClientError) -> bool {
    matches!(
        error,
        ClientError::Connect { .. } | ClientError::Transport { .. }
    )
}

/// One line for a connection failure: what failed and the innermost cause (the operating
/// system's words, not the client library's types).
fn cause(error: &ClientError) -> String {
    let what = match error {
        ClientError::Connect { endpoint, .. } => format!("cannot connect to {endpoint}"),
        _ => "the connection to the server failed".to_owned(),
    };
    match std::iter::successors(error.source(), |&source| source.source()).last() {
        // The innermost error may quote what the server sent.
        Some(innermost) => format!("{what} ({})", printable(&innermost.to_string())),
        None => what,
    }
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
                let mode = if tasks { Mode::of(&tool) } else { Mode::Inline }.label();
                let name = printable(&tool.name);
                let description = printable(tool.description.as_deref().unwrap_or(""));
                println!("{name}\ttask: {mode}\t{description}");
            }
            client.close().await;
            Ok(COMPLETED)
        }
        Command::Get { target, task_id } => {
            let client = connect(&target).await?;
            let task = client.task(&task_id).await?;
            println!("{}", printable::json(task.snapshot(), true));
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
            follow,
        } => {
            let client = connect(&target).await?;
            let task = client.task(&task_id).await?;
            let following = Following { target, follow };
            following.run(client, task, &mut interrupts).await
        }
        Command::Call {
            target,
            tool,
            arguments,
            follow,
        } => {
            let client = connect(&target).await?;
            let mut schema = None;
            if !arguments.args.is_empty() {
                let tools = client.list_tools().await?;
                let found = tools.into_iter().find(|t| t.name == tool);
                schema = found.map(|t| (*t.input_schema).clone());
            }
            let call = tokio::select! {
                call = client.call(&tool, Some(arguments.object(schema.as_ref()))) => call?,
                () = interrupts.next() => {
                    eprintln!("\ninterrupted before the server answered");
                    client.close().await;
                    return Ok(CANCELLED);
                }
            };
            let result = match call {
                Call::Task(task) => {
                    let following = Following { target, follow };
                    return following.run(client, task, &mut interrupts).await;
                }
                Call::Inline(result) => Some(result),
                _ => None,
            };
            client.close().await;
            Ok(result.map_or(PROTOCOL, |result| print_result(&result, follow.raw)))
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
        let status = mcp_tasks::store::admin::status_word(snapshot.status());
        let line = match &key.1 {
            Some(message) => format!("[{status}] {}", printable(message)),
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

/// Following one task to its end, through server restarts.
struct Following {
    target: Endpoint,
    follow: Follow,
}

impl Following {
    /// Follows `task` of `client`; when the connection fails, reconnects with backoff for up
    /// to `reconnect_for` and goes on, else prints the `resume` command and exits 5.
    async fn run(
        &self,
        mut client: TaskClient,
        mut task: TaskHandle,
        interrupts: &mut Interrupts,
    ) -> Result<u8, ClientError> {
        let id = task.id().to_owned();
        let (shown, target) = (printable(&id), &self.target);
        eprintln!("task {shown} (resume: mcp-tasks resume {target} {shown})");
        loop {
            let followed = follow(&mut task, self.follow.raw, interrupts).await;
            client.close().await;
            let error = match followed {
                Err(error) if lost(&error) => error,
                other => return other,
            };
            let ms = u64::try_from(self.follow.reconnect_for.as_millis()).unwrap_or(u64::MAX);
            let (why, up_to) = (cause(&error), mcp_tasks::duration::format(ms));
            eprintln!("{why}; reconnecting for up to {up_to}");
            (client, task) = match self.reconnect(&id, interrupts).await {
                Ok(again) => again,
                Err(code) => return Ok(code),
            };
            eprintln!("reconnected; following task {}", printable(&id));
        }
    }

    /// A new client and handle for task `id`, or the exit code after giving up.
    async fn reconnect(
        &self,
        id: &str,
        interrupts: &mut Interrupts,
    ) -> Result<(TaskClient, TaskHandle), u8> {
        let deadline = tokio::time::Instant::now() + self.follow.reconnect_for;
        let mut pause = BACKOFF.0;
        loop {
            let last = tokio::select! {
                attempt = async {
                    tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + pause)).await;
                    let client = connect(&self.target).await?;
                    match client.task(id).await {
                        Ok(task) => Ok((client, task)),
                        Err(error) => {
                            client.close().await;
                            Err(error)
                        }
                    }
                } => match attempt {
                    Ok(again) => return Ok(again),
                    Err(error) if lost(&error) => cause(&error),
                    Err(error) => {
                        eprintln!("mcp-tasks: {}", chain(&error));
                        return Err(PROTOCOL);
                    }
                },
                () = interrupts.next() => "interrupted".to_owned(),
            };
            if last == "interrupted" || tokio::time::Instant::now() >= deadline {
                let (target, id) = (&self.target, printable(id));
                eprintln!(
                    "gave up reconnecting: {last}\nthe task may still be running; follow it \
                     with:\n  mcp-tasks resume {target} {id}"
                );
                return Err(CONNECTION);
            }
            pause = (pause * 2).min(BACKOFF.1);
        }
    }
}

async fn follow(
    task: &mut TaskHandle,
    raw: bool,
    interrupts: &mut Interrupts,
) -> Result<u8, ClientError> {
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
                    Some(Err(error)) => break Err(error),
                    None => break Ok(false),
                },
                () = interrupts.next() => break Ok(true),
            }
        }
    };
    line.end();
    if interrupted? {
        eprintln!("interrupted: cancelling task {}", task.id());
        task.cancel().await?;
        let watched = tokio::select! {
            outcome = tokio::time::timeout(AFTER_CANCEL, task.wait()) => outcome.ok(),
            () = interrupts.next() => None,
        };
        return match watched {
            Some(outcome) => Ok(print_outcome(outcome?, task.id(), raw)),
            None => {
                eprintln!("cancel requested; the task has not ended yet");
                Ok(CANCELLED)
            }
        };
    }
    let outcome = task
        .outcome()?
        .ok_or_else(|| ClientError::InvalidResponse {
            method: "tasks/get",
            reason: "the task stopped changing before it ended".to_owned(),
        })?;
    Ok(print_outcome(outcome, task.id(), raw))
}

fn print_outcome(outcome: TaskEnd, task_id: &str, raw: bool) -> u8 {
    let task_id = printable(task_id);
    match outcome {
        TaskEnd::Completed(result) => print_result(&result, raw),
        TaskEnd::Failed(error) => {
            let (code, message) = (error.code.0, printable(&error.message));
            eprintln!("task {task_id} failed: error {code}: {message}");
            if let Some(data) = &error.data {
                eprintln!("  data: {}", printable::json(data, false));
            }
            if raw {
                println!("{}", printable::json(&error, false));
            }
            FAILED
        }
        TaskEnd::Cancelled => {
            eprintln!("task {task_id} cancelled");
            CANCELLED
        }
        _ => PROTOCOL,
    }
}

fn print_result(result: &CallToolResult, raw: bool) -> u8 {
    let _ = write_result(&mut std::io::stdout().lock(), result, raw);
    if result.is_error == Some(true) {
        eprintln!("the tool reported an error");
        TOOL_ERROR
    } else {
        COMPLETED
    }
}

/// The tool's result on `out`: as JSON (`raw`), or its content for a person, the server's
/// text made [`printable`] (JSON needs nothing: it escapes control characters).
fn write_result(out: &mut impl Write, result: &CallToolResult, raw: bool) -> std::io::Result<()> {
    if raw {
        return writeln!(out, "{}", printable::json(result, false));
    }
    for block in &result.content {
        let line = match block {
            ContentBlock::Text(text) => printable(&text.text).into_owned(),
            ContentBlock::Image(image) => media("image", &image.mime_type, &image.data),
            ContentBlock::Audio(audio) => media("audio", &audio.mime_type, &audio.data),
            other => printable::json(other, false),
        };
        writeln!(out, "{line}")?;
    }
    if result.content.is_empty()
        && let Some(structured) = &result.structured_content
    {
        writeln!(out, "{structured}")?;
    }
    Ok(())
}

/// An image or audio block: its type and size, not its data.
fn media(kind: &str, mime_type: &str, data: &str) -> String {
    let mime_type = printable(mime_type);
    format!("[{kind} {mime_type}, {} base64 bytes]", data.len())
}

#[cfg(test)]
mod tests {
    use rmcp::model::{CallToolResult, ContentBlock};

    use super::write_result;

    /// What a person sees of a tool's text: no escape sequence reaches the terminal.
    #[test]
    fn a_tools_text_is_printed_without_escape_sequences() {
        let result = CallToolResult::success(vec![
            ContentBlock::text("\x1b]0;pwned\x07"),
            ContentBlock::text("\x1b[2J"),
            ContentBlock::text("done\x1b]0;pwned\x07: 3 rows\x1b[2J\tok"),
        ]);
        let mut printed = Vec::new();
        write_result(&mut printed, &result, false).unwrap();
        assert_eq!(
            String::from_utf8(printed).unwrap(),
            "\n\ndone: 3 rows\tok\n"
        );
        // `--raw` is JSON, whose strings escape the controls.
        let mut printed = Vec::new();
        write_result(&mut printed, &result, true).unwrap();
        let printed = String::from_utf8(printed).unwrap();
        assert!(!printed.contains('\x1b'), "{printed}");
        assert!(printed.contains(r"\u001b]0;pwned\u0007"), "{printed}");
    }
}
