//! The command line, parsed by clap (derive): seven subcommands, their flags, and where the
//! server is, an URL before the operands or a command after `--`.

use clap::{Args, CommandFactory, Parser, Subcommand, error::ErrorKind};
use mcp_tasks::client::Endpoint;
use serde_json::{Map, Value};

/// What `--help` prints after the options.
const AFTER_HELP: &str = "\
The server is an http(s)://host:port/mcp URL, or `-- <command> <args>` (a stdio server),
which comes last: mcp-tasks call greet --arg name=Ada -- ./my-server --flag

Exit codes: 0 completed, 1 the tool reported an error (isError), 2 the task failed,
            3 cancelled (Ctrl-C sends tasks/cancel), 4 usage error, 5 connection error
            (the server cannot be reached, or not again within --reconnect-for while
            following a task), 6 protocol error (the server answered with an error or
            an invalid answer); `admin` exits 4 on any error";

/// Call MCP tools and follow their tasks (io.modelcontextprotocol/tasks).
#[derive(Debug, Parser)]
#[command(
    name = "mcp-tasks",
    version,
    after_help = AFTER_HELP,
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, Subcommand)]
enum Sub {
    /// List the server's tools, one a line: name, task support (`task: required`, `task:
    /// optional` or `task: never`), description.
    #[command(override_usage = "mcp-tasks tools <URL>\n       mcp-tasks tools -- <COMMAND>...")]
    Tools {
        /// The server's MCP endpoint (or give the server command after `--`).
        #[arg(value_name = "URL")]
        url: Option<String>,
        #[command(flatten)]
        server: Server,
    },
    /// Call a tool and follow it to its end (inline or as a task), answering its questions.
    #[command(override_usage = "mcp-tasks call <URL> <TOOL> [OPTIONS]\n       \
                                mcp-tasks call <TOOL> [OPTIONS] -- <COMMAND>...")]
    Call {
        #[command(flatten)]
        operands: ToolOperands,
        #[command(flatten)]
        arguments: Arguments,
        #[command(flatten)]
        follow: Follow,
    },
    /// Print a task's current snapshot as JSON.
    #[command(override_usage = "mcp-tasks get <URL> <TASK_ID>\n       \
                                mcp-tasks get <TASK_ID> -- <COMMAND>...")]
    Get(TaskOperands),
    /// Ask the server to cancel a task (tasks/cancel).
    #[command(override_usage = "mcp-tasks cancel <URL> <TASK_ID>\n       \
                                mcp-tasks cancel <TASK_ID> -- <COMMAND>...")]
    Cancel(TaskOperands),
    /// Follow a task to its end, answering its questions.
    #[command(override_usage = "mcp-tasks resume <URL> <TASK_ID> [--raw]\n       \
                                mcp-tasks resume <TASK_ID> [--raw] -- <COMMAND>...")]
    Resume {
        #[command(flatten)]
        operands: TaskOperands,
        #[command(flatten)]
        follow: Follow,
    },
    /// Operators' commands against a server's admin API (list, show, cancel, purge), with
    /// the admin credential in MCP_TASKS_ADMIN_TOKEN.
    Admin(crate::admin::AdminArgs),
    /// Print a completion script for a shell, e.g. `mcp-tasks completions bash >
    /// ~/.local/share/bash-completion/completions/mcp-tasks`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// The positional words of `call`: the URL (left out when the server comes after `--`),
/// then the tool, and the server after `--`.
#[derive(Debug, Args)]
struct ToolOperands {
    /// The server's MCP endpoint URL; or the tool, when the server comes after `--`.
    #[arg(value_name = "URL")]
    first: String,
    /// The tool's name (after the URL).
    #[arg(value_name = "TOOL")]
    second: Option<String>,
    #[command(flatten)]
    server: Server,
}

impl ToolOperands {
    /// The server and the tool.
    fn place(self, sub: &str) -> Result<(Endpoint, String), clap::Error> {
        place(self.first, self.second, sub, "TOOL", self.server)
    }
}

// The positional words of `get`, `cancel` and `resume`: the URL (left out when the server
// comes after `--`), then the task id, and the server after `--`. No doc comment: clap would
// show it instead of `get`'s and `cancel`'s own.
#[derive(Debug, Args)]
struct TaskOperands {
    /// The server's MCP endpoint URL; or the task id, when the server comes after `--`.
    #[arg(value_name = "URL")]
    first: String,
    /// The task id (after the URL).
    #[arg(value_name = "TASK_ID")]
    second: Option<String>,
    #[command(flatten)]
    server: Server,
}

impl TaskOperands {
    /// The server and the task id.
    fn place(self, sub: &str) -> Result<(Endpoint, String), clap::Error> {
        place(self.first, self.second, sub, "TASK_ID", self.server)
    }
}

/// The arguments of `call`: `--json`, then each `--arg`.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct Arguments {
    /// One argument; the value is taken as the tool's schema says (a string for string
    /// properties, else JSON if it parses, else a string). Repeatable.
    #[arg(long = "arg", value_name = "KEY=VALUE", value_parser = key_value)]
    pub args: Vec<(String, String)>,
    /// The arguments as one JSON object (`--arg` values override its keys).
    #[arg(long, value_name = "OBJECT", value_parser = json_object)]
    pub json: Option<Map<String, Value>>,
}

