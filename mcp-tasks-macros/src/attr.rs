//! Parsing: the `#[task_tool(...)]` arguments and the fn it sits on, into a model whose
//! values keep their spans. Mistakes that need only one argument or one parameter to see are
//! reported here, all of them, combined; cross-field rules live in `check.rs`.

use proc_macro2::{Span, TokenStream};
use syn::{
    Attribute, Expr, ExprLit, FnArg, Ident, ItemFn, Lit, LitStr, Pat, Token, Type,
    ext::IdentExt,
    parse::{Parse, ParseStream, Parser},
    punctuated::Punctuated,
    spanned::Spanned as _,
};

use crate::duration;

/// A value and where it was written.
#[derive(Debug, Clone)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    fn new(value: T, span: Span) -> Self {
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
    pub version: Option<Spanned<String>>,
    pub krate: Option<syn::Path>,
}

/// What a restarted server does with the tool's unfinished tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    Fail,
    Resume,
}

const RESTARTS: [&str; 2] = ["fail", "resume"];

pub const TOOL_ARGS: [&str; 14] = [
    "ttl",
    "poll_interval",
    "mode",
    "inline_budget",
    "name",
    "title",
    "description",
    "read_only",
    "destructive",
    "idempotent",
    "open_world",
    "restart",
    "version",
    "crate",
];

const MODES: [&str; 3] = ["required", "optional", "inline"];

