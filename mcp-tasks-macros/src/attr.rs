//! Parsing: the `#[task_tool(...)]` arguments, the `#[arg]`/`#[args]` helper attributes and
//! the fn they sit on, into the [model](crate::model). Every mistake goes to the
//! [`Sink`](crate::sink::Sink) and parsing goes on: the model is always built, so the checks
//! of `check.rs` run in the same build as a parse error. Cross-field rules live there.

use proc_macro2::{TokenStream, TokenTree};
use syn::{
    Attribute, Expr, ExprLit, FnArg, Ident, ItemFn, Lit, LitStr, Pat, Token,
    ext::IdentExt,
    parse::{ParseStream, Parser},
    spanned::Spanned as _,
};

use crate::{
    duration,
    model::{ArgAttr, Mode, Param, ParamKind, Restart, Spanned, Tool, ToolArgs, Ttl},
    sink::Sink,
    suggest::unknown,
};

pub const TOOL_ARGS: [&str; 20] = [
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
    "park_after",
    "version",
    "concurrency",
    "rate",
    "key_concurrency",
    "key_rate",
    "limit_key",
    "crate",
];

const MODES: [&str; 3] = ["required", "optional", "inline"];
const RESTARTS: [&str; 2] = ["fail", "resume"];
const ARG_ARGS: [&str; 4] = ["rename", "description", "default", "header"];

/// One `key` or `key = value` inside an attribute's parentheses.
struct Entry {
    key: Ident,
    value: Option<Expr>,
}

