//! The digest of a tool fn's code, the `code` part of the default tool version
//! (`ToolDefinition::with_digest_version`): 64-bit FNV-1a over the tokens of its parameters,
//! return type and body, taken at compile time. Tokens, not text: formatting and comments
//! do not change it (a trailing comma is layout too, except the one of a one-element tuple),
//! and neither do the fn's name, visibility, attributes or doc comment.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::ToTokens;
use syn::ItemFn;

/// 16 hex digits.
pub fn code_digest(item: &ItemFn) -> String {
    let mut text = String::new();
    render(item.sig.inputs.to_token_stream(), &mut text);
    text.push_str(" | ");
    render(item.sig.output.to_token_stream(), &mut text);
    text.push_str(" | ");
    render(item.block.to_token_stream(), &mut text);
    let mut hash = fnv::FnvHasher::default();
    std::hash::Hasher::write(&mut hash, text.as_bytes());
    format!("{:016x}", std::hash::Hasher::finish(&hash))
}

/// The tokens one per word, spans, spacing and trailing commas left out.
fn render(tokens: TokenStream, out: &mut String) {
    render_group(tokens, Delimiter::None, out);
}

fn is_comma(token: &TokenTree) -> bool {
    matches!(token, TokenTree::Punct(p) if p.as_char() == ',')
}

fn render_group(tokens: TokenStream, delimiter: Delimiter, out: &mut String) {
    let mut tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let commas = tokens.iter().filter(|t| is_comma(t)).count();
    // `(x,)` is a tuple and `(x)` is not; elsewhere a trailing comma is only layout.
    let keep = delimiter == Delimiter::Parenthesis && commas == 1;
    if !keep && tokens.last().is_some_and(is_comma) {
        tokens.pop();
    }
    for token in tokens {
        match token {
            TokenTree::Group(group) => {
                let (open, close) = match group.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Brace => ("{", "}"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::None => ("", ""),
                };
                out.push_str(open);
                out.push(' ');
                render_group(group.stream(), group.delimiter(), out);
                out.push_str(close);
            }
            TokenTree::Ident(ident) => out.push_str(&ident.to_string()),
            TokenTree::Punct(punct) => out.push(punct.as_char()),
            TokenTree::Literal(literal) => out.push_str(&literal.to_string()),
        }
        out.push(' ');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(item: ItemFn) -> String {
        code_digest(&item)
    }

    #[test]
    fn tracks_the_code_not_its_layout_or_name() {
        let base = digest(syn::parse_quote! { async fn a(x: u32) -> u32 { x + 1 } });
        assert_eq!(base.len(), 16);
        // The name, docs and layout are not the code.
        assert_eq!(
            base,
            digest(syn::parse_quote! {
                /// Documented.
                pub async fn b(
                    x: u32,
                ) -> u32 {
                    // a comment
                    x   +   1
                }
            })
        );
        assert_eq!(
            digest(syn::parse_quote! { async fn a() { match 1 { 1 => 2, _ => 3, } } }),
            digest(syn::parse_quote! { async fn a() { match 1 { 1 => 2, _ => 3 } } })
        );
        assert_ne!(
            digest(syn::parse_quote! { async fn a() { (1,) } }),
            digest(syn::parse_quote! { async fn a() { (1) } })
        );
        // The body, a parameter and the return type are.
        assert_ne!(
            base,
            digest(syn::parse_quote! { async fn a(x: u32) -> u32 { x + 2 } })
        );
        assert_ne!(
            base,
            digest(syn::parse_quote! { async fn a(y: u32) -> u32 { x + 1 } })
        );
        assert_ne!(
            base,
            digest(syn::parse_quote! { async fn a(x: u32) -> u64 { x + 1 } })
        );
        // Grouping is kept.
        assert_ne!(
            digest(syn::parse_quote! { async fn a() { (1, (2, 3)) } }),
            digest(syn::parse_quote! { async fn a() { ((1, 2), 3) } })
        );
    }
}
