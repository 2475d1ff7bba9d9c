//! [`Worker`]: a process (or a tokio task) that runs the work of a shared task space and
//! serves no requests.

use std::{future::Future, sync::Arc, time::Duration};

use tokio_util::sync::DropGuard;

use super::{ClusterConfig, Runtime, Settings, ShutdownReport, StartError, Tools};
use crate::{store::TaskStore, toolkit::Toolkit};

/// Runs tasks recorded by other instances, over a store several instances share
/// (`PostgresStore`), without serving MCP.
///
/// A worker claims queued tasks ([`ClusterConfig::with_queued_calls`] on the fronts) and
/// tasks whose instance stopped (lapsed leases), and runs each one under a lease exactly as
/// an instance would: renewed, fenced, woken by answers and cancels sent to any instance.
/// Request serving and execution then scale apart: fronts that record, workers that run.
///
/// A worker is set up as an engine is, by the [`EngineBuilder`](crate::EngineBuilder)
/// (store, instance id, cluster settings, expiry sweep, shutdown grace, `max_running`,
/// limits), and made by [`build_worker`](crate::EngineBuilder::build_worker);
/// [`Worker::new`] is the default setup over a store. [`Worker::start`] starts it and gives
/// the [`WorkerHandle`] that shuts it down, and [`Worker::run_until`] does both around a
/// shutdown signal.
///
/// ```no_run
/// # #[cfg(feature = "postgres")]
/// # async fn run(toolkit: mcp_tasks::Toolkit) -> Result<(), Box<dyn std::error::Error>> {
/// let store = mcp_tasks::PostgresStore::connect("postgres://127.0.0.1/app").await?;
/// let ctrl_c = async { tokio::signal::ctrl_c().await.ok(); };
/// mcp_tasks::Engine::builder(toolkit)
///     .with_store(store)
///     .with_max_running(8)
///     .build_worker()
///     .run_until(ctrl_c)
///     .await?;
/// # Ok(())
/// # }
/// ```
#[must_use]
pub struct Worker {
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) tools: Tools,
    pub(crate) settings: Settings,
    pub(crate) instance: Arc<str>,
    pub(crate) config: ClusterConfig,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("instance", &self.instance)
            .field("config", &self.config)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker for `toolkit`'s tools over `store`, with every setting at its default:
    /// `Engine::builder(toolkit).with_store(store).build_worker()`.
    pub fn new(store: impl TaskStore, toolkit: Toolkit) -> Self {
        crate::Engine::builder(toolkit)
            .with_store(store)
            .build_worker()
    }

    /// The instance id.
    #[must_use]
    pub fn instance_id(&self) -> &str {
        &self.instance
    }

    /// The grace period of [`Worker::run_until`]'s shutdown
    /// ([`EngineBuilder::with_shutdown_grace`](crate::EngineBuilder::with_shutdown_grace)).
    #[must_use]
    pub fn shutdown_grace(&self) -> Duration {
        self.settings.shutdown_grace
    }

    /// Starts claiming, renewing, listening for wake-ups and sweeping expiry, on the current
    /// tokio runtime, until [`WorkerHandle::shutdown`] (or until the handle is dropped,
    /// which stops everything at once). The cluster settings' execution is forced on and
    /// their queued calls off: a worker that runs nothing has no purpose.
    ///
    /// # Errors
    /// [`StartError::NotShared`] when the store is not one several instances can share (it
    /// has no [`TaskStore::cluster`]): there would be nothing to claim;
    /// [`StartError::NoRuntime`] outside a tokio runtime.
    pub fn start(self) -> Result<WorkerHandle, StartError> {
        let config = self.config.with_execution(true).with_queued_calls(false);
        let runtime = Runtime::new(self.store, self.tools, self.settings, self.instance, config);
        if runtime.placement.shared().is_none() {
            return Err(StartError::NotShared);
        }
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

    /// Runs until `shutdown` resolves, then shuts down with its grace period
    /// ([`Worker::shutdown_grace`], see [`WorkerHandle::shutdown`]): the worker claims
    /// nothing more at once, and stops renewing once its running work ended or the grace
    /// period is over; it returns when nothing of it runs any more.
    ///
    /// # Errors
    /// As [`Worker::start`].
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> Result<(), StartError> {
        let grace = self.shutdown_grace();
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
        &self.runtime.id
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

    /// Stops the worker in the three steps of [`Engine::shutdown`](crate::Engine::shutdown):
    /// no more claims or expiry sweeps at once, `grace` for the work to end on its own, then
    /// what still runs is dropped and handed over by its tool's restart policy. Returns once
    /// every loop and every work has ended.
    pub async fn shutdown(&self, grace: Duration) -> ShutdownReport {
        self.runtime.lifecycle.shutdown(grace).await
    }
}
