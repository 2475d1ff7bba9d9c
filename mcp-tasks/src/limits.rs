//! [`Limits`]: how much one request may carry and one task or owner may hold, with the
//! error each limit answers.
//!
//! | limit | default | set with | over it |
//! | --- | --- | --- | --- |
//! | request size (one JSON-RPC message: an HTTP body, a stdio line) | 4 MiB ([`Limits::DEFAULT_MAX_REQUEST_BYTES`]) | [`Limits::with_max_request_bytes`] | HTTP `413` with a JSON-RPC `-32600` body; stdio: one `-32600` line (without `id`: the request was not read), the stream goes on |
//! | `tools/call` `params.arguments`, serialized | 1 MiB ([`Limits::DEFAULT_MAX_ARGUMENTS_BYTES`]) | [`Limits::with_max_arguments_bytes`] | `-32602` naming `params.arguments`, its size and the limit (HTTP `400`); no task is created |
//! | a request's `params._meta`, serialized (every request: a `tools/call`'s is kept with its task while it runs) | 64 KiB ([`Limits::DEFAULT_MAX_META_BYTES`]) | [`Limits::with_max_meta_bytes`] | `-32602` naming `params._meta`, its size and the limit (`data.maxMetaBytes`; HTTP `400` on the 2026-07-28 wire); no task is created |
//! | how deep a request's `params._meta` nests (`{}` is one level) | 32 levels ([`Limits::DEFAULT_MAX_META_DEPTH`]) | [`Limits::with_max_meta_depth`] | `-32602` naming `params._meta`, its depth and the limit (`data.maxMetaDepth`); no task is created |
//! | outstanding input requests of one task | 32 ([`Limits::DEFAULT_MAX_INPUT_REQUESTS`]) | [`Limits::with_max_input_requests`] | the tool's `ctx.elicit(..)` (or `sample`, `roots`) past it fails with `-32603` naming the limit; the task's earlier questions stay outstanding |
//! | `statusMessage` length | 4,096 characters ([`Limits::DEFAULT_MAX_STATUS_CHARS`]) | [`Limits::with_max_status_chars`] | `ctx.status(..)` keeps the first 4,095 characters and ends the text with `…` (a status cannot fail) |
//! | live tasks of one owner: per server process, and across the cluster on a shared store | 10,000 ([`Limits::DEFAULT_MAX_LIVE_TASKS_PER_OWNER`]) | [`Limits::with_max_live_tasks_per_owner`] | `tools/call` answers `-32603` with `data.quota` naming the owner's quota; no task is created; the owner's other tasks and other owners are unaffected |
//! | finished tasks one owner keeps in the store (`completed`, `failed`, `cancelled`, until each is purged at its TTL) | 10,000 ([`Limits::DEFAULT_MAX_FINISHED_TASKS_PER_OWNER`]) | [`Limits::with_max_finished_tasks_per_owner`] | nothing is refused: at the store's next expiry sweep (about once a second) the owner's oldest finished tasks past the limit are removed early (at most 1,000 of them a sweep) (their TTL is cut short; a `tasks/get` of one answers as for a purged task); other owners' tasks and the owner's live tasks are never touched; on SQLite and Postgres a limit of 32 or more is kept to within a sixteenth of it for up to 30 s (a trim reads the whole limit from an index, so it waits until it has that much to remove) |
//! | how deep a task's result, its error or a step's value nests (`[]` is one level) | 100 levels ([`Limits::MAX_VALUE_DEPTH`]), fixed: a client's JSON reader stops at 128 (serde_json's), and the answer wraps the value in a few more | the task fails with `-32603` naming the result, error or step and the limit (`data.maxDepth`), instead of storing what no reader could read back; an inline call answers that error |
//! | task ids one `subscriptions/listen` may name | 256 ([`Limits::DEFAULT_MAX_LISTEN_TASK_IDS`]) | [`Limits::with_max_listen_task_ids`] | `-32602` naming `params.notifications.taskIds`, how many it named and the limit (`data.maxTaskIds`); no stream is opened |
//! | task listen streams one owner may hold open on one server | 64 ([`Limits::DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER`]) | [`Limits::with_max_listen_streams_per_owner`] | `-32603` naming the owner and the limit (`data.maxListenStreams`); the owner's open streams go on, and a closed one gives its place back |
//!
//! The finished-task limit keeps one owner from filling the store (and a store's capacity,
//! `with_max_tasks`, shared by every owner) with results nobody reads: an owner that
//! creates many short tasks keeps its newest finished ones, by creation time. Between two
//! sweeps an owner may hold more, by the tasks it finished since the last one. Every store
//! applies it; on a store several instances share (Postgres) it holds across the cluster:
//! each instance trims, at its sweep, the owners it created tasks for since the last one,
//! counting their finished tasks in the store by an index (no scan of other owners' tasks),
//! and keeps looking at an owner while it holds more tasks than the limit (its live ones
//! count), so a burst that was still running at one sweep is trimmed once it has ended. One
//! gap remains on Postgres: an owner's burst that was running when the instance watching it
//! stopped is trimmed at the latest at the owner's next create, or when the tasks' TTL
//! ends. (SQLite notes the owner as each task ends; after a restart, from the first create
//! on, since the limit comes with the creates.)
//!
//! The owner quota counts the tasks whose work runs in this process (so `ttl = "unlimited"`
//! tasks of one owner cannot take every slot of a shared server); a store's own capacity
//! (`MemoryStore::with_max_tasks`, `SqliteStore::with_max_tasks`) bounds all owners together.
//!
//! In cluster mode (a `PostgresStore` and
//! [`EngineBuilder::with_cluster`](crate::EngineBuilder::with_cluster)) the quota also holds
//! across the whole task space: the store counts the owner's live tasks (`working`,
//! `input_required`, not past their TTL) in the create's transaction, under a lock per owner,
//! so two instances creating for one owner at once take turns and neither takes it past the
//! quota; other owners do not wait. This covers queued calls too (fronts that record tasks
//! for workers count them when they are recorded; a worker that claims them refuses none).
//! Every instance of a cluster should set the same quota; a create is checked against its
//! own instance's. A retry with an idempotency key still answers the task it created.
//! `MemoryStore` and `SqliteStore` serve one process, and keep the in-process count only.
//! A call whose work started before its task existed (an inline budget, or a task-mode call
//! on a running instance) and is refused by the store's count is stopped before its first
//! step or input request.
//!
//! The request-size default is rmcp's own HTTP body limit, so a message accepted over HTTP
//! is accepted over stdio. Give an engine (and the server over it) its limits with
//! [`EngineBuilder::with_limits`](crate::EngineBuilder::with_limits):
//!
//! ```
//! use mcp_tasks::{Engine, Limits, TaskServer, Toolkit};
//!
//! let limits = Limits::default()
//!     .with_max_request_bytes(16 * 1024 * 1024)
//!     .with_max_arguments_bytes(8 * 1024 * 1024);
//! let engine = Engine::builder(Toolkit::new()).with_limits(limits).build();
//! let server = TaskServer::from_engine(engine);
//! assert_eq!(server.limits().max_request_bytes(), 16 * 1024 * 1024);
//! ```

