//! The settings of a tool definition: when it runs as a task ([`Mode`]), how long its tasks
//! live ([`Ttl`]), what a restart does with them ([`RestartPolicy`]), and the tool-name rule.

use std::time::Duration;

use rmcp::model::Tool;

/// When a tool runs as a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Mode {
    /// Only as a task. A `tools/call` that did not declare the extension gets `-32021`
    /// (missing required client capability), naming the extension the client must declare.
    Required,
    /// As a task when that very request declares the extension; otherwise inline. A
    /// declaration on an earlier request does not count.
    #[default]
    Optional,
    /// Never as a task: an ordinary tool.
    Inline,
}

/// The `_meta` key under which `tools/list` shows each task tool's [`Mode`] as
/// `"required"`, `"optional"` or `"never"` (the extension has no per-tool flag; this one is
/// ours, read by `mcp-tasks tools`). A tool without it never runs as a task.
pub const TASK_SUPPORT_KEY: &str = "mcp-tasks/taskSupport";

impl Mode {
    /// The label of [`TASK_SUPPORT_KEY`]: `"required"`, `"optional"` or `"never"`.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Required => "required",
            Self::Optional => "optional",
            Self::Inline => "never",
        }
    }

    /// The mode a tool of `tools/list` declares under [`TASK_SUPPORT_KEY`], or
    /// [`Mode::Inline`] when it declares none (an ordinary tool).
    #[must_use]
    pub fn of(tool: &Tool) -> Self {
        match tool
            .meta
            .as_ref()
            .and_then(|meta| meta.get(TASK_SUPPORT_KEY))
            .and_then(|v| v.as_str())
        {
            Some("required") => Self::Required,
            Some("optional") => Self::Optional,
            _ => Self::Inline,
        }
    }
}

/// What a restarted server does with a task of this tool that the previous process left
/// running (durable stores only; the memory store forgets everything on exit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RestartPolicy {
    /// The task ends `failed` with `-32603` and a `statusMessage` saying the server restarted.
    #[default]
    Fail,
    /// The tool runs again from the top with the same arguments; completed
    /// [steps](crate::TaskContext::step) return their stored results without running, and
    /// answered input requests are not asked again.
    Resume,
}

/// What the wire calls a task's `ttlMs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ttl {
    /// Expires this long after creation: a task still running then ends `failed` ("task
    /// expired"), and the task, result included, is deleted some time after.
    After(Duration),
    /// Never expires (`ttlMs: null`).
    Unlimited,
}

impl Ttl {
    /// The duration, or `None` for [`Ttl::Unlimited`].
    #[must_use]
    pub fn duration(self) -> Option<Duration> {
        match self {
            Self::After(d) => Some(d),
            Self::Unlimited => None,
        }
    }
}

/// The default `ttlMs` of a tool's tasks, one hour, unless the tool sets its own
/// ([`ToolDefinition::with_ttl`](super::ToolDefinition::with_ttl), `#[task_tool(ttl =
/// "..")]`). `#[task_tool]` checks a `poll_interval` written without a `ttl` against it.
pub const DEFAULT_TTL: Ttl = Ttl::After(Duration::from_secs(3600));
/// The default poll interval, one second: the `pollIntervalMs` a tool's tasks suggest unless
/// the tool sets its own
/// ([`ToolDefinition::with_poll_interval`](super::ToolDefinition::with_poll_interval),
/// `#[task_tool(poll_interval = "..")]`), and the pause the task client
/// (`client::TaskClient`, feature `client`) takes between polls when a server suggests none.
/// The one constant for both: `#[task_tool]` checks a `ttl` written without a
/// `poll_interval` against it.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How long a task of a tool that resumes waits (for an answer, or in a durable sleep)
/// before it is parked, thirty seconds, unless the tool sets its own
/// ([`ToolDefinition::with_park_after`](super::ToolDefinition::with_park_after),
/// `#[task_tool(park_after = "..")]`): long enough that a question answered while the person
/// is at the screen, or a short pause, costs no replay; short enough that a task waiting for
/// a person or a clock for hours holds only its row.
pub const DEFAULT_PARK_AFTER: Duration = Duration::from_secs(30);

/// The longest tool name, in characters (the MCP tool-name rule).
pub const MAX_TOOL_NAME_LEN: usize = 128;

/// What breaks the MCP rule for tool names in `name` (1 to [`MAX_TOOL_NAME_LEN`] characters,
/// each an ASCII letter, digit, `_`, `-` or `.`), or `None` when it follows it. The same rule
/// as the `#[task_tool]` macro's (`attr::check_tool_name` there), which cannot share code
/// with the runtime.
pub(crate) fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_TOOL_NAME_LEN {
        Some("it is longer than 128 characters")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        Some("it contains a character other than an ASCII letter, digit, `_`, `-` or `.`")
    } else {
        None
    }
}
