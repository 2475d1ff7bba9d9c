//! Durable task creation, measured: `cargo run --release --example store_bench [-- DIR]`.
//!
//! Side by side, in one run, on the file system of DIR (default `target/store-bench`):
//! - the disk's raw fsync rate (one writer: write 64 bytes, `fdatasync`, repeat);
//! - a one-fsync-per-create baseline: SQLite in WAL mode with `synchronous = FULL`, one
//!   `INSERT` per transaction, callers taking turns on one connection;
//! - `SqliteStore::create` (group commit) and `MemoryStore::create`,
//!
//! each with 1, 16 and 64 concurrent callers, each repetition (3 by default) measuring all
//! of them in turn; it prints the medians, and the median of the per-repetition ratios of
//! `SqliteStore` to the raw fsync rate (this disk's fsync rate drifts between runs, so the
//! ratio is taken against the rate measured seconds before, not one measured once).
//!
//! Each measurement starts after a warm-up (40,000 creates or 1 s, whichever comes first)
//! on the same file: a fresh file's log grows during its first pass, and a growing file is
//! slower to fsync than one being overwritten; a server runs on the reused log.
//!
//! Flags: `--callers N` (repeatable) and `--repeats N` narrow or widen the run;
//! `--only-sqlite` measures the raw fsync rate and `SqliteStore` only (for profiling).

mod ids;

