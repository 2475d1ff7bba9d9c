//! The tool contract: what a task tool is ([`TaskTool`]), how it describes itself
//! ([`ToolDefinition`]), when it runs as a task ([`Mode`]), and how it ends ([`ToolError`],
//! [`Failure`]).
//!
//! `#[task_tool]` implements [`TaskTool`] for a generated struct; a hand-written
//! implementation is just as valid.

use std::{borrow::Cow, fmt, sync::Arc, time::Duration};

mod digest;
mod error;
pub mod headers;

use digest::{Fnv1a, canonical_json};
pub use error::ToolError;

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};

use crate::context::TaskContext;
pub use crate::context::{Failure, ProgressError};

/// What is wrong with a [`ToolDefinition`], found when a toolkit registers it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DefinitionError {
    /// The wire name breaks the MCP rule for tool names, 1 to
    /// [`MAX_TOOL_NAME_LEN`] characters of ASCII letters,
    /// digits, `_`, `-` and `.` (the rule `#[task_tool]` checks at compile time).
    #[error(
        "invalid tool name: {}; use 1 to 128 characters of `A-Z`, `a-z`, `0-9`, `_`, `-`, `.`",
        name_problem(name).unwrap_or("it breaks the tool name rule")
    )]
    InvalidName {
        /// The name as given.
        name: String,
    },
    /// The input schema's root is not `"type": "object"` (e.g. an `#[args]` enum).
    #[error("the input schema's root must be `\"type\": \"object\"`")]
    InputSchemaNotObject,
    /// An inline budget on a tool that is not [`Mode::Optional`].
    #[error("an inline budget only applies to `Mode::Optional` tools, and this one is `{mode:?}`")]
    InlineBudgetNotOptional {
        /// The tool's mode.
        mode: Mode,
    },
    /// An `x-mcp-header` annotation that is not on a property reached through `properties`
    /// from the root ([`tool::headers`](headers) rule 1).
    #[error(
        "an `x-mcp-header` annotation must sit on a property (through `properties` from the root), not at {location}"
    )]
    HeaderOutsideProperties {
        /// Where it is: `the schema root`, or a path such as `properties/list/items`.
        location: String,
    },
    /// An `x-mcp-header` value that is not a non-empty HTTP token (rule 2).
    #[error(
        "property `{property}`: `x-mcp-header` {header} is not a valid HTTP header name (a non-empty token: ASCII letters, digits and ! # $ % & ' * + - . ^ _ ` | ~)"
    )]
    InvalidHeaderName {
        /// The property, its path dotted.
        property: String,
        /// The annotation's value, as JSON.
        header: String,
    },
    /// Two properties annotated with one header name, without regard to case (rule 3).
    #[error(
        "the properties `{other}` and `{property}` are both sent as the header `Mcp-Param-{header}` (header names compare without case)"
    )]
    DuplicateHeader {
        /// The second property.
        property: String,
        /// The first one.
        other: String,
        /// The second one's annotation.
        header: String,
    },
    /// An annotated property whose `type` is not `string`, `integer` or `boolean` (rule 4).
    #[error(
        "property `{property}` is sent as the header `Mcp-Param-{header}`, so its schema `type` must be \"string\", \"integer\" or \"boolean\"; found {found}"
    )]
    HeaderNotPrimitive {
        /// The property, its path dotted.
        property: String,
        /// The annotation.
        header: String,
        /// The `type` it has, as JSON, or `no \`type\``.
        found: String,
    },
    /// A zero poll interval.
    #[error("the poll interval must be positive")]
    ZeroPollInterval,
    /// A zero ttl.
    #[error("the ttl must be positive")]
    ZeroTtl,
    /// A poll interval longer than the ttl: the task would expire before a client polls it.
    #[error("the poll interval ({poll_interval:?}) is longer than the ttl ({ttl:?})")]
    PollIntervalLongerThanTtl {
        /// The poll interval.
        poll_interval: Duration,
        /// The ttl.
        ttl: Duration,
    },
}

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
/// ([`ToolDefinition::with_ttl`], `#[task_tool(ttl = "..")]`). `#[task_tool]` checks a
/// `poll_interval` written without a `ttl` against it.
pub const DEFAULT_TTL: Ttl = Ttl::After(Duration::from_secs(3600));
/// The default poll interval, one second: the `pollIntervalMs` a tool's tasks suggest unless
/// the tool sets its own ([`ToolDefinition::with_poll_interval`], `#[task_tool(poll_interval =
/// "..")]`), and the pause the task client (`client::TaskClient`, feature `client`) takes
/// between polls when a server suggests none. The one constant for both: `#[task_tool]` checks a `ttl`
/// written without a `poll_interval` against it.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

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

/// A tool's description on the wire plus how it runs as a task.
#[derive(Debug, Clone)]
pub struct ToolDefinition {
    tool: Tool,
    mode: Mode,
    ttl: Ttl,
    poll_interval: Duration,
    inline_budget: Option<Duration>,
    restart: RestartPolicy,
    version: Cow<'static, str>,
}

