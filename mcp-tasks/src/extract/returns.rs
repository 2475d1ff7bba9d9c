//! The return type of a `#[task_tool]` fn: how the value it returned becomes the call's
//! outcome ([`ReturnOps`], chosen by the dispatch `extract.rs` describes), and the tool's
//! `outputSchema`. The [`OutputShape`] (the `outputSchema` and whether values are wrapped as
//! `{"result": value}`) is computed once per tool: the macro keeps it in a `OnceLock` of the
//! tool's own, filled when the toolkit reads the definition.

use std::{convert::Infallible, fmt::Display, marker::PhantomData};

use rmcp::model::{CallToolResult, ContentBlock, ErrorData, JsonObject};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::{Tag, params::generator};
use crate::{
    errors,
    tool::{Failure, ToolError, ToolFuture},
};

/// A type `#[task_tool]` returns as `structuredContent`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's output",
    label = "a tool's output must implement `serde::Serialize` and `schemars::JsonSchema`",
    note = "derive both: `#[derive(serde::Serialize, schemars::JsonSchema)]`, or return a ready `rmcp::model::CallToolResult`"
)]
pub trait Output: Serialize + JsonSchema {}

impl<T: Serialize + JsonSchema> Output for T {}

/// An error type `#[task_tool]` reports as a result with `isError: true`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's error",
    label = "a tool's error must implement `std::fmt::Display`",
    note = "implement `Display` (e.g. with `thiserror`), or return `mcp_tasks::ToolError`"
)]
pub trait ErrorMessage: Display {}

impl<T: Display> ErrorMessage for T {}

/// The work of a call that ends before it starts, with a JSON-RPC error.
#[must_use]
pub fn fail(error: ErrorData) -> ToolFuture {
    Box::pin(std::future::ready(Err(Failure::Error(error))))
}

/// Boxes the work of a call.
pub fn boxed(
    work: impl Future<Output = Result<CallToolResult, Failure>> + Send + 'static,
) -> ToolFuture {
    Box::pin(work)
}

/// Whether a value goes into `structuredContent` as it is, or as `{"result": value}`
/// (an `outputSchema` must describe an object).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wrapping {
    /// The value's schema is an object schema.
    Bare,
    /// Anything else: `{"result": value}`.
    Result,
}

/// A tool's output on the wire: its `outputSchema` (none for `()` and `CallToolResult`) and
/// how values are wrapped.
#[derive(Debug, Clone)]
pub struct OutputShape {
    schema: Option<JsonObject>,
    wrapping: Wrapping,
}

impl OutputShape {
    /// No `outputSchema`; nothing to wrap.
    #[must_use]
    pub fn none() -> Self {
        Self {
            schema: None,
            wrapping: Wrapping::Bare,
        }
    }

    /// The shape of `T`, from one schema generation.
    #[must_use]
    pub fn of<T: JsonSchema>() -> Self {
        let (schema, wrapping) = output_schema::<T>();
        Self {
            schema: Some(schema),
            wrapping,
        }
    }

    /// The `outputSchema`.
    #[must_use]
    pub fn schema(&self) -> Option<&JsonObject> {
        self.schema.as_ref()
    }

    /// How values are wrapped.
    #[must_use]
    pub fn wrapping(&self) -> Wrapping {
        self.wrapping
    }
}

/// The `outputSchema` of `T`, wrapped as `{"result": ..}` when `T`'s schema is not an object
/// schema.
fn output_schema<T: JsonSchema>() -> (JsonObject, Wrapping) {
    let mut schema = generator(true).into_root_schema_for::<T>();
    schema.remove("title");
    schema.remove("description");
    let Value::Object(mut object) = schema.to_value() else {
        unreachable!("a root schema is an object");
    };
    if object.get("type").and_then(Value::as_str) == Some("object") {
        return (object, Wrapping::Bare);
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
    (root, Wrapping::Result)
}

type Outcome = Result<CallToolResult, Failure>;

/// How the value a tool fn returned becomes its outcome, and its output's shape.
pub trait ReturnOps<R>: Copy + Send + Sync + 'static {
    /// The output's shape; the macro computes it once per tool.
    fn shape(&self) -> OutputShape;
    /// The outcome of `value`, wrapped as `shape` says.
    ///
    /// # Errors
    /// A JSON-RPC error or a cancellation: the task ends `failed` or `cancelled`.
    fn outcome(&self, wrapping: Wrapping, value: R) -> Outcome;
}

/// What to do with the `Ok` side.
pub struct OkOps<T> {
    shape: fn() -> OutputShape,
    ok: fn(T, Wrapping) -> Outcome,
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

copy_ops!(Ops<R, T, E>, OkOps<T>, ErrOps<E>);

impl<R: 'static, T: 'static, E: 'static> ReturnOps<R> for Ops<R, T, E> {
    fn shape(&self) -> OutputShape {
        (self.ok.shape)()
    }
    fn outcome(&self, wrapping: Wrapping, value: R) -> Outcome {
        match (self.split)(value) {
            Ok(value) => (self.ok.ok)(value, wrapping),
            Err(error) => (self.err.err)(error),
        }
    }
}