/// Limits on what one request may carry and one task or owner may hold: the
/// [module docs](self) give each one's default (the `DEFAULT_*` constants) and what it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    max_request_bytes: usize,
    max_arguments_bytes: usize,
    max_meta_bytes: usize,
    max_meta_depth: usize,
    max_input_requests: usize,
    max_status_chars: usize,
    max_live_tasks_per_owner: usize,
    max_finished_tasks_per_owner: usize,
    max_listen_task_ids: usize,
    max_listen_streams_per_owner: usize,
}

impl Limits {
    /// The default size limit of one request: 4 MiB, the same as rmcp's HTTP body limit.
    pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;
    /// The default size limit of a `tools/call`'s `arguments`, serialized: 1 MiB.
    pub const DEFAULT_MAX_ARGUMENTS_BYTES: usize = 1024 * 1024;
    /// The default size limit of a request's `params._meta`, serialized: 64 KiB.
    pub const DEFAULT_MAX_META_BYTES: usize = 64 * 1024;
    /// The default depth limit of a request's `params._meta`: 32 levels.
    pub const DEFAULT_MAX_META_DEPTH: usize = 32;
    /// How deep a task's result, its error or a step's value may nest: 100 levels. Fixed,
    /// not a setting: JSON readers stop at 128 (serde_json, hence rmcp's clients and this
    /// crate's stores), and an answer wraps the value in a few levels of its own.
    pub const MAX_VALUE_DEPTH: usize = 100;
    /// The default number of outstanding input requests one task may have: 32.
    pub const DEFAULT_MAX_INPUT_REQUESTS: usize = 32;
    /// The default length of a `statusMessage`, in characters: 4,096.
    pub const DEFAULT_MAX_STATUS_CHARS: usize = 4096;
    /// The default number of live tasks one owner may have in one server process: 10,000.
    pub const DEFAULT_MAX_LIVE_TASKS_PER_OWNER: usize = 10_000;
    /// The default number of finished tasks one owner keeps in the store: 10,000.
    pub const DEFAULT_MAX_FINISHED_TASKS_PER_OWNER: usize = 10_000;
    /// The default number of task ids one `subscriptions/listen` may name: 256.
    pub const DEFAULT_MAX_LISTEN_TASK_IDS: usize = 256;
    /// The default number of task listen streams one owner may hold open on one server: 64.
    pub const DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER: usize = 64;

