//! [`Worker`]: a process (or a tokio task) that runs the work of a shared task space and
//! serves no requests.

use std::{future::Future, sync::Arc, time::Duration};

use tokio_util::sync::DropGuard;

use super::{
    ClusterConfig, DEFAULT_REAP_INTERVAL, Runtime, Settings, ShutdownReport, StartError,
    cluster::{Tools, random_instance_id},
};
use crate::{store::TaskStore, toolkit::Toolkit};

/// How long [`Worker::run_until`] lets running work end on its own once told to stop,
/// unless [`Worker::with_shutdown_grace`] says otherwise.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Runs tasks recorded by other instances, over a store several instances share
/// (`PostgresStore`), without serving MCP.
///
/// A worker claims queued tasks ([`ClusterConfig::with_queued_calls`] on the fronts) and
/// tasks whose instance stopped (lapsed leases), and runs each one under a lease exactly as
/// an instance would: renewed, fenced, woken by answers and cancels sent to any instance.
/// Request serving and execution then scale apart: fronts that record, workers that run.
///
/// `Worker` is the configuration; [`Worker::start`] starts it and gives the
/// [`WorkerHandle`] that shuts it down, and [`Worker::run_until`] does both around a
/// shutdown signal.
///
/// ```no_run
/// # #[cfg(feature = "postgres")]
/// # async fn run(toolkit: mcp_tasks::Toolkit) -> Result<(), Box<dyn std::error::Error>> {
/// let store = mcp_tasks::PostgresStore::connect("postgres://127.0.0.1/app").await?;
/// let ctrl_c = async { tokio::signal::ctrl_c().await.ok(); };
/// mcp_tasks::Worker::new(store, toolkit).run_until(ctrl_c).await?;
/// # Ok(())
/// # }
/// ```
#[must_use]
pub struct Worker {
    store: Arc<dyn TaskStore>,
    toolkit: Toolkit,
    instance: Arc<str>,
    config: ClusterConfig,
    expiry_sweep: Duration,
    grace: Duration,
    max_running: Option<usize>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("instance", &self.instance)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker for `toolkit`'s tools over `store`, with a random instance id and the
    /// default [`ClusterConfig`].
    pub fn new(store: impl TaskStore, toolkit: Toolkit) -> Self {
        Self::with_shared_store(Arc::new(store), toolkit)
    }

    /// A worker over a store shared with other code (an engine in the same process).
    pub fn with_shared_store(store: Arc<dyn TaskStore>, toolkit: Toolkit) -> Self {
        Self {
            store,
            toolkit,
            instance: random_instance_id(),
            config: ClusterConfig::default(),
            expiry_sweep: DEFAULT_REAP_INTERVAL,
            grace: DEFAULT_SHUTDOWN_GRACE,
            max_running: None,
        }
    }

    /// Sets the instance id the worker's leases carry (default: random).
    pub fn with_instance_id(mut self, id: impl Into<Arc<str>>) -> Self {
        self.instance = id.into();
        self
    }

    /// Sets lease length, renewal and claim interval ([`with_execution`] is forced on: a
    /// worker that runs nothing has no purpose).
    ///
    /// [`with_execution`]: ClusterConfig::with_execution
    pub fn with_cluster(mut self, config: ClusterConfig) -> Self {
        self.config = config;
        self
    }

    /// Sets how often the worker sweeps the store for tasks past their TTL (default 1 s).
    pub fn with_expiry_sweep(mut self, every: Duration) -> Self {
        self.expiry_sweep = every.max(Duration::from_millis(1));
        self
    }

    /// Sets the grace period of [`Worker::run_until`]'s shutdown (default
    /// [`DEFAULT_SHUTDOWN_GRACE`]); see [`WorkerHandle::shutdown`].
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Lets at most `max` tasks' work run in this worker at once (default: no limit; at
    /// least 1): each claim takes only as many queued or lapsed tasks as there are free
    /// slots, and the rest stay queued for another worker or a later claim.
    pub fn with_max_running(mut self, max: usize) -> Self {
        self.max_running = Some(max.max(1));
        self
    }

    /// The instance id.
    #[must_use]
    pub fn instance_id(&self) -> &str {
        &self.instance
    }

