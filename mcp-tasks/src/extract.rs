//! The glue `#[task_tool]` and `toolkit!` expand to, one module per job:
//!
//! - [`params`]: how each parameter is filled (from the call's context, by trait, or decoded
//!   from the arguments) and the input schema;
//! - [`returns`]: how the value the fn returned becomes the call's outcome, and the output
//!   schema (computed once per tool);
//! - [`registry`]: what `toolkit!` needs (the tool's wire name, duplicate checks).
//!
//! Everything here is reached only through `mcp_tasks::__private` and is not a public API.
//! The dispatch on parameter and return types is autoref specialisation over the concrete
//! types of a non-generic fn: a `Tag<T>` names the type, the most specific method wins, and
//! the chosen kind's `ops` method is the one place its bounds are checked, spanned at the
//! user's type, so a wrong type is reported once, there.

use std::marker::PhantomData;

/// `Clone` and `Copy` for tables of fn pointers, whatever their type parameters (a derive
/// would ask the parameters to be `Copy` too).
macro_rules! copy_ops {
    ($($ops:ident<$($t:ident),+>),+) => {$(
        impl<$($t),+> Clone for $ops<$($t),+> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<$($t),+> Copy for $ops<$($t),+> {}
    )+};
}

pub mod params;
pub mod registry;
pub mod returns;

/// Names a type without a value.
pub struct Tag<T: ?Sized>(PhantomData<fn() -> Box<T>>);

#[allow(clippy::new_without_default, reason = "named only by generated code")]
impl<T: ?Sized> Tag<T> {
    /// The tag of `T`.
    #[must_use]
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}
