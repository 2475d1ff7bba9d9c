//! Command-line parsing, by hand: a handful of subcommands and flags.

use mcp_tasks::client::Endpoint;
use serde_json::{Map, Value};

pub const USAGE: &str = "\
mcp-tasks: call MCP tools and follow their tasks (io.modelcontextprotocol/tasks)

usage:
  mcp-tasks tools  <target>
  mcp-tasks call   <target> <tool> [--arg key=value]... [--json '{...}'] [--raw]
  mcp-tasks get    <target> <task-id>
  mcp-tasks cancel <target> <task-id>
  mcp-tasks resume <target> <task-id> [--raw]

<target> is an http(s)://host:port/mcp URL, or `-- <command> <args>` (a stdio server),
which comes last: mcp-tasks call greet --arg name=Ada -- ./my-server --flag

  --arg key=value  one argument; the value is taken as the tool's schema says
                   (a string for string properties, else JSON if it parses, else a string)
  --json '{...}'   arguments as one JSON object (--arg values override its keys)
  --raw            print the result as JSON instead of its text

exit codes: 0 completed, 1 the tool reported an error (isError), 2 the task failed,
            3 cancelled (Ctrl-C sends tasks/cancel), 4 usage, connection or protocol error";

/// What to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Tools {
        target: Endpoint,
    },
    Call {
        target: Endpoint,
        tool: String,
        args: Vec<(String, String)>,
        json: Option<Map<String, Value>>,
        raw: bool,
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
        raw: bool,
    },
    Help,
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, String> {
    let Some((command, rest)) = args.split_first() else {
        return Ok(Command::Help);
    };
    if matches!(command.as_str(), "-h" | "--help" | "help") {
        return Ok(Command::Help);
    }
    // `--` and what follows is a stdio target; otherwise the first positional is the URL.
    let (before, stdio) = match rest.iter().position(|a| a == "--") {
        Some(at) => (&rest[..at], Some(&rest[at..])),
        None => (rest, None),
    };
    let mut positional = Vec::new();
    let mut args_kv = Vec::new();
    let mut json = None;
    let mut raw = false;
    let mut it = before.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--arg" => {
                let kv = it.next().ok_or("--arg needs key=value")?;
                let (key, value) = kv
                    .split_once('=')
                    .ok_or_else(|| format!("--arg {kv}: expected key=value"))?;
                if key.is_empty() {
                    return Err(format!("--arg {kv}: the key is empty"));
                }
                args_kv.push((key.to_owned(), value.to_owned()));
            }
            "--json" => {
                let text = it.next().ok_or("--json needs a JSON object")?;
                match serde_json::from_str::<Value>(text) {
                    Ok(Value::Object(map)) => json = Some(map),
                    Ok(_) => return Err(format!("--json {text}: expected a JSON object")),
                    Err(error) => return Err(format!("--json {text}: {error}")),
                }
            }
            "--raw" => raw = true,
            flag if flag.starts_with("--") => return Err(format!("unknown option `{flag}`")),
            _ => positional.push(arg.clone()),
        }
    }
    let target = match stdio {
        Some(stdio) => Endpoint::parse(stdio).map_err(|e| e.to_string())?,
        None => {
            if positional.is_empty() {
                return Err("missing <target>: an http(s)://…/mcp URL or `-- <command>`".into());
            }
            let url = positional.remove(0);
            Endpoint::parse(&[url]).map_err(|e| e.to_string())?
        }
    };
    let only_flags = |allowed_raw: bool| -> Result<(), String> {
        if !args_kv.is_empty() || json.is_some() {
            return Err(format!("`{command}` takes no --arg or --json"));
        }
        if raw && !allowed_raw {
            return Err(format!("`{command}` takes no --raw"));
        }
        Ok(())
    };
    let one = |what: &str, positional: &mut Vec<String>| -> Result<String, String> {
        match positional.len() {
            0 => Err(format!("`{command}` needs <{what}>")),
            1 => Ok(positional.remove(0)),
            _ => Err(format!("unexpected argument `{}`", positional[1])),
        }
    };
    match command.as_str() {
        "tools" => {
            only_flags(false)?;
            if let Some(extra) = positional.first() {
                return Err(format!("unexpected argument `{extra}`"));
            }
            Ok(Command::Tools { target })
        }
        "call" => {
            let tool = one("tool", &mut positional)?;
            Ok(Command::Call {
                target,
                tool,
                args: args_kv,
                json,
                raw,
            })
        }
        "get" | "cancel" | "resume" => {
            only_flags(command == "resume")?;
            let task_id = one("task-id", &mut positional)?;
            Ok(match command.as_str() {
                "get" => Command::Get { target, task_id },
                "cancel" => Command::Cancel { target, task_id },
                _ => Command::Resume {
                    target,
                    task_id,
                    raw,
                },
            })
        }
        other => Err(format!(
            "unknown command `{other}`; expected tools, call, get, cancel or resume"
        )),
    }
}

