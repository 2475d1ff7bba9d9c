//! Golden expansions: what `#[task_tool]` emits for a small fn, pretty-printed and compared
//! with the reviewed files in `tests/expand/`, so every codegen change shows up in review as
//! a diff of those files. `UPDATE_GOLDEN=1 cargo test -p mcp-tasks-macros` rewrites them.

use proc_macro2::TokenStream;
use quote::quote;

fn golden(name: &str, expansion: TokenStream) {
    let file: syn::File = syn::parse2(expansion).expect("the expansion parses as items");
    let text = format!(
        "// The expansion of `{name}` (src/golden.rs); `UPDATE_GOLDEN=1 cargo test -p \
         mcp-tasks-macros` rewrites it.\n{}",
        prettyplease::unparse(&file)
    );
    let path = format!(
        "{}/tests/expand/{name}.expanded.rs",
        env!("CARGO_MANIFEST_DIR")
    );
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, &text).expect("write the golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}; create it with UPDATE_GOLDEN=1"));
    if text != expected {
        let first = text
            .lines()
            .zip(expected.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| text.lines().count().min(expected.lines().count()));
        panic!(
            "the expansion of `{name}` differs from {path} from line {} on:\n  now:      {:?}\n  reviewed: {:?}\n\
             review the change, then rewrite the file with UPDATE_GOLDEN=1",
            first + 1,
            text.lines().nth(first),
            expected.lines().nth(first),
        );
    }
}

#[test]
fn a_small_tool() {
    let expansion = crate::expand::task_tool(
        quote! { ttl = "10m", poll_interval = "2s", read_only },
        quote! {
            /// Adds two numbers, reporting progress.
            async fn add(
                ctx: TaskContext,
                State(scale): State<Scale>,
                a: u32,
                #[arg(rename = "second", default)] b: u32,
            ) -> Result<u32, ToolError> {
                ctx.status("adding").await;
                Ok((a + b) * scale.0)
            }
        },
    );
    golden("add", expansion);
}

#[test]
fn an_invalid_tool() {
    let expansion = crate::expand::task_tool(
        quote! { ttl = "10 m", crate = "my::mcp_tasks" },
        quote! {
            fn broken(a: u32) -> u32 { a }
        },
    );
    golden("broken", expansion);
}

#[test]
fn a_toolkit() {
    let toolkit = crate::expand::toolkit(quote! { ::mcp_tasks; add, search::deep });
    golden("toolkit", quote! { fn main() { let _ = #toolkit; } });
}
