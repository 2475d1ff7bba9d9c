//! [`Toolkit`]: the set of tools a server offers, plus the shared state they read.

use std::{
    any::{Any, TypeId},
    collections::HashMap,
    fmt,
    sync::Arc,
    time::Duration,
};

use crate::tool::{Mode, TaskTool, ToolDefinition};

/// Building a toolkit failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolkitError {
    /// Two tools share one wire name.
    #[error("two tools are named `{0}`; tool names must be unique within a toolkit")]
    DuplicateName(String),
    /// A tool's definition breaks a rule.
    #[error("tool `{tool}`: {problem}")]
    InvalidDefinition {
        /// The tool's wire name (as given, when that is the problem).
        tool: String,
        /// What is wrong.
        problem: DefinitionError,
    },
}

/// What is wrong with a [`ToolDefinition`], found when a toolkit registers it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DefinitionError {
    /// The wire name breaks the MCP rule for tool names, 1 to
    /// [`MAX_TOOL_NAME_LEN`](crate::tool::MAX_TOOL_NAME_LEN) characters of ASCII letters,
    /// digits, `_`, `-` and `.` (the rule `#[task_tool]` checks at compile time).
    #[error(
        "invalid tool name: {}; use 1 to 128 characters of `A-Z`, `a-z`, `0-9`, `_`, `-`, `.`",
        crate::tool::name_problem(name).unwrap_or("it breaks the tool name rule")
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
    /// from the root ([`tool::headers`](crate::tool::headers) rule 1).
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

pub(crate) struct Registered {
    pub(crate) definition: ToolDefinition,
    pub(crate) tool: Arc<dyn TaskTool>,
    /// The tool's name, shared by every call and task of it.
    pub(crate) name: Arc<str>,
}

/// Application state that tools read through [`TaskContext::state`](crate::TaskContext::state),
/// keyed by type.
#[derive(Default, Clone)]
pub(crate) struct StateMap(HashMap<TypeId, Arc<dyn Any + Send + Sync>>);

impl StateMap {
    /// The value registered for `type_id`, type-erased.
    pub(crate) fn get_any(&self, type_id: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        self.0.get(&type_id).map(|value| &**value)
    }
}

impl fmt::Debug for StateMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateMap")
            .field("len", &self.0.len())
            .finish()
    }
}

/// The tools of a server, in registration order, and the state they share.
#[derive(Default)]
pub struct Toolkit {
    tools: Vec<Registered>,
    index: HashMap<String, usize>,
    state: StateMap,
}

impl Toolkit {
    /// An empty toolkit.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool.
    ///
    /// # Errors
    /// [`ToolkitError::DuplicateName`] when a tool of that name is already registered, and
    /// [`ToolkitError::InvalidDefinition`] when the definition breaks a rule.
    pub fn with_tool(mut self, tool: impl TaskTool) -> Result<Self, ToolkitError> {
        self.add(Arc::new(tool))?;
        Ok(self)
    }

    /// Adds a tool already behind an [`Arc`].
    ///
    /// # Errors
    /// As [`Toolkit::with_tool`].
    pub fn add(&mut self, tool: Arc<dyn TaskTool>) -> Result<(), ToolkitError> {
        let definition = tool.definition();
        definition
            .validate()
            .map_err(|problem| ToolkitError::InvalidDefinition {
                tool: definition.name().to_owned(),
                problem,
            })?;
        let name = definition.name().to_owned();
        if self.index.contains_key(&name) {
            return Err(ToolkitError::DuplicateName(name));
        }
        self.index.insert(name, self.tools.len());
        let name = Arc::from(definition.name());
        self.tools.push(Registered {
            definition,
            tool,
            name,
        });
        Ok(())
    }

    /// Registers shared state of type `T` (a pool, a client, a config), replacing any earlier
    /// value of that type. Tools read it with `ctx.state::<T>()` or a `State<T>` parameter.
    #[must_use]
    pub fn with_state<T: Clone + Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.0.insert(TypeId::of::<T>(), Arc::new(value));
        self
    }

    /// The definitions, in registration order.
    pub fn definitions(&self) -> impl Iterator<Item = &ToolDefinition> {
        self.tools.iter().map(|r| &r.definition)
    }

    /// Whether any tool may run as a task.
    #[must_use]
    pub fn has_task_tools(&self) -> bool {
        self.definitions().any(|d| d.mode() != Mode::Inline)
    }

    /// Whether a tool of this name is registered.
    #[must_use]
    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// The number of tools.
    #[must_use]
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are no tools.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Registered> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    pub(crate) fn state(&self) -> &StateMap {
        &self.state
    }
}

impl fmt::Debug for Toolkit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Toolkit")
            .field(
                "tools",
                &self
                    .definitions()
                    .map(ToolDefinition::name)
                    .collect::<Vec<_>>(),
            )
            .field("state", &self.state)
            .finish()
    }
}
