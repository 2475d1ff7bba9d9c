//! The type check of an `#[arg(header = "..")]` argument: `(&Tag::<Type>::new())
//! .__header_kind().header()` picks `RefusedHeader` for the types whose JSON Schema type is
//! known to be `number`, an array or an object (and their `Option`s), whose `header()` needs a
//! bound that never holds; every other type falls back to `AnyHeader`, and its schema is
//! checked when the toolkit registers the tool.
// The rules checked are docs/protocol.md C35.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque},
    marker::PhantomData,
};

use crate::extract::Tag;

/// The bound of a float argument sent as a header; it never holds.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be sent as an `Mcp-Param-*` header: its JSON Schema type is `number`",
    label = "`header` takes a string, an integer or a boolean argument",
    note = "only strings, integers and booleans are mirrored into headers (SEP-2243); take an integer type, or remove `header`"
)]
pub trait NumberHeader: super::sealed::Never {}

/// The bound of a list or map argument sent as a header; it never holds.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be sent as an `Mcp-Param-*` header: its JSON Schema type is an array or an object",
    label = "`header` takes a string, an integer or a boolean argument",
    note = "only strings, integers and booleans are mirrored into headers (SEP-2243); remove `header` from this argument"
)]
pub trait CompoundHeader: super::sealed::Never {}

/// A type known to be refused.
pub trait RefusedHeader {
    /// Why.
    type Kind;
    /// The kind of this argument.
    fn __header_kind(&self) -> Self::Kind;
}
/// Any other type: checked on its schema at registration.
pub trait AnyHeader {
    /// Checked later.
    type Kind;
    /// The kind of this argument.
    fn __header_kind(&self) -> Self::Kind;
}

/// A `number`.
pub struct NumberKind<T>(PhantomData<fn() -> T>);
/// An array or an object.
pub struct CompoundKind<T>(PhantomData<fn() -> T>);
/// Anything else.
pub struct OtherKind;

impl<T> NumberKind<T> {
    /// Refused: [`NumberHeader`] never holds.
    pub fn header(&self)
    where
        T: NumberHeader,
    {
    }
}
impl<T> CompoundKind<T> {
    /// Refused: [`CompoundHeader`] never holds.
    pub fn header(&self)
    where
        T: CompoundHeader,
    {
    }
}
impl OtherKind {
    /// Accepted here; the schema is checked when the toolkit registers the tool.
    pub fn header(&self) {}
}

impl<T> AnyHeader for &Tag<T> {
    type Kind = OtherKind;
    fn __header_kind(&self) -> Self::Kind {
        OtherKind
    }
}

macro_rules! refuse {
    ($kind:ident: $($({$($generics:tt)*})? $ty:ty),* $(,)?) => {$(
        impl$(<$($generics)*>)? RefusedHeader for Tag<$ty> {
            type Kind = $kind<$ty>;
            fn __header_kind(&self) -> Self::Kind {
                $kind(PhantomData)
            }
        }
        impl$(<$($generics)*>)? RefusedHeader for Tag<Option<$ty>> {
            type Kind = $kind<$ty>;
            fn __header_kind(&self) -> Self::Kind {
                $kind(PhantomData)
            }
        }
    )*};
}

refuse!(NumberKind: f32, f64);
refuse!(CompoundKind:
    {T} Vec<T>,
    {T} VecDeque<T>,
    {T} Box<[T]>,
    {T, const N: usize} [T; N],
    {T, S} HashSet<T, S>,
    {T} BTreeSet<T>,
    {K, V, S} HashMap<K, V, S>,
    {K, V} BTreeMap<K, V>,
    serde_json::Map<String, serde_json::Value>,
);
