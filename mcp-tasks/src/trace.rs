//! One trace from call to result: the W3C trace context a task keeps from the call that
//! created it, and the task's `tracing` span.
//!
//! A `tools/call` that creates a task may carry a [W3C Trace Context] in its `_meta`
//! (`traceparent`, and optionally `tracestate`). When it does not, and the `opentelemetry`
//! feature is on, the context of the span current in the server's handler is taken instead.
//! The context is validated ([`TraceContext::parse`]: a malformed `traceparent` is ignored,
//! never an error of the call, and never stored), bounded in size, and stored with the task
//! by every store. Each run of the task's work, the first one and every later one (a replay
//! after a restart, a takeover by another instance), runs in one `task` span:
//!
//! | field         | value                                                              |
//! |---------------|--------------------------------------------------------------------|
//! | `task_id`     | the task id                                                        |
//! | `tool`        | the tool's wire name                                               |
//! | `owner`       | the principal that owns the task                                   |
//! | `instance`    | the instance id running this run (cluster mode; empty otherwise)   |
//! | `epoch`       | the lease's fencing epoch of this run (cluster mode)               |
//! | `traceparent` | the stored `traceparent` of the creating call, when there is one   |
//!
//! Inside it, `step` spans (field `step`: its name) cover each
//! [`TaskContext::step`](crate::TaskContext::step) that runs, `input` spans (field `key`)
//! each question asked, and a `result` span (field `status`) the write of the outcome.
//! Under the `opentelemetry` feature the stored context is the task span's OpenTelemetry
//! parent, so with a `tracing_opentelemetry` layer installed one trace shows the call, its
//! steps, its questions and its result, on whichever instance each part ran.
//!
//! [W3C Trace Context]: https://www.w3.org/TR/trace-context/

use rmcp::model::JsonObject;
use serde_json::Value;

/// The `_meta` key of the W3C `traceparent`.
pub const TRACEPARENT: &str = "traceparent";
/// The `_meta` key of the W3C `tracestate`.
pub const TRACESTATE: &str = "tracestate";

/// The longest `tracestate` kept, in bytes (the W3C limit of what must be propagated); a
/// longer one is dropped, the `traceparent` kept.
pub const MAX_TRACESTATE: usize = 512;

/// The length of a version-00 `traceparent`: `00-{32 hex}-{16 hex}-{2 hex}`.
const TRACEPARENT_LEN: usize = 55;

/// A validated W3C trace context: a `traceparent` and, optionally, a `tracestate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    traceparent: Box<str>,
    tracestate: Option<Box<str>>,
}