/// How a task is followed to its end (`call`, `resume`): how its result is printed, and
/// how long to reconnect when the connection drops.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct Follow {
    /// Print the result as JSON instead of its text.
    #[arg(long)]
    pub raw: bool,
    /// How long to keep reconnecting when the server goes away while a task is followed
    /// (a restart), e.g. `30s`, `2m`, `1ms` (give up at once).
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = duration)]
    pub reconnect_for: std::time::Duration,
}

/// A duration as `#[task_tool]` takes it (`90s`, `1h30m`).
fn duration(text: &str) -> Result<std::time::Duration, String> {
    mcp_tasks::duration::parse(text).map(std::time::Duration::from_millis)
}

/// A stdio server: the command after `--`.
#[derive(Debug, Args)]
struct Server {
    /// A stdio server to start instead of an URL: its command and arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// What to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Tools {
        target: Endpoint,
    },
    Call {
        target: Endpoint,
        tool: String,
        arguments: Arguments,
        follow: Follow,
    },
    Get {
        target: Endpoint,
        task_id: String,
    },
    Cancel {
        target: Endpoint,
        task_id: String,
    },
    Resume {
        target: Endpoint,
        task_id: String,
        follow: Follow,
    },
    Completions {
        shell: clap_complete::Shell,
    },
    Admin(crate::admin::AdminArgs),
}

/// Writes the completion script of `shell` for this command line.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn std::io::Write) {
    clap_complete::generate(shell, &mut Cli::command(), "mcp-tasks", out);
}

/// How parsing the command line ended when it did not give a [`Command`].
#[derive(Debug)]
pub enum Stop {
    /// `--help`, `--version`, `help`, or no arguments at all: print this on stdout, exit 0.
    Info(String),
    /// A usage error, rendered by clap (with the usage line): print it on stderr, exit 4.
    Usage(String),
}

/// Parses `argv` (the program name first).
///
/// # Errors
/// [`Stop`] for help and version requests, and for usage errors.
pub fn parse<I, T>(argv: I) -> Result<Command, Stop>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let stop = |error: clap::Error| match error.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            Stop::Info(error.render().to_string())
        }
        _ => Stop::Usage(error.render().to_string()),
    };
    let cli = Cli::try_parse_from(argv).map_err(stop)?;
    cli.resolve().map_err(stop)
}

impl Cli {
    /// The command, with its server resolved: the URL among the operands, or the command
    /// after `--`.
    fn resolve(self) -> Result<Command, clap::Error> {
        Ok(match self.command {
            Sub::Tools { url, server } => {
                let target = match (url, server.command.is_empty()) {
                    (Some(url), true) => http(&url, "tools")?,
                    (None, false) => stdio(server.command),
                    (Some(url), false) => {
                        return Err(usage(
                            "tools",
                            ErrorKind::ArgumentConflict,
                            format!(
                                "both an URL (`{url}`) and a server command after `--`: give one"
                            ),
                        ));
                    }
                    (None, true) => return Err(missing_target("tools")),
                };
                Command::Tools { target }
            }
            Sub::Call {
                operands,
                arguments,
                follow,
            } => {
                let (target, tool) = operands.place("call")?;
                Command::Call {
                    target,
                    tool,
                    arguments,
                    follow,
                }
            }
            Sub::Get(operands) => {
                let (target, task_id) = operands.place("get")?;
                Command::Get { target, task_id }
            }
            Sub::Cancel(operands) => {
                let (target, task_id) = operands.place("cancel")?;
                Command::Cancel { target, task_id }
            }
            Sub::Resume { operands, follow } => {
                let (target, task_id) = operands.place("resume")?;
                Command::Resume {
                    target,
                    task_id,
                    follow,
                }
            }
            Sub::Completions { shell } => Command::Completions { shell },
            Sub::Admin(admin) => Command::Admin(admin),
        })
    }
}

