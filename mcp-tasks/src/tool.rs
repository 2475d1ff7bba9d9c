//! The tool contract: what a task tool is ([`TaskTool`]), how it describes itself
//! ([`ToolDefinition`]), when it runs as a task ([`Mode`]), and how it ends ([`ToolError`],
//! [`Failure`]).
//!
//! `#[task_tool]` implements [`TaskTool`] for a generated struct; a hand-written
//! implementation is just as valid.

use std::{borrow::Cow, fmt, hash::Hasher as _, sync::Arc, time::Duration};

mod error;
pub mod headers;
mod settings;

pub use error::{DefinitionError, ToolError};
use settings::name_problem;
pub use settings::{
    DEFAULT_PARK_AFTER, DEFAULT_POLL_INTERVAL, DEFAULT_TTL, MAX_TOOL_NAME_LEN, Mode, RestartPolicy,
    TASK_SUPPORT_KEY, Ttl,
};

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};

use crate::context::TaskContext;
pub use crate::context::{Failure, ProgressError};

/// A tool's description on the wire plus how it runs as a task.
#[derive(Debug, Clone)]
pub struct ToolDefinition {
    tool: Tool,
    mode: Mode,
    ttl: Ttl,
    poll_interval: Duration,
    inline_budget: Option<Duration>,
    restart: RestartPolicy,
    park_after: Option<Duration>,
    version: Cow<'static, str>,
    concurrency: Option<u32>,
    rate: Option<crate::rate::Rate>,
    key_concurrency: Option<(LimitKey, u32)>,
    key_rate: Option<(LimitKey, crate::rate::Rate)>,
}

/// What a per-key limit counts by ([`ToolDefinition::with_key_concurrency`],
/// [`ToolDefinition::with_key_rate`]): each value of the key has its own places and its own
/// window of starts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LimitKey {
    /// The task's owner (the identity authentication gave the call).
    Owner,
    /// A top-level argument of the call, by name: a string is its own key (with U+FFFD in
    /// place of each NUL character, which a Postgres text column refuses), any other value
    /// its compact JSON text (a missing argument is `null`).
    Argument(Cow<'static, str>),
}

impl LimitKey {
    /// The key of a call by `owner` with `arguments`.
    #[must_use]
    pub fn of(&self, owner: &str, arguments: &JsonObject) -> String {
        match self {
            Self::Owner => owner.to_owned(),
            Self::Argument(name) => match arguments.get(&**name) {
                Some(serde_json::Value::String(text)) => {
                    crate::store::record::storable_text(text).into_owned()
                }
                Some(other) => other.to_string(),
                None => "null".to_owned(),
            },
        }
    }
}

