//! Soak: create-complete-expire cycles on the `MemoryStore`, with the process's RSS sampled.
//!
//! Each cycle creates a task with a short TTL (arguments and request `_meta` like a real
//! call's), then ends it: nine in ten complete with a `CallToolResult`, one in ten is left
//! running and expires (`failed`, kept for the expired retention, then purged). Time is
//! tokio's paused clock, advanced by `1 / --rate` seconds per cycle (default 50,000 cycles
//! per virtual second), and `expire_due` runs every 500 cycles, as the runtime's reaper does;
//! so the store settles at exactly `rate x ttl x 1.1` tasks (expired ones stay one more ttl)
//! however loaded the machine is. RSS is the real process's. Once retention is reached
//! (after 2 x ttl of virtual time) RSS must stay flat.
//!
//! ```sh
//! cargo run --release --example soak -- --cycles 1000000 --ttl-ms 1000 --rate 50000 --sample-every 20000
//! ```
//!
//! Prints one CSV line per sample (`cycle,elapsed_ms,tasks,rss_kib`, elapsed in real time) and a summary.

mod ids;

use std::{sync::Arc, time::Duration};

use mcp_tasks::{
    MemoryStore, TaskStore,
    store::{NewTask, Outcome, Transition},
};
use serde_json::json;

struct Options {
    cycles: u64,
    ttl: Duration,
    sample_every: u64,
    /// Cycles per second of virtual time.
    rate: u64,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        cycles: 1_000_000,
        ttl: Duration::from_millis(1000),
        sample_every: 20_000,
        rate: 50_000,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number: u64 = value.parse().map_err(|e| format!("{flag} {value}: {e}"))?;
        match flag.as_str() {
            "--cycles" => options.cycles = number,
            "--ttl-ms" => options.ttl = Duration::from_millis(number),
            "--sample-every" => options.sample_every = number.max(1),
            "--rate" => options.rate = number.max(1),
            _ => {
                return Err(format!(
                    "unknown flag {flag}; expected --cycles, --ttl-ms, --sample-every, --rate"
                ));
            }
        }
    }
    Ok(options)
}

/// The resident set size of this process in KiB (`VmRSS` of `/proc/self/status`).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    // Print the error's message: a `main` that returns it would print its Debug form.
    if let Err(error) = run().await {
        eprintln!("error: {error}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let options = options()?;
    // Virtual time: each cycle advances the clock by 1/rate s, so the store holds the same
    // number of tasks whatever the machine's load. RSS is real.
    tokio::time::pause();
    let step = Duration::from_secs(1) / u32::try_from(options.rate.max(1)).unwrap_or(u32::MAX);
    let store = Arc::new(
        MemoryStore::new()
            .with_max_tasks(10_000_000)
            .with_expired_retention(options.ttl),
    );
    let owner: Arc<str> = Arc::from("soak-owner");
    let tool: Arc<str> = Arc::from("workspace_report");
    let version: Arc<str> = Arc::from("0.1.0");
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "soak", "version": "0" },
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": { "io.modelcontextprotocol/tasks": {} }
        }
    });
    let meta = meta.as_object().cloned().unwrap_or_default();
    let start = std::time::Instant::now();
    let mut samples: Vec<(u64, u64, usize, u64)> = Vec::new();
    println!("cycle,elapsed_ms,tasks,rss_kib");
    let mut sample = |cycle: u64, store: &MemoryStore| {
        let row = (
            cycle,
            u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
            store.len(),
            rss_kib(),
        );
        println!("{},{},{},{}", row.0, row.1, row.2, row.3);
        samples.push(row);
    };
    sample(0, &store);
    for cycle in 1..=options.cycles {
        let id: Arc<str> = Arc::from(ids::task_id());
        let arguments = json!({ "workspace_id": format!("ws-{cycle}"), "include_archived": true });
        let task = NewTask::new(id.clone(), owner.clone(), tool.clone())
            .with_ttl(Some(options.ttl))
            .with_poll_interval(Duration::from_millis(100))
            .with_status_message(Some("scanning".to_owned()))
            .with_arguments(arguments.as_object().cloned().unwrap_or_default())
            .with_tool_version(version.clone())
            .with_request_meta(meta.clone());
        store.create(task).await?;
        if cycle % 10 != 0 {
            let result = json!({
                "content": [{ "type": "text", "text": format!("{{\"accounts\":{cycle}}}") }],
                "structuredContent": { "accounts": cycle },
                "isError": false
            });
            let result = result.as_object().cloned().unwrap_or_default();
            store
                .apply(&id, None, Transition::Finish(Outcome::Completed(result)))
                .await?;
        }
        if cycle % options.sample_every == 0 {
            sample(cycle, &store);
        }
        if cycle % 100 == 0 {
            tokio::time::advance(step * 100).await;
        }
        if cycle % 500 == 0 {
            // The sweep the runtime's reaper makes (every 10 ms of virtual time at 50,000/s).
            store.expire_due().await?;
        }
    }
    // Let every remaining task reach its TTL (and the expired ones their retention).
    tokio::time::advance(options.ttl * 2 + Duration::from_millis(10)).await;
    store.expire_due().await?;
    sample(options.cycles, &store);
    let start_rss = samples.first().map_or(0, |s| s.3);
    let peak = samples
        .iter()
        .max_by_key(|s| s.3)
        .copied()
        .unwrap_or_default();
    let end = samples.last().copied().unwrap_or_default();
    let peak_tasks = samples.iter().map(|s| s.2).max().unwrap_or(0);
    // Retention is reached after 2 x ttl of virtual time: from then on tasks are purged as
    // fast as they are created.
    let steady: Vec<_> = samples
        .iter()
        .filter(|s| s.0 as f64 >= options.rate as f64 * options.ttl.as_secs_f64() * 2.0)
        .collect();
    let steady_min = steady.iter().map(|s| s.3).min().unwrap_or(0);
    let steady_max = steady.iter().map(|s| s.3).max().unwrap_or(0);
    eprintln!(
        "cycles {} in {:.1} s; rss start {} KiB, peak {} KiB (cycle {}), end {} KiB; \
         tasks peak {}, end {}; after 2 x ttl: rss {}..{} KiB over {} samples",
        options.cycles,
        start.elapsed().as_secs_f64(),
        start_rss,
        peak.3,
        peak.0,
        end.3,
        peak_tasks,
        end.2,
        steady_min,
        steady_max,
        steady.len()
    );
    Ok(())
}
