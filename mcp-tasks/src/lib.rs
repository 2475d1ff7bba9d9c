//! # mcp-tasks
//!
//! Long-running MCP tools as **tasks**, under the Tasks extension
//! `io.modelcontextprotocol/tasks` ([`EXTENSION_ID`]), revision [`REVISION`], on
//! [rmcp](https://docs.rs/rmcp), the official Rust MCP SDK.
//!
//! A tool implements [`TaskTool`] (the [`#[task_tool]`](task_tool) attribute writes that for
//! an ordinary `async fn`); a [`Toolkit`] collects tools ([`toolkit!`] builds one); a
//! [`TaskServer`] serves them over stdio or Streamable HTTP, and an [`Engine`] adds them to
//! an rmcp server of your own. A client that declares the extension on a `tools/call` may get
//! a task handle back and follows it with `tasks/get`, `tasks/update` and `tasks/cancel`;
//! every other client sees ordinary MCP.
//!
//! Tasks are kept in a [`TaskStore`]: [`MemoryStore`] is the embedded default.
//!
//! ```sh
//! cargo add mcp-tasks --features http
//! cargo add tokio --features macros,rt-multi-thread,net
//! ```
//!
//! The [guide] walks through adding task tools to an rmcp server, tool modes and restart
//! policies, durable steps and questions, the client and command line, several instances,
//! security, operating and troubleshooting.
//!
//! # Features
//!
//! None is on by default.
//!
//! | feature | what it adds |
//! | --- | --- |
//! | `stdio` | [`serve_stdio`] |
//! | `http` | [`serve_http`] and [`http_router`] (Streamable HTTP via axum), with [`HttpOptions`]: bearer tokens, allowed origins and hosts |
//! | `sqlite` | [`SqliteStore`], the durable store on one SQLite file (SQLite built in) |
//! | `postgres` | [`PostgresStore`], the task space several instances share on a Postgres server (leases, fencing, wake-ups) |
//! | `postgres-tls` | TLS for [`PostgresStore`] (rustls): `sslmode` `require`, `verify-ca`, `verify-full` and `sslrootcert` from the connection string ([`store::postgres::tls`]) |
//! | `client` | [`client::TaskClient`]: call tools and follow tasks (poll, input, cancel, resume) over stdio child processes and `http://` |
//! | `https` | `https://` endpoints for the client (rustls) |
//! | `cli` | the `mcp-tasks` command-line client |
//! | `admin` | [`admin::router`]: the operators' API and web view (list, detail, cancel, purge), behind a credential of its own |
//! | `opentelemetry` | each task's span continues the trace of the call that created it, on any instance ([`trace`]); the client sends the current span's context |
//! | `prometheus` | [`metrics::install_prometheus`] and [`metrics::prometheus_router`]: the crate's metrics (always recorded through the `metrics` facade) on a Prometheus scrape page |
//!
//! On docs.rs, items behind a feature say so ("Available on crate feature ... only").

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// The docs link to items of every feature; without all of them those links cannot resolve.
// The doc build with every feature (docs.rs's, and CI's with `-D warnings`) checks them all.
#![cfg_attr(
    not(all(
        feature = "stdio",
        feature = "http",
        feature = "sqlite",
        feature = "postgres-tls",
        feature = "client",
        feature = "admin",
        feature = "prometheus"
    )),
    allow(rustdoc::broken_intra_doc_links)
)]
#![warn(missing_docs)]

#[cfg(feature = "admin")]
pub mod admin;
#[cfg(feature = "client")]
pub mod client;
mod clock;
mod context;
pub mod duration;
mod errors;
mod extract;
pub mod guide;
mod id;
pub mod limits;
pub mod metrics;
pub mod rate;
mod runtime;
pub mod server;
pub mod store;
pub mod tool;
pub mod toolkit;
pub mod trace;

