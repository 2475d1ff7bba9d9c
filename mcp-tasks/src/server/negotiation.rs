//! Negotiation, written once, and what the transport layer
//! hands the engine with each request.
//!
//! A request runs on the modern wire when its own `_meta` names a protocol version without
//! `initialize` and it does not arrive in a session opened with `initialize`; it declares the
//! tasks extension when, on the modern wire, its own `_meta` client capabilities name
//! `io.modelcontextprotocol/tasks`. The request authority (`shape.rs`) decides that from the
//! `_meta` it read, [`Negotiation::of_meta`] from the `_meta` rmcp decoded; both end in
//! [`Negotiation::new`], so the guard and the engine cannot disagree.
//!
//! # One parse per request
//!
//! On stdio the line filter parses each message once and hands rmcp the message it decoded,
//! with its verdict, a [`Checked`], in the request's extensions. rmcp hands those extensions
//! to the handler (`RequestContext::extensions`; on HTTP inside the request's
//! `http::request::Parts`), and [`Incoming::of`] reads them once per request: the
//! negotiation, the client capabilities and the [`Owner`].
//!
//! On Streamable HTTP a stateless request on the 2026-07-28 wire is parsed once, by rmcp
//! (the guard's docs say which requests it reads first), and negotiated from the `_meta`
//! rmcp decoded, by the same rule; so is a request that reached the engine without the
//! guard (an rmcp transport of the caller's own).

use std::sync::Arc;

use rmcp::{
    RoleServer,
    model::{ClientCapabilities, ProtocolVersion, RequestMetaObject},
    service::RequestContext,
};
use serde::Deserialize;
use serde_json::Value;

use super::Owner;

