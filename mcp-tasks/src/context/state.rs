//! [`State`]: shared application state a `#[task_tool]` parameter receives, next to the
//! [`TaskContext`](super::TaskContext) it is read from.

use std::ops::{Deref, DerefMut};

/// Shared application state of type `T`, registered with
/// [`Toolkit::with_state`](crate::Toolkit::with_state).
///
/// A `#[task_tool]` parameter of type `State<T>` (under any name or path: the macro
/// recognises it by type, not by how it is written) is filled from the toolkit's state, so a
/// spawned `'static` task owns its own clone (share a pool or a client behind an `Arc`, or use
/// a type that is cheap to clone). A call to a tool whose state was never registered ends with
/// a JSON-RPC internal error (`-32603`) naming the missing type; it does not panic.
///
/// ```
/// use mcp_tasks::{State, task_tool};
///
/// #[derive(Clone)]
/// struct Greeting(&'static str);
///
/// /// Greets someone.
/// #[task_tool]
/// async fn greet(State(greeting): State<Greeting>, name: String) -> String {
///     format!("{}, {name}", greeting.0)
/// }
///
/// let toolkit = mcp_tasks::toolkit![greet].unwrap().with_state(Greeting("hello"));
/// # let _ = toolkit;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct State<T>(pub T);

impl<T> Deref for State<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for State<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}