    /// The defaults (the same as [`Limits::default()`]).
    #[must_use]
    pub const fn new() -> Self {
        Self {
            max_request_bytes: Self::DEFAULT_MAX_REQUEST_BYTES,
            max_arguments_bytes: Self::DEFAULT_MAX_ARGUMENTS_BYTES,
            max_meta_bytes: Self::DEFAULT_MAX_META_BYTES,
            max_meta_depth: Self::DEFAULT_MAX_META_DEPTH,
            max_input_requests: Self::DEFAULT_MAX_INPUT_REQUESTS,
            max_status_chars: Self::DEFAULT_MAX_STATUS_CHARS,
            max_live_tasks_per_owner: Self::DEFAULT_MAX_LIVE_TASKS_PER_OWNER,
            max_finished_tasks_per_owner: Self::DEFAULT_MAX_FINISHED_TASKS_PER_OWNER,
            max_listen_task_ids: Self::DEFAULT_MAX_LISTEN_TASK_IDS,
            max_listen_streams_per_owner: Self::DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER,
        }
    }

    /// Sets the size limit of one request in bytes: an HTTP body or a stdio line (without
    /// its newline). Larger requests are answered with `-32600` and never parsed.
    #[must_use]
    pub const fn with_max_request_bytes(mut self, bytes: usize) -> Self {
        self.max_request_bytes = bytes;
        self
    }

    /// Sets the size limit of a `tools/call`'s `params.arguments` in bytes, as compact JSON.
    /// Larger arguments are answered with `-32602` before the tool sees them.
    #[must_use]
    pub const fn with_max_arguments_bytes(mut self, bytes: usize) -> Self {
        self.max_arguments_bytes = bytes;
        self
    }

    /// Sets the size limit of a request's `params._meta` in bytes, as compact JSON (every
    /// request; a `tools/call`'s `_meta` is kept with its task while it runs). A larger one is
    /// answered with `-32602` before anything is created.
    #[must_use]
    pub const fn with_max_meta_bytes(mut self, bytes: usize) -> Self {
        self.max_meta_bytes = bytes;
        self
    }

    /// Sets how deep a request's `params._meta` may nest, in levels (`{}` is one, at least
    /// 1). A deeper one is answered with `-32602` before anything is created.
    #[must_use]
    pub const fn with_max_meta_depth(mut self, levels: usize) -> Self {
        self.max_meta_depth = if levels == 0 { 1 } else { levels };
        self
    }