/// Collects errors so that one build reports every mistake.
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    pub fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub fn at(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    /// An error covering all of `tokens` (on stable, a `Span` cannot be joined otherwise).
    pub fn spanned(&mut self, tokens: impl quote::ToTokens, message: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    pub fn into_result(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

/// One `key` or `key = value` inside an attribute's parentheses.
struct Entry {
    key: Ident,
    value: Option<Expr>,
}

impl Parse for Entry {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let key = Ident::parse_any(input)?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Some(input.parse()?)
        } else {
            None
        };
        Ok(Self { key, value })
    }
}

fn entries(tokens: TokenStream) -> syn::Result<Punctuated<Entry, Token![,]>> {
    Punctuated::<Entry, Token![,]>::parse_terminated.parse2(tokens)
}

/// The closest candidate within a small edit distance, for "did you mean".
pub fn suggest<'a>(found: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (distance(found, c), *c))
        .filter(|(d, c)| *d <= (c.len().max(found.len()) / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(row[j]).min(row[j + 1])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

fn one_of(options: &[&str]) -> String {
    let quoted: Vec<String> = options.iter().map(|o| format!("`{o}`")).collect();
    quoted.join(", ")
}

fn unknown(what: &str, found: &str, options: &[&str]) -> String {
    match suggest(found, options) {
        Some(best) => format!(
            "unknown {what} `{found}`, did you mean `{best}`? expected one of {}",
            one_of(options)
        ),
        None => format!(
            "unknown {what} `{found}`, expected one of {}",
            one_of(options)
        ),
    }
}

fn string(key: &Ident, value: Option<&Expr>, example: &str) -> syn::Result<LitStr> {
    match value {
        Some(Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        })) => Ok(lit.clone()),
        Some(other) => Err(syn::Error::new(
            other.span(),
            format!("`{key}` takes a string literal, e.g. `{key} = {example}`"),
        )),
        None => Err(syn::Error::new(
            key.span(),
            format!("`{key}` needs a value, e.g. `{key} = {example}`"),
        )),
    }
}

fn flag(key: &Ident, value: Option<&Expr>) -> syn::Result<Spanned<bool>> {
    match value {
        None => Ok(Spanned::new(true, key.span())),
        Some(Expr::Lit(ExprLit {
            lit: Lit::Bool(lit),
            ..
        })) => Ok(Spanned::new(lit.value, lit.span)),
        Some(other) => Err(syn::Error::new(
            other.span(),
            format!("`{key}` takes `true` or `false`, e.g. `{key}` or `{key} = false`"),
        )),
    }
}

fn duration(key: &Ident, value: Option<&Expr>) -> syn::Result<Spanned<u64>> {
    let lit = string(key, value, "\"10s\"")?;
    duration::parse(&lit.value())
        .map(|ms| Spanned::new(ms, lit.span()))
        .map_err(|message| syn::Error::new(lit.span(), message))
}

/// Parses `#[task_tool(...)]`'s arguments, reporting every mistake at once.
pub fn parse_tool_args(tokens: TokenStream) -> syn::Result<ToolArgs> {
    let mut args = ToolArgs::default();
    let mut errors = Errors::default();
    let mut seen: Vec<String> = Vec::new();
    for Entry { key, value } in entries(tokens)? {
        let name = key.unraw().to_string();
        if !TOOL_ARGS.contains(&name.as_str()) {
            errors.at(
                key.span(),
                unknown("`task_tool` argument", &name, &TOOL_ARGS),
            );
            continue;
        }
        if seen.contains(&name) {
            errors.at(
                key.span(),
                format!("duplicate `task_tool` argument `{name}`: remove one of them"),
            );
            continue;
        }
        seen.push(name.clone());
        let value = value.as_ref();
        let parsed: syn::Result<()> = (|| {
            match name.as_str() {
                "ttl" => {
                    let lit = string(&key, value, "\"10m\"")?;
                    let ttl = if lit.value() == "unlimited" {
                        Ttl::Unlimited
                    } else {
                        let ms = duration::parse(&lit.value()).map_err(|m| {
                            syn::Error::new(
                                lit.span(),
                                format!("{m}; `ttl` also takes `\"unlimited\"` for tasks that never expire"),
                            )
                        })?;
                        Ttl::After(ms)
                    };
                    args.ttl = Some(Spanned::new(ttl, lit.span()));
                }
                "poll_interval" => args.poll_interval = Some(duration(&key, value)?),
                "inline_budget" => args.inline_budget = Some(duration(&key, value)?),
                "mode" => {
                    let lit = string(&key, value, "\"optional\"")?;
                    let mode = match lit.value().as_str() {
                        "required" => Mode::Required,
                        "optional" => Mode::Optional,
                        "inline" => Mode::Inline,
                        other => {
                            return Err(syn::Error::new(
                                lit.span(),
                                unknown("mode", other, &MODES),
                            ));
                        }
                    };
                    args.mode = Some(Spanned::new(mode, lit.span()));
                }
                "name" => {
                    let lit = string(&key, value, "\"my_tool\"")?;
                    if let Err(message) = check_tool_name(&lit.value()) {
                        return Err(syn::Error::new(lit.span(), message));
                    }
                    args.name = Some(Spanned::new(lit.value(), lit.span()));
                }
                "title" => {
                    let lit = string(&key, value, "\"My tool\"")?;
                    args.title = Some(Spanned::new(lit.value(), lit.span()));
                }
                "description" => {
                    let lit = string(&key, value, "\"What the tool does\"")?;
                    args.description = Some(Spanned::new(lit.value(), lit.span()));
                }
                "read_only" => args.read_only = Some(flag(&key, value)?),
                "destructive" => args.destructive = Some(flag(&key, value)?),
                "idempotent" => args.idempotent = Some(flag(&key, value)?),
                "open_world" => args.open_world = Some(flag(&key, value)?),
                "restart" => {
                    let lit = string(&key, value, "\"resume\"")?;
                    let restart = match lit.value().as_str() {
                        "fail" => Restart::Fail,
                        "resume" => Restart::Resume,
                        other => {
                            return Err(syn::Error::new(
                                lit.span(),
                                unknown("restart", other, &RESTARTS),
                            ));
                        }
                    };
                    args.restart = Some(Spanned::new(restart, lit.span()));
                }
                "version" => {
                    let lit = string(&key, value, "\"2\"")?;
                    if lit.value().is_empty() {
                        return Err(syn::Error::new(
                            lit.span(),
                            "`version` must not be empty; leave it out to use the crate's version",
                        ));
                    }
                    args.version = Some(Spanned::new(lit.value(), lit.span()));
                }
                "crate" => {
                    let lit = string(&key, value, "\"my_reexport::mcp_tasks\"")?;
                    args.krate = Some(lit.parse::<syn::Path>().map_err(|_| {
                        syn::Error::new(
                            lit.span(),
                            format!("`crate` takes a path, e.g. `crate = \"my_reexport::mcp_tasks\"`, found `{}`", lit.value()),
                        )
                    })?);
                }
                _ => unreachable!("every name of TOOL_ARGS is handled"),
            }
            Ok(())
        })();
        if let Err(error) = parsed {
            errors.push(error);
        }
    }
    errors.into_result().map(|()| args)
}

/// MCP tool names: 1 to 128 of `A-Z a-z 0-9 _ - .`.
pub fn check_tool_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "invalid tool name `{name}`: use 1 to 128 characters of `A-Z`, `a-z`, `0-9`, `_`, `-`, `.`"
        ))
    }
}