impl ToolDefinition {
    /// A tool named `name` taking arguments described by `input_schema` (a JSON Schema whose
    /// root is `type: "object"`).
    #[must_use]
    pub fn new(name: impl Into<Cow<'static, str>>, input_schema: JsonObject) -> Self {
        let mut tool = Tool::default();
        tool.name = name.into();
        tool.input_schema = Arc::new(input_schema);
        Self {
            tool,
            mode: Mode::default(),
            ttl: DEFAULT_TTL,
            poll_interval: DEFAULT_POLL_INTERVAL,
            inline_budget: None,
            restart: RestartPolicy::default(),
            version: Cow::Borrowed(""),
        }
        .with_mode(Mode::default())
    }

    /// Sets what a restarted server does with this tool's unfinished tasks.
    #[must_use]
    pub fn with_restart(mut self, restart: RestartPolicy) -> Self {
        self.restart = restart;
        self
    }

    /// Sets the tool's version. A task started by one version is never replayed by another:
    /// after a restart it ends `failed` with a message that says so. `#[task_tool(version =
    /// "..")]` sets it; without one, `#[task_tool]` uses [`with_digest_version`](Self::with_digest_version).
    #[must_use]
    pub fn with_version(mut self, version: impl Into<Cow<'static, str>>) -> Self {
        self.version = version.into();
        self
    }

    /// Sets the version to a digest of the tool itself: its wire name, input schema and
    /// output schema as set so far (so call it last), and `code`, a digest of the code that
    /// runs (`#[task_tool]` passes one of the fn's parameters, return type and body, taken at
    /// compile time). A release that leaves all of them unchanged keeps the version, so its
    /// tasks resume after a restart; any change to them fails those tasks instead of
    /// replaying them with code they were not started by.
    ///
    /// The digest is 16 hex digits of a 64-bit FNV-1a hash over the canonical JSON of the
    /// schemas (keys sorted), stable across builds, platforms and Rust versions.
    #[must_use]
    pub fn with_digest_version(mut self, code: &str) -> Self {
        let mut digest = Fnv1a::new();
        digest.field(self.tool.name.as_bytes());
        let mut json = String::new();
        canonical_json(
            &serde_json::Value::Object((*self.tool.input_schema).clone()),
            &mut json,
        );
        digest.field(json.as_bytes());
        json.clear();
        if let Some(output) = &self.tool.output_schema {
            canonical_json(&serde_json::Value::Object((**output).clone()), &mut json);
        }
        digest.field(json.as_bytes());
        digest.field(code.as_bytes());
        self.version = Cow::Owned(format!("{:016x}", digest.finish()));
        self
    }

    /// Sets the human-readable title.
    #[must_use]
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.tool.title = Some(title.into());
        self
    }

    /// Sets the description shown to models and people.
    #[must_use]
    pub fn with_description(mut self, description: impl Into<Cow<'static, str>>) -> Self {
        self.tool.description = Some(description.into());
        self
    }

    /// Sets the JSON Schema of `structuredContent`.
    #[must_use]
    pub fn with_output_schema(mut self, schema: JsonObject) -> Self {
        self.tool.output_schema = Some(Arc::new(schema));
        self
    }

    /// Sets the behaviour hints.
    #[must_use]
    pub fn with_annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.tool.annotations = Some(annotations);
        self
    }

    /// Sets when the tool runs as a task.
    #[must_use]
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self.tool
            .meta
            .get_or_insert_with(Default::default)
            .insert(TASK_SUPPORT_KEY.to_owned(), mode.label().into());
        self
    }

    /// Sets the `ttlMs` of the tool's tasks.
    #[must_use]
    pub fn with_ttl(mut self, ttl: Ttl) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets the `pollIntervalMs` of the tool's tasks.
    #[must_use]
    pub fn with_poll_interval(mut self, poll_interval: Duration) -> Self {
        self.poll_interval = poll_interval;
        self
    }

    /// For a [`Mode::Optional`] tool called by a declaring client: start the work, answer
    /// inline if it ends within `budget`, otherwise create a task around the running work.
    #[must_use]
    pub fn with_inline_budget(mut self, budget: Duration) -> Self {
        self.inline_budget = Some(budget);
        self
    }

    /// The wire name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.tool.name
    }

    /// The tool as `tools/list` shows it (its [`Mode`] under [`TASK_SUPPORT_KEY`] in `_meta`).
    #[must_use]
    pub fn tool(&self) -> &Tool {
        &self.tool
    }

    /// When the tool runs as a task.
    #[must_use]
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The `ttlMs` of the tool's tasks.
    #[must_use]
    pub fn ttl(&self) -> Ttl {
        self.ttl
    }

    /// The `pollIntervalMs` of the tool's tasks.
    #[must_use]
    pub fn poll_interval(&self) -> Duration {
        self.poll_interval
    }

    /// The inline budget, if any.
    #[must_use]
    pub fn inline_budget(&self) -> Option<Duration> {
        self.inline_budget
    }

    /// What a restarted server does with this tool's unfinished tasks.
    #[must_use]
    pub fn restart(&self) -> RestartPolicy {
        self.restart
    }

    /// The tool's version.
    #[must_use]
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Checks the rules a definition must follow; the toolkit calls it on registration.
    pub(crate) fn validate(&self) -> Result<(), DefinitionError> {
        if name_problem(self.name()).is_some() {
            return Err(DefinitionError::InvalidName {
                name: self.name().to_owned(),
            });
        }
        if self.tool.input_schema.get("type").and_then(|t| t.as_str()) != Some("object") {
            return Err(DefinitionError::InputSchemaNotObject);
        }
        headers::check(&self.tool.input_schema)?;
        if self.inline_budget.is_some() && self.mode != Mode::Optional {
            return Err(DefinitionError::InlineBudgetNotOptional { mode: self.mode });
        }
        if self.poll_interval.is_zero() {
            return Err(DefinitionError::ZeroPollInterval);
        }
        if let Ttl::After(ttl) = self.ttl {
            if ttl.is_zero() {
                return Err(DefinitionError::ZeroTtl);
            }
            if self.poll_interval > ttl {
                return Err(DefinitionError::PollIntervalLongerThanTtl {
                    poll_interval: self.poll_interval,
                    ttl,
                });
            }
        }
        Ok(())
    }
}

