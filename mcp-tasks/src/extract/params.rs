//! The parameters of a `#[task_tool]` fn: how each one is filled, and the input schema.
//!
//! A parameter is filled by its type, never by how the type is written: [`TaskContext`] and
//! [`State<T>`] (under any alias or path) come from the call's context, every other type is
//! one property of the arguments ([`Argument`]). The macro emits, per parameter, one helper
//! that dispatches on `Tag<Type>` (see [`kinds`]) to a [`ParamOps`]; the chosen kind's method
//! is where the bounds are checked, spanned at the user's type or pattern.

use std::{any::type_name, fmt};

use rmcp::model::{ErrorData, JsonObject};
use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::{
    context::{State, TaskContext},
    errors,
    tool::ArgumentError,
};

/// A parameter type `#[task_tool]` reads from the call's arguments.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool argument",
    label = "a tool argument must implement `serde::Deserialize` and `schemars::JsonSchema`",
    note = "derive both: `#[derive(serde::Deserialize, schemars::JsonSchema)]`; a `TaskContext` or `State<T>` parameter is filled from the call's context, without `#[arg]` or `#[args]`"
)]
pub trait Argument: DeserializeOwned + JsonSchema {}

impl<T: DeserializeOwned + JsonSchema> Argument for T {}

/// A parameter with `#[arg(default)]`: missing means `T::default()`, shown as the schema's
/// `default`.
#[diagnostic::on_unimplemented(
    message = "`#[arg(default)]` needs `{Self}: Default + Serialize`",
    label = "the default value is `Default::default()`, and it is shown in the input schema",
    note = "implement or derive `Default` and `serde::Serialize`, or remove `default` and take an `Option`"
)]
pub trait DefaultArgument: Default + Serialize {}

impl<T: Default + Serialize> DefaultArgument for T {}

mod sealed {
    /// Implemented by no type: the bounds below can never hold, so the code behind them is
    /// never built into a program.
    pub trait Never {}
}

/// The bound of an argument whose pattern has no name (`(a, b): (u32, u32)`); it never holds.
#[diagnostic::on_unimplemented(
    message = "an argument needs a name: use a plain identifier, or give this pattern `#[arg(rename = \"..\")]`",
    label = "a parameter of type `{Self}` is read from the arguments, as the property of its name",
    note = "only `TaskContext` and `State<T>` parameters, filled from the call's context, may use any pattern"
)]
pub trait UnnamedArgument: sealed::Never {}

/// The bound of an argument beside an `#[args]` parameter; it never holds.
#[diagnostic::on_unimplemented(
    message = "with `#[args]` every argument comes from that struct: move this parameter into it, or remove `#[args]`",
    label = "a parameter of type `{Self}` is read from the arguments",
    note = "only `TaskContext` and `State<T>` parameters may stand beside `#[args]`"
)]
pub trait ArgumentBesideArgs: sealed::Never {}

/// The bound of a `&TaskContext` or `&State<T>` parameter; it never holds.
#[diagnostic::on_unimplemented(
    message = "take `{Self}` by value, not by reference: the work of a task outlives the call (`{Self}` is cheap to clone)",
    label = "a reference to the call's context cannot outlive the call"
)]
pub trait TakenByValue: sealed::Never {}

/// What filling one parameter gives: the value, or the JSON-RPC error the call ends with
/// (a `State<T>` that was never registered).
pub type Filled<T> = Result<T, ErrorData>;

/// How one parameter is described in the input schema and filled for a call.
pub struct ParamOps<T> {
    schema: fn(&mut InputSchema, &str, Option<&str>),
    take: fn(&TaskContext, &mut Arguments, &str) -> Result<Filled<T>, ArgumentError>,
}

copy_ops!(ParamOps<T>);

impl<T> fmt::Debug for ParamOps<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParamOps")
            .field("type", &type_name::<T>())
            .finish_non_exhaustive()
    }
}

fn no_property(_: &mut InputSchema, _: &str, _: Option<&str>) {}

impl<T> ParamOps<T> {
    /// A property, required unless `T` decodes from `null`.
    #[must_use]
    pub const fn argument() -> Self
    where
        T: Argument,
    {
        Self {
            schema: InputSchema::property::<T>,
            take: |_, arguments, name| arguments.take::<T>(name).map(Ok),
        }
    }

    /// A property with `#[arg(default)]`.
    #[must_use]
    pub const fn argument_with_default() -> Self
    where
        T: Argument + DefaultArgument,
    {
        Self {
            schema: InputSchema::property_with_default::<T>,
            take: |_, arguments, name| arguments.take_or_default::<T>(name).map(Ok),
        }
    }

    /// Adds the parameter's property, if it has one, to `schema`.
    pub fn schema(&self, schema: &mut InputSchema, name: &str, description: Option<&str>) {
        (self.schema)(schema, name, description);
    }

    /// The value for this call.
    ///
    /// # Errors
    /// An [`ArgumentError`] naming the field and what was expected (the caller gets
    /// `isError: true` and no task is created); inside `Ok`, the JSON-RPC error the call
    /// ends with.
    pub fn take(
        &self,
        ctx: &TaskContext,
        arguments: &mut Arguments,
        name: &str,
    ) -> Result<Filled<T>, ArgumentError> {
        (self.take)(ctx, arguments, name)
    }
}

