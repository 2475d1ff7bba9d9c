//! What a `#[task_tool]` fn receives besides its arguments ([`State`]), and the glue the
//! macro expands to: argument decoding, input and output schemas, and turning a return value
//! into a result.
//!
//! Everything but [`State`] is reached only through `mcp_tasks::__private` and is not a
//! public API.

use std::{
    any::{TypeId, type_name},
    collections::HashMap,
    convert::Infallible,
    fmt::Display,
    marker::PhantomData,
    ops::{Deref, DerefMut},
    sync::{LazyLock, RwLock},
};

use rmcp::model::{CallToolResult, ContentBlock, ErrorData, JsonObject};
use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::{
    context::TaskContext,
    tool::{ArgumentError, Failure, ToolError, ToolFuture},
};

/// Shared application state of type `T`, registered with
/// [`Toolkit::with_state`](crate::Toolkit::with_state).
///
/// A `#[task_tool]` parameter of type `State<T>` is filled from the toolkit's state, so a
/// spawned `'static` task owns its own clone (share a pool or a client behind an `Arc`, or use
/// a type that is cheap to clone). A call to a tool whose state was never registered ends with
/// a JSON-RPC internal error (`-32603`) naming the missing type; it does not panic.
///
/// ```
/// use mcp_tasks::{State, task_tool};
///
/// #[derive(Clone)]
/// struct Greeting(&'static str);
///
/// /// Greets someone.
/// #[task_tool]
/// async fn greet(State(greeting): State<Greeting>, name: String) -> String {
///     format!("{}, {name}", greeting.0)
/// }
///
/// let toolkit = mcp_tasks::toolkit![greet].unwrap().with_state(Greeting("hello"));
/// # let _ = toolkit;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct State<T>(pub T);

impl<T> Deref for State<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for State<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// A parameter filled from the call's context rather than from its arguments.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a context extractor",
    label = "a parameter of a type named `TaskContext` or `State` is filled from the call's context",
    note = "use `mcp_tasks::TaskContext` or `mcp_tasks::State<T>` here, or rename your own type so it is read from the arguments"
)]
pub trait FromContext: Sized {
    /// The value for this call.
    ///
    /// # Errors
    /// The JSON-RPC error the call ends with.
    fn from_context(ctx: &TaskContext) -> Result<Self, ErrorData>;
}

impl FromContext for TaskContext {
    fn from_context(ctx: &TaskContext) -> Result<Self, ErrorData> {
        Ok(ctx.clone())
    }
}

impl<T: Clone + Send + Sync + 'static> FromContext for State<T> {
    fn from_context(ctx: &TaskContext) -> Result<Self, ErrorData> {
        ctx.state::<T>().map(State).ok_or_else(|| {
            let tool = ctx.tool_name();
            let ty = type_name::<T>();
            tracing::error!(tool, state = ty, "state not registered");
            ErrorData::internal_error(
                format!(
                    "tool `{tool}` needs state of type `{ty}`, which the toolkit does not have: \
                     register it with `Toolkit::with_state`"
                ),
                None,
            )
        })
    }
}

/// The work of a call that ends before it starts, with a JSON-RPC error.
#[doc(hidden)]
#[must_use]
pub fn fail(error: ErrorData) -> ToolFuture {
    Box::pin(std::future::ready(Err(Failure::Error(error))))
}

/// A parameter type `#[task_tool]` reads from the call's arguments.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool argument",
    label = "a tool argument must implement `serde::Deserialize` and `schemars::JsonSchema`",
    note = "derive both: `#[derive(serde::Deserialize, schemars::JsonSchema)]`, or take `TaskContext` / `State<T>` if this is not an argument"
)]
pub trait Argument: DeserializeOwned + JsonSchema {}

impl<T: DeserializeOwned + JsonSchema> Argument for T {}

/// A type `#[task_tool]` returns as `structuredContent`.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's output",
    label = "a tool's output must implement `serde::Serialize` and `schemars::JsonSchema`",
    note = "derive both: `#[derive(serde::Serialize, schemars::JsonSchema)]`, or return a ready `rmcp::model::CallToolResult`"
)]
pub trait Output: Serialize + JsonSchema {}

impl<T: Serialize + JsonSchema> Output for T {}