/// The `_meta` key of the protocol version a request runs on.
pub(crate) const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` key of the capabilities the client declares on a request.
pub(crate) const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";

/// How one request negotiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Negotiation {
    /// The request runs on the modern wire (no `initialize`, its own `_meta` names a
    /// protocol version without one).
    pub(crate) modern: bool,
    /// The request declares the tasks extension, on the modern wire.
    pub(crate) declares_tasks: bool,
}

impl Negotiation {
    /// The rule: `protocol_version` and `capabilities` as the request's own `_meta` carries
    /// them (`None` when absent or not of their type), `legacy_session` whether it arrives in
    /// a session opened with `initialize`.
    pub(crate) fn new(
        protocol_version: Option<&str>,
        capabilities: Option<&ClientCapabilities>,
        legacy_session: bool,
    ) -> Self {
        let modern = !legacy_session
            // As `ProtocolVersion::has_initialize`: versions are dates, compared as text.
            && protocol_version.is_some_and(|version| version >= ProtocolVersion::NO_INITIALIZE.as_str());
        Self {
            modern,
            declares_tasks: modern && capabilities.is_some_and(ClientCapabilities::supports_tasks),
        }
    }

    /// From the `_meta` rmcp decoded.
    pub(crate) fn of_meta(
        meta: &RequestMetaObject,
        legacy_session: bool,
    ) -> (Self, Option<ClientCapabilities>) {
        let meta = &meta.0.0;
        let version = meta.get(PROTOCOL_VERSION_KEY).and_then(Value::as_str);
        let capabilities = meta
            .get(CLIENT_CAPABILITIES_KEY)
            .and_then(|caps| ClientCapabilities::deserialize(caps).ok());
        (
            Self::new(version, capabilities.as_ref(), legacy_session),
            capabilities,
        )
    }
}

/// The guard's verdict on a request it let through, left in the request's extensions for
/// the engine (see the [module docs](self)).
#[derive(Clone, Debug)]
pub(crate) struct Checked {
    /// How the request negotiated, as the guard judged it.
    pub(crate) negotiation: Negotiation,
    /// The client capabilities of the request's own `_meta`, decoded.
    pub(crate) capabilities: Option<ClientCapabilities>,
    /// The request is a `subscriptions/listen` whose filter names `taskIds`: the transports
    /// hand it to the push module (`push/`) instead of rmcp, which has no `taskIds`.
    #[cfg(any(feature = "http", feature = "stdio"))]
    pub(crate) task_listen: bool,
}

/// What the engine needs to know about a request besides its params, read once.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub(crate) negotiation: Negotiation,
    /// The client capabilities of the request's own `_meta` (or, in a legacy session, of
    /// `initialize`).
    pub(crate) capabilities: Option<ClientCapabilities>,
    /// The principal the request runs as.
    pub(crate) owner: Arc<str>,
}

impl Incoming {
    /// Reads the guard's [`Checked`] and the [`Owner`] from the request's extensions (or,
    /// on HTTP, the extensions of the request's `Parts`); negotiates from the decoded `_meta`
    /// when no guard ran. `default_owner` answers for a request without an [`Owner`].
    pub(crate) fn of(context: &RequestContext<RoleServer>, default_owner: &Arc<str>) -> Self {
        let direct = &context.extensions;
        #[cfg(feature = "http")]
        let parts = direct
            .get::<axum::http::request::Parts>()
            .map(|parts| &parts.extensions);
        #[cfg(not(feature = "http"))]
        let parts: Option<&rmcp::model::Extensions> = None;
        let checked = direct.get::<Checked>().or_else(|| parts?.get::<Checked>());
        let owner = direct.get::<Owner>().or_else(|| parts?.get::<Owner>());
        let owner = owner.map_or_else(|| default_owner.clone(), |owner| owner.0.clone());
        // A session opened with `initialize` is legacy whatever the request says (R53); the
        // guard only sees its transport's marker of one, the engine sees the peer.
        let peer = context.peer.peer_info();
        let legacy_peer = peer.is_some_and(|info| info.protocol_version.has_initialize());
        let (negotiation, capabilities) = match checked {
            Some(checked) if !legacy_peer => (checked.negotiation, checked.capabilities.clone()),
            _ => Negotiation::of_meta(&context.meta, legacy_peer),
        };
        // Without its own, a legacy session's request has the capabilities of `initialize`.
        let capabilities = capabilities.or_else(|| context.client_capabilities());
        Self {
            negotiation,
            capabilities,
            owner,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Negotiation;

    fn meta(version: &str, extensions: serde_json::Value) -> serde_json::Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": { "extensions": extensions },
        })
    }

    fn negotiate(meta: &serde_json::Value, legacy_session: bool) -> Negotiation {
        let meta = serde_json::from_value(meta.clone()).expect("a _meta object");
        Negotiation::of_meta(&meta, legacy_session).0
    }

    #[test]
    fn a_modern_request_that_declares_the_extension() {
        let declaring = meta("2026-07-28", json!({ "io.modelcontextprotocol/tasks": {} }));
        let n = negotiate(&declaring, false);
        assert!(n.modern && n.declares_tasks, "{n:?}");
        let later = meta("2027-01-01", json!({ "io.modelcontextprotocol/tasks": {} }));
        assert!(negotiate(&later, false).declares_tasks);
    }

    #[test]
    fn nothing_declares_on_the_legacy_wire() {
        let declaring = meta("2026-07-28", json!({ "io.modelcontextprotocol/tasks": {} }));
        assert_eq!(negotiate(&declaring, true), Negotiation::default());
        let old = meta("2025-11-25", json!({ "io.modelcontextprotocol/tasks": {} }));
        assert_eq!(negotiate(&old, false), Negotiation::default());
        assert_eq!(
            Negotiation::of_meta(&rmcp::model::RequestMetaObject::default(), false).0,
            Negotiation::default()
        );
    }

    #[test]
    fn capabilities_that_do_not_decode_declare_nothing() {
        let plain = meta("2026-07-28", json!({}));
        let n = negotiate(&plain, false);
        assert!(n.modern && !n.declares_tasks, "{n:?}");
        let broken = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": 5,
        });
        let n = negotiate(&broken, false);
        assert!(n.modern && !n.declares_tasks, "{n:?}");
        let numeric = json!({ "io.modelcontextprotocol/protocolVersion": 20260728 });
        assert!(!negotiate(&numeric, false).modern);
    }
}