/// The arguments object: `--json`, then each `--arg` converted as the schema's property type
/// says.
pub fn arguments(
    json: Option<Map<String, Value>>,
    args: &[(String, String)],
    schema: Option<&Map<String, Value>>,
) -> Map<String, Value> {
    let mut out = json.unwrap_or_default();
    for (key, text) in args {
        let kind = schema
            .and_then(|s| s.get("properties"))
            .and_then(|p| p.get(key))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str);
        let value = match kind {
            Some("string") => Value::String(text.clone()),
            _ => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone())),
        };
        out.insert(key.clone(), value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_str(line: &str) -> Result<Command, String> {
        let args: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        parse(&args)
    }

    #[test]
    fn call_over_http_and_stdio() {
        assert_eq!(
            parse_str("call http://h:1/mcp greet --arg name=Ada --raw").unwrap(),
            Command::Call {
                target: Endpoint::http("http://h:1/mcp"),
                tool: "greet".into(),
                args: vec![("name".into(), "Ada".into())],
                json: None,
                raw: true,
            }
        );
        assert_eq!(
            parse_str("call greet --arg n=1 -- ./srv --port 3").unwrap(),
            Command::Call {
                target: Endpoint::stdio("./srv", ["--port", "3"]),
                tool: "greet".into(),
                args: vec![("n".into(), "1".into())],
                json: None,
                raw: false,
            }
        );
        assert_eq!(
            parse_str("resume http://h/mcp t1").unwrap(),
            Command::Resume {
                target: Endpoint::http("http://h/mcp"),
                task_id: "t1".into(),
                raw: false
            }
        );
    }

    #[test]
    fn mistakes_are_explained() {
        for (line, expected) in [
            ("call http://h/mcp", "`call` needs <tool>"),
            ("call http://h/mcp t --arg x", "--arg x: expected key=value"),
            ("call http://h/mcp t --json [1]", "expected a JSON object"),
            ("call http://h/mcp t --bogus", "unknown option `--bogus`"),
            ("get http://h/mcp", "`get` needs <task-id>"),
            ("get http://h/mcp a b", "unexpected argument `b`"),
            ("cancel http://h/mcp a --raw", "`cancel` takes no --raw"),
            ("tools ftp://h", "invalid target"),
            ("tools", "missing <target>"),
            ("frob http://h/mcp", "unknown command `frob`"),
            ("call t --", "must be followed by the server command"),
        ] {
            let error = parse_str(line).unwrap_err();
            assert!(error.contains(expected), "{line}: {error}");
        }
    }

    #[test]
    fn arguments_follow_the_schema() {
        let schema =
            json!({ "properties": { "name": { "type": "string" }, "n": { "type": "integer" } } });
        let out = arguments(
            json!({ "a": true }).as_object().cloned(),
            &[
                ("name".into(), "42".into()),
                ("n".into(), "42".into()),
                ("free".into(), "hello".into()),
            ],
            schema.as_object(),
        );
        assert_eq!(
            Value::Object(out),
            json!({ "a": true, "name": "42", "n": 42, "free": "hello" })
        );
    }
}