/// An error type `#[task_tool]` reports as a result with `isError: true`.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's error",
    label = "a tool's error must implement `std::fmt::Display`",
    note = "implement `Display` (e.g. with `thiserror`), or return `mcp_tasks::ToolError`"
)]
pub trait ErrorMessage: Display {}

impl<T: Display> ErrorMessage for T {}

/// A parameter with `#[arg(default)]`: missing means `T::default()`, shown as the schema's
/// `default`.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`#[arg(default)]` needs `{Self}: Default + Serialize`",
    label = "the default value is `Default::default()`, and it is shown in the input schema",
    note = "implement or derive `Default` and `serde::Serialize`, or remove `default` and take an `Option`"
)]
pub trait DefaultArgument: Default + Serialize {}

impl<T: Default + Serialize> DefaultArgument for T {}

/// How one parameter is described and decoded; built at the one place where its bounds are
/// checked (the macro emits one associated const per parameter, spanned at its type).
#[doc(hidden)]
pub struct ArgOps<T> {
    schema: fn(&mut InputSchema, &str, Option<&str>),
    take: fn(&mut Arguments, &str) -> Result<T, ArgumentError>,
}

impl<T> Clone for ArgOps<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for ArgOps<T> {}

#[allow(
    clippy::new_without_default,
    reason = "built only by generated code, in a const"
)]
impl<T> ArgOps<T> {
    /// A property, required unless `T` decodes from `null`.
    #[must_use]
    pub const fn new() -> Self
    where
        T: Argument,
    {
        Self {
            schema: InputSchema::property::<T>,
            take: Arguments::take::<T>,
        }
    }

    /// A property with `#[arg(default)]`.
    #[must_use]
    pub const fn with_default() -> Self
    where
        T: Argument + DefaultArgument,
    {
        Self {
            schema: InputSchema::property_with_default::<T>,
            take: Arguments::take_or_default::<T>,
        }
    }

    pub fn schema(&self, schema: &mut InputSchema, name: &str, description: Option<&str>) {
        (self.schema)(schema, name, description);
    }

    /// # Errors
    /// An [`ArgumentError`] naming the field and what was expected.
    pub fn take(&self, arguments: &mut Arguments, name: &str) -> Result<T, ArgumentError> {
        (self.take)(arguments, name)
    }
}

/// How an `#[args]` struct is described and decoded.
#[doc(hidden)]
pub struct WholeOps<T> {
    schema: fn() -> JsonObject,
    take: fn(Arguments) -> Result<T, ArgumentError>,
}

impl<T> Clone for WholeOps<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for WholeOps<T> {}

#[allow(
    clippy::new_without_default,
    reason = "built only by generated code, in a const"
)]
impl<T> WholeOps<T> {
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

    #[must_use]
    pub fn schema(&self) -> JsonObject {
        (self.schema)()
    }

    /// # Errors
    /// An [`ArgumentError`] with serde's message.
    pub fn take(&self, arguments: Arguments) -> Result<T, ArgumentError> {
        (self.take)(arguments)
    }
}

/// The arguments of one call, taken one field at a time.
#[doc(hidden)]
#[derive(Debug)]
pub struct Arguments(JsonObject);

impl Arguments {
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
    pub fn whole<T: DeserializeOwned>(self) -> Result<T, ArgumentError> {
        serde_json::from_value(Value::Object(self.0)).map_err(|e| ArgumentError::new(e.to_string()))
    }
}

fn decode<T: DeserializeOwned>(name: &str, value: Value) -> Result<T, ArgumentError> {
    serde_json::from_value(value).map_err(|e| ArgumentError::new(format!("`{name}`: {e}")))
}

/// "`count`: missing, expected u32", from serde's "invalid type: null, expected u32".
fn missing(name: &str, error: &serde_json::Error) -> ArgumentError {
    let text = error.to_string();
    match text.split_once(", expected ") {
        Some((_, expected)) => {
            ArgumentError::new(format!("`{name}`: missing, expected {expected}"))
        }
        None => ArgumentError::new(format!("`{name}`: missing")),
    }
}

fn generator(serialize: bool) -> SchemaGenerator {
    let settings = SchemaSettings::draft2020_12();
    if serialize {
        settings.for_serialize()
    } else {
        settings
    }
    .into_generator()
}

