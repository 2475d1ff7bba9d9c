//! [`PostgresStore`]: one task space on a Postgres server, shared by every instance of a
//! server (and by workers).
//!
//! # Invariants
//!
//! The store keeps the [`TaskStore`](super::TaskStore) contract (module docs of
//! [`store`](super)) for every client of the schema at once, and the cluster one
//! ([`ClusterStore`](super::ClusterStore)). How:
//!
//! - **Rows are the truth.** Every field of a task is a column of `tasks` (status, message,
//!   timestamps, TTL, poll interval, owner, tool and version, arguments, the creating
//!   request's `_meta`, input requests, used keys and answers, result or error, cancel
//!   intent, runner, lease deadline, epoch, idempotency key); completed steps are rows of
//!   `steps`. No instance keeps task state that another one could not read.
//! - **Acknowledged means committed.** A change returns only after the `COMMIT` that holds it
//!   returned, under the server's `synchronous_commit` (the store does not lower it; with the
//!   default `on` a commit waits for the WAL flush). A commit whose answer is lost (the
//!   connection dropped) is reported as a [`StoreError::Backend`] that says so; the task is
//!   then either fully stored or not at all, never half.
//! - **One change at a time per task.** A change reads its row `FOR UPDATE`, applies the
//!   expiry that is due, checks the lease's epoch (for a fenced write), runs the transition
//!   of the state machine every store shares, and writes back what it changed in the same
//!   transaction.
//! - **Creates in groups.** Creates queued at the same moment share one multi-row `INSERT`
//!   and one commit. The unique index on (owner, tool, idempotency key) makes a
//!   retried create atomic: of concurrent creates with one key, one inserts, every other
//!   answers [`Created::Existing`](super::Created::Existing) with that task (within its
//!   TTL; past it the key is released and a new task is created).
//! - **One clock, the database's.** Lease deadlines are the server's `clock_timestamp()`
//!   plus the lease length, and so are the claims' lapse checks. Everything else that
//!   reads a clock (`createdAt` and `lastUpdatedAt`, TTL deadlines, expiry, the claims'
//!   TTL filter) reads the instance's clock corrected by its offset from the server's,
//!   measured when the store connects: instances whose clocks disagree
//!   still agree on when a task expires. The correction is off by at most half the round
//!   trip of that measurement, plus what the instance's monotonic clock drifts from the
//!   server's clock afterwards.
//! - **Claims skip locked rows.** [`claim`](super::ClusterStore::claim) and
//!   [`expire_due`](super::TaskStore::expire_due) select their rows
//!   `FOR UPDATE SKIP LOCKED` in small batches: instances running them at once split the
//!   rows between them, never wait on each other, and never process a row twice (a claim
//!   increments the epoch; an expiry leaves the live set).
//! - **Fencing.** A fenced write whose lease epoch (or instance) is not the row's changes
//!   nothing and answers [`StoreError::Fenced`].
//! - **Wake-ups in the same transaction.** [`deliver_input`](super::TaskStore::deliver_input)
//!   and [`request_cancel`](super::TaskStore::request_cancel) `NOTIFY` the schema's channel in
//!   the transaction of the change, so the notification is sent exactly when the change
//!   commits; so does a create with no runner. Each store listens on one connection
//!   (opened by the first [`wakeups`](super::ClusterStore::wakeups) call) and announces
//!   every notification as a [`Notice`] (one encoding, `notice.rs`); it keeps no list of
//!   leases. Which tasks run on an instance is that
//!   instance's runtime's knowledge: it keeps the wake-ups of its own tasks and re-reads
//!   them to cover a notification lost while the connection was down, and its claims find
//!   queued tasks whose announcement was lost.
//! - **Connections.** A pool ([`deadpool_postgres`]); a connection that fails mid-transaction,
//!   or whose operation is dropped mid-way, is closed, never handed out again in an unknown
//!   state. A read, and a transaction's `BEGIN`, that meet a connection gone stale in the pool
//!   (its backend terminated) are retried once on a fresh connection; no write is retried.
//! - **Schema.** Created and migrated by the store in its own Postgres schema
//!   ([`with_schema`](PostgresBuilder::with_schema); tests use one each), versioned in its
//!   `meta` table, one step per version, each in one transaction, instances taking turns
//!   (an advisory lock). A schema of a newer version is refused and left untouched.

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use deadpool_postgres::{ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::{broadcast, mpsc};
use tokio_postgres::{
    Socket,
    tls::{MakeTlsConnect, TlsConnect},
};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::{
    BackendError, ConfigError, Lease, NewTask, Notice, Outcome, StoreError,
    memory::DEFAULT_EXPIRED_RETENTION,
};
use crate::clock::{Clock, millis};

mod admin;
mod batch;
mod claim;
mod clock;
mod cluster;
mod listener;
mod notice;
mod pool;
mod rate_log;
mod row;
mod schema;
mod tasks;
pub mod tls;

use pool::PgError;
pub use schema::SCHEMA_VERSION;
pub use tls::SslMode;

/// Default connections in the pool.
pub const DEFAULT_POOL_SIZE: usize = 8;
/// Default Postgres schema of the task tables.
pub const DEFAULT_SCHEMA: &str = "mcp_tasks";
/// Default time to wait for a new connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `application_name` of the store's connections (when the URL sets none).
pub const DEFAULT_APPLICATION_NAME: &str = "mcp-tasks";
/// Default number of wake-ups held for a runtime that has not read them yet.
pub const DEFAULT_WAKEUP_CAPACITY: usize = 1024;
/// Default time from the end of one pass over every owner's finished tasks to the start of
/// the next ([`PostgresBuilder::with_trim_pass_every`]).
pub const DEFAULT_TRIM_PASS_EVERY: Duration = Duration::from_secs(3600);

/// How long the server lets a connection of the store sit idle inside a transaction before
/// it ends the session (`idle_in_transaction_session_timeout`). The store's transactions
/// last milliseconds; a process stalled in the middle of one (SIGSTOP, a VM pause) would keep
/// its rows locked, and claims skip locked rows, so without this a stalled instance could
/// keep its tasks from being taken over for as long as it stalls.
const IDLE_IN_TRANSACTION_TIMEOUT_MS: u64 = 10_000;

/// Tasks one expiry or purge statement takes at most (the sweep repeats until none is due).
const SWEEP_BATCH: i64 = 256;

/// How [`PostgresStore::connect`] sets up the store; every setting has a documented default.
///
/// Made from a connection string ([`PostgresStore::builder`]) or from a
/// [`tokio_postgres::Config`] of the caller's own ([`PostgresStore::builder_from_config`]).
/// TLS comes from the connection string's `sslmode` and `sslrootcert` (the
/// [`tls`] module tells what each checks; the built-in connector needs the `postgres-tls`
/// feature), from [`with_ssl_mode`](Self::with_ssl_mode) and
/// [`with_ssl_root_cert`](Self::with_ssl_root_cert), or from a connector of the caller's own
/// ([`with_tls`](Self::with_tls)).
///
/// ```no_run
/// # async fn run() -> Result<(), mcp_tasks::store::StoreError> {
/// use mcp_tasks::PostgresStore;
///
/// // A managed server: encrypted, its certificate checked against the provider's CA.
/// let store = PostgresStore::builder(
///     "postgres://app:secret@db.example.com/tasks?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem",
/// )
/// .connect()
/// .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[must_use]
pub struct PostgresBuilder {
    source: Source,
    ssl_mode: Option<SslMode>,
    ssl_root_cert: Option<String>,
    /// A connector of the user's own ([`with_tls`](Self::with_tls)).
    tls: Option<Arc<dyn tls::Connector>>,
    schema: String,
    pool_size: usize,
    connect_timeout: Duration,
    application_name: Option<String>,
    expired_retention: Duration,
    clock_offset_ms: i64,
    wakeup_capacity: usize,
    trim_pass_every: Duration,
}

/// Where the builder's connection settings come from.
#[derive(Clone)]
enum Source {
    Url(String),
    Config(Box<tokio_postgres::Config>),
}

/// The builder's settings; the connection string shown as user, hosts, ports and database,
/// never with its password.
impl std::fmt::Debug for PostgresBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut f = f.debug_struct("PostgresBuilder");
        match &self.source {
            Source::Url(url) => f.field("url", &pool::shown(url)),
            Source::Config(config) => f.field("config", &pool::describe(config)),
        };
        f.field("ssl_mode", &self.ssl_mode)
            .field("ssl_root_cert", &self.ssl_root_cert)
            .field(
                "tls",
                &self.tls.as_ref().map(|_| "a connector of the caller's own"),
            )
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .field("connect_timeout", &self.connect_timeout)
            .field("application_name", &self.application_name)
            .field("expired_retention", &self.expired_retention)
            .field("trim_pass_every", &self.trim_pass_every)
            .finish()
    }
}