/// The entries of an attribute's parentheses. A malformed entry is reported and skipped up
/// to the next top-level comma, so the entries after it are still read; the keys whose value
/// did not parse are returned too. `Err` only when a key itself could not be read.
fn entries(tokens: TokenStream, sink: &Sink) -> (Vec<Entry>, Vec<Ident>, bool) {
    let parser = |input: ParseStream<'_>| {
        let mut entries = Vec::new();
        let mut broken = Vec::new();
        let mut unreadable = false;
        while !input.is_empty() {
            let entry = (|| {
                let key = Ident::parse_any(input).map_err(|e| (None, e))?;
                let value = if input.peek(Token![=]) {
                    input
                        .parse::<Token![=]>()
                        .map_err(|e| (Some(key.clone()), e))?;
                    Some(input.parse::<Expr>().map_err(|e| (Some(key.clone()), e))?)
                } else {
                    None
                };
                if !input.is_empty() && !input.peek(Token![,]) {
                    let error = input.error("expected `,` between arguments");
                    return Err((Some(key), error));
                }
                Ok(Entry { key, value })
            })();
            match entry {
                Ok(entry) => entries.push(entry),
                Err((key, error)) => {
                    sink.push(error);
                    match key {
                        Some(key) => broken.push(key),
                        None => unreadable = true,
                    }
                    while !input.is_empty() && !input.peek(Token![,]) {
                        input.parse::<TokenTree>()?;
                    }
                }
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok((entries, broken, unreadable))
    };
    match parser.parse2(tokens) {
        Ok(parsed) => parsed,
        Err(error) => {
            sink.push(error);
            (Vec::new(), Vec::new(), true)
        }
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

/// A rate, `"<count>/<duration>"` (e.g. `"10/1m"`): the count and the window in
/// milliseconds. The messages are the runtime's (`mcp_tasks::rate::Rate::parse`).
fn rate(text: &str) -> Result<(u32, u64), String> {
    let Some((count, per)) = text.split_once('/') else {
        return Err(format!(
            "invalid rate `{text}`: write a count, a slash and a window, e.g. `\"10/1m\"` \
             (at most 10 starts in any minute)"
        ));
    };
    let count = match count.parse::<u32>() {
        Ok(n) if n > 0 => n,
        _ => {
            return Err(format!(
                "invalid rate `{text}`: the count before the slash must be a whole number \
                 above zero, e.g. `\"10/1m\"`"
            ));
        }
    };
    let ms = duration::parse(per).map_err(|e| format!("invalid rate `{text}`: {e}"))?;
    Ok((count, ms))
}

/// A count above zero that fits in a `u32`, e.g. `concurrency = 3`.
fn count(key: &Ident, value: Option<&Expr>) -> syn::Result<Spanned<u32>> {
    let wrong = |span| {
        syn::Error::new(
            span,
            format!("`{key}` takes a whole number above zero, e.g. `{key} = 3`"),
        )
    };
    match value {
        Some(Expr::Lit(ExprLit {
            lit: Lit::Int(lit), ..
        })) => match lit.base10_parse::<u32>() {
            Ok(n) if n > 0 => Ok(Spanned::new(n, lit.span())),
            _ => Err(wrong(lit.span())),
        },
        Some(other) => Err(wrong(other.span())),
        None => Err(syn::Error::new(
            key.span(),
            format!("`{key}` needs a value, e.g. `{key} = 3`"),
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

/// Parses `#[task_tool(...)]`'s arguments into the model, every mistake into `sink`.
pub fn parse_tool_args(tokens: TokenStream, sink: &Sink) -> ToolArgs {
    let mut args = ToolArgs::default();
    let (entries, broken, unreadable) = entries(tokens, sink);
    args.unreadable = unreadable;
    for key in broken {
        let name = key.unraw().to_string();
        if let Some(known) = TOOL_ARGS.iter().find(|k| **k == name) {
            args.invalid.push(known);
        }
    }
    let mut seen: Vec<String> = Vec::new();
    for Entry { key, value } in entries {
        let name = key.unraw().to_string();
        let Some(&known) = TOOL_ARGS.iter().find(|k| **k == name) else {
            sink.at(
                key.span(),
                unknown("`task_tool` argument", &name, &TOOL_ARGS),
            );
            continue;
        };
        if seen.contains(&name) {
            sink.at(
                key.span(),
                format!("duplicate `task_tool` argument `{name}`: remove one of them"),
            );
            continue;
        }
        seen.push(name);
        if let Err(error) = tool_arg(&mut args, known, &key, value.as_ref()) {
            sink.push(error);
            args.invalid.push(known);
        }
    }
    args
}

/// Reads one argument of `#[task_tool(...)]` into `args`.
fn tool_arg(args: &mut ToolArgs, name: &str, key: &Ident, value: Option<&Expr>) -> syn::Result<()> {
    match name {
        "ttl" => {
            let lit = string(key, value, "\"10m\"")?;
            let ttl = if lit.value() == "unlimited" {
                Ttl::Unlimited
            } else {
                let ms = duration::parse(&lit.value()).map_err(|m| {
                    syn::Error::new(
                        lit.span(),
                        format!(
                            "{m}; `ttl` also takes `\"unlimited\"` for tasks that never expire"
                        ),
                    )
                })?;
                Ttl::After(ms)
            };
            args.ttl = Some(Spanned::new(ttl, lit.span()));
        }
        "poll_interval" => args.poll_interval = Some(duration(key, value)?),
        "inline_budget" => args.inline_budget = Some(duration(key, value)?),
        "park_after" => {
            let lit = string(key, value, "\"30s\"")?;
            let after = if lit.value() == "never" {
                None
            } else {
                Some(duration::parse(&lit.value()).map_err(|m| {
                    syn::Error::new(
                        lit.span(),
                        format!(
                            "{m}; `park_after` also takes `\"never\"` for tasks that keep \
                             waiting in memory"
                        ),
                    )
                })?)
            };
            args.park_after = Some(Spanned::new(after, lit.span()));
        }
        "mode" => {
            let lit = string(key, value, "\"optional\"")?;
            let mode = match lit.value().as_str() {
                "required" => Mode::Required,
                "optional" => Mode::Optional,
                "inline" => Mode::Inline,
                other => {
                    return Err(syn::Error::new(lit.span(), unknown("mode", other, &MODES)));
                }
            };
            args.mode = Some(Spanned::new(mode, lit.span()));
        }
        "name" => {
            let lit = string(key, value, "\"my_tool\"")?;
            if let Err(message) = check_tool_name(&lit.value()) {
                return Err(syn::Error::new(lit.span(), message));
            }
            args.name = Some(Spanned::new(lit.value(), lit.span()));
        }
        "title" => {
            let lit = string(key, value, "\"My tool\"")?;
            args.title = Some(Spanned::new(lit.value(), lit.span()));
        }
        "description" => {
            let lit = string(key, value, "\"What the tool does\"")?;
            args.description = Some(Spanned::new(lit.value(), lit.span()));
        }
        "read_only" => args.read_only = Some(flag(key, value)?),
        "destructive" => args.destructive = Some(flag(key, value)?),
        "idempotent" => args.idempotent = Some(flag(key, value)?),
        "open_world" => args.open_world = Some(flag(key, value)?),
        "restart" => {
            let lit = string(key, value, "\"resume\"")?;
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
        "concurrency" => args.concurrency = Some(count(key, value)?),
        "key_concurrency" => args.key_concurrency = Some(count(key, value)?),
        "limit_key" => {
            let lit = string(key, value, "\"workspace_id\"")?;
            if lit.value().is_empty() {
                return Err(syn::Error::new(
                    lit.span(),
                    "`limit_key` must not be empty: write `\"owner\"` or the name of one of \
                     the function's arguments",
                ));
            }
            args.limit_key = Some(Spanned::new(lit.value(), lit.span()));
        }
        "rate" | "key_rate" => {
            let lit = string(key, value, "\"10/1m\"")?;
            let rate = rate(&lit.value()).map_err(|m| syn::Error::new(lit.span(), m))?;
            let rate = Some(Spanned::new(rate, lit.span()));
            if key == "rate" {
                args.rate = rate;
            } else {
                args.key_rate = rate;
            }
        }
        "version" => {
            let lit = string(key, value, "\"2\"")?;
            if lit.value().is_empty() {
                return Err(syn::Error::new(
                    lit.span(),
                    "`version` must not be empty; leave it out to use a digest of the tool's definition",
                ));
            }
            args.version = Some(Spanned::new(lit.value(), lit.span()));
        }
        "crate" => {
            let lit = string(key, value, "\"my_reexport::mcp_tasks\"")?;
            args.krate = Some(lit.parse::<syn::Path>().map_err(|_| {
                syn::Error::new(
                    lit.span(),
                    format!(
                        "`crate` takes a path, e.g. `crate = \"my_reexport::mcp_tasks\"`, found `{}`",
                        lit.value()
                    ),
                )
            })?);
        }
        _ => unreachable!("every name of TOOL_ARGS is handled"),
    }
    Ok(())
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

fn parse_arg_attr(attr: &Attribute, sink: &Sink) -> ArgAttr {
    let mut out = ArgAttr::default();
    let tokens = match &attr.meta {
        syn::Meta::List(list) => list.tokens.clone(),
        _ => {
            sink.spanned(
                attr,
                "`#[arg]` takes arguments, e.g. `#[arg(description = \"..\", rename = \"..\", default, header = \"..\")]`",
            );
            return out;
        }
    };
    let (list, _, _) = entries(tokens, sink);
    let mut seen: Vec<String> = Vec::new();
    for Entry { key, value } in list {
        let name = key.unraw().to_string();
        if !ARG_ARGS.contains(&name.as_str()) {
            sink.at(key.span(), unknown("`arg` argument", &name, &ARG_ARGS));
            continue;
        }
        if seen.contains(&name) {
            sink.at(
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
            "header" => string(&key, value.as_ref(), "\"Region\"").and_then(|lit| {
                check_header_name(&lit)?;
                out.header = Some(Spanned::new(lit.value(), lit.span()));
                Ok(())
            }),
            _ => unreachable!("every name of ARG_ARGS is handled"),
        };
        if let Err(error) = result {
            sink.push(error);
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

/// RFC 9110 token characters (`tchar`): what the `Name` of `Mcp-Param-{Name}` may hold.
fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// `header = ".."` names the header `Mcp-Param-{Name}`: `Name` must be a non-empty HTTP
/// token.
// docs/protocol.md C35.
fn check_header_name(lit: &LitStr) -> syn::Result<()> {
    let name = lit.value();
    if name.is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            "`header` needs a non-empty name, e.g. `header = \"Region\"` for the header \
             `Mcp-Param-Region`",
        ));
    }
    if name
        .get(..10)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case("mcp-param-"))
    {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "write the header name without its `Mcp-Param-` prefix: `header = \"{}\"` is sent \
                 as `{name}`",
                &name[10..]
            ),
        ));
    }
    if let Some(bad) = name.chars().find(|c| !is_tchar(*c)) {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "invalid header name `{name}`: {bad:?} cannot be part of an HTTP header name; use \
                 ASCII letters, digits and ! # $ % & ' * + - . ^ _ ` | ~, e.g. `header = \"Region\"`"
            ),
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

/// Parses the attribute and the fn into a [`Tool`], every mistake into `sink`. The model is
/// always built (with the helper attributes removed from the fn, so that it can be emitted
/// next to the errors), whatever was wrong.
pub fn parse_tool(args: TokenStream, mut item: ItemFn, sink: &Sink) -> Tool {
    let helper_attrs = strip_helpers(&mut item);
    let args = parse_tool_args(args, sink);
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
        let before = sink.len();
        for attr in &attrs {
            let attr_kind = if attr.path().is_ident("args") {
                if !matches!(attr.meta, syn::Meta::Path(_)) {
                    sink.spanned(attr, "`#[args]` takes no arguments");
                }
                ParamKind::Whole(attr.path().span())
            } else {
                ParamKind::Argument(parse_arg_attr(attr, sink))
            };
            match kind {
                Some(_) => sink.spanned(
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
            kind: kind.unwrap_or(ParamKind::ByType),
            ident,
            doubtful: sink.len() > before,
        });
    }
    let doc = doc_comment(&item.attrs);
    Tool {
        args,
        item,
        params,
        receiver,
        doc,
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    #[test]
    fn the_shared_table_of_rate_cases() {
        check_rate_table(rate);
    }

    include!("../../tests/support/case_table.rs");
    include!("../../tests/support/rate_table.rs");

    fn messages(result: syn::Result<()>) -> Vec<String> {
        result
            .err()
            .into_iter()
            .flatten()
            .map(|e| e.to_string())
            .collect()
    }

    fn parse_args(tokens: TokenStream) -> (ToolArgs, Vec<String>) {
        let sink = Sink::new();
        let args = parse_tool_args(tokens, &sink);
        (args, messages(sink.finish()))
    }

    /// Arguments that must parse without an error.
    fn valid(tokens: TokenStream) -> ToolArgs {
        let (args, errors) = parse_args(tokens);
        assert_eq!(errors, Vec::<String>::new());
        args
    }

    fn errors_of(tokens: TokenStream) -> Vec<String> {
        let errors = parse_args(tokens).1;
        assert!(!errors.is_empty(), "expected an error");
        errors
    }

    fn parse_fn(item: ItemFn) -> (Tool, Vec<String>) {
        let sink = Sink::new();
        let tool = parse_tool(TokenStream::new(), item, &sink);
        (tool, messages(sink.finish()))
    }

    #[test]
    fn parses_every_argument() {
        let args = valid(quote! {
            ttl = "10m", poll_interval = "1s500ms", mode = "optional", inline_budget = "250ms",
            name = "deep.research", title = "Deep research", description = "Researches.",
            read_only, destructive = false, idempotent = true, open_world,
            crate = "my_reexport::mcp_tasks"
        });
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
        let args = valid(quote! {});
        assert!(args.ttl.is_none() && args.mode.is_none() && args.krate.is_none());
    }

    #[test]
    fn ttl_unlimited() {
        let args = valid(quote! { ttl = "unlimited" });
        assert_eq!(args.ttl.unwrap().value, Ttl::Unlimited);
    }

    #[test]
    fn unknown_argument_suggests_the_closest() {
        assert_eq!(
            errors_of(quote! { tll = "10m" }),
            [
                "unknown `task_tool` argument `tll`, did you mean `ttl`? expected one of `ttl`, \
              `poll_interval`, `mode`, `inline_budget`, `name`, `title`, `description`, \
              `read_only`, `destructive`, `idempotent`, `open_world`, `restart`, `park_after`, `version`, `concurrency`, `rate`, \
              `key_concurrency`, `key_rate`, `limit_key`, `crate`"
            ]
        );
        assert!(errors_of(quote! { readonly })[0].contains("did you mean `read_only`?"));
        assert!(!errors_of(quote! { zzzzzz = 1 })[0].contains("did you mean"));
    }

    #[test]
    fn restart_and_version() {
        let args = valid(quote! { restart = "resume", version = "2.1" });
        assert_eq!(args.restart.unwrap().value, Restart::Resume);
        assert_eq!(args.version.unwrap().value, "2.1");
        assert_eq!(
            errors_of(quote! { restart = "retry" }),
            ["unknown restart `retry`, expected one of `fail`, `resume`"]
        );
        assert_eq!(
            errors_of(quote! { version = "" }),
            ["`version` must not be empty; leave it out to use a digest of the tool's definition"]
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
                "invalid duration `10 m`: a duration has no spaces, write `\"10m\"`; `ttl` also takes \
                 `\"unlimited\"` for tasks that never expire",
                "unknown mode `requried`, did you mean `required`? expected one of `required`, \
                 `optional`, `inline`",
                "unknown `task_tool` argument `poll`, expected one of `ttl`, `poll_interval`, \
                 `mode`, `inline_budget`, `name`, `title`, `description`, `read_only`, \
                 `destructive`, `idempotent`, `open_world`, `restart`, `park_after`, `version`, \
                 `concurrency`, `rate`, `key_concurrency`, `key_rate`, `limit_key`, `crate`",
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
                #[args] all: Input,
            ) -> u32 { a }
        };
        let (tool, errors) = parse_fn(item);
        assert_eq!(errors, Vec::<String>::new());
        assert_eq!(tool.doc.as_deref(), Some("Adds.\n\nSecond paragraph."));
        // Without a helper attribute a parameter is filled by its type, which only the
        // compiler knows: the macro does not look at how the type is written.
        assert!(matches!(tool.params[0].kind, ParamKind::ByType));
        assert!(matches!(tool.params[1].kind, ParamKind::ByType));
        assert_eq!(tool.params[1].wire_name(), None);
        assert_eq!(tool.params[2].wire_name().as_deref(), Some("lhs"));
        assert!(tool.params[2].renamed());
        let ParamKind::Argument(arg) = &tool.params[2].kind else {
            panic!("an argument")
        };
        assert_eq!(arg.description.as_ref().unwrap().value, "left");
        let ParamKind::Argument(arg) = &tool.params[3].kind else {
            panic!("an argument")
        };
        assert!(arg.default.is_some());
        assert_eq!(tool.params[4].wire_name().as_deref(), Some("type"));
        assert!(matches!(tool.params[5].kind, ParamKind::Whole(_)));
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
                all: Input,
            ) -> u32 { a }
        };
        let emitted = &tool.item;
        assert_eq!(quote!(#emitted).to_string(), quote!(#expected).to_string());
    }

    #[test]
    fn parameter_attribute_errors() {
        let item: ItemFn = syn::parse_quote! {
            async fn f(
                #[arg(descripton = "x")] a: u32,
                #[arg(default = 3)] c: u32,
                #[args(all)] #[arg] d: u32,
            ) {}
        };
        let (tool, errors) = parse_fn(item);
        assert_eq!(
            errors,
            [
                "unknown `arg` argument `descripton`, did you mean `description`? expected one of \
                 `rename`, `description`, `default`, `header`",
                "`default` takes no value: it uses `Default::default()`; write `#[arg(default)]`",
                "`#[args]` takes no arguments",
                "`#[arg]` takes arguments, e.g. `#[arg(description = \"..\", rename = \"..\", \
                 default, header = \"..\")]`",
                "a parameter takes one `#[arg(...)]` or `#[args]`: merge or remove this one",
            ]
        );
        // The model is complete all the same.
        assert_eq!(tool.params.len(), 3);
    }

    #[test]
    fn header_names() {
        let item: ItemFn = syn::parse_quote! {
            async fn f(
                #[arg(header = "Region", rename = "region_id")] a: String,
                #[arg(header = "x.y_z~1!")] b: u32,
                #[arg(header = "Two Words")] c: String,
                #[arg(header = "")] d: String,
                #[arg(header = "mcp-param-zone")] e: String,
                #[arg(header)] g: String,
            ) {}
        };
        let (tool, errors) = parse_fn(item);
        assert_eq!(
            errors,
            [
                "invalid header name `Two Words`: ' ' cannot be part of an HTTP header name; use \
                 ASCII letters, digits and ! # $ % & ' * + - . ^ _ ` | ~, e.g. \
                 `header = \"Region\"`",
                "`header` needs a non-empty name, e.g. `header = \"Region\"` for the header \
                 `Mcp-Param-Region`",
                "write the header name without its `Mcp-Param-` prefix: `header = \"zone\"` is \
                 sent as `mcp-param-zone`",
                "`header` needs a value, e.g. `header = \"Region\"`",
            ]
        );
        let header = |i: usize| match &tool.params[i].kind {
            ParamKind::Argument(arg) => arg.header.as_ref().map(|h| h.value.clone()),
            _ => panic!("an argument"),
        };
        assert_eq!(header(0).as_deref(), Some("Region"));
        assert_eq!(tool.params[0].wire_name().as_deref(), Some("region_id"));
        assert_eq!(header(1).as_deref(), Some("x.y_z~1!"));
        assert_eq!(header(2), None);
    }

    #[test]
    fn a_malformed_entry_does_not_hide_the_others() {
        let (args, errors) = parse_args(quote! {
            ttl = "10m" "junk", mode = "requried", crate = "my::mcp_tasks", poll_interval = ,
            restart = "resume"
        });
        // Syntax first (the entries are read before their values), then the values.
        assert_eq!(
            errors,
            [
                "expected `,` between arguments",
                "expected an expression",
                "unknown mode `requried`, did you mean `required`? expected one of `required`, \
                 `optional`, `inline`",
            ]
        );
        // The entries after a broken one are read, and the broken keys are known.
        let krate = args.krate.as_ref().expect("`crate` after the errors");
        assert_eq!(quote!(#krate).to_string(), "my :: mcp_tasks");
        assert_eq!(args.restart.as_ref().unwrap().value, Restart::Resume);
        assert!(args.unknown("ttl") && args.unknown("mode") && args.unknown("poll_interval"));
        assert!(!args.unknown("name") && !args.unreadable);
    }

    #[test]
    fn an_unreadable_key_makes_every_argument_unknown() {
        let (args, errors) = parse_args(quote! { "ttl" = "10m", mode = "inline" });
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(args.unreadable && args.unknown("ttl"));
        assert_eq!(args.mode.unwrap().value, Mode::Inline);
    }
}