/// Arguments that do not decode. The caller gets an immediate result with `isError: true`
/// whose text is [`ArgumentError::message`]; no task is created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentError {
    message: String,
}

impl ArgumentError {
    /// An error whose message names the field and what was expected, e.g.
    /// ``"`count`: invalid type: string \"a\", expected u32"``.
    #[must_use]
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The message.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn into_result(self, tool: &str) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(format!(
            "invalid arguments for tool `{tool}`: {}",
            self.message
        ))])
    }
}

impl fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ArgumentError {}

/// The running work of one call: a `'static` future that ends in the tool's result or a
/// [`Failure`].
pub type ToolFuture = BoxFuture<'static, Result<CallToolResult, Failure>>;

/// A tool that can run as an MCP task.
///
/// [`TaskTool::call`] decodes the arguments synchronously, so bad arguments are answered at
/// once without creating a task, and returns the work as a `'static` future that the runtime
/// runs inline or under supervision as a task.
pub trait TaskTool: Send + Sync + 'static {
    /// The tool's wire description and task policy. Called once, on registration.
    fn definition(&self) -> ToolDefinition;

    /// Decodes `arguments` and returns the work.
    ///
    /// # Errors
    /// An [`ArgumentError`] naming the field and what was expected.
    fn call(&self, ctx: TaskContext, arguments: JsonObject) -> Result<ToolFuture, ArgumentError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn definition(name: &str) -> ToolDefinition {
        let schema = JsonObject::from_iter([("type".to_owned(), "object".into())]);
        ToolDefinition::new(name.to_owned(), schema)
    }

    fn name_error(name: &str) -> Option<String> {
        match definition(name).validate() {
            Ok(()) => None,
            Err(error @ DefinitionError::InvalidName { .. }) => Some(error.to_string()),
            Err(other) => panic!("{name:?}: not a name error: {other}"),
        }
    }

    #[test]
    fn tool_names_follow_the_macro_rule() {
        for valid in ["a", "get_weather", "search.deep", "v2-report", "A.b_c-9"] {
            assert_eq!(name_error(valid), None, "{valid:?}");
        }
        assert_eq!(name_error(&"x".repeat(MAX_TOOL_NAME_LEN)), None);
        for (invalid, problem) in [
            ("", "it is empty"),
            ("two words", "it contains a character other than"),
            ("café", "it contains a character other than"),
            ("a/b", "it contains a character other than"),
            ("tool:x", "it contains a character other than"),
        ] {
            let message = name_error(invalid).unwrap_or_else(|| panic!("{invalid:?} accepted"));
            assert!(
                message.starts_with(&format!("invalid tool name: {problem}")),
                "{invalid:?}: {message}"
            );
            assert!(
                message.ends_with("use 1 to 128 characters of `A-Z`, `a-z`, `0-9`, `_`, `-`, `.`"),
                "{message}"
            );
        }
        assert_eq!(
            name_error(&"x".repeat(MAX_TOOL_NAME_LEN + 1)).as_deref(),
            Some(
                "invalid tool name: it is longer than 128 characters; use 1 to 128 characters \
                 of `A-Z`, `a-z`, `0-9`, `_`, `-`, `.`"
            )
        );
    }
}

#[cfg(test)]
mod digest_tests {
    use super::*;

    #[test]
    fn the_digest_version_is_pinned() {
        // Versions are stored with tasks: a change of this value fails every resumable task
        // across an upgrade, so it may only change on purpose.
        let schema = JsonObject::from_iter([
            ("type".to_owned(), "object".into()),
            (
                "properties".to_owned(),
                serde_json::json!({ "b": { "type": "integer" }, "a": { "type": "string" } }),
            ),
        ]);
        let definition = ToolDefinition::new("job", schema)
            .with_output_schema(JsonObject::from_iter([(
                "type".to_owned(),
                "object".into(),
            )]))
            .with_digest_version("da00bd4250e888dc");
        assert_eq!(definition.version(), "4a38d4955629de14");
    }
}