/// The fn returns `Result<T, E>`.
pub struct SplitResult<T, E>(PhantomData<fn() -> (T, E)>);
/// The fn returns a plain `T`.
pub struct SplitValue<T>(PhantomData<fn() -> T>);

impl<T, E> SplitResult<T, E> {
    /// The `Ok` type.
    #[must_use]
    pub fn ok(&self) -> Tag<T> {
        Tag::new()
    }
    /// The `Err` type.
    #[must_use]
    pub fn err(&self) -> Tag<E> {
        Tag::new()
    }
    /// The ops of the whole return type.
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
    /// The value's type.
    #[must_use]
    pub fn ok(&self) -> Tag<T> {
        Tag::new()
    }
    /// No error.
    #[must_use]
    pub fn err(&self) -> Tag<Infallible> {
        Tag::new()
    }
    /// The ops of the whole return type.
    #[must_use]
    pub fn ops(&self, ok: OkOps<T>, err: ErrOps<Infallible>) -> Ops<T, T, Infallible> {
        Ops { split: Ok, ok, err }
    }
}

/// `Result<T, E>`.
pub trait ResultReturn {
    /// The split.
    type Kind;
    /// The split of this return type.
    fn __return_kind(&self) -> Self::Kind;
}
impl<T, E> ResultReturn for Tag<Result<T, E>> {
    type Kind = SplitResult<T, E>;
    fn __return_kind(&self) -> Self::Kind {
        SplitResult(PhantomData)
    }
}

/// Any other type.
pub trait ValueReturn {
    /// The split.
    type Kind;
    /// The split of this return type.
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
    /// The ops.
    #[must_use]
    pub fn ops(&self) -> OkOps<CallToolResult> {
        OkOps {
            shape: OutputShape::none,
            ok: |result, _| Ok(result),
        }
    }
}

impl Unit {
    /// The ops.
    #[must_use]
    pub fn ops(&self) -> OkOps<()> {
        OkOps {
            shape: OutputShape::none,
            ok: |(), _| Ok(CallToolResult::success(Vec::new())),
        }
    }
}

impl<T> Structured<T> {
    /// The ops, checking `T: Output`.
    #[must_use]
    pub fn ops(&self) -> OkOps<T>
    where
        T: Output + 'static,
    {
        OkOps {
            shape: OutputShape::of::<T>,
            ok: structured::<T>,
        }
    }
}

fn structured<T: Output + 'static>(value: T, wrapping: Wrapping) -> Outcome {
    let value = serde_json::to_value(value)
        .map_err(|e| Failure::Error(errors::output_not_serializable(&e)))?;
    // The text copy of a string is the string itself, not its JSON quoting.
    let text = match &value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let value = match wrapping {
        Wrapping::Bare => value,
        Wrapping::Result => serde_json::json!({ "result": value }),
    };
    let mut result = CallToolResult::structured(value);
    result.content = vec![ContentBlock::text(text)];
    Ok(result)
}

/// `CallToolResult`.
pub trait PassThroughOutput {
    /// The kind.
    fn __output_kind(&self) -> PassThrough;
}
impl PassThroughOutput for Tag<CallToolResult> {
    fn __output_kind(&self) -> PassThrough {
        PassThrough
    }
}
/// `()`.
pub trait UnitOutput {
    /// The kind.
    fn __output_kind(&self) -> Unit;
}
impl UnitOutput for Tag<()> {
    fn __output_kind(&self) -> Unit {
        Unit
    }
}
/// Any other type.
pub trait StructuredOutput {
    /// The kind.
    type Kind;
    /// The kind of this output type.
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
    /// The ops.
    #[must_use]
    pub fn ops(&self) -> ErrOps<ToolError> {
        ErrOps {
            err: ToolError::into_outcome,
        }
    }
}

impl<E: Into<Failure>> FailureKind<E> {
    /// The ops.
    #[must_use]
    pub fn ops(&self) -> ErrOps<E> {
        ErrOps {
            err: |error| Err(error.into()),
        }
    }
}

impl<E> MessageKind<E> {
    /// The ops, checking `E: Display`.
    #[must_use]
    pub fn ops(&self) -> ErrOps<E>
    where
        E: ErrorMessage,
    {
        ErrOps {
            err: |error| ToolError::new(error.to_string()).into_outcome(),
        }
    }
}

/// `ToolError`.
pub trait ToolErrorError {
    /// The kind.
    fn __error_kind(&self) -> ToolErrorKind;
}
impl ToolErrorError for Tag<ToolError> {
    fn __error_kind(&self) -> ToolErrorKind {
        ToolErrorKind
    }
}
/// `Failure` and `ErrorData`.
pub trait FailureError {
    /// The kind.
    type Kind;
    /// The kind of this error type.
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
/// Any other type.
pub trait MessageError {
    /// The kind.
    type Kind;
    /// The kind of this error type.
    fn __error_kind(&self) -> Self::Kind;
}
impl<E> MessageError for &Tag<E> {
    type Kind = MessageKind<E>;
    fn __error_kind(&self) -> Self::Kind {
        MessageKind(PhantomData)
    }
}
