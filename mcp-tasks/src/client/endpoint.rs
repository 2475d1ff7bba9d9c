//! Where a server is: a Streamable HTTP URL or a command line that serves stdio; and
//! [`TaskReference`], a task's id together with its server, to resume after a restart.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::ClientError;

/// A server endpoint.
///
/// Parse the command-line form with [`Endpoint::parse`]: `http://host:port/mcp`,
/// `https://…`, or `--` followed by the command and its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Endpoint {
    /// Streamable HTTP at `url`.
    Http {
        /// The MCP endpoint URL, e.g. `http://127.0.0.1:8080/mcp`.
        url: String,
    },
    /// A child process speaking MCP on its stdin and stdout.
    Stdio {
        /// The program and its arguments.
        command: Vec<String>,
    },
    /// A transport the application connected itself ([`super::TaskClientBuilder::serve`]).
    Named {
        /// The name the application gave it.
        name: String,
    },
}

impl Endpoint {
    /// An HTTP endpoint.
    #[must_use]
    pub fn http(url: impl Into<String>) -> Self {
        Self::Http { url: url.into() }
    }

    /// A stdio endpoint running `program` with `args`.
    #[must_use]
    pub fn stdio<I, S>(program: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut command = vec![program.into()];
        command.extend(args.into_iter().map(Into::into));
        Self::Stdio { command }
    }

    /// Parses the command-line form: one `http(s)://` argument, or `--` and a command.
    ///
    /// # Errors
    /// [`ClientError::InvalidTarget`] for anything else.
    pub fn parse(args: &[String]) -> Result<Self, ClientError> {
        const EXPECTED: &str = "expected an http(s)://…/mcp URL or `-- <command> <args>`";
        let invalid = |target: String, reason| Err(ClientError::InvalidTarget { target, reason });
        let Some(first) = args.first() else {
            return invalid(String::new(), EXPECTED);
        };
        if first == "--" {
            if args.len() < 2 {
                return invalid(first.clone(), "`--` must be followed by the server command");
            }
            return Ok(Self::Stdio {
                command: args[1..].to_vec(),
            });
        }
        if !(first.starts_with("http://") || first.starts_with("https://")) {
            return invalid(first.clone(), EXPECTED);
        }
        if args.len() > 1 {
            return invalid(args.join(" "), "an URL target takes no further arguments");
        }
        if first.len() <= "https://".len() || first.contains(char::is_whitespace) {
            return invalid(first.clone(), "the URL has no host");
        }
        Ok(Self::Http { url: first.clone() })
    }
}

/// A [`Endpoint::Named`] endpoint: the name of a transport the application connected itself.
impl From<&str> for Endpoint {
    fn from(name: &str) -> Self {
        Self::Named {
            name: name.to_owned(),
        }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Http { url } => f.write_str(url),
            Self::Stdio { command } => write!(f, "-- {}", command.join(" ")),
            Self::Named { name } => f.write_str(name),
        }
    }
}

/// A task and the server that holds it: what to persist to resume following the task after
/// a reconnect or a crash of the client.
///
/// ```
/// use mcp_tasks::client::{Endpoint, TaskReference};
///
/// let reference = TaskReference::new(Endpoint::http("http://127.0.0.1:8080/mcp"), "t-1");
/// let json = reference.to_json();
/// assert_eq!(TaskReference::from_json(&json).unwrap(), reference);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TaskReference {
    /// The server.
    pub endpoint: Endpoint,
    /// The task id the server gave.
    pub task_id: String,
    /// The input-request keys already answered with `tasks/update`; a resumed handle never
    /// answers them again, so a person is not asked the same question twice. Absent from the
    /// JSON when empty, so references written before this field existed still read.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub answered_keys: BTreeSet<String>,
}

impl TaskReference {
    /// A reference to `task_id` on `endpoint`.
    #[must_use]
    pub fn new(endpoint: Endpoint, task_id: impl Into<String>) -> Self {
        Self {
            endpoint,
            task_id: task_id.into(),
            answered_keys: BTreeSet::new(),
        }
    }

    /// Adds input keys already answered.
    #[must_use]
    pub fn with_answered_keys(mut self, keys: impl IntoIterator<Item = String>) -> Self {
        self.answered_keys.extend(keys);
        self
    }

    /// The JSON form.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads the JSON form.
    ///
    /// # Errors
    /// [`ClientError::InvalidReference`] when `json` is not a task reference.
    pub fn from_json(json: &str) -> Result<Self, ClientError> {
        serde_json::from_str(json).map_err(ClientError::InvalidReference)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn parses_http_and_stdio_targets() {
        assert_eq!(
            Endpoint::parse(&args(&["http://127.0.0.1:1/mcp"])).unwrap(),
            Endpoint::http("http://127.0.0.1:1/mcp")
        );
        assert_eq!(
            Endpoint::parse(&args(&["--", "server", "--port", "1"])).unwrap(),
            Endpoint::stdio("server", ["--port", "1"])
        );
    }

    #[test]
    fn rejects_bad_targets_with_reasons() {
        for bad in [
            &[][..],
            &["--"],
            &["ftp://x"],
            &["http://"],
            &["http://a/mcp", "x"],
        ] {
            let error = Endpoint::parse(&args(bad)).unwrap_err();
            assert!(
                matches!(error, ClientError::InvalidTarget { .. }),
                "{bad:?}: {error}"
            );
        }
    }

    #[test]
    fn reference_round_trips_and_rejects_garbage() {
        let reference = TaskReference::new(Endpoint::stdio("srv", ["a"]), "abc");
        assert_eq!(
            reference.to_json(),
            r#"{"endpoint":{"transport":"stdio","command":["srv","a"]},"taskId":"abc"}"#
        );
        assert_eq!(
            TaskReference::from_json(&reference.to_json()).unwrap(),
            reference
        );
        assert!(matches!(
            TaskReference::from_json("{\"taskId\":1}"),
            Err(ClientError::InvalidReference(_))
        ));
    }
}
