//! A fresh SQLite database file for one test, under the system's temp folder: unique per
//! process and per call, removed (with its `-wal`, `-shm` and `-journal` files) before use
//! and on drop.
#![allow(
    dead_code,
    reason = "each test binary uses a different part of the support"
)]

use std::path::PathBuf;

pub struct TempDb(pub PathBuf);

impl TempDb {
    pub fn new(name: &str) -> Self {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("mcp-tasks-{name}-{}-{n}.db", std::process::id()));
        let db = Self(path);
        db.remove();
        db
    }

    /// The file beside the database with `suffix` appended to its name (`-wal`, `-shm`).
    pub fn sidecar(&self, suffix: &str) -> PathBuf {
        PathBuf::from(format!("{}{suffix}", self.0.display()))
    }

    pub fn remove(&self) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let _ = std::fs::remove_file(self.sidecar(suffix));
        }
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        self.remove();
    }
}