impl ParamOps<TaskContext> {
    /// The call's [`TaskContext`].
    #[must_use]
    pub const fn context() -> Self {
        Self {
            schema: no_property,
            take: |ctx, _, _| Ok(Ok(ctx.clone())),
        }
    }
}

impl<T: Clone + Send + Sync + 'static> ParamOps<State<T>> {
    /// The toolkit's state of type `T`; a JSON-RPC internal error when it has none.
    #[must_use]
    pub const fn state() -> Self {
        Self {
            schema: no_property,
            take: |ctx, _, _| Ok(take_state::<T>(ctx)),
        }
    }
}

fn take_state<T: Clone + Send + Sync + 'static>(ctx: &TaskContext) -> Filled<State<T>> {
    ctx.state::<T>().map(State).ok_or_else(|| {
        let tool = ctx.tool_name();
        let ty = type_name::<T>();
        tracing::error!(tool, state = ty, "state not registered");
        errors::state_not_registered(tool, ty)
    })
}

pub mod headers;
pub mod kinds;

/// How an `#[args]` struct is described and decoded.
pub struct WholeOps<T> {
    schema: fn() -> JsonObject,
    take: fn(&mut Arguments) -> Result<T, ArgumentError>,
}

copy_ops!(WholeOps<T>);

#[allow(
    clippy::new_without_default,
    reason = "built only by generated code, in a const"
)]
impl<T> WholeOps<T> {
    /// The ops of `T`, checking its bounds.
    #[must_use]
    pub const fn new() -> Self
    where
        T: Argument,
    {
        Self {
            schema: InputSchema::whole::<T>,
            take: Arguments::whole::<T>,
        }
    }

    /// The input schema: `T`'s.
    #[must_use]
    pub fn schema(&self) -> JsonObject {
        (self.schema)()
    }

    /// # Errors
    /// An [`ArgumentError`] with serde's message.
    pub fn take(&self, arguments: &mut Arguments) -> Result<T, ArgumentError> {
        (self.take)(arguments)
    }
}

/// The arguments of one call, taken one field at a time.
#[derive(Debug)]
pub struct Arguments(JsonObject);

impl Arguments {
    /// The call's arguments.
    #[must_use]
    pub fn new(arguments: JsonObject) -> Self {
        Self(arguments)
    }

    /// The field `name`; a missing field decodes as `null`, so an `Option` is `None`.
    ///
    /// # Errors
    /// An [`ArgumentError`] naming the field and what was expected.
    pub fn take<T: DeserializeOwned>(&mut self, name: &str) -> Result<T, ArgumentError> {
        match self.0.remove(name) {
            Some(value) => decode(name, value),
            None => serde_json::from_value(Value::Null).map_err(|e| missing(name, &e)),
        }
    }

    /// The field `name`, or `T::default()` when it is missing or `null`.
    ///
    /// # Errors
    /// An [`ArgumentError`] naming the field and what was expected.
    pub fn take_or_default<T: DeserializeOwned + Default>(
        &mut self,
        name: &str,
    ) -> Result<T, ArgumentError> {
        match self.0.remove(name) {
            None | Some(Value::Null) => Ok(T::default()),
            Some(value) => decode(name, value),
        }
    }

    /// All arguments as one struct (`#[args]`).
    ///
    /// # Errors
    /// An [`ArgumentError`] with serde's message (which names a missing field).
    pub fn whole<T: DeserializeOwned>(&mut self) -> Result<T, ArgumentError> {
        serde_json::from_value(Value::Object(std::mem::take(&mut self.0)))
            .map_err(|e| ArgumentError::new(e.to_string()))
    }
}

fn decode<T: DeserializeOwned>(name: &str, value: Value) -> Result<T, ArgumentError> {
    serde_json::from_value(value).map_err(|e| ArgumentError::new(format!("`{name}`: {e}")))
}

/// "`count`: missing, expected u32", from serde's "invalid type: null, expected u32".
fn missing(name: &str, error: &serde_json::Error) -> ArgumentError {
    let text = error.to_string();
    let expected = text.split_once(", expected ").map(|(_, expected)| expected);
    let expected = expected.map_or(String::new(), |e| format!(", expected {e}"));
    ArgumentError::new(format!("`{name}`: missing{expected}"))
}

/// A draft 2020-12 generator; `serialize` for output schemas.
pub(super) fn generator(serialize: bool) -> SchemaGenerator {
    let settings = SchemaSettings::draft2020_12();
    if serialize {
        settings.for_serialize()
    } else {
        settings
    }
    .into_generator()
}

/// The `inputSchema` of a tool with one property per parameter.
pub struct InputSchema {
    generator: SchemaGenerator,
    properties: JsonObject,
    required: Vec<Value>,
}

impl fmt::Debug for InputSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InputSchema")
            .field("properties", &self.properties)
            .finish_non_exhaustive()
    }
}

impl Default for InputSchema {
    fn default() -> Self {
        Self::new()
    }
}

