//! The one shape of a stored task: every field a store keeps, in two parts that every backend
//! stores and every view reads.
//!
//! - [`TaskRow`]: what the state machine ([`record`](super::record)) reads and changes: the
//!   task's identity, its [`State`], its [`Pending`] input requests and replay data, and its
//!   outcome. The SQL stores decode it from a row and write it back ([`codec`](super::codec));
//!   the memory store keeps the same parts in its compact entry.
//! - [`TaskOrigin`]: what the task was created with, unchanged for its life (tool version,
//!   arguments, the creating request's `_meta`, its trace context). No transition reads it;
//!   a replay ([`Recovery`](super::Recovery)) and the operator's detail
//!   ([`TaskDetail`](super::admin::TaskDetail)) do. Each backend writes it from
//!   [`TaskOrigin::encode`] and reads it with [`TaskOrigin::decode`], column by column in
//!   [`origin_columns`]' order.
//!
//! A new stored field that a task is created with goes into [`TaskOrigin`] (the struct, its
//! column name, its encode and decode lines below), the stores' schemas and migrations, and
//! the views that show it; nothing else. Completed steps and, in a cluster store, the lease
//! are kept beside the row (their own table and columns), read by the operations that need
//! them.

use std::sync::Arc;

use rmcp::model::JsonObject;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
use super::StoreError;
use super::record::{Pending, Record, State};
use super::{Outcome, TaskSnapshot};
use crate::trace::TraceContext;

/// What a task was created with, unchanged for its life; see the [module docs](self).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct TaskOrigin {
    /// The version of the tool that started the task; a replay needs the same version.
    pub tool_version: Arc<str>,
    /// The call's arguments.
    pub arguments: JsonObject,
    /// The `_meta` of the creating request (protocol version, client capabilities).
    pub request_meta: JsonObject,
    /// The W3C trace context of the creating call ([`crate::trace`]), continued by every run
    /// of the task's work.
    pub trace_context: Option<TraceContext>,
}

/// The columns of a [`TaskOrigin`], in [`TaskOrigin::encode`]'s order, for statements
/// written as constants (`concat!`). [`ORIGIN_COLUMNS`] lists the same names; a test holds
/// the two together.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
macro_rules! origin_columns {
    () => {
        "tool_version, arguments, request_meta, trace_context"
    };
}
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use origin_columns;

/// The columns of a [`TaskOrigin`], in [`TaskOrigin::encode`]'s order.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) const ORIGIN_COLUMNS: [&str; 4] =
    ["tool_version", "arguments", "request_meta", "trace_context"];

/// A [`TaskOrigin`] as its columns hold it: text, NULL where the field is absent.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) type EncodedOrigin = [Option<String>; ORIGIN_COLUMNS.len()];

impl TaskOrigin {
    /// What a task keeps of its origin once it ended: the arguments, the request's `_meta`
    /// and the tool version served only a replay, and go; the rest stays for the operator.
    #[must_use]
    pub(crate) fn ended(self) -> Self {
        Self {
            tool_version: Arc::from(""),
            arguments: JsonObject::new(),
            request_meta: JsonObject::new(),
            ..self
        }
    }

    /// Every column, encoded, in [`ORIGIN_COLUMNS`]' order.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn encode(&self) -> Result<EncodedOrigin, StoreError> {
        use super::codec::to_json;
        Ok([
            Some(self.tool_version.to_string()),
            Some(to_json(&self.arguments)?),
            Some(to_json(&self.request_meta)?),
            self.trace_context.as_ref().map(TraceContext::encode),
        ])
    }

    /// Decodes the [`ORIGIN_COLUMNS`] of `row`, from column `first` on.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn decode(
        row: &impl super::codec::Columns,
        first: usize,
    ) -> Result<Self, StoreError> {
        use super::codec::json;
        Ok(Self {
            tool_version: Arc::from(row.text(first)?),
            arguments: json(&row.text(first + 1)?)?,
            request_meta: json(&row.text(first + 2)?)?,
            trace_context: TraceContext::decode(row.opt_text(first + 3)?.as_deref()),
        })
    }
}

/// A stored task as the state machine sees it; see the [module docs](self).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(dead_code, reason = "only the SQL stores and the tests use it")
)]
pub(crate) struct TaskRow {
    pub(crate) id: Arc<str>,
    pub(crate) owner: Arc<str>,
    pub(crate) tool: Arc<str>,
    pub(crate) poll_interval_ms: Option<u64>,
    pub(crate) state: State,
    pub(crate) pending: Pending,
    pub(crate) outcome: Option<Outcome>,
}

impl Record for TaskRow {
    fn state(&self) -> &State {
        &self.state
    }

    fn state_mut(&mut self) -> &mut State {
        &mut self.state
    }

    fn pending_mut(&mut self) -> &mut Pending {
        &mut self.pending
    }

    fn end_with(&mut self, outcome: Outcome) {
        self.outcome = Some(outcome);
        self.pending = Pending::default();
    }
}

impl TaskRow {
    /// The task as a snapshot.
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "postgres")),
        allow(dead_code, reason = "only the SQL stores and the tests use it")
    )]
    pub(crate) fn into_snapshot(self) -> TaskSnapshot {
        snapshot(
            (self.id, self.owner, self.tool),
            self.state,
            self.poll_interval_ms,
            self.pending.input_requests,
            self.outcome,
        )
    }
}

/// The snapshot of a task from its parts, as every store's view builds it.
pub(crate) fn snapshot(
    (id, owner, tool): (Arc<str>, Arc<str>, Arc<str>),
    state: State,
    poll_interval_ms: Option<u64>,
    input_requests: rmcp::model::InputRequests,
    outcome: Option<Outcome>,
) -> TaskSnapshot {
    TaskSnapshot {
        id,
        owner,
        tool,
        status: state.status,
        status_message: state.status_message,
        created_at_ms: state.created_at_ms,
        last_updated_at_ms: state.last_updated_at_ms,
        ttl_ms: state.ttl_ms,
        poll_interval_ms,
        input_requests,
        outcome,
        cancel_requested: state.cancel_requested,
    }
}

#[cfg(test)]
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod tests {
    use super::ORIGIN_COLUMNS;

    #[test]
    fn the_column_macro_and_the_column_list_name_the_same_columns() {
        assert_eq!(origin_columns!(), ORIGIN_COLUMNS.join(", "));
    }
}
