// The expansion of `toolkit` (src/golden.rs); `UPDATE_GOLDEN=1 cargo test -p mcp-tasks-macros` rewrites it.
fn main() {
    let _ = {
        const _: () = ::mcp_tasks::__private::assert_unique_names(
            &[
                <add as ::mcp_tasks::__private::NamedTool>::NAME,
                <search::deep as ::mcp_tasks::__private::NamedTool>::NAME,
            ],
        );
        let __toolkit = ::core::result::Result::<
            ::mcp_tasks::__private::Toolkit,
            ::mcp_tasks::__private::ToolkitError,
        >::Ok(::mcp_tasks::__private::Toolkit::new());
        let __toolkit = ::mcp_tasks::__private::add_tool(__toolkit, add {});
        let __toolkit = ::mcp_tasks::__private::add_tool(__toolkit, search::deep {});
        __toolkit
    };
}