/// How a parameter is filled.
#[derive(Debug)]
pub enum ParamKind {
    /// `TaskContext` (a type whose last path segment is `TaskContext`).
    Context,
    /// `State<T>` (a type whose last path segment is `State`).
    State,
    /// One property of the input schema.
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
}

const ARG_ARGS: [&str; 3] = ["rename", "description", "default"];

/// A parameter of the tool fn.
pub struct Param {
    pub pat: Box<Pat>,
    pub ty: Box<Type>,
    pub kind: ParamKind,
    /// The name from the pattern (`r#` stripped), when it is a plain identifier.
    pub ident: Option<Ident>,
    /// `&TaskContext` or `&State<T>`: a reference where a value is needed.
    pub by_ref: bool,
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
}

/// The annotated fn and what the macro needs of it.
pub struct Tool {
    pub args: ToolArgs,
    /// The user's fn with `#[arg]` and `#[args]` removed; emitted unchanged otherwise.
    pub item: ItemFn,
    pub params: Vec<Param>,
    pub receiver: Option<Span>,
    /// The doc comment, joined.
    pub doc: Option<String>,
}

/// Removes `#[arg]` / `#[args]` from the parameters of `item`, so that the fn can be emitted
/// even when the rest of the input is wrong.
pub fn strip_helpers(item: &mut ItemFn) -> Vec<Vec<Attribute>> {
    item.sig
        .inputs
        .iter_mut()
        .map(|input| match input {
            FnArg::Typed(typed) => {
                let (ours, theirs) = std::mem::take(&mut typed.attrs)
                    .into_iter()
                    .partition(|a| a.path().is_ident("arg") || a.path().is_ident("args"));
                typed.attrs = theirs;
                ours
            }
            FnArg::Receiver(receiver) => {
                let (ours, theirs) = std::mem::take(&mut receiver.attrs)
                    .into_iter()
                    .partition(|a| a.path().is_ident("arg") || a.path().is_ident("args"));
                receiver.attrs = theirs;
                ours
            }
        })
        .collect()
}

/// The last path segment of `ty`, if it is a path type.
fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(path) if path.qself.is_none() => path.path.segments.last(),
        Type::Group(group) => last_segment(&group.elem),
        Type::Paren(paren) => last_segment(&paren.elem),
        _ => None,
    }
}

fn extractor(ty: &Type) -> Option<ParamKind> {
    let segment = last_segment(ty)?;
    if segment.ident == "TaskContext" {
        Some(ParamKind::Context)
    } else if segment.ident == "State" {
        Some(ParamKind::State)
    } else {
        None
    }
}

