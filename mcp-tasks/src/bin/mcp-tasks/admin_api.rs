//! How the admin commands reach a server's admin API: the target and credential, one
//! request, and the answers printed.

use std::time::Duration;

use clap::Args;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::Method;
use serde_json::Value;

/// The environment variable that holds the admin credential.
pub const TOKEN_ENV: &str = "MCP_TASKS_ADMIN_TOKEN";

/// How long one admin request may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Where the admin API is and how to reach it: common to every admin command.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct Target {
    /// The server's base URL (`http://host:port`; its MCP endpoint `…/mcp` or `…/admin` lead
    /// to the same).
    #[arg(value_name = "URL")]
    pub url: String,
    /// The admin credential (default: the MCP_TASKS_ADMIN_TOKEN environment variable, which
    /// other users of the machine cannot read from the process list).
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Print the API's JSON answer instead of a table.
    #[arg(long)]
    pub json: bool,
}

// No doc comment: clap would show it instead of each command's own.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct TaskArgs {
    #[command(flatten)]
    pub target: Target,
    /// The task id.
    pub task_id: String,
}

/// An admin command that could not be done.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(
        "no admin credential: set MCP_TASKS_ADMIN_TOKEN (or pass --token); it is the \
         server's admin credential, not a user's token"
    )]
    NoToken,
    #[error("`{0}` is not an http:// or https:// URL")]
    BadUrl(String),
    #[error("could not reach the admin API at {url}")]
    Unreachable {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the admin API answered {status}: {message}")]
    Refused { status: u16, message: String },
    #[error(
        "{url} answered {status} without the admin API's JSON ({body:?}): is the admin router \
         mounted? Give the server's base URL (http://host:port)"
    )]
    NotJson {
        url: String,
        status: u16,
        body: String,
    },
}

pub struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    pub fn new(target: &Target) -> Result<Self, AdminError> {
        let token = target
            .token
            .clone()
            .or_else(|| std::env::var(TOKEN_ENV).ok())
            .filter(|token| !token.is_empty())
            .ok_or(AdminError::NoToken)?;
        let url = target.url.trim_end_matches('/');
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(AdminError::BadUrl(target.url.clone()));
        }
        // The server's base URL; the MCP endpoint (what every other command takes) and the
        // admin path lead to it too.
        let base = url
            .strip_suffix("/mcp")
            .or_else(|| url.strip_suffix("/admin"))
            .unwrap_or(url);
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .map_err(|source| AdminError::Unreachable {
                url: base.to_owned(),
                source,
            })?;
        Ok(Self {
            http,
            base: format!("{base}/admin/api"),
            token,
        })
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<Value, AdminError> {
        let mut url = format!("{}/{path}", self.base);
        for (i, (key, value)) in query.iter().enumerate() {
            let separator = if i == 0 { '?' } else { '&' };
            url += &format!("{separator}{key}={}", encode(value));
        }
        let request = self.http.request(method, &url).bearer_auth(&self.token);
        let unreachable = |source| AdminError::Unreachable {
            url: url.clone(),
            source,
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(unreachable)?;
        let body: Value = serde_json::from_str(&text).map_err(|_| AdminError::NotJson {
            url,
            status,
            body: text.chars().take(80).collect(),
        })?;
        if status != 200 {
            let message = body["error"]["message"]
                .as_str()
                .unwrap_or("no reason given")
                .to_owned();
            return Err(AdminError::Refused { status, message });
        }
        Ok(body)
    }
}

/// Percent-encodes a query value or path segment: every byte but RFC 3986's unreserved ones.
pub fn encode(value: &str) -> String {
    const KEPT: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    utf8_percent_encode(value, KEPT).to_string()
}

pub fn print_json(value: &Value) {
    println!("{}", crate::printable::json(value, true));
}

pub fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    }
}
