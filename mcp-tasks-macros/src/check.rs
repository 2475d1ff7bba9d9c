//! Cross-field rules over the parsed model: an `async`, non-generic free fn; unique property
//! names; unique `header` names; `poll_interval <= ttl` when both are written (against a
//! runtime default, the generated code checks it: see `expand::default_timing`);
//! `inline_budget` only on optional tools. Every violation
//! goes to the same [`Sink`] as the parse errors, each at its own token; a rule that depends
//! on an argument whose value was already reported as wrong is skipped, not checked against
//! the default.
//!
//! What depends on a parameter's type (is it the context, a `State<T>`, an argument?) is not
//! checked here: the generated code dispatches on the type and the compiler reports it.

use syn::{FnArg, GenericParam, visit::Visit};

use crate::{
    attr::check_tool_name,
    duration,
    model::{Mode, ParamKind, Restart, Tool, Ttl},
    sink::Sink,
};

pub fn check(tool: &Tool, sink: &Sink) {
    signature(tool, sink);
    parameters(tool, sink);
    timing(tool, sink);
}

fn signature(tool: &Tool, errors: &Sink) {
    let sig = &tool.item.sig;
    if sig.asyncness.is_none() {
        errors.at(
            sig.fn_token.span,
            "`#[task_tool]` needs an `async fn`: add `async` before `fn`",
        );
    }
    if let Some(unsafety) = sig.unsafety {
        errors.at(
            unsafety.span,
            "a task tool cannot be an `unsafe fn`: remove `unsafe`",
        );
    }
    if let Some(abi) = &sig.abi {
        errors.spanned(abi, "a task tool cannot have an `extern` ABI: remove it");
    }
    if let Some(span) = tool.receiver {
        errors.at(
            span,
            "a task tool is a free `async fn`, it cannot take `self`: move it out of the `impl` \
             block and reach shared data through a `State<T>` parameter",
        );
    }
    let generics = &sig.generics;
    if let Some(param) = generics.params.first() {
        let what = match param {
            GenericParam::Type(_) => "type",
            GenericParam::Lifetime(_) => "lifetime",
            GenericParam::Const(_) => "const",
        };
        errors.spanned(
            generics,
            format!(
                "a task tool cannot be generic (found a {what} parameter): its arguments are \
                 decoded from JSON into concrete types; remove the generic parameters"
            ),
        );
    } else if let Some(clause) = &generics.where_clause {
        errors.spanned(
            clause,
            "a task tool cannot have a `where` clause: remove it",
        );
    }
    for input in &sig.inputs {
        if let FnArg::Typed(typed) = input {
            let mut finder = ImplTrait(None);
            finder.visit_type(&typed.ty);
            if let Some(node) = finder.0 {
                errors.spanned(
                    node,
                    "a task tool cannot take `impl Trait`, which makes it generic: use a concrete type",
                );
            }
            if let Some(owned) = owned_spelling(&typed.ty) {
                errors.spanned(
                    &typed.ty,
                    format!(
                        "an argument is decoded from the call's JSON and lives as long as the \
                         task, so it cannot borrow: take `{owned}`"
                    ),
                );
            }
        }
    }
    if tool.args.name.is_none() && !tool.args.unknown("name") {
        let name = syn::ext::IdentExt::unraw(&sig.ident).to_string();
        if let Err(message) = check_tool_name(&name) {
            errors.at(
                sig.ident.span(),
                format!("{message}; or set `name = \"..\"`"),
            );
        }
    }
}