impl TraceContext {
    /// A trace context from its two headers, or `None` when `traceparent` is malformed
    /// (wrong length or version, not lowercase hex, an all-zero trace or parent id). A
    /// malformed or oversized `tracestate` is dropped and the `traceparent` kept, as the
    /// W3C recommendation says. A `traceparent` of a later version keeps its first 55
    /// characters (the fields this version knows).
    #[must_use]
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        Some(Self {
            traceparent: Box::from(valid_traceparent(traceparent)?),
            tracestate: tracestate
                .filter(|state| valid_tracestate(state))
                .map(Box::from),
        })
    }

    /// The trace context in a request's `_meta`, if it carries a valid one.
    #[must_use]
    pub fn from_meta(meta: &JsonObject) -> Option<Self> {
        let traceparent = meta.get(TRACEPARENT)?.as_str()?;
        Self::parse(traceparent, meta.get(TRACESTATE).and_then(Value::as_str))
    }

    /// The context of the current `tracing` span's OpenTelemetry span, when it has a valid
    /// one (a `tracing_opentelemetry` layer is installed and the span is sampled or not).
    #[cfg(feature = "opentelemetry")]
    #[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
    #[must_use]
    pub fn current() -> Option<Self> {
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let context = tracing::Span::current().context();
        let span = context.span();
        let span_context = span.span_context();
        if !span_context.is_valid() {
            return None;
        }
        let traceparent = format!(
            "00-{}-{}-{:02x}",
            span_context.trace_id(),
            span_context.span_id(),
            span_context.trace_flags().to_u8()
        );
        let tracestate = span_context.trace_state().header();
        Self::parse(
            &traceparent,
            Some(tracestate.as_str()).filter(|s| !s.is_empty()),
        )
    }

    /// The `traceparent`.
    #[must_use]
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate`, if one was given (and valid).
    #[must_use]
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The trace id: 32 lowercase hex digits.
    #[must_use]
    pub fn trace_id(&self) -> &str {
        &self.traceparent[3..35]
    }

    /// Writes the context into a request's `_meta`.
    pub fn insert_into(&self, meta: &mut JsonObject) {
        meta.insert(TRACEPARENT.into(), Value::from(self.traceparent()));
        if let Some(state) = self.tracestate() {
            meta.insert(TRACESTATE.into(), Value::from(state));
        }
    }

    /// The context as a store column: a JSON object.
    #[cfg(any(test, feature = "sqlite", feature = "postgres"))]
    pub(crate) fn encode(&self) -> String {
        let mut object = JsonObject::new();
        self.insert_into(&mut object);
        Value::Object(object).to_string()
    }

    /// The context from its store column; an unreadable one reads as none (it is validated
    /// again, never trusted).
    #[cfg(any(test, feature = "sqlite", feature = "postgres"))]
    pub(crate) fn decode(column: Option<&str>) -> Option<Self> {
        let object: JsonObject = serde_json::from_str(column?).ok()?;
        Self::from_meta(&object)
    }

    /// The OpenTelemetry context whose remote parent span this is.
    #[cfg(feature = "opentelemetry")]
    pub(crate) fn otel_context(&self) -> opentelemetry::Context {
        use opentelemetry::trace::{
            SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
        };
        let hex = &self.traceparent;
        let trace_id = TraceId::from_hex(&hex[3..35]).unwrap_or(TraceId::INVALID);
        let span_id = SpanId::from_hex(&hex[36..52]).unwrap_or(SpanId::INVALID);
        let flags = u8::from_str_radix(&hex[53..55], 16).unwrap_or(0);
        let state = self
            .tracestate()
            .and_then(|state| state.parse::<TraceState>().ok())
            .unwrap_or_default();
        opentelemetry::Context::new().with_remote_span_context(SpanContext::new(
            trace_id,
            span_id,
            TraceFlags::new(flags & TraceFlags::SAMPLED.to_u8()),
            true,
            state,
        ))
    }
}

/// The trace context of a `tools/call` whose `_meta` is `meta`: the one the client sent,
/// else, under the `opentelemetry` feature, the current span's. The task stores it on its
/// own, validated; the `_meta` it stores does not hold it, so it never holds a malformed one.
pub(crate) fn of_call(meta: &JsonObject) -> Option<TraceContext> {
    let sent = TraceContext::from_meta(meta);
    #[cfg(feature = "opentelemetry")]
    let sent = sent.or_else(TraceContext::current);
    sent
}

/// The first 55 characters of a valid `traceparent`, or `None`.
fn valid_traceparent(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    // Version ff is invalid; version 00 is exactly 55 characters; a later version may
    // append fields after a dash.
    let fits = match text.get(0..2)? {
        "00" => bytes.len() == TRACEPARENT_LEN,
        "ff" => false,
        _ => {
            bytes.len() == TRACEPARENT_LEN
                || (bytes.len() > TRACEPARENT_LEN && bytes[TRACEPARENT_LEN] == b'-')
        }
    };
    if !fits {
        return None;
    }
    let head = &bytes[..TRACEPARENT_LEN];
    let dashes = head[2] == b'-' && head[35] == b'-' && head[52] == b'-';
    // The version, the trace id, the parent id and the flags, each in lowercase hex.
    let hex = [0..2, 3..35, 36..52, 53..55].into_iter().all(|field| {
        head[field]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    });
    let zero = |range: std::ops::Range<usize>| head[range].iter().all(|b| *b == b'0');
    (dashes && hex && !zero(3..35) && !zero(36..52)).then(|| &text[..TRACEPARENT_LEN])
}

/// A `tracestate` of at most [`MAX_TRACESTATE`] bytes and 32 members, each `key=value` in
/// printable ASCII.
fn valid_tracestate(text: &str) -> bool {
    if text.len() > MAX_TRACESTATE || !text.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return false;
    }
    let mut members = text.split(',').map(str::trim).filter(|m| !m.is_empty());
    members.clone().count() <= 32
        && members.all(|member| {
            member.split_once('=').is_some_and(|(key, value)| {
                !key.is_empty() && !value.is_empty() && !value.contains('=')
            })
        })
}

/// Where a run of a task's work runs: for the fields of its span.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Run<'a> {
    /// The instance id (cluster mode).
    pub(crate) instance: Option<&'a str>,
    /// The lease's epoch (cluster mode).
    pub(crate) epoch: Option<u64>,
}

/// The `task` span of one run of a task's work (see the module docs for its fields), whose
/// OpenTelemetry parent is the stored trace context under the `opentelemetry` feature.
pub(crate) fn task_span(
    id: &str,
    tool: &str,
    owner: &str,
    run: Run<'_>,
    trace: Option<&TraceContext>,
) -> tracing::Span {
    let span = tracing::info_span!(
        "task",
        task_id = %id,
        tool = %tool,
        owner = %owner,
        instance = run.instance,
        epoch = run.epoch,
        traceparent = trace.map(TraceContext::traceparent),
    );
    #[cfg(feature = "opentelemetry")]
    if let Some(trace) = trace {
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        // Without a tracing_opentelemetry layer there is nothing to parent.
        let _ = span.set_parent(trace.otel_context());
    }
    span
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_is_kept_with_its_trace_id() {
        let trace = TraceContext::parse(VALID, Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(trace.traceparent(), VALID);
        assert_eq!(trace.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(trace.tracestate(), Some("congo=t61rcWkgMzE"));
        assert_eq!(TraceContext::decode(Some(&trace.encode())), Some(trace));
    }

    #[test]
    fn malformed_traceparents_are_ignored() {
        for bad in [
            "",
            "00",
            "garbage",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01é",
        ] {
            assert_eq!(TraceContext::parse(bad, None), None, "{bad:?}");
        }
        let long = format!("{VALID}{}", "0".repeat(10_000));
        assert_eq!(TraceContext::parse(&long, None), None);
    }

    #[test]
    fn a_later_version_keeps_the_fields_this_one_knows() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra";
        let trace = TraceContext::parse(later, None).unwrap();
        assert_eq!(trace.traceparent(), &later[..55]);
    }

    #[test]
    fn a_bad_or_oversized_tracestate_is_dropped() {
        let huge = format!("k={}", "v".repeat(MAX_TRACESTATE));
        for bad in ["novalue", "a=b=c", "=v", "k=\u{7f}", huge.as_str()] {
            let trace = TraceContext::parse(VALID, Some(bad)).unwrap();
            assert_eq!(trace.tracestate(), None, "{bad:?}");
        }
        let many = (0..33)
            .map(|i| format!("k{i}=v"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(
            TraceContext::parse(VALID, Some(&many))
                .unwrap()
                .tracestate(),
            None
        );
    }

    #[test]
    fn meta_and_columns_without_a_valid_context_read_as_none() {
        let mut meta = JsonObject::new();
        meta.insert(TRACEPARENT.into(), Value::from(42));
        assert_eq!(TraceContext::from_meta(&meta), None);
        assert_eq!(TraceContext::decode(None), None);
        assert_eq!(TraceContext::decode(Some("not json")), None);
        assert_eq!(
            TraceContext::decode(Some(r#"{"traceparent":"00-x"}"#)),
            None
        );
    }
}