impl PostgresBuilder {
    /// Sets how the store's connections use TLS, over the connection string's `sslmode` (and
    /// the [`tokio_postgres::Config`]'s mode). Every mode but [`SslMode::Disable`] and
    /// [`SslMode::Prefer`] needs the `postgres-tls` feature or [`with_tls`](Self::with_tls).
    pub fn with_ssl_mode(mut self, mode: SslMode) -> Self {
        self.ssl_mode = Some(mode);
        self
    }

    /// Sets the CA certificates the server's certificate is checked against, over the
    /// connection string's `sslrootcert`: the path of a PEM file, or `system` for the
    /// operating system's store (feature `postgres-tls`).
    pub fn with_ssl_root_cert(mut self, root: impl Into<String>) -> Self {
        self.ssl_root_cert = Some(root.into());
        self
    }

    /// Opens every connection of the store with `tls`, a connector of the caller's own (e.g.
    /// from `tokio-postgres-rustls` or `postgres-native-tls`) instead of the built-in one; it
    /// works without the `postgres-tls` feature. The `sslmode` still says whether TLS is used
    /// (`disable`, `prefer`, `require`); the connector checks the certificate, so
    /// `verify-ca`, `verify-full` and a root certificate are refused beside it.
    pub fn with_tls<T>(mut self, tls: T) -> Self
    where
        T: MakeTlsConnect<Socket> + Clone + Sync + Send + 'static,
        T::Stream: Sync + Send,
        T::TlsConnect: Sync + Send,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        self.tls = Some(Arc::new(tls::Generic(tls)));
        self
    }

    /// Sets the Postgres schema that holds the task tables (default [`DEFAULT_SCHEMA`]):
    /// lowercase ASCII letters, digits and `_`, starting with a letter or `_`, at most 48
    /// characters. Every instance of one task space uses the same schema.
    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Sets the most connections the pool opens (default [`DEFAULT_POOL_SIZE`]); the store
    /// opens one more to listen for notifications once wake-ups are asked for.
    pub fn with_pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// Sets how long opening a connection may take (default [`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the `application_name` of the store's connections (default: the URL's, else
    /// [`DEFAULT_APPLICATION_NAME`]), as `pg_stat_activity` shows it.
    pub fn with_application_name(mut self, name: impl Into<String>) -> Self {
        self.application_name = Some(name.into());
        self
    }

    /// Sets how long an expired task stays readable as `failed` before it is purged
    /// (default: the memory store's, 5 minutes).
    pub fn with_expired_retention(mut self, retention: Duration) -> Self {
        self.expired_retention = retention;
        self
    }

    /// Sets how many wake-ups the store holds for a runtime that has not read them yet
    /// (default [`DEFAULT_WAKEUP_CAPACITY`]). A runtime that falls further behind misses
    /// some and re-reads every task it runs instead, so a small buffer costs reads, never a
    /// lost answer or cancel.
    pub fn with_wakeup_capacity(mut self, capacity: usize) -> Self {
        self.wakeup_capacity = capacity.max(1);
        self
    }

    /// Sets how long after one pass over every owner's finished tasks ends the next one
    /// starts (default [`DEFAULT_TRIM_PASS_EVERY`]). A pass trims each owner holding more
    /// finished tasks than the runtime's bound
    /// ([`Limits::with_max_finished_tasks_per_owner`](crate::Limits::with_max_finished_tasks_per_owner));
    /// a runtime starts one when it starts. The passes that follow trim what an instance
    /// that stopped before its sweep left past the bound, though no instance starts after
    /// it. The instances sharing the database take turns: one of them makes each of these
    /// passes, so a cluster makes about one an interval however many instances it has. A
    /// pass reads at most 10,000 rows a sweep.
    pub fn with_trim_pass_every(mut self, every: Duration) -> Self {
        self.trim_pass_every = every;
        self
    }

    /// Reads this instance's clock `offset_ms` milliseconds off (ahead when positive), as a
    /// host whose clock is wrong would (default 0). The store measures the instance's clock
    /// against the database server's when it connects and corrects it, so this changes
    /// nothing a client sees: it is there for tests of clock skew.
    pub fn with_local_clock_offset_ms(mut self, offset_ms: i64) -> Self {
        self.clock_offset_ms = offset_ms;
        self
    }

    /// Connects, creates or migrates the schema, and starts the create writers.
    ///
    /// # Errors
    /// [`StoreError::Config`], saying what to fix, when the URL does not parse, the schema
    /// name is not valid, the TLS settings cannot be met (TLS asked for without the
    /// `postgres-tls` feature or a connector, root certificates that cannot be read), or the
    /// schema was written by a newer build (it is left untouched); [`StoreError::Backend`]
    /// when the server cannot be reached, refuses the login, or its certificate fails the
    /// checks of the `sslmode`.
    pub async fn connect(self) -> Result<PostgresStore, StoreError> {
        if !valid_schema(&self.schema) {
            return Err(StoreError::Config(ConfigError::new(format!(
                "`{}` is not a valid task store schema name: use lowercase ASCII letters, \
                 digits and `_`, starting with a letter or `_`, at most 48 characters",
                self.schema
            ))));
        }
        let (mut config, mut tls_settings) = match &self.source {
            Source::Url(url) => {
                let (rest, settings) = tls::split(url)?;
                (pool::parse_config(&rest)?, settings)
            }
            Source::Config(config) => ((**config).clone(), tls::Settings::default()),
        };
        // The builder's settings over the connection string's.
        tls_settings.mode = self.ssl_mode.or(tls_settings.mode);
        tls_settings.root_cert = self.ssl_root_cert.clone().or(tls_settings.root_cert);
        // `enable_seqscan = off`: every statement of the store finds its rows by an index,
        // and must keep doing so. A prepared statement's generic plan is made once, from
        // the table as it is then: made while the table was new and small, a sequential scan
        // was cheapest, and was kept (until the next ANALYZE) however large the table grew,
        // one scan of every row per read (650 scans in a 5-second benchmark of 8,000 tasks).
        // With it off the planner takes the index path wherever there is one.
        // `jit = off`: with sequential scans off, a statement that has no index path (the
        // prune of a per-key rate's log, an operator's count) is costed at the planner's
        // "disabled" cost, far past `jit_above_cost`, and each execution compiled its plan
        // to machine code first: 25-55 ms a prune, which made a claim of a tool with a
        // per-key rate 30x slower. Short statements never gain from it.
        let search_path = format!(
            "-c search_path=\"{}\" -c idle_in_transaction_session_timeout={} \
             -c enable_seqscan=off -c jit=off",
            self.schema, IDLE_IN_TRANSACTION_TIMEOUT_MS
        );
        let options = match config.get_options() {
            Some(existing) if !existing.is_empty() => format!("{existing} {search_path}"),
            _ => search_path,
        };
        config.options(&options);
        if let Some(name) = &self.application_name {
            config.application_name(name);
        } else if config.get_application_name().is_none() {
            config.application_name(DEFAULT_APPLICATION_NAME);
        }
        config.connect_timeout(self.connect_timeout);
        let connect = tls::Connect::new(config, &tls_settings, self.tls.clone())?;
        let manager = connect.manager(ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        });
        let pool = Pool::builder(manager)
            .max_size(self.pool_size)
            .build()
            .map_err(|e| {
                StoreError::backend(format!("could not build the connection pool: {e}"))
            })?;
        let context = format!(
            "could not connect to the Postgres server at {}",
            pool::describe(connect.config())
        );
        let mut first = pool::get_or(&pool, &context).await?;
        schema::migrate(&mut first, &self.schema).await?;
        let local = Clock::new().with_offset_ms(self.clock_offset_ms);
        let clock = clock::measure(&first, local).await?;
        drop(first);
        let runtime = tokio::runtime::Handle::current();
        let channel: Arc<str> = Arc::from(format!("mcp_tasks.{}", self.schema));
        let shared = (pool.clone(), Arc::clone(&channel));
        let creates = batch::spawn(&runtime, batch::WRITERS, &shared, batch::write_creates);
        let reads = batch::spawn(&runtime, batch::READERS, &pool, batch::read_batch);
        let finishes = batch::spawn(&runtime, batch::WRITERS, &shared, batch::finish_batch);
        let stop = CancellationToken::new();
        let trim = super::trim::Owners::default();
        trim.repeat_every(self.trim_pass_every);
        Ok(PostgresStore {
            pool,
            creates,
            reads,
            finishes,
            clock,
            channel,
            wakeups: OnceLock::new(),
            runtime,
            config: connect,
            stop: stop.clone(),
            _stop: stop.drop_guard(),
            settings: self,
            trim,
            turn: parking_lot::Mutex::default(),
        })
    }
}