use std::{
    io::Write,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use mcp_tasks::{MemoryStore, SqliteStore, TaskStore, store::NewTask};

const RUN: Duration = Duration::from_secs(2);
/// Creates before a measurement starts (enough for `SqliteStore`'s log to be reused)…
const WARMUP_CREATES: u64 = 40_000;
/// …or this long, whichever comes first.
const WARMUP_MAX: Duration = Duration::from_secs(1);
const REPEATS: usize = 3;
const CALLERS: [usize; 3] = [1, 16, 64];
/// A cap on the tasks one measurement counts, so the memory store's run stays small.
const MAX_CREATES: u64 = 200_000;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn fresh(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    path
}

/// fsyncs per second from one writer.
fn raw_fsync_rate(dir: &Path) -> std::io::Result<f64> {
    let path = fresh(dir, "fsync.bin");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < RUN {
        file.write_all(&[0u8; 64])?;
        file.sync_data()?;
        n += 1;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    drop(file);
    let _ = std::fs::remove_file(&path);
    Ok(rate)
}

/// Creates per second with one fsync per create: `callers` threads take turns on one
/// connection, one transaction per insert.
fn one_fsync_per_create(dir: &Path, callers: usize) -> f64 {
    let path = fresh(dir, "baseline.db");
    let conn = rusqlite::Connection::open(&path).expect("open the baseline database");
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "FULL").unwrap();
    conn.execute_batch(
        "CREATE TABLE tasks (id TEXT PRIMARY KEY, body TEXT NOT NULL) WITHOUT ROWID",
    )
    .unwrap();
    let conn = Arc::new(Mutex::new(conn));
    let meter = Meter::default();
    std::thread::scope(|scope| {
        for _ in 0..callers {
            let conn = Arc::clone(&conn);
            let meter = &meter;
            scope.spawn(move || {
                while !meter.stop.load(Ordering::Relaxed) {
                    let conn = conn.lock().unwrap();
                    conn.execute(
                        "INSERT INTO tasks (id, body) VALUES (?1, ?2)",
                        rusqlite::params![ids::task_id(), "{}"],
                    )
                    .unwrap();
                    meter.done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        meter.measure(std::thread::sleep)
    })
}

/// Counts creates from concurrent callers and measures their rate in steady state: after
/// a warm-up of [`WARMUP_CREATES`] creates or [`WARMUP_MAX`], whichever comes first (a fresh
/// file's log grows during its first pass, and a growing file is slower to fsync than one
/// being overwritten), for [`RUN`] or [`MAX_CREATES`] creates, whichever comes first.
#[derive(Default)]
struct Meter {
    done: AtomicU64,
    stop: AtomicBool,
}

impl Meter {
    /// Watches `done` (sleeping with `sleep` between looks) and returns the rate; sets `stop`.
    fn measure(&self, sleep: impl Fn(Duration)) -> f64 {
        let tick = Duration::from_millis(5);
        let start = Instant::now();
        while self.done.load(Ordering::Relaxed) < WARMUP_CREATES && start.elapsed() < WARMUP_MAX {
            sleep(tick);
        }
        let (from, base) = (Instant::now(), self.done.load(Ordering::Relaxed));
        while from.elapsed() < RUN && self.done.load(Ordering::Relaxed) - base < MAX_CREATES {
            sleep(tick);
        }
        let (to, end) = (Instant::now(), self.done.load(Ordering::Relaxed));
        self.stop.store(true, Ordering::Relaxed);
        (end - base) as f64 / (to - from).as_secs_f64()
    }
}

/// Creates per second through `store` from `callers` concurrent tasks.
async fn store_creates(store: Arc<dyn TaskStore>, callers: usize) -> f64 {
    let meter = Arc::new(Meter::default());
    let owner: Arc<str> = Arc::from("bench");
    let tool: Arc<str> = Arc::from("noop_task");
    let workers: Vec<_> = (0..callers)
        .map(|_| {
            let (store, meter) = (Arc::clone(&store), Arc::clone(&meter));
            let (owner, tool) = (owner.clone(), tool.clone());
            tokio::spawn(async move {
                while !meter.stop.load(Ordering::Relaxed) {
                    let task = NewTask::new(Arc::from(ids::task_id()), owner.clone(), tool.clone())
                        .with_ttl(Some(Duration::from_secs(3600)))
                        .with_poll_interval(Duration::from_secs(1));
                    store.create(task).await.expect("create");
                    meter.done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // The meter sleeps on a thread of its own, not on the two runtime threads.
    let watcher = Arc::clone(&meter);
    let rate = tokio::task::spawn_blocking(move || watcher.measure(std::thread::sleep))
        .await
        .expect("the meter");
    futures::future::join_all(workers).await;
    rate
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    // Print the error's message: a `main` that returns it would print its Debug form.
    if let Err(error) = run().await {
        eprintln!("error: {error}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}

async fn run() -> std::io::Result<()> {
    // `store_bench [DIR] [--callers N]... [--repeats N] [--only-sqlite]`: the flags narrow the
    // run (for profiling).
    let mut dir = PathBuf::from("target/store-bench");
    let mut callers_list = Vec::new();
    let mut only_sqlite = false;
    let mut repeats = REPEATS;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--only-sqlite" {
            only_sqlite = true;
        } else if arg == "--repeats" {
            let n = args.next().and_then(|n| n.parse().ok());
            repeats = n.ok_or_else(|| std::io::Error::other("--repeats takes a number"))?;
        } else if arg == "--callers" {
            let n = args.next().and_then(|n| n.parse().ok());
            callers_list.push(n.ok_or_else(|| std::io::Error::other("--callers takes a number"))?);
        } else {
            dir = PathBuf::from(arg);
        }
    }
    if callers_list.is_empty() {
        callers_list = CALLERS.to_vec();
    }
    std::fs::create_dir_all(&dir)?;
    println!(
        "store_bench: {} s per measurement, {repeats} repetitions (medians), in {}",
        RUN.as_secs(),
        dir.display()
    );
    println!(
        "Each repetition measures the disk's raw fsync rate right before the stores, and the \
         ratio to it is taken per repetition: this disk's fsync rate drifts between runs."
    );
    println!();
    println!(
        "| callers | raw fsync rate | one fsync per create | SqliteStore (group commit) | MemoryStore | SqliteStore / fsync rate | SqliteStore / baseline | SqliteStore / MemoryStore |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for callers in callers_list {
        let (mut fsync, mut baseline, mut sqlite, mut memory) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut per_fsync = Vec::new();
        for _ in 0..repeats {
            // Interleaved, so drift in the machine touches all of them alike.
            let rate = raw_fsync_rate(&dir)?;
            fsync.push(rate);
            if !only_sqlite {
                baseline.push(one_fsync_per_create(&dir, callers));
            }
            let path = fresh(&dir, "store.db");
            let store: Arc<dyn TaskStore> =
                Arc::new(SqliteStore::open(&path).map_err(std::io::Error::other)?);
            let creates = store_creates(store, callers).await;
            sqlite.push(creates);
            per_fsync.push(creates / rate);
            if !only_sqlite {
                let store: Arc<dyn TaskStore> =
                    Arc::new(MemoryStore::new().with_max_tasks(usize::MAX));
                memory.push(store_creates(store, callers).await);
            }
        }
        let rate = median(fsync);
        let sqlite = median(sqlite);
        let per_fsync = median(per_fsync);
        if only_sqlite {
            println!(
                "| {callers} | {rate:.0}/s | - | {sqlite:.0}/s | - | {per_fsync:.1}× | - | - |"
            );
        } else {
            let (baseline, memory) = (median(baseline), median(memory));
            println!(
                "| {callers} | {rate:.0}/s | {baseline:.0}/s | {sqlite:.0}/s | {memory:.0}/s | {per_fsync:.1}× | {:.1}× | {:.3}× |",
                sqlite / baseline,
                sqlite / memory
            );
        }
    }
    for name in ["baseline.db", "store.db"] {
        fresh(&dir, name);
    }
    Ok(())
}