/// The server and the operand from the positional words: `<URL> <operand>`, or `<operand>`
/// with the server after `--`.
fn place(
    first: String,
    second: Option<String>,
    sub: &str,
    operand: &str,
    server: Server,
) -> Result<(Endpoint, String), clap::Error> {
    match (second, server.command.is_empty()) {
        (Some(value), true) => Ok((http(&first, sub)?, value)),
        (None, false) => Ok((stdio(server.command), first)),
        (None, true) if first.contains("://") => {
            http(&first, sub)?;
            Err(usage(
                sub,
                ErrorKind::MissingRequiredArgument,
                format!("`{sub}` needs <{operand}> after the URL"),
            ))
        }
        (None, true) => Err(missing_target(sub)),
        (Some(extra), false) => Err(usage(
            sub,
            ErrorKind::UnknownArgument,
            format!(
                "unexpected argument `{extra}`: with a server command after `--`, no URL \
                     comes before <{operand}>"
            ),
        )),
    }
}

fn http(url: &str, sub: &str) -> Result<Endpoint, clap::Error> {
    Endpoint::parse(&[url.to_owned()])
        .map_err(|error| usage(sub, ErrorKind::ValueValidation, error.to_string()))
}

/// A stdio server; `command` is not empty (all that `Endpoint::parse` would check).
fn stdio(command: Vec<String>) -> Endpoint {
    Endpoint::Stdio { command }
}

fn missing_target(sub: &str) -> clap::Error {
    usage(
        sub,
        ErrorKind::MissingRequiredArgument,
        "missing the server: an http(s)://…/mcp URL, or `-- <command> <args>` last".to_owned(),
    )
}

/// A usage error of subcommand `sub`, rendered by clap with that subcommand's usage.
fn usage(sub: &str, kind: ErrorKind, message: String) -> clap::Error {
    Cli::command()
        .find_subcommand_mut(sub)
        .expect("`sub` names a subcommand")
        .error(kind, message)
}

/// `--arg key=value`.
fn key_value(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| "expected key=value".to_owned())?;
    if key.is_empty() {
        return Err("the key is empty".to_owned());
    }
    Ok((key.to_owned(), value.to_owned()))
}

/// `--json '{...}'`.
fn json_object(text: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("expected a JSON object".to_owned()),
        Err(error) => Err(error.to_string()),
    }
}