fn parse_arg_attr(attr: &Attribute, errors: &mut Errors) -> ArgAttr {
    let mut out = ArgAttr::default();
    let tokens = match &attr.meta {
        syn::Meta::List(list) => list.tokens.clone(),
        _ => {
            errors.spanned(
                attr,
                "`#[arg]` takes arguments, e.g. `#[arg(description = \"..\", rename = \"..\", default)]`",
            );
            return out;
        }
    };
    let list = match entries(tokens) {
        Ok(list) => list,
        Err(error) => {
            errors.push(error);
            return out;
        }
    };
    let mut seen: Vec<String> = Vec::new();
    for Entry { key, value } in list {
        let name = key.unraw().to_string();
        if !ARG_ARGS.contains(&name.as_str()) {
            errors.at(key.span(), unknown("`arg` argument", &name, &ARG_ARGS));
            continue;
        }
        if seen.contains(&name) {
            errors.at(
                key.span(),
                format!("duplicate `arg` argument `{name}`: remove one of them"),
            );
            continue;
        }
        seen.push(name.clone());
        let result = match name.as_str() {
            "rename" => string(&key, value.as_ref(), "\"wireName\"").and_then(|lit| {
                check_property_name(&lit)?;
                out.rename = Some(Spanned::new(lit.value(), lit.span()));
                Ok(())
            }),
            "description" => {
                string(&key, value.as_ref(), "\"what the argument means\"").map(|lit| {
                    out.description = Some(Spanned::new(lit.value(), lit.span()));
                })
            }
            "default" => match value {
                None => {
                    out.default = Some(key.span());
                    Ok(())
                }
                Some(value) => Err(syn::Error::new(
                    value.span(),
                    "`default` takes no value: it uses `Default::default()`; write `#[arg(default)]`",
                )),
            },
            _ => unreachable!("every name of ARG_ARGS is handled"),
        };
        if let Err(error) = result {
            errors.push(error);
        }
    }
    out
}

fn check_property_name(lit: &LitStr) -> syn::Result<()> {
    if lit.value().is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            "`rename` needs a non-empty name",
        ));
    }
    Ok(())
}