    /// Sets how many input requests one task may have outstanding at once (at least 1).
    #[must_use]
    pub const fn with_max_input_requests(mut self, requests: usize) -> Self {
        self.max_input_requests = if requests == 0 { 1 } else { requests };
        self
    }

    /// Sets the longest `statusMessage`, in characters (at least 1); longer ones are cut and
    /// end with `…`.
    #[must_use]
    pub const fn with_max_status_chars(mut self, chars: usize) -> Self {
        self.max_status_chars = if chars == 0 { 1 } else { chars };
        self
    }

    /// Sets how many live tasks one owner may have in this server process (at least 1), and,
    /// in cluster mode, in the whole task space (see the [module docs](self)).
    #[must_use]
    pub const fn with_max_live_tasks_per_owner(mut self, tasks: usize) -> Self {
        self.max_live_tasks_per_owner = if tasks == 0 { 1 } else { tasks };
        self
    }

    /// Sets how many finished tasks one owner keeps in the store (at least 1): past it, the
    /// store's next expiry sweep removes the owner's oldest finished tasks early, cutting
    /// their TTL short (see the [module docs](self)). Nothing is refused. A starting server
    /// also trims, over its first sweeps, every owner a process that stopped (or a higher
    /// bound before a restart) left past it in a SQLite or Postgres store. Those two stores
    /// trim an owner whose bound is 32 or more once it created a sixteenth of its bound since
    /// its last trim, or 30 s after the first of those creates.
    #[must_use]
    pub const fn with_max_finished_tasks_per_owner(mut self, tasks: usize) -> Self {
        self.max_finished_tasks_per_owner = if tasks == 0 { 1 } else { tasks };
        self
    }

    /// Sets how many task ids one `subscriptions/listen` may name (at least 1); a listen
    /// naming more (after removing repeats) is answered `-32602`. A stream keeps at most one
    /// pending state per id, so this also bounds what a slow reader makes the server hold.
    #[must_use]
    pub const fn with_max_listen_task_ids(mut self, ids: usize) -> Self {
        self.max_listen_task_ids = if ids == 0 { 1 } else { ids };
        self
    }

    /// Sets how many task listen streams one owner may hold open on one server at once (at
    /// least 1); one more is answered `-32603` until one of them ends.
    #[must_use]
    pub const fn with_max_listen_streams_per_owner(mut self, streams: usize) -> Self {
        self.max_listen_streams_per_owner = if streams == 0 { 1 } else { streams };
        self
    }

    /// How many task ids one `subscriptions/listen` may name.
    #[must_use]
    pub const fn max_listen_task_ids(&self) -> usize {
        self.max_listen_task_ids
    }

    /// How many task listen streams one owner may hold open on one server.
    #[must_use]
    pub const fn max_listen_streams_per_owner(&self) -> usize {
        self.max_listen_streams_per_owner
    }

    /// How many input requests one task may have outstanding.
    #[must_use]
    pub const fn max_input_requests(&self) -> usize {
        self.max_input_requests
    }

    /// The longest `statusMessage`, in characters.
    #[must_use]
    pub const fn max_status_chars(&self) -> usize {
        self.max_status_chars
    }

    /// How many live tasks one owner may have in this server process.
    #[must_use]
    pub const fn max_live_tasks_per_owner(&self) -> usize {
        self.max_live_tasks_per_owner
    }

    /// How many finished tasks one owner keeps in the store.
    #[must_use]
    pub const fn max_finished_tasks_per_owner(&self) -> usize {
        self.max_finished_tasks_per_owner
    }

    /// `message` within [`Limits::max_status_chars`]: cut, ending with `…`, when longer.
    pub(crate) fn clip_status(&self, message: String) -> String {
        let last_kept = message
            .char_indices()
            .nth(self.max_status_chars.saturating_sub(1));
        match last_kept {
            Some((cut, _)) if message[cut..].chars().nth(1).is_some() => {
                format!("{}…", &message[..cut])
            }
            _ => message,
        }
    }

    /// The size limit of one request in bytes.
    #[must_use]
    pub const fn max_request_bytes(&self) -> usize {
        self.max_request_bytes
    }