impl fmt::Display for LimitKey {
    /// `owner`, or the argument's name: how a status message names the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Owner => f.write_str("owner"),
            Self::Argument(name) => f.write_str(name),
        }
    }
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
            park_after: Some(DEFAULT_PARK_AFTER),
            version: Cow::Borrowed(""),
            concurrency: None,
            rate: None,
            key_concurrency: None,
            key_rate: None,
        }
        .with_mode(Mode::default())
    }

    /// Sets what a restarted server does with this tool's unfinished tasks.
    #[must_use]
    pub fn with_restart(mut self, restart: RestartPolicy) -> Self {
        self.restart = restart;
        self
    }

    /// Sets how long a task of this tool waits (for an answer to an input request, or in a
    /// durable [`sleep`](crate::TaskContext::sleep)) before it is parked: its work is
    /// dropped, its memory and (in a cluster) its lease given back, and only its row waits;
    /// the answer, the timer, a cancel or the task's expiry wakes it, on any instance, and
    /// it goes on by replay. Only a tool that resumes ([`RestartPolicy::Resume`]) is ever
    /// parked, and only over a store that keeps parked tasks (every store of this crate
    /// does). [`DEFAULT_PARK_AFTER`] unless set; `#[task_tool(park_after = "..")]` sets it.
    #[must_use]
    pub fn with_park_after(mut self, after: Duration) -> Self {
        self.park_after = Some(after);
        self
    }

    /// Runs at most `limit` of this tool's tasks at once (at least 1): in the process over a
    /// single-process store, across every instance and worker over a shared store. A call
    /// over the limit still gets its task at once; the task waits until one of the tool's
    /// tasks ends. On a shared store every call of the tool is recorded queued and claimed
    /// by an instance or worker with a free slot (the claim counts the tool's tasks under a
    /// lock, so the limit holds whichever instance claims); a waiting task holds only its
    /// row, and a task parked on an answer or a timer keeps its place. In one process the
    /// waiting task is held back as its row and a small queue entry (no work in memory, no
    /// running slot of [`max_running`](crate::EngineBuilder::with_max_running)) and starts
    /// when a place frees, oldest first; a parked task gives its place back until it goes
    /// on. Only for [`Mode::Required`] tools (the toolkit refuses it on
    /// others). `#[task_tool(concurrency = 3)]`.
    #[must_use]
    pub fn with_concurrency(mut self, limit: u32) -> Self {
        self.concurrency = Some(limit.max(1));
        self
    }

    /// Starts at most `rate` of this tool's tasks: no window of [`Rate::per`](crate::rate::Rate::per)
    /// holds more than [`Rate::count`](crate::rate::Rate::count) starts (a sliding window), in
    /// the process over a single-process store, across every instance and worker over a
    /// shared store. A call over the rate still gets its task at once; the task waits
    /// until the window has room. On a shared store every call of the tool is recorded
    /// queued, and a claim starts only as many of its tasks as the window has room for
    /// (each start is logged in the store under the tool's lock, by the database's clock);
    /// the waiting task holds only its row, and an instance's claims (at its
    /// [claim interval](crate::ClusterConfig::with_claim_interval)) start it once the window
    /// has room. In one process the waiting task is held back as its row and a small queue
    /// entry until the window has room. A replay after a restart or a takeover is not a new
    /// start. Only for [`Mode::Required`] tools (the
    /// toolkit refuses it on others). `#[task_tool(rate = "10/1m")]`.
    #[must_use]
    pub fn with_rate(mut self, rate: crate::rate::Rate) -> Self {
        self.rate = Some(rate);
        self
    }

    /// Runs at most `limit` of this tool's tasks at once (at least 1) for each value of
    /// `key`: per owner ([`LimitKey::Owner`]), or per value of an argument (a workspace id,
    /// [`LimitKey::Argument`]). It combines with [`with_concurrency`](Self::with_concurrency)
    /// (the tool's limit across all keys) and [`with_rate`](Self::with_rate), and holds as
    /// those do: across every instance and worker over a shared store (every call of the
    /// tool is recorded queued with its key, and a claim takes, for each key, only as many
    /// of its oldest tasks as the key has free places, counted under the tool's lock), in
    /// the process otherwise. A task over the limit waits queued (its row only, on a shared
    /// store); tasks of other keys go past it. Only for [`Mode::Required`] tools, and an
    /// argument key must be a property of the input schema (the toolkit refuses others).
    /// `#[task_tool(key_concurrency = 1, limit_key = "workspace_id")]`.
    #[must_use]
    pub fn with_key_concurrency(mut self, key: LimitKey, limit: u32) -> Self {
        self.key_concurrency = Some((key, limit.max(1)));
        self
    }

    /// Starts at most `rate` of this tool's tasks for each value of `key` (per owner, or per
    /// value of an argument): no window of [`Rate::per`](crate::rate::Rate::per) holds more
    /// than [`Rate::count`](crate::rate::Rate::count) starts of one key (a sliding window).
    /// It combines with the tool's other limits and holds as they do: across every instance
    /// and worker over a shared store (a claim takes, for each key, only as many of its
    /// oldest tasks as the key's window has room for, and logs their starts by key in the
    /// same transaction), in the process otherwise. A task over its key's rate waits queued;
    /// tasks of other keys go past it. With [`with_key_concurrency`](Self::with_key_concurrency)
    /// both must count by the same key. Only for [`Mode::Required`] tools, and an argument key
    /// must be a property of the input schema (the toolkit refuses others).
    /// `#[task_tool(key_rate = "10/1m", limit_key = "owner")]`.
    #[must_use]
    pub fn with_key_rate(mut self, key: LimitKey, rate: crate::rate::Rate) -> Self {
        self.key_rate = Some((key, rate));
        self
    }

    /// Never parks this tool's tasks: a waiting task keeps its work in memory (and, in a
    /// cluster, its lease) for as long as it waits. `#[task_tool(park_after = "never")]`.
    #[must_use]
    pub fn without_parking(mut self) -> Self {
        self.park_after = None;
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
        // Keys sorted whatever order the map keeps (a no-op unless `preserve_order` is on).
        let canonical = |schema: &JsonObject| {
            let mut value = serde_json::Value::Object(schema.clone());
            value.sort_all_objects();
            value.to_string()
        };
        let input = canonical(&self.tool.input_schema);
        let output = self
            .tool
            .output_schema
            .as_deref()
            .map(canonical)
            .unwrap_or_default();
        // 64-bit FNV-1a (the `fnv` crate, as the macro's code digest), each field followed by
        // its length so that fields cannot run together.
        let mut digest = fnv::FnvHasher::default();
        for field in [&*self.tool.name, &input, &output, code] {
            digest.write(field.as_bytes());
            digest.write(&(field.len() as u64).to_le_bytes());
        }
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

    /// How long a task of this tool waits before it is parked
    /// ([`with_park_after`](Self::with_park_after)); `None` when it never is (its tool does
    /// not resume, or [`without_parking`](Self::without_parking)).
    #[must_use]
    pub fn park_after(&self) -> Option<Duration> {
        self.park_after
            .filter(|_| self.restart == RestartPolicy::Resume)
    }

    /// How many of this tool's tasks may run at once
    /// ([`with_concurrency`](Self::with_concurrency)); `None`: no limit of its own.
    #[must_use]
    pub fn concurrency(&self) -> Option<u32> {
        self.concurrency
    }

    /// How fast this tool's tasks may start ([`with_rate`](Self::with_rate)); `None`: no
    /// rate limit of its own.
    #[must_use]
    pub fn rate(&self) -> Option<crate::rate::Rate> {
        self.rate
    }

    /// How many of this tool's tasks may run at once for each value of which key
    /// ([`with_key_concurrency`](Self::with_key_concurrency)); `None`: no such limit.
    #[must_use]
    pub fn key_concurrency(&self) -> Option<(&LimitKey, u32)> {
        self.key_concurrency
            .as_ref()
            .map(|(key, limit)| (key, *limit))
    }

    /// How fast this tool's tasks may start for each value of which key
    /// ([`with_key_rate`](Self::with_key_rate)); `None`: no such limit.
    #[must_use]
    pub fn key_rate(&self) -> Option<(&LimitKey, crate::rate::Rate)> {
        self.key_rate.as_ref().map(|(key, rate)| (key, *rate))
    }

    /// What this tool's per-key limits count its tasks by; `None`: it has none.
    #[must_use]
    pub fn limit_key(&self) -> Option<&LimitKey> {
        (self.key_concurrency.as_ref().map(|(key, _)| key))
            .or(self.key_rate.as_ref().map(|(key, _)| key))
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
        let limits = [
            (self.concurrency.is_some(), "a concurrency limit"),
            (self.rate.is_some(), "a rate limit"),
            (
                self.key_concurrency.is_some(),
                "a per-key concurrency limit",
            ),
            (self.key_rate.is_some(), "a per-key rate limit"),
        ];
        if self.mode != Mode::Required
            && let Some((_, limit)) = limits.into_iter().find(|(set, _)| *set)
        {
            return Err(DefinitionError::LimitNotRequired {
                limit,
                mode: self.mode,
            });
        }
        if let (Some((by, _)), Some((rate_by, _))) = (&self.key_concurrency, &self.key_rate)
            && by != rate_by
        {
            return Err(DefinitionError::TwoLimitKeys {
                concurrency: by.to_string(),
                rate: rate_by.to_string(),
            });
        }
        if let Some(LimitKey::Argument(name)) = self.limit_key() {
            let declared = self
                .tool
                .input_schema
                .get("properties")
                .and_then(|p| p.as_object())
                .is_some_and(|p| p.contains_key(&**name));
            if !declared {
                return Err(DefinitionError::UnknownLimitKey {
                    argument: name.to_string(),
                });
            }
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
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
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
        let text = format!("invalid arguments for tool `{tool}`: {}", self.message);
        CallToolResult::error(vec![ContentBlock::text(text)])
    }
}

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

    #[test]
    fn a_limit_key_is_the_owner_or_an_argument() {
        let arguments: JsonObject = serde_json::from_value(serde_json::json!({
            "workspace": "acme", "shard": 7, "filter": {"b": 1, "a": [true]}
        }))
        .unwrap();
        let key = |name: &'static str| LimitKey::Argument(name.into()).of("alice", &arguments);
        assert_eq!(LimitKey::Owner.of("alice", &arguments), "alice");
        assert_eq!(key("workspace"), "acme", "a string is its own key");
        assert_eq!(key("shard"), "7");
        assert_eq!(
            key("filter"),
            r#"{"a":[true],"b":1}"#,
            "compact JSON, keys sorted"
        );
        assert_eq!(key("missing"), "null");
    }

    #[test]
    fn a_key_limit_needs_a_required_tool_and_a_declared_argument() {
        let schema = JsonObject::from_iter([
            ("type".to_owned(), "object".into()),
            (
                "properties".to_owned(),
                serde_json::json!({ "workspace": { "type": "string" } }),
            ),
        ]);
        let tool = |key: LimitKey| {
            ToolDefinition::new("sync", schema.clone()).with_key_concurrency(key, 1)
        };
        assert!(matches!(
            tool(LimitKey::Owner).validate(),
            Err(DefinitionError::LimitNotRequired {
                limit: "a per-key concurrency limit",
                ..
            })
        ));
        let required = |key| tool(key).with_mode(Mode::Required);
        assert!(required(LimitKey::Owner).validate().is_ok());
        assert!(
            required(LimitKey::Argument("workspace".into()))
                .validate()
                .is_ok()
        );
        let unknown = required(LimitKey::Argument("workspace_id".into())).validate();
        assert_eq!(
            unknown.map_err(|e| e.to_string()),
            Err(
                "the per-key limit is keyed by the argument `workspace_id`, which the input \
                 schema does not declare: key it by one of the tool's arguments, or by \
                 `LimitKey::Owner`"
                    .to_owned()
            )
        );
        // A per-key rate alone, keyed by an undeclared argument, and keyed apart from the
        // per-key concurrency limit.
        let rate = crate::rate::Rate::new(2, std::time::Duration::from_secs(60));
        let rated = ToolDefinition::new("sync", schema.clone()).with_mode(Mode::Required);
        assert!(matches!(
            rated
                .clone()
                .with_key_rate(LimitKey::Argument("shard".into()), rate)
                .validate(),
            Err(DefinitionError::UnknownLimitKey { argument }) if argument == "shard"
        ));
        assert!(matches!(
            ToolDefinition::new("sync", schema.clone())
                .with_key_rate(LimitKey::Owner, rate)
                .validate(),
            Err(DefinitionError::LimitNotRequired {
                limit: "a per-key rate limit",
                ..
            })
        ));
        let both = required(LimitKey::Argument("workspace".into()));
        assert_eq!(
            both.clone()
                .with_key_rate(LimitKey::Owner, rate)
                .validate()
                .map_err(|e| e.to_string()),
            Err(
                "the per-key concurrency limit counts by `workspace` and the per-key rate by \
                 `owner`: a tool's tasks have one key, so give both the same one"
                    .to_owned()
            )
        );
        let both = both.with_key_rate(LimitKey::Argument("workspace".into()), rate);
        assert!(both.validate().is_ok());
        assert_eq!(
            both.limit_key(),
            Some(&LimitKey::Argument("workspace".into()))
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