/// The doc comment of `attrs`, one line per `///` line, common indentation of one space
/// removed, blank edges trimmed.
pub fn doc_comment(attrs: &[Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .flat_map(|s| s.split('\n').map(str::to_owned).collect::<Vec<_>>())
        .map(|line| line.strip_prefix(' ').map(str::to_owned).unwrap_or(line))
        .collect();
    let text = lines.join("\n").trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// Parses the attribute and the fn into a [`Tool`]. The fn is always returned (with the
/// helper attributes removed) so that it can be emitted next to the errors.
pub fn parse_tool(args: TokenStream, mut item: ItemFn) -> (ItemFn, syn::Result<Tool>) {
    let helper_attrs = strip_helpers(&mut item);
    let mut errors = Errors::default();
    let args = match parse_tool_args(args) {
        Ok(args) => args,
        Err(error) => {
            errors.push(error);
            ToolArgs::default()
        }
    };
    let mut params = Vec::new();
    let mut receiver = None;
    for (input, attrs) in item.sig.inputs.iter().zip(helper_attrs) {
        let typed = match input {
            FnArg::Receiver(r) => {
                receiver = Some(r.span());
                continue;
            }
            FnArg::Typed(typed) => typed,
        };
        let mut kind = None;
        let mut by_ref = false;
        let (ty_for_kind, is_ref) = match &*typed.ty {
            Type::Reference(r) => (&*r.elem, true),
            other => (other, false),
        };
        if let Some(extracted) = extractor(ty_for_kind) {
            by_ref = is_ref;
            kind = Some(extracted);
        }
        for attr in &attrs {
            if let Some(ParamKind::Context | ParamKind::State) = kind {
                errors.spanned(
                    attr,
                    "`TaskContext` and `State<T>` parameters are filled from the call's context, \
                     not from its arguments: remove this attribute",
                );
                continue;
            }
            let attr_kind = if attr.path().is_ident("args") {
                if !matches!(attr.meta, syn::Meta::Path(_)) {
                    errors.spanned(attr, "`#[args]` takes no arguments");
                }
                ParamKind::Whole(attr.path().span())
            } else {
                ParamKind::Argument(parse_arg_attr(attr, &mut errors))
            };
            match kind {
                Some(_) => errors.spanned(
                    attr,
                    "a parameter takes one `#[arg(...)]` or `#[args]`: merge or remove this one",
                ),
                None => kind = Some(attr_kind),
            }
        }
        let ident = match &*typed.pat {
            Pat::Ident(pat) if pat.subpat.is_none() => Some(pat.ident.clone()),
            _ => None,
        };
        params.push(Param {
            pat: typed.pat.clone(),
            ty: typed.ty.clone(),
            kind: kind.unwrap_or_else(|| ParamKind::Argument(ArgAttr::default())),
            ident,
            by_ref,
        });
    }
    let doc = doc_comment(&item.attrs);
    let result = errors.into_result().map(|()| Tool {
        args,
        item: item.clone(),
        params,
        receiver,
        doc,
    });
    (item, result)
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    fn errors_of(tokens: TokenStream) -> Vec<String> {
        parse_tool_args(tokens)
            .err()
            .expect("an error")
            .into_iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn parses_every_argument() {
        let args = parse_tool_args(quote! {
            ttl = "10m", poll_interval = "1s500ms", mode = "optional", inline_budget = "250ms",
            name = "deep.research", title = "Deep research", description = "Researches.",
            read_only, destructive = false, idempotent = true, open_world,
            crate = "my_reexport::mcp_tasks"
        })
        .unwrap();
        assert_eq!(args.ttl.unwrap().value, Ttl::After(600_000));
        assert_eq!(args.poll_interval.unwrap().value, 1_500);
        assert_eq!(args.mode.unwrap().value, Mode::Optional);
        assert_eq!(args.inline_budget.unwrap().value, 250);
        assert_eq!(args.name.unwrap().value, "deep.research");
        assert_eq!(args.title.unwrap().value, "Deep research");
        assert_eq!(args.description.unwrap().value, "Researches.");
        assert!(args.read_only.unwrap().value);
        assert!(!args.destructive.unwrap().value);
        assert!(args.idempotent.unwrap().value);
        assert!(args.open_world.unwrap().value);
        let krate = args.krate.unwrap();
        assert_eq!(quote!(#krate).to_string(), "my_reexport :: mcp_tasks");
    }

    #[test]
    fn empty_arguments_are_all_defaults() {
        let args = parse_tool_args(quote! {}).unwrap();
        assert!(args.ttl.is_none() && args.mode.is_none() && args.krate.is_none());
    }

    #[test]
    fn ttl_unlimited() {
        let args = parse_tool_args(quote! { ttl = "unlimited" }).unwrap();
        assert_eq!(args.ttl.unwrap().value, Ttl::Unlimited);
    }

    #[test]
    fn unknown_argument_suggests_the_closest() {
        assert_eq!(
            errors_of(quote! { tll = "10m" }),
            [
                "unknown `task_tool` argument `tll`, did you mean `ttl`? expected one of `ttl`, \
              `poll_interval`, `mode`, `inline_budget`, `name`, `title`, `description`, \
              `read_only`, `destructive`, `idempotent`, `open_world`, `restart`, `version`, \
              `crate`"
            ]
        );
        assert!(errors_of(quote! { readonly })[0].contains("did you mean `read_only`?"));
        assert!(!errors_of(quote! { zzzzzz = 1 })[0].contains("did you mean"));
    }

    #[test]
    fn restart_and_version() {
        let args = parse_tool_args(quote! { restart = "resume", version = "2.1" }).expect("valid");
        assert_eq!(args.restart.unwrap().value, Restart::Resume);
        assert_eq!(args.version.unwrap().value, "2.1");
        assert_eq!(
            errors_of(quote! { restart = "retry" }),
            ["unknown restart `retry`, expected one of `fail`, `resume`"]
        );
        assert_eq!(
            errors_of(quote! { version = "" }),
            ["`version` must not be empty; leave it out to use the crate's version"]
        );
    }

    #[test]
    fn duplicate_argument() {
        assert_eq!(
            errors_of(quote! { ttl = "1m", ttl = "2m" }),
            ["duplicate `task_tool` argument `ttl`: remove one of them"]
        );
    }

    #[test]
    fn every_error_is_reported() {
        assert_eq!(
            errors_of(quote! { ttl = "10 m", mode = "requried", poll = "1s" }),
            [
                "invalid duration `10 m`: remove the whitespace, e.g. `\"10m\"`; `ttl` also takes \
                 `\"unlimited\"` for tasks that never expire",
                "unknown mode `requried`, did you mean `required`? expected one of `required`, \
                 `optional`, `inline`",
                "unknown `task_tool` argument `poll`, expected one of `ttl`, `poll_interval`, \
                 `mode`, `inline_budget`, `name`, `title`, `description`, `read_only`, \
                 `destructive`, `idempotent`, `open_world`, `restart`, `version`, `crate`",
            ]
        );
    }

    #[test]
    fn wrong_value_kinds() {
        assert_eq!(
            errors_of(quote! { ttl = 10 }),
            ["`ttl` takes a string literal, e.g. `ttl = \"10m\"`"]
        );
        assert_eq!(
            errors_of(quote! { mode }),
            ["`mode` needs a value, e.g. `mode = \"optional\"`"]
        );
        assert_eq!(
            errors_of(quote! { read_only = "yes" }),
            ["`read_only` takes `true` or `false`, e.g. `read_only` or `read_only = false`"]
        );
        assert!(
            errors_of(quote! { name = "has space" })[0]
                .starts_with("invalid tool name `has space`")
        );
        assert!(errors_of(quote! { crate = "not a path" })[0].starts_with("`crate` takes a path"));
        assert!(errors_of(quote! { poll_interval = "0s" })[0].contains("must be longer than zero"));
    }

    #[test]
    fn parses_parameters() {
        let item: ItemFn = syn::parse_quote! {
            /// Adds.
            ///
            /// Second paragraph.
            async fn add(
                ctx: mcp_tasks::TaskContext,
                State(db): State<Db>,
                #[arg(description = "left", rename = "lhs")] a: u32,
                #[arg(default)] b: Option<u32>,
                r#type: String,
            ) -> u32 { a }
        };
        let (emitted, tool) = parse_tool(quote! {}, item);
        let tool = tool.unwrap();
        assert_eq!(tool.doc.as_deref(), Some("Adds.\n\nSecond paragraph."));
        assert!(matches!(tool.params[0].kind, ParamKind::Context));
        assert!(matches!(tool.params[1].kind, ParamKind::State));
        assert_eq!(tool.params[2].wire_name().as_deref(), Some("lhs"));
        let ParamKind::Argument(arg) = &tool.params[2].kind else {
            panic!("an argument")
        };
        assert_eq!(arg.description.as_ref().unwrap().value, "left");
        let ParamKind::Argument(arg) = &tool.params[3].kind else {
            panic!("an argument")
        };
        assert!(arg.default.is_some());
        assert_eq!(tool.params[4].wire_name().as_deref(), Some("type"));
        // The helper attributes are gone from the emitted fn, nothing else changed.
        let expected: ItemFn = syn::parse_quote! {
            /// Adds.
            ///
            /// Second paragraph.
            async fn add(
                ctx: mcp_tasks::TaskContext,
                State(db): State<Db>,
                a: u32,
                b: Option<u32>,
                r#type: String,
            ) -> u32 { a }
        };
        assert_eq!(quote!(#emitted).to_string(), quote!(#expected).to_string());
    }

    #[test]
    fn parameter_attribute_errors() {
        let item: ItemFn = syn::parse_quote! {
            async fn f(
                #[arg(descripton = "x")] a: u32,
                #[arg] ctx: TaskContext,
                #[arg(default = 3)] c: u32,
            ) {}
        };
        let messages: Vec<String> = parse_tool(quote! {}, item)
            .1
            .err()
            .unwrap()
            .into_iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            messages,
            [
                "unknown `arg` argument `descripton`, did you mean `description`? expected one of \
                 `rename`, `description`, `default`",
                "`TaskContext` and `State<T>` parameters are filled from the call's context, not \
                 from its arguments: remove this attribute",
                "`default` takes no value: it uses `Default::default()`; write `#[arg(default)]`",
            ]
        );
    }
}