    /// The grace period of [`Worker::run_until`]'s shutdown
    /// ([`Worker::with_shutdown_grace`]).
    #[must_use]
    pub fn shutdown_grace(&self) -> Duration {
        self.grace
    }

    /// Starts claiming, renewing, listening for wake-ups and sweeping expiry, on the current
    /// tokio runtime, until [`WorkerHandle::shutdown`] (or until the handle is dropped,
    /// which stops everything at once).
    ///
    /// # Errors
    /// [`StartError::NotShared`] when the store is not one several instances can share (it
    /// has no [`TaskStore::cluster`]): there would be nothing to claim;
    /// [`StartError::NoRuntime`] outside a tokio runtime.
    pub fn start(self) -> Result<WorkerHandle, StartError> {
        if self.store.cluster().is_none() {
            return Err(StartError::NotShared);
        }
        let tools = Tools {
            state: Arc::new(self.toolkit.state().clone()),
            toolkit: Arc::new(self.toolkit),
        };
        let config = self.config.with_execution(true).with_queued_calls(false);
        let runtime = Runtime::new(
            self.store,
            tools,
            Settings {
                reap_interval: self.expiry_sweep,
                limits: crate::Limits::default(),
                shutdown_grace: self.grace,
                max_running: self.max_running,
            },
            self.instance,
            config,
        );
        let guard = runtime.lifecycle.drop_guard();
        runtime.start()?;
        Ok(WorkerHandle {
            runtime,
            _guard: guard,
        })
    }

    /// Runs until the process ends.
    ///
    /// # Errors
    /// As [`Worker::start`].
    pub async fn run(self) -> Result<(), StartError> {
        self.run_until(std::future::pending()).await
    }

    /// Runs until `shutdown` resolves, then shuts down with the grace period of
    /// [`Worker::with_shutdown_grace`] ([`WorkerHandle::shutdown`]): the worker claims
    /// nothing more at once, and stops renewing once its running work ended or the grace
    /// period is over; it returns when nothing of it runs any more.
    ///
    /// # Errors
    /// As [`Worker::start`].
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> Result<(), StartError> {
        let grace = self.grace;
        let handle = self.start()?;
        shutdown.await;
        handle.shutdown(grace).await;
        Ok(())
    }
}

/// A started [`Worker`]: shut it down with [`WorkerHandle::shutdown`]. Dropping it stops
/// the worker at once: its loops end and its running work is dropped, writing nothing more.
#[must_use = "dropping the handle stops the worker at once"]
pub struct WorkerHandle {
    runtime: Arc<Runtime>,
    _guard: Arc<DropGuard>,
}

impl std::fmt::Debug for WorkerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerHandle")
            .field("instance", &self.instance_id())
            .field("running_tasks", &self.running_tasks())
            .finish_non_exhaustive()
    }
}

impl WorkerHandle {
    /// The instance id.
    #[must_use]
    pub fn instance_id(&self) -> &str {
        self.runtime
            .instance
            .as_ref()
            .map_or("", |instance| &instance.id)
    }

    /// How many tasks' work runs in this worker now.
    #[must_use]
    pub fn running_tasks(&self) -> usize {
        self.runtime.live_count()
    }

    /// Whether nothing of the worker runs any more: every loop and every work it spawned
    /// has ended (true once [`WorkerHandle::shutdown`] returned).
    #[must_use]
    pub fn is_stopped(&self) -> bool {
        self.runtime.lifecycle.is_stopped()
    }

    /// Stops the worker, in three steps: it claims nothing more and stops sweeping expiry
    /// at once; the work it runs has `grace` to end on its own (its leases are still
    /// renewed, its outcome written); then the work still running is dropped and drained:
    /// a `resume` task's lease is released, so another instance or worker claims it at once,
    /// and a `fail` task ends `failed` saying the server was shut down (see
    /// [`Engine::shutdown`](crate::Engine::shutdown)); renewals and wake-ups end. Returns
    /// once every loop and every work has ended.
    pub async fn shutdown(&self, grace: Duration) -> ShutdownReport {
        self.runtime.lifecycle.shutdown(grace).await
    }
}