/// The `inputSchema` of a tool with one property per parameter.
#[doc(hidden)]
pub struct InputSchema {
    generator: SchemaGenerator,
    properties: JsonObject,
    required: Vec<Value>,
}

impl std::fmt::Debug for InputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
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
            other => {
                let mut object = JsonObject::new();
                object.insert("allOf".into(), Value::Array(vec![other]));
                object
            }
        }
    }
}

/// The `outputSchema` of `T`, and whether a value of `T` is wrapped as `{"result": value}`
/// because its schema is not an object schema (an `outputSchema` must be `type: "object"`).
fn output_schema<T: JsonSchema>() -> (JsonObject, bool) {
    let mut schema = generator(true).into_root_schema_for::<T>();
    schema.remove("title");
    schema.remove("description");
    let Value::Object(mut object) = schema.to_value() else {
        unreachable!("a root schema is an object");
    };
    if object.get("type").and_then(Value::as_str) == Some("object") {
        return (object, false);
    }
    let mut root = JsonObject::new();
    if let Some(meta) = object.remove("$schema") {
        root.insert("$schema".into(), meta);
    }
    let definitions = object.remove("$defs");
    root.insert("type".into(), "object".into());
    root.insert(
        "properties".into(),
        serde_json::json!({ "result": Value::Object(object) }),
    );
    root.insert("required".into(), serde_json::json!(["result"]));
    if let Some(definitions) = definitions {
        root.insert("$defs".into(), definitions);
    }
    (root, true)
}

/// Whether values of `T` are wrapped, computed once per type.
fn wraps<T: JsonSchema + 'static>() -> bool {
    static CACHE: LazyLock<RwLock<HashMap<TypeId, bool>>> = LazyLock::new(Default::default);
    let id = TypeId::of::<T>();
    if let Some(&wrapped) = CACHE
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&id)
    {
        return wrapped;
    }
    let wrapped = output_schema::<T>().1;
    CACHE
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(id, wrapped);
    wrapped
}

/// Adds a `#[task_tool]` to a toolkit being built by `toolkit!`.
///
/// # Errors
/// As [`Toolkit::with_tool`](crate::Toolkit::with_tool).
#[doc(hidden)]
pub fn add_tool<T: NamedTool>(
    toolkit: Result<crate::Toolkit, crate::ToolkitError>,
    tool: T,
) -> Result<crate::Toolkit, crate::ToolkitError> {
    toolkit?.with_tool(tool)
}

/// Boxes the work of a call.
#[doc(hidden)]
pub fn boxed(
    work: impl Future<Output = Result<CallToolResult, Failure>> + Send + 'static,
) -> ToolFuture {
    Box::pin(work)
}

/// Dispatch on the return type of a `#[task_tool]` fn: autoref specialization over concrete
/// types (the macro only calls these in non-generic code), ending in one [`kinds::ReturnOps`]
/// value whose bounds are checked at a single place, so a wrong type is reported once.
#[doc(hidden)]
pub mod kinds {
    use super::*;

    /// Names a type without a value.
    pub struct Tag<T: ?Sized>(PhantomData<fn() -> Box<T>>);

    #[allow(clippy::new_without_default, reason = "named only by generated code")]
    impl<T: ?Sized> Tag<T> {
        #[must_use]
        pub const fn new() -> Self {
            Self(PhantomData)
        }
    }

