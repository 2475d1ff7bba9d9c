//! The model of one `#[task_tool]`: the attribute's arguments and the fn's parameters, every
//! value with the span it was written at. `attr.rs` builds it, `check.rs` checks it,
//! `expand.rs` generates from it.

use proc_macro2::Span;
use syn::{Ident, ItemFn, Pat, Type, ext::IdentExt};

/// A value and where it was written.
#[derive(Debug, Clone)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    pub fn new(value: T, span: Span) -> Self {
        Self { value, span }
    }
}

/// `ttl = ".."`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    After(u64),
    Unlimited,
}

/// `mode = ".."`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Required,
    Optional,
    Inline,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Required => "required",
            Self::Optional => "optional",
            Self::Inline => "inline",
        }
    }
}

/// `restart = ".."`: what a restarted server does with the tool's unfinished tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    Fail,
    Resume,
}

/// The arguments of `#[task_tool(...)]`.
#[derive(Default)]
pub struct ToolArgs {
    pub ttl: Option<Spanned<Ttl>>,
    pub poll_interval: Option<Spanned<u64>>,
    pub mode: Option<Spanned<Mode>>,
    pub inline_budget: Option<Spanned<u64>>,
    pub name: Option<Spanned<String>>,
    pub title: Option<Spanned<String>>,
    pub description: Option<Spanned<String>>,
    pub read_only: Option<Spanned<bool>>,
    pub destructive: Option<Spanned<bool>>,
    pub idempotent: Option<Spanned<bool>>,
    pub open_world: Option<Spanned<bool>>,
    pub restart: Option<Spanned<Restart>>,
    /// `park_after = ".."`: milliseconds, `None` for `"never"`.
    pub park_after: Option<Spanned<Option<u64>>>,
    pub version: Option<Spanned<String>>,
    /// `concurrency = N`: at most N of the tool's tasks run at once.
    pub concurrency: Option<Spanned<u32>>,
    /// `rate = "10/1m"`: at most this many starts (the count) in any window of this many
    /// milliseconds.
    pub rate: Option<Spanned<(u32, u64)>>,
    /// `key_concurrency = N`: at most N of the tool's tasks run at once for each value of
    /// `limit_key`.
    pub key_concurrency: Option<Spanned<u32>>,
    /// `key_rate = "10/1m"`: at most this many starts of the tool's tasks for each value of
    /// `limit_key` in any window of this many milliseconds.
    pub key_rate: Option<Spanned<(u32, u64)>>,
    /// `limit_key = ".."`: `"owner"`, or the name of an argument.
    pub limit_key: Option<Spanned<String>>,
    pub krate: Option<syn::Path>,
    /// Arguments that were written but whose value was reported as wrong: a check that
    /// depends on one skips it rather than assume the default.
    pub invalid: Vec<&'static str>,
    /// An entry whose key could not be read: any argument may be missing.
    pub unreadable: bool,
}

impl ToolArgs {
    /// Whether `key`'s value is unknown because of an error already reported.
    pub fn unknown(&self, key: &str) -> bool {
        self.unreadable || self.invalid.contains(&key)
    }
}

/// How a parameter is filled.
#[derive(Debug)]
pub enum ParamKind {
    /// No helper attribute: filled by its type (the call's context for `TaskContext` and
    /// `State<T>`, one argument otherwise), which only the compiler knows.
    ByType,
    /// `#[arg(...)]`: one property of the input schema.
    Argument(ArgAttr),
    /// `#[args]`: the whole argument object.
    Whole(Span),
}

/// `#[arg(...)]` on a parameter.
#[derive(Debug, Default)]
pub struct ArgAttr {
    pub rename: Option<Spanned<String>>,
    pub description: Option<Spanned<String>>,
    pub default: Option<Span>,
    /// `header = ".."`: the `x-mcp-header` annotation (the `Name` of `Mcp-Param-{Name}`),
    /// already checked to be an HTTP token.
    pub header: Option<Spanned<String>>,
}

/// A parameter of the tool fn.
pub struct Param {
    pub pat: Box<Pat>,
    pub ty: Box<Type>,
    pub kind: ParamKind,
    /// The name from the pattern (`r#` stripped), when it is a plain identifier.
    pub ident: Option<Ident>,
    /// Its helper attributes had a mistake (already reported): what the author meant is
    /// unclear, so rules that compare it with the other parameters skip it.
    pub doubtful: bool,
}

impl Param {
    /// The property name: `rename`, else the identifier.
    pub fn wire_name(&self) -> Option<String> {
        match &self.kind {
            ParamKind::Argument(ArgAttr {
                rename: Some(rename),
                ..
            }) => Some(rename.value.clone()),
            _ => self.ident.as_ref().map(|i| i.unraw().to_string()),
        }
    }

    /// Whether the property name comes from `#[arg(rename = "..")]`.
    pub fn renamed(&self) -> bool {
        matches!(
            &self.kind,
            ParamKind::Argument(ArgAttr {
                rename: Some(_),
                ..
            })
        )
    }
}

/// The annotated fn and what the macro needs of it.
pub struct Tool {
    pub args: ToolArgs,
    /// The user's fn with `#[arg]` and `#[args]` removed; emitted unchanged otherwise.
    pub item: ItemFn,
    pub params: Vec<Param>,
    /// The `self` parameter, if any (an error).
    pub receiver: Option<Span>,
    /// The doc comment, the default description.
    pub doc: Option<String>,
}

impl Tool {
    /// The property named by `limit_key` (a parameter's identifier or its wire name):
    /// its wire name; `None` when no parameter has it.
    pub fn key_property(&self, key: &str) -> Option<String> {
        self.params.iter().find_map(|param| {
            let wire = param.wire_name()?;
            let ident = param.ident.as_ref().map(|i| i.unraw().to_string());
            (wire == key || ident.as_deref() == Some(key)).then_some(wire)
        })
    }
}