impl Arguments {
    /// The arguments object: `--json`, then each `--arg` converted as the schema's property
    /// type says.
    pub fn object(self, schema: Option<&Map<String, Value>>) -> Map<String, Value> {
        let mut out = self.json.unwrap_or_default();
        for (key, text) in self.args {
            let kind = schema
                .and_then(|s| s.get("properties"))
                .and_then(|p| p[&key]["type"].as_str());
            let value = match kind {
                Some("string") => Value::String(text),
                _ => serde_json::from_str(&text).unwrap_or(Value::String(text)),
            };
            out.insert(key, value);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MINUTE: std::time::Duration = std::time::Duration::from_secs(60);

    fn parse_str(line: &str) -> Result<Command, Stop> {
        parse(std::iter::once("mcp-tasks").chain(line.split_whitespace()))
    }

    fn usage_error(line: &str) -> String {
        match parse_str(line) {
            Err(Stop::Usage(text)) => text,
            other => panic!("{line}: not a usage error: {other:?}"),
        }
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn call_over_http_and_stdio() {
        assert_eq!(
            parse_str("call http://h:1/mcp greet --arg name=Ada --raw").unwrap(),
            Command::Call {
                target: Endpoint::http("http://h:1/mcp"),
                tool: "greet".into(),
                arguments: Arguments {
                    args: vec![("name".into(), "Ada".into())],
                    json: None,
                },
                follow: Follow {
                    raw: true,
                    reconnect_for: MINUTE,
                },
            }
        );
        assert_eq!(
            parse_str("call greet --arg n=1 -- ./srv --port 3").unwrap(),
            Command::Call {
                target: Endpoint::stdio("./srv", ["--port", "3"]),
                tool: "greet".into(),
                arguments: Arguments {
                    args: vec![("n".into(), "1".into())],
                    json: None,
                },
                follow: Follow {
                    raw: false,
                    reconnect_for: MINUTE,
                },
            }
        );
        assert_eq!(
            parse_str("call --raw http://h/mcp t --json {\"a\":1} --arg b=2").unwrap(),
            Command::Call {
                target: Endpoint::http("http://h/mcp"),
                tool: "t".into(),
                arguments: Arguments {
                    args: vec![("b".into(), "2".into())],
                    json: json!({ "a": 1 }).as_object().cloned(),
                },
                follow: Follow {
                    raw: true,
                    reconnect_for: MINUTE,
                },
            }
        );
        assert_eq!(
            parse_str("resume http://h/mcp t1").unwrap(),
            Command::Resume {
                target: Endpoint::http("http://h/mcp"),
                task_id: "t1".into(),
                follow: Follow {
                    raw: false,
                    reconnect_for: MINUTE,
                },
            }
        );
        assert_eq!(
            parse_str("tools -- ./srv -v").unwrap(),
            Command::Tools {
                target: Endpoint::stdio("./srv", ["-v"]),
            }
        );
        assert_eq!(
            parse_str("cancel t9 -- ./srv").unwrap(),
            Command::Cancel {
                target: Endpoint::stdio("./srv", Vec::<String>::new()),
                task_id: "t9".into(),
            }
        );
    }

    #[test]
    fn mistakes_are_explained() {
        for (line, expected) in [
            ("call http://h/mcp", "`call` needs <TOOL> after the URL"),
            (
                "call http://h/mcp t --arg x",
                "invalid value 'x' for '--arg <KEY=VALUE>': expected key=value",
            ),
            ("call http://h/mcp t --arg =1", "the key is empty"),
            ("call http://h/mcp t --json [1]", "expected a JSON object"),
            (
                "call http://h/mcp t --bogus",
                "unexpected argument '--bogus'",
            ),
            ("get http://h/mcp", "`get` needs <TASK_ID>"),
            ("get http://h/mcp a b", "unexpected argument 'b'"),
            ("cancel http://h/mcp a --raw", "unexpected argument '--raw'"),
            ("tools ftp://h", "invalid target"),
            ("get ftp://x id", "invalid target"),
            ("tools", "missing the server"),
            ("call greet", "missing the server"),
            ("call t --", "missing the server"),
            ("call http://h/mcp t -- ./srv", "unexpected argument `t`"),
            ("tools http://h/mcp -- ./srv", "both an URL"),
            ("frob http://h/mcp", "unrecognized subcommand 'frob'"),
        ] {
            let error = usage_error(line);
            assert!(error.contains(expected), "{line}: {error}");
            assert!(
                error.contains("try '--help'"),
                "{line}: no pointer to --help: {error}"
            );
        }
    }

    #[test]
    fn help_and_version_are_information() {
        for line in ["--help", "-h", "help", "", "call --help", "--version"] {
            match parse_str(line) {
                Err(Stop::Info(text)) => assert!(!text.is_empty(), "{line:?}"),
                other => panic!("{line:?}: {other:?}"),
            }
        }
        let Err(Stop::Info(help)) = parse_str("--help") else {
            unreachable!("checked above")
        };
        for word in ["tools", "call", "get", "cancel", "resume", "Exit codes"] {
            assert!(help.contains(word), "{word}: {help}");
        }
        let Err(Stop::Info(call)) = parse_str("call --help") else {
            unreachable!("checked above")
        };
        for word in [
            "--arg <KEY=VALUE>",
            "--json <OBJECT>",
            "--raw",
            "-- <COMMAND>...",
        ] {
            assert!(call.contains(word), "{word}: {call}");
        }
    }

    #[test]
    fn completions_cover_every_subcommand_and_flag() {
        let Ok(Command::Completions { shell }) = parse_str("completions bash") else {
            panic!("`completions bash` does not parse")
        };
        let mut script = Vec::new();
        completions(shell, &mut script);
        let script = String::from_utf8(script).expect("a script is text");
        for word in [
            "tools", "call", "get", "cancel", "resume", "--arg", "--json", "--raw",
        ] {
            assert!(script.contains(word), "{word} is not completed");
        }
        assert!(matches!(parse_str("completions tcsh"), Err(Stop::Usage(_))));
    }

    #[test]
    fn arguments_follow_the_schema() {
        let schema =
            json!({ "properties": { "name": { "type": "string" }, "n": { "type": "integer" } } });
        let out = Arguments {
            json: json!({ "a": true }).as_object().cloned(),
            args: vec![
                ("name".into(), "42".into()),
                ("n".into(), "42".into()),
                ("free".into(), "hello".into()),
            ],
        }
        .object(schema.as_object());
        assert_eq!(
            Value::Object(out),
            json!({ "a": true, "name": "42", "n": 42, "free": "hello" })
        );
    }
}