/// The owned type to take instead of a borrowed argument: `String` for `&str`, `Vec<T>` for
/// `&[T]`. (A reference to anything else may be `&TaskContext` or `&State<T>`, which the
/// generated bounds refuse with their own message.)
fn owned_spelling(ty: &syn::Type) -> Option<String> {
    let syn::Type::Reference(reference) = ty else {
        return None;
    };
    match &*reference.elem {
        syn::Type::Path(path) if path.qself.is_none() && path.path.is_ident("str") => {
            Some("String".to_owned())
        }
        syn::Type::Slice(slice) => {
            let elem = &slice.elem;
            Some(format!("Vec<{}>", quote::quote!(#elem)))
        }
        _ => None,
    }
}

struct ImplTrait(Option<syn::TypeImplTrait>);

impl Visit<'_> for ImplTrait {
    fn visit_type_impl_trait(&mut self, node: &syn::TypeImplTrait) {
        if self.0.is_none() {
            self.0 = Some(node.clone());
        }
    }
}

fn parameters(tool: &Tool, errors: &Sink) {
    let mut whole = None;
    let mut names: Vec<(String, bool)> = Vec::new();
    for param in &tool.params {
        match &param.kind {
            ParamKind::Whole(_) if param.doubtful => {}
            ParamKind::Whole(span) => {
                if whole.is_some() {
                    errors.at(
                        *span,
                        "only one parameter can be `#[args]`: merge the structs",
                    );
                }
                whole = Some(*span);
            }
            ParamKind::Argument(_) | ParamKind::ByType => {
                let Some(name) = param.wire_name() else {
                    // Only an `#[arg]` parameter is known to be an argument; one filled by
                    // its type may be a `State(db)` pattern, and the compiler decides.
                    if matches!(param.kind, ParamKind::Argument(_)) {
                        errors.spanned(
                            &param.pat,
                            "an argument needs a name: use a plain identifier, or give this \
                             pattern `#[arg(rename = \"..\")]`",
                        );
                    }
                    continue;
                };
                // Two plain identifiers cannot be equal (the compiler refuses the fn), so a
                // clash involves a `rename`.
                let renamed = param.renamed();
                if names.iter().any(|(n, r)| *n == name && (*r || renamed)) {
                    errors.spanned(
                        &param.pat,
                        format!(
                            "two parameters are named `{name}` in the input schema: rename one \
                             with `#[arg(rename = \"..\")]`"
                        ),
                    );
                }
                names.push((name, renamed));
            }
        }
    }
    headers(tool, errors);
    if whole.is_some() {
        for param in &tool.params {
            if matches!(param.kind, ParamKind::Argument(_)) && !param.doubtful {
                errors.spanned(
                    &param.pat,
                    "with `#[args]` every argument comes from that struct: move this parameter \
                     into it, or remove `#[args]`",
                );
            }
        }
    }
}

/// Header names compare without case: two arguments cannot share one.
// docs/protocol.md C34.
fn headers(tool: &Tool, errors: &Sink) {
    let mut seen: Vec<String> = Vec::new();
    for param in &tool.params {
        let ParamKind::Argument(arg) = &param.kind else {
            continue;
        };
        let Some(header) = &arg.header else {
            continue;
        };
        let folded = header.value.to_ascii_lowercase();
        if seen.contains(&folded) {
            errors.at(
                header.span,
                format!(
                    "two arguments are sent as the header `Mcp-Param-{}` (header names compare \
                     without case): give this one another `header` name",
                    header.value
                ),
            );
        }
        seen.push(folded);
    }
}

fn timing(tool: &Tool, errors: &Sink) {
    let args = &tool.args;
    if args.unknown("ttl") || args.unknown("poll_interval") {
        return;
    }
    // The runtime owns the defaults; a value checked against one is checked by the generated
    // code, at the user's compile time (`expand::default_timing`).
    if let (Some(ttl), Some(poll)) = (&args.ttl, &args.poll_interval)
        && let Ttl::After(ttl_ms) = ttl.value
        && poll.value > ttl_ms
    {
        errors.at(
            poll.span,
            format!(
                "`poll_interval` ({}) is longer than `ttl` ({}): the task would expire before a \
                 client polls it; shorten `poll_interval` or lengthen `ttl`",
                duration::format(poll.value),
                duration::format(ttl_ms),
            ),
        );
    }
    if let Some(after) = &args.park_after
        && after.value.is_some()
        && !args.unknown("restart")
        && args
            .restart
            .as_ref()
            .is_none_or(|r| r.value != Restart::Resume)
    {
        errors.at(
            after.span,
            "`park_after` applies only to a tool whose tasks resume: a parked task goes on by \
             replay, and this tool's tasks fail on a restart; add `restart = \"resume\"` (its \
             work must be safe to replay) or remove `park_after`",
        );
    }
    let limits = [
        ("concurrency", args.concurrency.as_ref().map(|l| l.span)),
        ("rate", args.rate.as_ref().map(|r| r.span)),
        (
            "key_concurrency",
            args.key_concurrency.as_ref().map(|l| l.span),
        ),
        ("key_rate", args.key_rate.as_ref().map(|r| r.span)),
    ];
    for (key, span) in limits {
        let mode = args.mode.as_ref().map_or(Mode::Optional, |m| m.value);
        if let Some(span) = span
            && !args.unknown("mode")
            && mode != Mode::Required
        {
            errors.at(
                span,
                format!(
                    "`{key}` applies only to `mode = \"required\"` tools, and this one is \
                     `mode = \"{}\"`: a call over the limit waits as a queued task, and only a \
                     task can wait; add `mode = \"required\"` or remove `{key}`",
                    mode.as_str()
                ),
            );
        }
    }
    key_limit(tool, errors);
    if let Some(budget) = &args.inline_budget
        && !args.unknown("mode")
    {
        let mode = args.mode.as_ref().map_or(Mode::Optional, |m| m.value);
        if mode != Mode::Optional {
            errors.at(
                budget.span,
                format!(
                    "`inline_budget` only applies to `mode = \"optional\"` tools, and this one is \
                     `mode = \"{}\"`: remove `inline_budget` or use `mode = \"optional\"`",
                    mode.as_str()
                ),
            );
        }
    }
}

/// `key_concurrency` and `key_rate` need `limit_key`, which needs one of them, and the key
/// is `"owner"` or one of the function's arguments.
fn key_limit(tool: &Tool, errors: &Sink) {
    let args = &tool.args;
    if ["key_concurrency", "key_rate", "limit_key"]
        .iter()
        .any(|key| args.unknown(key))
    {
        return;
    }
    let limits = [
        (
            "key_concurrency",
            args.key_concurrency.as_ref().map(|l| l.span),
        ),
        ("key_rate", args.key_rate.as_ref().map(|r| r.span)),
    ];
    let limited = limits.iter().any(|(_, span)| span.is_some());
    match &args.limit_key {
        None => {
            for (name, span) in limits {
                if let Some(span) = span {
                    errors.at(
                        span,
                        format!(
                            "`{name}` needs `limit_key`, what it counts by: `\"owner\"` or one \
                             of the function's arguments, e.g. `limit_key = \"workspace_id\"`"
                        ),
                    );
                }
            }
        }
        Some(key) if !limited => errors.at(
            key.span,
            "`limit_key` needs a limit to count by it: `key_concurrency = 1` (tasks at once \
             for each key) or `key_rate = \"10/1m\"` (starts for each key)",
        ),
        Some(key) if key.value != "owner" => {
            // The whole-object parameter's properties are known only to its type: the toolkit
            // checks the key against the input schema.
            let whole = (tool.params.iter()).any(|p| matches!(p.kind, ParamKind::Whole(_)));
            if whole || tool.params.iter().any(|p| p.doubtful) {
                return;
            }
            if tool.key_property(&key.value).is_none() {
                let names: Vec<String> = (tool.params.iter())
                    .filter_map(|p| p.wire_name())
                    .map(|n| format!("`{n}`"))
                    .collect();
                errors.at(
                    key.span,
                    format!(
                        "`limit_key = \"{}\"` names no argument of this function: use \
                         `\"owner\"`{}{}",
                        key.value,
                        if names.is_empty() { "" } else { " or one of " },
                        names.join(", ")
                    ),
                );
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;
    use syn::ItemFn;

    use crate::{attr::parse_tool, sink::Sink};

    /// Every error of parsing and checking, as one build reports them.
    fn check_errors(args: proc_macro2::TokenStream, item: ItemFn) -> Vec<String> {
        let sink = Sink::new();
        let tool = parse_tool(args, item, &sink);
        super::check(&tool, &sink);
        match sink.finish() {
            Ok(()) => Vec::new(),
            Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn accepts_a_plain_tool() {
        let item = syn::parse_quote! { async fn f(ctx: TaskContext, a: u32) -> u32 { a } };
        assert!(check_errors(quote! { ttl = "10m", inline_budget = "1s" }, item).is_empty());
    }

    #[test]
    fn signature_errors() {
        let item = syn::parse_quote! { fn f<T>(&self, x: impl Into<u32>) {} };
        assert_eq!(
            check_errors(quote! {}, item),
            [
                "`#[task_tool]` needs an `async fn`: add `async` before `fn`",
                "a task tool is a free `async fn`, it cannot take `self`: move it out of the \
                 `impl` block and reach shared data through a `State<T>` parameter",
                "a task tool cannot be generic (found a type parameter): its arguments are \
                 decoded from JSON into concrete types; remove the generic parameters",
                "a task tool cannot take `impl Trait`, which makes it generic: use a concrete type",
            ]
        );
    }

    #[test]
    fn borrowed_arguments_name_the_owned_type() {
        let item = syn::parse_quote! {
            async fn f(ctx: &TaskContext, a: &str, b: &'static str, c: &[u8], d: &u32) {}
        };
        let take = |owned: &str| {
            format!(
                "an argument is decoded from the call's JSON and lives as long as the task, so \
                 it cannot borrow: take `{owned}`"
            )
        };
        assert_eq!(
            check_errors(quote! {}, item),
            [take("String"), take("String"), take("Vec<u8>")]
        );
    }

    #[test]
    fn poll_interval_longer_than_ttl() {
        let item: ItemFn = syn::parse_quote! { async fn f() {} };
        assert_eq!(
            check_errors(quote! { ttl = "10m", poll_interval = "1h" }, item.clone()),
            [
                "`poll_interval` (1h) is longer than `ttl` (10m): the task would expire before a \
              client polls it; shorten `poll_interval` or lengthen `ttl`"
            ]
        );
        // Against a default, the generated code checks (expand.rs), not this pass.
        assert!(check_errors(quote! { poll_interval = "2h" }, item.clone()).is_empty());
        assert!(check_errors(quote! { ttl = "500ms" }, item.clone()).is_empty());
        assert!(check_errors(quote! { ttl = "unlimited", poll_interval = "2h" }, item).is_empty());
    }

    #[test]
    fn park_after_needs_a_tool_that_resumes() {
        let item: ItemFn = syn::parse_quote! { async fn f() {} };
        assert_eq!(
            check_errors(quote! { park_after = "1m" }, item.clone()),
            [
                "`park_after` applies only to a tool whose tasks resume: a parked task goes on by \
                 replay, and this tool's tasks fail on a restart; add `restart = \"resume\"` (its \
                 work must be safe to replay) or remove `park_after`"
            ]
        );
        assert!(
            check_errors(
                quote! { park_after = "1m", restart = "resume" },
                item.clone()
            )
            .is_empty()
        );
        assert!(check_errors(quote! { park_after = "never" }, item).is_empty());
    }

    #[test]
    fn inline_budget_needs_an_optional_tool() {
        let item: ItemFn = syn::parse_quote! { async fn f() {} };
        assert_eq!(
            check_errors(quote! { mode = "required", inline_budget = "250ms" }, item),
            [
                "`inline_budget` only applies to `mode = \"optional\"` tools, and this one is \
              `mode = \"required\"`: remove `inline_budget` or use `mode = \"optional\"`"
            ]
        );
    }

    #[test]
    fn parameter_errors() {
        let item = syn::parse_quote! {
            async fn f(
                ctx: &TaskContext,
                a: u32,
                #[arg(rename = "a")] b: u32,
                (c, d): (u32, u32),
                #[arg(description = "unnamed")] (e, f): (u32, u32),
                #[args] all: Input,
            ) {}
        };
        // `ctx` by reference and the `(c, d)` pattern depend on their types: the compiler
        // reports them (tests/ui/fail/params/names.rs).
        assert_eq!(
            check_errors(quote! {}, item),
            [
                "two parameters are named `a` in the input schema: rename one with \
                 `#[arg(rename = \"..\")]`",
                "an argument needs a name: use a plain identifier, or give this pattern \
                 `#[arg(rename = \"..\")]`",
                "with `#[args]` every argument comes from that struct: move this parameter into \
                 it, or remove `#[args]`",
                "with `#[args]` every argument comes from that struct: move this parameter into \
                 it, or remove `#[args]`",
            ]
        );
    }

    #[test]
    fn header_names_are_unique_without_case() {
        let item = syn::parse_quote! {
            async fn f(
                #[arg(header = "Region")] a: String,
                #[arg(header = "Zone")] b: String,
                #[arg(header = "region")] c: String,
                #[arg(header = "ZONE")] d: String,
                #[arg(header = "Tenant")] e: String,
            ) {}
        };
        assert_eq!(
            check_errors(quote! {}, item),
            [
                "two arguments are sent as the header `Mcp-Param-region` (header names compare \
                 without case): give this one another `header` name",
                "two arguments are sent as the header `Mcp-Param-ZONE` (header names compare \
                 without case): give this one another `header` name",
            ]
        );
    }

    #[test]
    fn parse_and_check_errors_are_reported_together() {
        let item = syn::parse_quote! { fn f(&self) {} };
        assert_eq!(
            check_errors(quote! { ttl = "10 m", crate = "my::mcp_tasks" }, item),
            [
                "invalid duration `10 m`: a duration has no spaces, write `\"10m\"`; `ttl` also takes \
                 `\"unlimited\"` for tasks that never expire",
                "`#[task_tool]` needs an `async fn`: add `async` before `fn`",
                "a task tool is a free `async fn`, it cannot take `self`: move it out of the \
                 `impl` block and reach shared data through a `State<T>` parameter",
            ]
        );
    }

    #[test]
    fn a_wrong_value_is_not_checked_as_the_default() {
        let item: ItemFn = syn::parse_quote! { async fn f() {} };
        // With `ttl` unreadable, `poll_interval = "2h"` is not compared with the default 1h.
        assert_eq!(
            check_errors(quote! { ttl = "1 h", poll_interval = "2h" }, item.clone()).len(),
            1
        );
        // Nor `inline_budget` with the default mode when `mode` is wrong.
        assert_eq!(
            check_errors(
                quote! { mode = "sometimes", inline_budget = "1s" },
                item.clone()
            )
            .len(),
            1
        );
        // Nor the fn's name when `name` is wrong.
        let item: ItemFn = syn::parse_quote! { async fn café() {} };
        assert_eq!(check_errors(quote! { name = "" }, item.clone()).len(), 1);
        assert_eq!(
            check_errors(quote! {}, item).len(),
            1,
            "`café` is no tool name"
        );
    }
}