fn valid_schema(schema: &str) -> bool {
    let mut chars = schema.chars();
    schema.len() <= 48
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The shared task store on a Postgres server. See the [module docs](self).
pub struct PostgresStore {
    pool: Pool,
    creates: mpsc::UnboundedSender<batch::Job>,
    reads: mpsc::UnboundedSender<batch::ReadJob>,
    finishes: mpsc::UnboundedSender<batch::FinishJob>,
    clock: Clock,
    channel: Arc<str>,
    wakeups: OnceLock<broadcast::Sender<Notice>>,
    runtime: tokio::runtime::Handle,
    /// The settings and TLS connector of every connection (the listener's too).
    config: tls::Connect,
    stop: CancellationToken,
    /// Stops the listener when the store is dropped.
    _stop: DropGuard,
    settings: PostgresBuilder,
    /// The owner whose queued task this store claimed last, owners taking turns
    /// ([`ClaimOrder::OwnersTakeTurns`](super::ClaimOrder)): the next claim starts after it.
    turn: parking_lot::Mutex<String>,
    /// Owners to trim at the next sweep ([`NewTask::max_finished_per_owner`](super::NewTask::max_finished_per_owner)).
    trim: super::trim::Owners,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("schema", &self.settings.schema)
            .field("pool_size", &self.settings.pool_size)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// A builder for the store at `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`,
    /// or `key=value` pairs), with libpq's TLS settings: `sslmode` (`disable`, `prefer`,
    /// `require`, `verify-ca`, `verify-full`) and `sslrootcert` (see the [`tls`] module).
    pub fn builder(url: impl Into<String>) -> PostgresBuilder {
        Self::builder_from(Source::Url(url.into()))
    }

    /// A builder for the store that connects with `config`, a driver configuration of the
    /// caller's own (hosts, credentials, keepalives, and the rest). The store adds its own
    /// session options to it (`search_path` to its schema, a timeout for idle transactions)
    /// and its application name unless `config` has one. Its `ssl_mode` is honoured (as
    /// `disable`, `prefer` or `require`); [`with_ssl_mode`](PostgresBuilder::with_ssl_mode),
    /// [`with_ssl_root_cert`](PostgresBuilder::with_ssl_root_cert) or
    /// [`with_tls`](PostgresBuilder::with_tls) set certificate checks.
    ///
    /// The store opens its own pool (of [`with_pool_size`](PostgresBuilder::with_pool_size)
    /// connections) from it: it takes no pool of the caller's, whose connections would lack
    /// the store's session options.
    pub fn builder_from_config(config: tokio_postgres::Config) -> PostgresBuilder {
        Self::builder_from(Source::Config(Box::new(config)))
    }

    fn builder_from(source: Source) -> PostgresBuilder {
        PostgresBuilder {
            source,
            ssl_mode: None,
            ssl_root_cert: None,
            tls: None,
            schema: DEFAULT_SCHEMA.to_owned(),
            pool_size: DEFAULT_POOL_SIZE,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            application_name: None,
            expired_retention: DEFAULT_EXPIRED_RETENTION,
            clock_offset_ms: 0,
            wakeup_capacity: DEFAULT_WAKEUP_CAPACITY,
            trim_pass_every: DEFAULT_TRIM_PASS_EVERY,
        }
    }

    /// The store at `url` with every default setting ([`PostgresStore::builder`]).
    ///
    /// # Errors
    /// As [`PostgresBuilder::connect`].
    pub async fn connect(url: impl Into<String>) -> Result<Self, StoreError> {
        Self::builder(url).connect().await
    }

    /// The Postgres schema of the task tables.
    #[must_use]
    pub fn schema(&self) -> &str {
        &self.settings.schema
    }

    fn retention_ms(&self) -> u64 {
        millis(self.settings.expired_retention)
    }
}