pub use context::{Keyed, MAX_INPUT_KEY_LEN, RetryPolicy, State, StepError, TaskContext};
pub use limits::Limits;
/// Turns an `async fn` into a task tool.
///
/// ```
/// use mcp_tasks::{State, TaskContext, ToolError, task_tool, toolkit};
/// use schemars::JsonSchema;
/// use serde::Serialize;
///
/// #[derive(Serialize, JsonSchema)]
/// struct Report {
///     pages: u32,
/// }
///
/// #[derive(Clone)]
/// struct Http; // a client, a pool, ...
///
/// /// Crawls a site and reports how many pages it has.
/// #[task_tool(ttl = "10m", poll_interval = "2s", mode = "optional", inline_budget = "250ms", read_only)]
/// async fn crawl(
///     ctx: TaskContext,
///     State(_http): State<Http>,
///     #[arg(description = "Where to start")] url: String,
///     max_pages: Option<u32>,
/// ) -> Result<Report, ToolError> {
///     ctx.status(format!("crawling {url}")).await;
///     Ok(Report { pages: max_pages.unwrap_or(1) })
/// }
///
/// let toolkit = toolkit![crawl]?.with_state(Http);
/// # assert!(toolkit.contains("crawl"));
/// # Ok::<(), mcp_tasks::ToolkitError>(())
/// ```
///
/// The fn is emitted unchanged (but for the `#[arg]`/`#[args]` helper attributes); beside it
/// a braced unit struct of the same name implements [`TaskTool`], which is what
/// [`toolkit!`] registers.
///
/// # Arguments of the attribute
///
/// | argument | default | meaning |
/// | --- | --- | --- |
/// | `ttl = "10m"` or `"unlimited"` | `"1h"` | the task's `ttlMs` |
/// | `poll_interval = "1s"` | `"1s"` | the task's `pollIntervalMs`; at most `ttl` |
/// | `mode = "required" \| "optional" \| "inline"` | `"optional"` | see [`Mode`] |
/// | `inline_budget = "250ms"` | none | answer inline if done this soon (`optional` only) |
/// | `name = ".."` | the fn name | the wire name (`A-Z a-z 0-9 _ - .`, 1 to 128) |
/// | `title = ".."` | none | the human-readable title |
/// | `description = ".."` | the doc comment | the description |
/// | `read_only`, `destructive`, `idempotent`, `open_world` (`= false` to deny) | unset | the annotations' hints |
/// | `restart = "fail" \| "resume"` | `"fail"` | after a restart on a durable store, see [`RestartPolicy`] |
/// | `version = ".."` | a digest of the tool | a task is only replayed by the version that started it; see [Versions](#versions) |
/// | `concurrency = 3` | none | at most this many of the tool's tasks run at once, across the cluster on a shared store (`required` only); see [`ToolDefinition::with_concurrency`] |
/// | `key_concurrency = 1` | none | at most this many of the tool's tasks run at once for each value of `limit_key`, across the cluster on a shared store (`required` only); see [`ToolDefinition::with_key_concurrency`] |
/// | `key_rate = "10/1m"` | none | at most this many starts of the tool's tasks for each value of `limit_key` in any window of this length, across the cluster on a shared store (`required` only); see [`ToolDefinition::with_key_rate`] |
/// | `limit_key = "owner"` | none | what `key_concurrency` and `key_rate` count by: `"owner"`, or the name of one of the function's arguments (e.g. `"workspace_id"`) |
/// | `rate = "10/1m"` | none | at most this many starts of the tool's tasks in any window of this length, across the cluster on a shared store (`required` only); see [`ToolDefinition::with_rate`] |
/// | `crate = "path"` | `::mcp_tasks` | where the runtime is, for re-exports and renames |
///
/// Durations are whole numbers of `d`, `h`, `m`, `s`, `ms`, largest first, without spaces:
/// `"250ms"`, `"10s"`, `"1h30m"`. They are checked at compile time.
///
/// # Parameters
///
/// - A parameter of type [`TaskContext`] receives the call's context; one of type
///   [`State<T>`] receives the state registered with [`Toolkit::with_state`] (a call ends
///   with a JSON-RPC error if it was not registered). They are recognised by type, not by
///   name: `use mcp_tasks::TaskContext as Ctx`, a full path or a `type` alias work the same,
///   and a type of your own named `State` is an argument like any other.
/// - Every other parameter is one property of the input schema (JSON Schema 2020-12, root
///   `type: "object"`): its type must implement `serde::Deserialize` and
///   `schemars::JsonSchema`. A parameter whose type decodes from `null` (an `Option`) is not
///   required. `#[arg(description = "..", rename = "..", default)]` documents it, renames it
///   on the wire, or makes it optional with `Default::default()` (shown as the schema's
///   `default`).
/// - `#[arg(header = "Region")]` also sends the argument as the HTTP header `Mcp-Param-Region`
///   (SEP-2243): the property gets `"x-mcp-header": "Region"`, clients
///   on Streamable HTTP copy its value into the header, and the server answers a call whose
///   header is missing or differs from the argument with HTTP 400 and `-32020`, so a
///   gateway can route on the header without reading the body. The name must be an HTTP token
///   (letters, digits, `-`, ...), written without the `Mcp-Param-` prefix, and unique within
///   the tool without regard to case; the type must be a string, an integer or a boolean (or
///   an `Option` of one). A float, a list or a map is refused at compile time; a type the
///   macro cannot see into (a newtype of `f64`) is refused when the toolkit registers the
///   tool ([`DefinitionError::HeaderNotPrimitive`]). See [`tool::headers`].
/// - Or one `#[args]` parameter: a struct that is the whole argument object, so its field
///   docs become the property descriptions.
///
/// Arguments are decoded before any task exists: a bad or missing field answers at once with
/// `isError: true` naming the field and the expected type, e.g.
/// ``"`count`: invalid type: string \"a\", expected u32"``.
///
/// # Return types
///
/// | the fn returns | the caller gets |
/// | --- | --- |
/// | `T: Serialize + JsonSchema` | `structuredContent` plus a text copy; `outputSchema` from `T` |
/// | `()` | an empty successful result, no `outputSchema` |
/// | `rmcp::model::CallToolResult` | that result, as is |
/// | `Result<T, E>` with `E: Display` | `Ok` as above; `Err` as `isError: true` with its text |
/// | `Result<T, ToolError>` | [`ToolError::new`]: `isError`; [`ToolError::rpc`]: the task ends `failed`; [`ToolError::cancelled`]: `cancelled` |
/// | `Result<T, Failure>` or `Result<T, ErrorData>` | the task ends `failed` (or `cancelled`) |
///
/// An `outputSchema` must describe an object: when `T`'s schema is not `type: "object"` (a
/// number, a string, a list, an enum, an `Option`), the value is wrapped as
/// `{"result": value}` and the schema says so.
///
/// # Versions
///
/// A task of a `restart = "resume"` tool that a restarted server finds unfinished is replayed
/// only by the same version of the tool; otherwise it ends `failed` with a message naming both
/// versions. Without `version = ".."` the version is a digest of the tool itself
/// ([`ToolDefinition::with_digest_version`]): its wire name, input schema, output schema, and
/// the tokens of the fn's parameters, return type and body (not its name, docs, comments or
/// layout). The trade-off:
///
/// - **the digest** (default) follows the tool without anyone remembering to: a release that
///   leaves the tool alone resumes its tasks (a crate version bump does not matter), and any
///   change to the tool's code or schemas fails them rather than replaying stored steps and
///   answers into code they were not recorded by. It is conservative: a refactor that keeps
///   the behaviour (or a change in a helper the fn calls, which the digest cannot see) is
///   judged by the fn's own tokens only;
/// - **an explicit `version = "3"`** is the author's promise: bump it when a change makes old
///   tasks unsafe to replay, keep it to let them resume across changes the digest would
///   count (renaming a local, fixing a log message), or when the behaviour lives in code
///   outside the fn.
pub use mcp_tasks_macros::task_tool;
pub use runtime::recover::RecoveryReport;
pub use runtime::{ClusterConfig, PriorityInput, ShutdownReport, StartError, Worker, WorkerHandle};
pub use server::IDEMPOTENCY_KEY;
#[cfg(feature = "http")]
pub use server::{
    AuthError, HttpOptions, LIVENESS_PATH, LOCALHOST_ORIGINS, ProtectedResourceError,
    READINESS_PATH, READINESS_STORE_TIMEOUT, StaticTokens, TokenListError, TokenValidator,
    http_router, serve_http, serve_http_with_shutdown,
};
pub use server::{
    DEFAULT_OWNER, DEFAULT_REQUEST_STATE_TTL, Engine, EngineBuilder, Owner, RequestStateKey,
    RequestStateKeyError, TaskServer,
};
#[cfg(feature = "stdio")]
pub use server::{serve_io, serve_stdio};
#[cfg(feature = "postgres")]
pub use store::PostgresStore;
#[cfg(feature = "sqlite")]
pub use store::SqliteStore;
pub use store::{ClaimOrder, MemoryStore, TaskStore};
pub use tool::{
    ArgumentError, Failure, LimitKey, Mode, ProgressError, RestartPolicy, TaskTool, ToolDefinition,
    ToolError, ToolFuture, Ttl,
};
pub use toolkit::{DefinitionError, Toolkit, ToolkitError};