    /// How the value a tool fn returned becomes its outcome, and its `outputSchema`.
    pub trait ReturnOps<R>: Copy + Send + Sync + 'static {
        fn output_schema(&self) -> Option<JsonObject>;
        /// # Errors
        /// A JSON-RPC error or a cancellation: the task ends `failed` or `cancelled`.
        fn outcome(&self, value: R) -> Result<CallToolResult, Failure>;
    }

    type Outcome = Result<CallToolResult, Failure>;

    /// What to do with the `Ok` side.
    pub struct OkOps<T> {
        schema: fn() -> Option<JsonObject>,
        ok: fn(T) -> Outcome,
    }
    /// What to do with the `Err` side.
    pub struct ErrOps<E> {
        err: fn(E) -> Outcome,
    }

    /// The whole return type: split into `Ok`/`Err`, then each side's ops.
    pub struct Ops<R, T, E> {
        split: fn(R) -> Result<T, E>,
        ok: OkOps<T>,
        err: ErrOps<E>,
    }

    impl<R, T, E> Clone for Ops<R, T, E> {
        fn clone(&self) -> Self {
            *self
        }
    }
    impl<R, T, E> Copy for Ops<R, T, E> {}
    impl<T> Clone for OkOps<T> {
        fn clone(&self) -> Self {
            *self
        }
    }
    impl<T> Copy for OkOps<T> {}
    impl<E> Clone for ErrOps<E> {
        fn clone(&self) -> Self {
            *self
        }
    }
    impl<E> Copy for ErrOps<E> {}

    impl<R: 'static, T: 'static, E: 'static> ReturnOps<R> for Ops<R, T, E> {
        fn output_schema(&self) -> Option<JsonObject> {
            (self.ok.schema)()
        }
        fn outcome(&self, value: R) -> Outcome {
            match (self.split)(value) {
                Ok(value) => (self.ok.ok)(value),
                Err(error) => (self.err.err)(error),
            }
        }
    }

    /// The fn returns `Result<T, E>`.
    pub struct SplitResult<T, E>(PhantomData<fn() -> (T, E)>);
    /// The fn returns a plain `T`.
    pub struct SplitValue<T>(PhantomData<fn() -> T>);

    impl<T, E> SplitResult<T, E> {
        #[must_use]
        pub fn ok(&self) -> Tag<T> {
            Tag::new()
        }
        #[must_use]
        pub fn err(&self) -> Tag<E> {
            Tag::new()
        }
        #[must_use]
        pub fn ops(&self, ok: OkOps<T>, err: ErrOps<E>) -> Ops<Result<T, E>, T, E> {
            Ops {
                split: |value| value,
                ok,
                err,
            }
        }
    }

    impl<T> SplitValue<T> {
        #[must_use]
        pub fn ok(&self) -> Tag<T> {
            Tag::new()
        }
        #[must_use]
        pub fn err(&self) -> Tag<Infallible> {
            Tag::new()
        }
        #[must_use]
        pub fn ops(&self, ok: OkOps<T>, err: ErrOps<Infallible>) -> Ops<T, T, Infallible> {
            Ops { split: Ok, ok, err }
        }
    }

    pub trait ResultReturn {
        type Kind;
        fn __return_kind(&self) -> Self::Kind;
    }
    impl<T, E> ResultReturn for Tag<Result<T, E>> {
        type Kind = SplitResult<T, E>;
        fn __return_kind(&self) -> Self::Kind {
            SplitResult(PhantomData)
        }
    }

    pub trait ValueReturn {
        type Kind;
        fn __return_kind(&self) -> Self::Kind;
    }
    impl<T> ValueReturn for &Tag<T> {
        type Kind = SplitValue<T>;
        fn __return_kind(&self) -> Self::Kind {
            SplitValue(PhantomData)
        }
    }

    /// A ready `CallToolResult` is the result.
    pub struct PassThrough;
    /// `()`: an empty successful result, no `outputSchema`.
    pub struct Unit;
    /// `T: Serialize + JsonSchema`: `structuredContent` plus a text copy.
    pub struct Structured<T>(PhantomData<fn() -> T>);

    impl PassThrough {
        #[must_use]
        pub fn ops(&self) -> OkOps<CallToolResult> {
            OkOps {
                schema: || None,
                ok: Ok,
            }
        }
    }

    impl Unit {
        #[must_use]
        pub fn ops(&self) -> OkOps<()> {
            OkOps {
                schema: || None,
                ok: |()| Ok(CallToolResult::success(Vec::new())),
            }
        }
    }

    impl<T> Structured<T> {
        #[must_use]
        pub fn ops(&self) -> OkOps<T>
        where
            T: Output + 'static,
        {
            OkOps {
                schema: || Some(output_schema::<T>().0),
                ok: structured::<T>,
            }
        }
    }

    fn structured<T: Output + 'static>(value: T) -> Outcome {
        let value = serde_json::to_value(value).map_err(|e| {
            Failure::Error(ErrorData::internal_error(
                format!("the tool's output does not serialize to JSON: {e}"),
                None,
            ))
        })?;
        // The text copy of a string is the string itself, not its JSON quoting.
        let text = match &value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let value = if wraps::<T>() {
            serde_json::json!({ "result": value })
        } else {
            value
        };
        let mut result = CallToolResult::structured(value);
        result.content = vec![ContentBlock::text(text)];
        Ok(result)
    }

    pub trait PassThroughOutput {
        fn __output_kind(&self) -> PassThrough;
    }
    impl PassThroughOutput for Tag<CallToolResult> {
        fn __output_kind(&self) -> PassThrough {
            PassThrough
        }
    }
    pub trait UnitOutput {
        fn __output_kind(&self) -> Unit;
    }
    impl UnitOutput for Tag<()> {
        fn __output_kind(&self) -> Unit {
            Unit
        }
    }
    pub trait StructuredOutput {
        type Kind;
        fn __output_kind(&self) -> Self::Kind;
    }
    impl<T> StructuredOutput for &Tag<T> {
        type Kind = Structured<T>;
        fn __output_kind(&self) -> Self::Kind {
            Structured(PhantomData)
        }
    }

    /// `ToolError`: its own outcome (`isError`, `failed` or `cancelled`).
    pub struct ToolErrorKind;
    /// `Failure` or `ErrorData`: the task ends `failed` (or `cancelled`).
    pub struct FailureKind<E>(PhantomData<fn() -> E>);
    /// `E: Display`: a result with `isError: true` and the text.
    pub struct MessageKind<E>(PhantomData<fn() -> E>);

    impl ToolErrorKind {
        #[must_use]
        pub fn ops(&self) -> ErrOps<ToolError> {
            ErrOps {
                err: ToolError::into_outcome,
            }
        }
    }

    impl<E: Into<Failure>> FailureKind<E> {
        #[must_use]
        pub fn ops(&self) -> ErrOps<E> {
            ErrOps {
                err: |error| Err(error.into()),
            }
        }
    }

    impl<E> MessageKind<E> {
        #[must_use]
        pub fn ops(&self) -> ErrOps<E>
        where
            E: ErrorMessage,
        {
            ErrOps {
                err: |error| {
                    Ok(CallToolResult::error(vec![ContentBlock::text(
                        error.to_string(),
                    )]))
                },
            }
        }
    }

    pub trait ToolErrorError {
        fn __error_kind(&self) -> ToolErrorKind;
    }
    impl ToolErrorError for Tag<ToolError> {
        fn __error_kind(&self) -> ToolErrorKind {
            ToolErrorKind
        }
    }
    pub trait FailureError {
        type Kind;
        fn __error_kind(&self) -> Self::Kind;
    }
    impl FailureError for Tag<Failure> {
        type Kind = FailureKind<Failure>;
        fn __error_kind(&self) -> Self::Kind {
            FailureKind(PhantomData)
        }
    }
    impl FailureError for Tag<ErrorData> {
        type Kind = FailureKind<ErrorData>;
        fn __error_kind(&self) -> Self::Kind {
            FailureKind(PhantomData)
        }
    }
    pub trait MessageError {
        type Kind;
        fn __error_kind(&self) -> Self::Kind;
    }
    impl<E> MessageError for &Tag<E> {
        type Kind = MessageKind<E>;
        fn __error_kind(&self) -> Self::Kind {
            MessageKind(PhantomData)
        }
    }
}

/// A `#[task_tool]` fn's generated struct: what `toolkit!` takes. Its wire name lets
/// `toolkit!` reject duplicates at compile time.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `#[task_tool]` fn",
    label = "`toolkit!` takes fns annotated with `#[task_tool]`",
    note = "register a hand-written `TaskTool` with `Toolkit::with_tool` on the toolkit this builds"
)]
pub trait NamedTool: crate::tool::TaskTool {
    /// The wire name.
    const NAME: &'static str;
}

#[doc(hidden)]
pub const fn assert_unique_names(names: &[&str]) {
    let mut i = 0;
    while i < names.len() {
        let mut j = i + 1;
        while j < names.len() {
            if str_eq(names[i], names[j]) {
                panic!(
                    "two tools in `toolkit!` share one wire name: give one of them another `name = \"..\"`"
                );
            }
            j += 1;
        }
        i += 1;
    }
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
