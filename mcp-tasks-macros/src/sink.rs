//! The error sink: parsing and checking write every mistake here, so one build reports them
//! all (serde_derive's `Ctxt` is the model). The sink must be [finished](Sink::finish):
//! dropping one unread is a bug in the macro and panics, so no error is lost silently.

use std::{cell::RefCell, fmt::Display};

use proc_macro2::Span;
use quote::ToTokens;

/// Collects `syn::Error`s; [`Sink::finish`] combines them.
pub struct Sink {
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Sink {
    pub fn new() -> Self {
        Self {
            errors: RefCell::new(Some(Vec::new())),
        }
    }

    pub fn push(&self, error: syn::Error) {
        self.errors
            .borrow_mut()
            .as_mut()
            .expect("the sink is read only once, by `finish`")
            .push(error);
    }

    /// An error at `span`.
    pub fn at(&self, span: Span, message: impl Display) {
        self.push(syn::Error::new(span, message));
    }

    /// An error covering all of `tokens` (on stable, a `Span` cannot be joined otherwise).
    pub fn spanned(&self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// How many errors were written so far.
    pub fn len(&self) -> usize {
        self.errors.borrow().as_ref().map_or(0, Vec::len)
    }

    /// Every error, in the order they were written, combined into one; `Ok` when there were
    /// none.
    pub fn finish(self) -> syn::Result<()> {
        let errors = self
            .errors
            .borrow_mut()
            .take()
            .expect("the sink is read only once, by `finish`");
        let mut errors = errors.into_iter();
        match errors.next() {
            None => Ok(()),
            Some(mut all) => {
                all.extend(errors);
                Err(all)
            }
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        if !std::thread::panicking() && self.errors.borrow().is_some() {
            panic!("the macro dropped its error sink without reading it with `finish`");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_every_error_in_order() {
        let sink = Sink::new();
        assert!(Sink::new().finish().is_ok());
        sink.at(Span::call_site(), "first");
        sink.at(Span::call_site(), "second");
        let messages: Vec<String> = sink
            .finish()
            .unwrap_err()
            .into_iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(messages, ["first", "second"]);
    }

    #[test]
    #[should_panic(expected = "without reading it")]
    fn an_unread_sink_panics() {
        let sink = Sink::new();
        sink.at(Span::call_site(), "lost");
        drop(sink);
    }
}