/// Several instances on one task space: [`ClusterConfig`] and its defaults, [`Worker`].
pub mod cluster {
    pub use crate::runtime::cluster::{
        ClusterConfig, DEFAULT_CLAIM_INTERVAL, DEFAULT_LEASE, DEFAULT_OWNER_BUCKET,
        DEFAULT_RENEWAL, DEFAULT_REREAD_INTERVAL,
    };
    pub use crate::runtime::lifecycle::DEFAULT_SHUTDOWN_GRACE;
    pub use crate::runtime::worker::{Worker, WorkerHandle};
}

/// The extension identifier: the capability key and reserved label of SEP-2663.
pub const EXTENSION_ID: &str = rmcp::model::TASKS_EXTENSION_ID;

/// The revision of the Tasks extension this crate implements: `2026-07-28`.
///
/// "Targeting 2026-07-28" means: the wire shapes, status machine and error codes are those of
/// the extension's stable `2026-07-28` release (flat `CreateTaskResult` with
/// `resultType: "task"`, `DetailedTask` in `tasks/get`, input through `inputRequests` and
/// `tasks/update`, ack-only `tasks/cancel`, `-32021` for a missing capability), negotiated per
/// request on the core protocol version `2026-07-28` or later. Requests on older protocol
/// versions (the `initialize` handshake) never see a task, and the `2025-11-25` experimental
/// tasks (`params.task`, `tasks/result`, `tasks/list`) are not offered.
pub const REVISION: &str = "2026-07-28";

