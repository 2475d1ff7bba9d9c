//! [`Toolkit`]: the set of tools a server offers, plus the shared state they read.

use std::{
    any::{Any, TypeId},
    collections::HashMap,
    fmt,
    sync::Arc,
};

pub use crate::tool::DefinitionError;
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
    index: HashMap<Arc<str>, usize>,
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
        let name: Arc<str> = Arc::from(definition.name());
        if self.index.contains_key(&name) {
            return Err(ToolkitError::DuplicateName(name.to_string()));
        }
        self.index.insert(Arc::clone(&name), self.tools.len());
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
        let tools: Vec<&str> = self.definitions().map(ToolDefinition::name).collect();
        f.debug_struct("Toolkit")
            .field("tools", &tools)
            .field("state", &self.state)
            .finish()
    }
}
