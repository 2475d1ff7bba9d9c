//! A real restart of an in-process server on a SQLite file: the first server runs on a tokio
//! runtime of its own (its own thread), which is shut down, dropping every task of it, and
//! the store's threads (writer, checkpointer) are seen to exit before the caller opens the
//! file again. Nothing of the first process can act after that.

use std::{collections::HashSet, future::Future, time::Duration};

use mcp_tasks::TaskServer;

use super::{Patience, Peer, Stdio};

/// The thread ids of the `SqliteStore` threads alive in this process (the writer and the
/// checkpointer of each open store; Linux truncates their names to 15 bytes).
pub fn store_threads() -> HashSet<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|task| {
            let task = task.ok()?;
            let name = std::fs::read_to_string(task.path().join("comm")).ok()?;
            (name.trim_end() == "mcp-tasks-sqlit").then(|| task.file_name().into_string().ok())?
        })
        .collect()
}

/// Runs a server made by `make` on a runtime and thread of its own, with a stdio peer that
/// `client` drives; then shuts that runtime down (as a killed process: no task of it runs
/// again) and waits until the threads of the store it opened have exited. Returns what
/// `client` returned.
pub async fn run_then_stop<T, F, Fut>(
    make: impl FnOnce() -> TaskServer + Send + 'static,
    client: F,
) -> T
where
    T: Send + 'static,
    F: FnOnce(Peer) -> Fut + Send + 'static,
    Fut: Future<Output = T>,
{
    let (out, threads) = tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let out = runtime.block_on(async move {
            let before = store_threads();
            let server = make();
            // A thread names itself once it runs: look until both have.
            let mut threads = HashSet::new();
            let patience = Patience::with_bound("the store's threads", Duration::from_secs(10));
            while threads.len() < 2 && !patience.expired() {
                threads = store_threads().difference(&before).cloned().collect();
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(
                threads.len(),
                2,
                "the store's writer and checkpointer are seen (else the wait below proves nothing)"
            );
            let peer = Peer::Stdio(Stdio::start(server));
            (client(peer).await, threads)
        });
        runtime.shutdown_timeout(Duration::from_secs(5));
        out
    })
    .await
    .expect("the first process ran");
    let patience = Patience::new("the first process's store threads to exit");
    while !store_threads().is_disjoint(&threads) {
        patience.wait().await;
    }
    out
}