/// Builds a [`Toolkit`] from `#[task_tool]` fns: `toolkit![search, summarize]`.
///
/// Evaluates to `Result<Toolkit, ToolkitError>`: registering checks each definition
/// ([`ToolkitError::InvalidDefinition`], e.g. an `#[args]` struct whose schema is not an
/// object) and names ([`ToolkitError::DuplicateName`]). Two tools with the same wire name are
/// also rejected at compile time: the same fn listed twice, and (by evaluating the names in a
/// constant) two fns with the same `name = ".."`. Add state and hand-written tools on the
/// result:
///
/// ```
/// use mcp_tasks::{task_tool, toolkit};
///
/// /// Adds two numbers.
/// #[task_tool]
/// async fn add(a: i64, b: i64) -> i64 {
///     a + b
/// }
///
/// /// Says hello.
/// #[task_tool(name = "say-hello", mode = "inline")]
/// async fn hello() -> String {
///     "hello".into()
/// }
///
/// let toolkit = toolkit![add, hello]?.with_state(42_u32);
/// assert_eq!(toolkit.len(), 2);
/// # Ok::<(), mcp_tasks::ToolkitError>(())
/// ```
#[macro_export]
macro_rules! toolkit {
    ($($tools:tt)*) => {
        $crate::__private::toolkit!($crate; $($tools)*)
    };
}

#[doc(hidden)]
pub mod __private {
    //! What `#[task_tool]`, `toolkit!` and `task_methods!` expand to. Not a public API.
    pub use std::{sync::OnceLock, time::Duration};

    /// For `task_methods!`.
    pub use rmcp;

    pub use mcp_tasks_macros::toolkit;

    pub use rmcp::model::{JsonObject, ToolAnnotations};

    pub use crate::{
        context::TaskContext,
        // The command-line client's error messages.
        errors::error_chain,
        extract::{
            Tag, params,
            registry::{NamedTool, add_tool, assert_unique_names},
            returns,
        },
        rate::Rate,
        tool::{
            ArgumentError, LimitKey, Mode, RestartPolicy, TaskTool, ToolDefinition, ToolFuture, Ttl,
        },
        toolkit::{Toolkit, ToolkitError},
    };

    /// Whether a `ttl` of `ttl_ms` is at least [`DEFAULT_POLL_INTERVAL`]: `#[task_tool]`
    /// checks a `ttl` written without a `poll_interval` with it, at compile time.
    ///
    /// [`DEFAULT_POLL_INTERVAL`]: crate::tool::DEFAULT_POLL_INTERVAL
    #[must_use]
    pub const fn ttl_fits_default_poll_interval(ttl_ms: u64) -> bool {
        crate::tool::DEFAULT_POLL_INTERVAL.as_millis() <= ttl_ms as u128
    }

    /// Whether a `poll_interval` of `poll_ms` is at most [`DEFAULT_TTL`]: `#[task_tool]`
    /// checks a `poll_interval` written without a `ttl` with it, at compile time.
    ///
    /// [`DEFAULT_TTL`]: crate::tool::DEFAULT_TTL
    #[must_use]
    pub const fn poll_interval_fits_default_ttl(poll_ms: u64) -> bool {
        match crate::tool::DEFAULT_TTL {
            Ttl::After(ttl) => poll_ms as u128 <= ttl.as_millis(),
            Ttl::Unlimited => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::__private::{poll_interval_fits_default_ttl, ttl_fits_default_poll_interval};

    #[test]
    fn the_macro_checks_against_the_runtime_defaults_at_their_bounds() {
        // tool::DEFAULT_POLL_INTERVAL is 1 s and tool::DEFAULT_TTL one hour.
        assert!(ttl_fits_default_poll_interval(1_000));
        assert!(!ttl_fits_default_poll_interval(999));
        assert!(poll_interval_fits_default_ttl(3_600_000));
        assert!(!poll_interval_fits_default_ttl(3_600_001));
        assert!(ttl_fits_default_poll_interval(u64::MAX));
        assert!(poll_interval_fits_default_ttl(0));
    }
}

/// The README's Rust examples, compiled as doctests (they need the `http` feature).
/// `README.md` in this package is the workspace README (a link in the repository, a copy in
/// the published crate).
#[cfg(all(doctest, feature = "http"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
