//! Dispatch on a parameter's type: `(&Tag::<Type>::new()).__param_kind()` picks
//! `ExtractorParam` for the context's types and falls back to `ArgumentParam`; then
//! `named()`, `unnamed()` (the pattern has no name) or `beside_args()` (the tool has an
//! `#[args]` parameter) gives the [`ParamOps`], checking that kind's bounds.

use std::marker::PhantomData;

use super::{
    Argument, ArgumentBesideArgs, ParamOps, State, TakenByValue, TaskContext, UnnamedArgument,
};
use crate::extract::Tag;

/// A parameter filled from the call's context.
pub trait ExtractorParam {
    /// How it is filled.
    type Kind;
    /// The kind of this parameter.
    fn __param_kind(&self) -> Self::Kind;
}
/// A parameter read from the arguments.
pub trait ArgumentParam {
    /// How it is filled.
    type Kind;
    /// The kind of this parameter.
    fn __param_kind(&self) -> Self::Kind;
}

impl ExtractorParam for Tag<TaskContext> {
    type Kind = ContextKind;
    fn __param_kind(&self) -> Self::Kind {
        ContextKind
    }
}
impl<T> ExtractorParam for Tag<State<T>> {
    type Kind = StateKind<T>;
    fn __param_kind(&self) -> Self::Kind {
        StateKind(PhantomData)
    }
}
impl ExtractorParam for Tag<&TaskContext> {
    type Kind = ByRefKind<TaskContext>;
    fn __param_kind(&self) -> Self::Kind {
        ByRefKind(PhantomData)
    }
}
impl<T> ExtractorParam for Tag<&State<T>> {
    type Kind = ByRefKind<State<T>>;
    fn __param_kind(&self) -> Self::Kind {
        ByRefKind(PhantomData)
    }
}
impl<T> ArgumentParam for &Tag<T> {
    type Kind = ArgumentKind<T>;
    fn __param_kind(&self) -> Self::Kind {
        ArgumentKind(PhantomData)
    }
}

/// `TaskContext`.
pub struct ContextKind;
/// `State<T>`.
pub struct StateKind<T>(PhantomData<fn() -> T>);
/// `&TaskContext` or `&State<T>`: refused.
pub struct ByRefKind<T>(PhantomData<fn() -> T>);
/// Any other type: an argument.
pub struct ArgumentKind<T>(PhantomData<fn() -> T>);

impl ContextKind {
    /// The ops, whatever the pattern.
    #[must_use]
    pub fn named(&self) -> ParamOps<TaskContext> {
        ParamOps::context()
    }
    /// The ops, whatever the pattern.
    #[must_use]
    pub fn unnamed(&self) -> ParamOps<TaskContext> {
        ParamOps::context()
    }
    /// The ops, beside `#[args]` too.
    #[must_use]
    pub fn beside_args(&self) -> ParamOps<TaskContext> {
        ParamOps::context()
    }
}

impl<T: Clone + Send + Sync + 'static> StateKind<T> {
    /// The ops, whatever the pattern.
    #[must_use]
    pub fn named(&self) -> ParamOps<State<T>> {
        ParamOps::state()
    }
    /// The ops, whatever the pattern (`State(db)` is the usual one).
    #[must_use]
    pub fn unnamed(&self) -> ParamOps<State<T>> {
        ParamOps::state()
    }
    /// The ops, beside `#[args]` too.
    #[must_use]
    pub fn beside_args(&self) -> ParamOps<State<T>> {
        ParamOps::state()
    }
}

impl<T> ByRefKind<T> {
    /// Refused: [`TakenByValue`] never holds.
    #[must_use]
    pub fn named<R>(&self) -> ParamOps<R>
    where
        T: TakenByValue,
    {
        unreachable!("`TakenByValue` is sealed and has no implementations")
    }
    /// Refused: [`TakenByValue`] never holds.
    #[must_use]
    pub fn unnamed<R>(&self) -> ParamOps<R>
    where
        T: TakenByValue,
    {
        unreachable!("`TakenByValue` is sealed and has no implementations")
    }
    /// Refused: [`TakenByValue`] never holds.
    #[must_use]
    pub fn beside_args<R>(&self) -> ParamOps<R>
    where
        T: TakenByValue,
    {
        unreachable!("`TakenByValue` is sealed and has no implementations")
    }
}

impl<T> ArgumentKind<T> {
    /// The property named after the parameter.
    #[must_use]
    pub fn named(&self) -> ParamOps<T>
    where
        T: Argument,
    {
        ParamOps::argument()
    }
    /// Refused: [`UnnamedArgument`] never holds.
    #[must_use]
    pub fn unnamed(&self) -> ParamOps<T>
    where
        T: UnnamedArgument,
    {
        unreachable!("`UnnamedArgument` is sealed and has no implementations")
    }
    /// Refused: [`ArgumentBesideArgs`] never holds.
    #[must_use]
    pub fn beside_args(&self) -> ParamOps<T>
    where
        T: ArgumentBesideArgs,
    {
        unreachable!("`ArgumentBesideArgs` is sealed and has no implementations")
    }
}