impl InputSchema {
    /// No properties yet.
    #[must_use]
    pub fn new() -> Self {
        Self {
            generator: generator(false),
            properties: JsonObject::new(),
            required: Vec::new(),
        }
    }

    /// Adds the property `name`: required unless `T` decodes from `null` (an `Option`).
    pub fn property<T: DeserializeOwned + JsonSchema>(
        &mut self,
        name: &str,
        description: Option<&str>,
    ) {
        let required = serde_json::from_value::<T>(Value::Null).is_err();
        self.insert::<T>(name, description, required, None);
    }

    /// Adds the property `name`, never required, with `T::default()` as its `default`.
    pub fn property_with_default<T: DeserializeOwned + JsonSchema + Default + Serialize>(
        &mut self,
        name: &str,
        description: Option<&str>,
    ) {
        let default = serde_json::to_value(T::default()).ok();
        self.insert::<T>(name, description, false, default);
    }

    fn insert<T: JsonSchema>(
        &mut self,
        name: &str,
        description: Option<&str>,
        required: bool,
        default: Option<Value>,
    ) {
        let mut schema = self.generator.subschema_for::<T>();
        if let Some(description) = description {
            schema.insert("description".into(), description.into());
        }
        if let Some(default) = default {
            schema.insert("default".into(), default);
        }
        if required {
            self.required.push(name.into());
        }
        self.properties.insert(name.into(), schema.to_value());
    }

    /// Annotates the property `name` with `"x-mcp-header": header` (SEP-2243), so that clients send
    /// its value as the `Mcp-Param-{header}` header. The property's schema is made one a client can
    /// read without resolving anything: a `$ref` to a definition is replaced by that definition,
    /// and an `Option`'s `null` alternative is dropped (the property is not required, so a missing
    /// value sends no header). Whether the annotation is valid is checked when the toolkit
    /// registers the tool ([`DefinitionError`](crate::DefinitionError)).
    pub fn header(&mut self, name: &str, header: &str) {
        let mut property = match self.properties.get(name) {
            Some(Value::Object(property)) => self.readable(property.clone()),
            // A boolean schema (`true`: any value, such as a `serde_json::Value`) has no
            // `type`: annotated all the same, so that registration names the problem.
            Some(_) => JsonObject::new(),
            None => return,
        };
        property.insert("x-mcp-header".into(), header.into());
        self.properties.insert(name.into(), Value::Object(property));
    }

    /// `schema` without a leading `$ref` or `null` alternative (at most a few levels deep).
    fn readable(&self, mut schema: JsonObject) -> JsonObject {
        for _ in 0..4 {
            if let Some(Value::String(target)) = schema.get("$ref")
                && let Some(Value::Object(definition)) = target
                    .strip_prefix("#/$defs/")
                    .and_then(|key| self.generator.definitions().get(key))
            {
                let mut inlined = definition.clone();
                inlined.extend(schema.into_iter().filter(|(key, _)| key != "$ref"));
                schema = inlined;
                continue;
            }
            if let Some(Value::Array(types)) = schema.get("type") {
                let kept: Vec<Value> = types
                    .iter()
                    .filter(|t| t.as_str() != Some("null"))
                    .cloned()
                    .collect();
                if kept.len() == 1 && kept.len() < types.len() {
                    schema.insert("type".into(), kept[0].clone());
                    if let Some(Value::Array(values)) = schema.get_mut("enum") {
                        values.retain(|v| !v.is_null());
                    }
                    continue;
                }
            }
            if let Some(Value::Array(branches)) = schema.get("anyOf") {
                let mut kept = branches
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"));
                if let (Some(Value::Object(only)), None) = (kept.next(), kept.next())
                    && branches.len() == 2
                {
                    let mut merged = only.clone();
                    merged.extend(schema.into_iter().filter(|(key, _)| key != "anyOf"));
                    schema = merged;
                    continue;
                }
            }
            break;
        }
        schema
    }

    /// The schema: `type: "object"` with the properties, draft 2020-12.
    #[must_use]
    pub fn finish(mut self) -> JsonObject {
        let mut root = JsonObject::new();
        root.insert(
            "$schema".into(),
            schemars::consts::meta_schemas::DRAFT2020_12.into(),
        );
        root.insert("type".into(), "object".into());
        root.insert("properties".into(), Value::Object(self.properties));
        if !self.required.is_empty() {
            root.insert("required".into(), Value::Array(self.required));
        }
        let definitions = self.generator.take_definitions(true);
        if !definitions.is_empty() {
            root.insert("$defs".into(), Value::Object(definitions));
        }
        root
    }

    /// The schema of a struct that is the whole argument object (`#[args]`), without its
    /// top-level `title` and `description` (the tool has its own).
    #[must_use]
    pub fn whole<T: JsonSchema>() -> JsonObject {
        let mut schema = generator(false).into_root_schema_for::<T>();
        schema.remove("title");
        schema.remove("description");
        match schema.to_value() {
            Value::Object(object) => object,
            other => JsonObject::from_iter([("allOf".to_owned(), Value::Array(vec![other]))]),
        }
    }
}
