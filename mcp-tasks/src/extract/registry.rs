//! What `toolkit!` expands to: each tool's wire name, checked for duplicates at compile time,
//! and the registration of each tool.

use crate::{Toolkit, ToolkitError, tool::TaskTool};

/// A `#[task_tool]` fn's generated struct: what `toolkit!` takes. Its wire name lets
/// `toolkit!` reject duplicates at compile time.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `#[task_tool]` fn",
    label = "`toolkit!` takes fns annotated with `#[task_tool]`",
    note = "register a hand-written `TaskTool` with `Toolkit::with_tool` on the toolkit this builds"
)]
pub trait NamedTool: TaskTool {
    /// The wire name.
    const NAME: &'static str;
}

/// Adds a `#[task_tool]` to a toolkit being built by `toolkit!`.
///
/// # Errors
/// As [`Toolkit::with_tool`].
pub fn add_tool<T: NamedTool>(
    toolkit: Result<Toolkit, ToolkitError>,
    tool: T,
) -> Result<Toolkit, ToolkitError> {
    toolkit?.with_tool(tool)
}

/// Fails the build (in a `const`) when two names are equal.
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
