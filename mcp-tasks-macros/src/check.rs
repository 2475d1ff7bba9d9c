//! Cross-field rules over the parsed model: an `async`, non-generic free fn; unique property
//! names; `poll_interval <= ttl`; `inline_budget` only on optional tools. Every violation is
//! reported, combined, each at its own token.

use syn::{FnArg, GenericParam, visit::Visit};

use crate::{
    attr::{Errors, Mode, ParamKind, Tool, Ttl, check_tool_name},
    duration,
};

/// The runtime's defaults (`mcp_tasks::tool::DEFAULT_TTL`, `DEFAULT_POLL_INTERVAL`).
pub const DEFAULT_TTL_MS: u64 = 3_600_000;
pub const DEFAULT_POLL_INTERVAL_MS: u64 = 1_000;

pub fn check(tool: &Tool) -> syn::Result<()> {
    let mut errors = Errors::default();
    signature(tool, &mut errors);
    parameters(tool, &mut errors);
    timing(tool, &mut errors);
    errors.into_result()
}

fn signature(tool: &Tool, errors: &mut Errors) {
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
        }
    }
    if tool.args.name.is_none() {
        let name = syn::ext::IdentExt::unraw(&sig.ident).to_string();
        if let Err(message) = check_tool_name(&name) {
            errors.at(
                sig.ident.span(),
                format!("{message}; or set `name = \"..\"`"),
            );
        }
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

fn parameters(tool: &Tool, errors: &mut Errors) {
    let mut whole = None;
    let mut names: Vec<String> = Vec::new();
    for param in &tool.params {
        if param.by_ref {
            let what = if matches!(param.kind, ParamKind::Context) {
                "TaskContext"
            } else {
                "State<T>"
            };
            errors.spanned(
                &param.ty,
                format!(
                    "take `{what}` by value, not by reference: the work of a task outlives the \
                     call (`{what}` is cheap to clone)"
                ),
            );
        }
        match &param.kind {
            ParamKind::Context | ParamKind::State => {}
            ParamKind::Whole(span) => {
                if whole.is_some() {
                    errors.at(
                        *span,
                        "only one parameter can be `#[args]`: merge the structs",
                    );
                }
                whole = Some(*span);
            }
            ParamKind::Argument(_) => {
                let Some(name) = param.wire_name() else {
                    errors.spanned(
                        &param.pat,
                        "an argument needs a name: use a plain identifier, or give this pattern \
                         `#[arg(rename = \"..\")]`",
                    );
                    continue;
                };
                if names.contains(&name) {
                    errors.spanned(
                        &param.pat,
                        format!(
                            "two parameters are named `{name}` in the input schema: rename one \
                             with `#[arg(rename = \"..\")]`"
                        ),
                    );
                }
                names.push(name);
            }
        }
    }
    if whole.is_some() {
        for param in &tool.params {
            if matches!(param.kind, ParamKind::Argument(_)) {
                errors.spanned(
                    &param.pat,
                    "with `#[args]` every argument comes from that struct: move this parameter \
                     into it, or remove `#[args]`",
                );
            }
        }
    }
}

fn timing(tool: &Tool, errors: &mut Errors) {
    let args = &tool.args;
    let ttl = args
        .ttl
        .as_ref()
        .map_or(Ttl::After(DEFAULT_TTL_MS), |t| t.value);
    let poll = args
        .poll_interval
        .as_ref()
        .map_or(DEFAULT_POLL_INTERVAL_MS, |p| p.value);
    if let Ttl::After(ttl_ms) = ttl
        && poll > ttl_ms
    {
        let (ttl_text, poll_text) = (duration::format(ttl_ms), duration::format(poll));
        match (&args.ttl, &args.poll_interval) {
            (_, Some(p)) => errors.at(
                p.span,
                format!(
                    "`poll_interval` ({poll_text}) is longer than {} ({ttl_text}): the task \
                     would expire before a client polls it; shorten `poll_interval` or lengthen `ttl`",
                    if args.ttl.is_some() { "`ttl`" } else { "the default `ttl`" },
                ),
            ),
            (Some(t), None) => errors.at(
                t.span,
                format!(
                    "`ttl` ({ttl_text}) is shorter than the default `poll_interval` \
                     ({poll_text}): set a shorter `poll_interval` or lengthen `ttl`"
                ),
            ),
            (None, None) => {}
        }
    }
    if let Some(budget) = &args.inline_budget {
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

#[cfg(test)]
mod tests {
    use quote::quote;
    use syn::ItemFn;

    use crate::attr::parse_tool;

    fn check_errors(args: proc_macro2::TokenStream, item: ItemFn) -> Vec<String> {
        let tool = parse_tool(args, item).1.unwrap();
        match super::check(&tool) {
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
    fn poll_interval_longer_than_ttl() {
        let item: ItemFn = syn::parse_quote! { async fn f() {} };
        assert_eq!(
            check_errors(quote! { ttl = "10m", poll_interval = "1h" }, item.clone()),
            [
                "`poll_interval` (1h) is longer than `ttl` (10m): the task would expire before a \
              client polls it; shorten `poll_interval` or lengthen `ttl`"
            ]
        );
        assert_eq!(
            check_errors(quote! { poll_interval = "2h" }, item.clone()),
            [
                "`poll_interval` (2h) is longer than the default `ttl` (1h): the task would expire \
              before a client polls it; shorten `poll_interval` or lengthen `ttl`"
            ]
        );
        assert_eq!(
            check_errors(quote! { ttl = "500ms" }, item.clone()),
            [
                "`ttl` (500ms) is shorter than the default `poll_interval` (1s): set a shorter \
              `poll_interval` or lengthen `ttl`"
            ]
        );
        assert!(check_errors(quote! { ttl = "unlimited", poll_interval = "2h" }, item).is_empty());
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
                #[args] all: Input,
            ) {}
        };
        assert_eq!(
            check_errors(quote! {}, item),
            [
                "take `TaskContext` by value, not by reference: the work of a task outlives the \
                 call (`TaskContext` is cheap to clone)",
                "two parameters are named `a` in the input schema: rename one with \
                 `#[arg(rename = \"..\")]`",
                "an argument needs a name: use a plain identifier, or give this pattern \
                 `#[arg(rename = \"..\")]`",
                "with `#[args]` every argument comes from that struct: move this parameter into \
                 it, or remove `#[args]`",
                "with `#[args]` every argument comes from that struct: move this parameter into \
                 it, or remove `#[args]`",
                "with `#[args]` every argument comes from that struct: move this parameter into \
                 it, or remove `#[args]`",
            ]
        );
    }
}
