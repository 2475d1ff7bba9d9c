//! The bounds on a request's `params._meta` ([`Limits::max_meta_bytes`],
//! [`Limits::max_meta_depth`]): a cheap look at the body first, a measure when it does not
//! settle it.

use rmcp::model::ErrorData;
use serde_json::Value;

use crate::{Limits, errors};

/// A compact re-serialization of parsed JSON is at most this many times longer than the
/// text it was parsed from (a float written `1e15` comes back as `1000000000000000.0`;
/// everything else keeps or loses length).
pub(crate) const MAX_GROWTH: usize = 5;

/// Whether the `params._meta` of message `bytes` is within `limits` whatever it holds: its
/// compact form is at most [`MAX_GROWTH`] times the body, and it nests at most as deep as
/// the body has brackets, less the message's and the params' own. The authority measures
/// `_meta` only when this is false, and rmcp decodes a body first only when it is true
/// (`guard::rmcp_first`): a body rmcp decodes first is never one the authority refuses for
/// its `_meta`.
pub(crate) fn meta_cannot_exceed(bytes: &[u8], limits: &Limits) -> bool {
    bytes.len().saturating_mul(MAX_GROWTH) <= limits.max_meta_bytes()
        && brackets(bytes) <= limits.max_meta_depth().saturating_add(2)
}

/// A request's `params._meta` (present) within [`Limits::max_meta_bytes`] and
/// [`Limits::max_meta_depth`], measured as compact JSON when the body alone does not settle
/// it ([`meta_cannot_exceed`]); otherwise the `-32602` naming the limit it is over.
pub(super) fn meta_within(method: &str, text: &str, limits: &Limits) -> Result<(), ErrorData> {
    if meta_cannot_exceed(text.as_bytes(), limits) {
        return Ok(());
    }
    let Some(meta) = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|mut message| message.pointer_mut("/params/_meta").map(Value::take))
    else {
        return Ok(());
    };
    let (depth, max_depth) = (depth(&meta), limits.max_meta_depth());
    if depth > max_depth {
        return Err(errors::meta_too_deep(method, depth, max_depth));
    }
    let size = serde_json::to_vec(&meta).map_or(0, |compact| compact.len());
    let max_bytes = limits.max_meta_bytes();
    if size > max_bytes {
        return Err(errors::meta_too_large(method, size, max_bytes));
    }
    Ok(())
}

/// How many levels `value` nests: 0 for a scalar, 1 for `{}` or `[]`.
pub(super) fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(fields) => 1 + fields.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// How many `[` and `{` bytes `bytes` has (JSON cannot nest deeper). `b | 0x20` maps `[`
/// (0x5B) to `{` (0x7B) and no other byte to it; per-chunk `u8` sums vectorize.
pub(super) fn brackets(bytes: &[u8]) -> usize {
    bytes
        .chunks(255)
        .map(|chunk| {
            chunk
                .iter()
                .fold(0u8, |count, &b| count + u8::from(b | 0x20 == b'{')) as usize
        })
        .sum()
}