    /// The size limit of a `tools/call`'s arguments in bytes.
    #[must_use]
    pub const fn max_arguments_bytes(&self) -> usize {
        self.max_arguments_bytes
    }

    /// The size limit of a request's `params._meta` in bytes.
    #[must_use]
    pub const fn max_meta_bytes(&self) -> usize {
        self.max_meta_bytes
    }

    /// How deep a request's `params._meta` may nest, in levels.
    #[must_use]
    pub const fn max_meta_depth(&self) -> usize {
        self.max_meta_depth
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether `field`, a field of a task's result or error object, takes the object past
/// [`Limits::MAX_VALUE_DEPTH`] (the object itself is one level): the one measure of a stored
/// outcome and of an inline answer.
pub(crate) fn field_too_deep(field: &serde_json::Value) -> bool {
    nests_deeper(field, Limits::MAX_VALUE_DEPTH - 1)
}

/// Whether `value` nests more than `levels` levels (`[]` and `{}` are one). It looks no
/// deeper than `levels + 1`, so a value nested ever so deep costs no deeper recursion.
pub(crate) fn nests_deeper(value: &serde_json::Value, levels: usize) -> bool {
    use serde_json::Value;
    match value {
        Value::Array(_) | Value::Object(_) if levels == 0 => true,
        Value::Array(items) => items.iter().any(|item| nests_deeper(item, levels - 1)),
        Value::Object(fields) => fields.values().any(|field| nests_deeper(field, levels - 1)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::Limits;

    #[test]
    fn status_messages_are_cut_at_the_limit_on_a_char_boundary() {
        let limits = Limits::default().with_max_status_chars(4);
        assert_eq!(limits.clip_status("abcd".into()), "abcd");
        assert_eq!(limits.clip_status("abcde".into()), "abc…");
        assert_eq!(limits.clip_status("ééééé".into()), "ééé…");
        assert_eq!(limits.clip_status(String::new()), "");
        let one = Limits::default().with_max_status_chars(0);
        assert_eq!(one.clip_status("ab".into()), "…");
        assert_eq!(one.clip_status("a".into()), "a");
    }

    #[test]
    fn defaults_and_setters() {
        let limits = Limits::default();
        assert_eq!(limits.max_request_bytes(), 4 * 1024 * 1024);
        assert_eq!(limits.max_arguments_bytes(), 1024 * 1024);
        assert_eq!(
            (limits.max_meta_bytes(), limits.max_meta_depth()),
            (64 * 1024, 32)
        );
        let meta = Limits::default()
            .with_max_meta_bytes(100)
            .with_max_meta_depth(0);
        assert_eq!((meta.max_meta_bytes(), meta.max_meta_depth()), (100, 1));
        let limits = limits
            .with_max_request_bytes(10)
            .with_max_arguments_bytes(5);
        assert_eq!(
            (limits.max_request_bytes(), limits.max_arguments_bytes()),
            (10, 5)
        );
    }

    #[test]
    fn listen_limits_default_and_are_at_least_one() {
        let limits = Limits::default();
        assert_eq!(limits.max_listen_task_ids(), 256);
        assert_eq!(limits.max_finished_tasks_per_owner(), 10_000);
        assert_eq!(
            Limits::default()
                .with_max_finished_tasks_per_owner(0)
                .max_finished_tasks_per_owner(),
            1
        );
        assert_eq!(limits.max_listen_streams_per_owner(), 64);
        let limits = limits
            .with_max_listen_task_ids(3)
            .with_max_listen_streams_per_owner(2);
        assert_eq!(
            (
                limits.max_listen_task_ids(),
                limits.max_listen_streams_per_owner()
            ),
            (3, 2)
        );
        let floor = Limits::default()
            .with_max_listen_task_ids(0)
            .with_max_listen_streams_per_owner(0);
        assert_eq!(
            (
                floor.max_listen_task_ids(),
                floor.max_listen_streams_per_owner()
            ),
            (1, 1)
        );
    }
}
