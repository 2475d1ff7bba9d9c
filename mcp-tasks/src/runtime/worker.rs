//! [`Worker`]: a process (or a tokio task) that runs the work of a shared task space and
//! serves no requests.

use std::{future::Future, sync::Arc, time::Duration};

use super::{
    ClusterConfig, DEFAULT_REAP_INTERVAL, Runtime, Settings,
    cluster::{self, Tools, random_instance_id},
};
use crate::{
    store::{ConfigError, StoreError, TaskStore},
    toolkit::Toolkit,
};

/// Runs tasks recorded by other instances, over a store several instances share
/// (`PostgresStore`), without serving MCP.
///
/// A worker claims queued tasks ([`ClusterConfig::with_queued_calls`] on the fronts) and
/// tasks whose instance stopped (lapsed leases), and runs each one under a lease exactly as
/// an instance would: renewed, fenced, woken by answers and cancels sent to any instance.
/// Request serving and execution then scale apart: fronts that record, workers that run.
///
/// ```no_run
/// # #[cfg(feature = "postgres")]
/// # async fn run(toolkit: mcp_tasks::Toolkit) -> Result<(), mcp_tasks::store::StoreError> {
/// let store = mcp_tasks::PostgresStore::connect("postgres://127.0.0.1/app").await?;
/// mcp_tasks::Worker::new(store, toolkit).run().await
/// # }
/// ```
#[must_use]
pub struct Worker {
    store: Arc<dyn TaskStore>,
    toolkit: Toolkit,
    instance: Arc<str>,
    config: ClusterConfig,
    expiry_sweep: Duration,
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

    /// The instance id.
    #[must_use]
    pub fn instance_id(&self) -> &str {
        &self.instance
    }

    /// Runs until the process ends.
    ///
    /// # Errors
    /// [`StoreError::Config`] at once when the store is not one several instances can
    /// share (it has no [`TaskStore::cluster`]): there would be nothing to claim.
    pub async fn run(self) -> Result<(), StoreError> {
        self.run_until(std::future::pending()).await
    }

    /// Runs until `shutdown` resolves. Then the worker stops claiming and renewing: work
    /// still running goes on, but once its leases lapse another worker or instance takes
    /// those tasks over, and from then on its writes are refused (fenced).
    ///
    /// # Errors
    /// As [`Worker::run`].
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> Result<(), StoreError> {
        if self.store.cluster().is_none() {
            return Err(StoreError::Config(ConfigError::new(
                "a Worker needs a store that several instances share (PostgresStore); this \
                 store has no cluster operations",
            )));
        }
        let state = Arc::new(self.toolkit.state().clone());
        let config = self.config.with_execution(true).with_queued_calls(false);
        let runtime = Runtime::new(
            self.store,
            Settings {
                reap_interval: self.expiry_sweep,
                limits: crate::Limits::default(),
            },
            self.instance,
            config,
        );
        let tools = Tools {
            toolkit: Arc::new(self.toolkit),
            state,
        };
        cluster::start(&runtime, &tools);
        shutdown.await;
        Ok(())
    }
}
