//! Claims of queued tasks per second on Postgres, owners taking turns against oldest first:
//! `cargo run --release --example claim_bench [-- URL] [--owners N] [--per-owner N]
//! [--claimers N] [--batch N] [--rounds N] [--keyed | --routed]`.
//!
//! `--routed` compares owners taking turns routed by version, as the runtime claims (only the
//! tasks recorded by a version of a tool the claimer runs), against the same claims unrouted.
//!
//! `--keyed` compares instead owners taking turns with the tool under a per-key concurrency
//! limit and a per-key rate (keyed by owner, each wide enough that every task may start: the
//! cost of the keyed claim itself, its window over the tool's queue by key, its count of each
//! key's starts and its log of them) against owners taking turns with no limit.
//!
//! Each measurement queues `--owners` × `--per-owner` tasks (default 1,000 owners × 20) in a
//! fresh schema, all at once, then `--claimers` claimers (default 2, each with its own store
//! and pool, as instances are) claim them in batches of `--batch` (default 32, the runtime's
//! batch) until none is left: tasks claimed per second, from the first claim to the last.
//! Nothing runs the tasks: the claims alone are measured, with the store's real statements
//! (`ClusterStore::claim`, its steps read included), after an `ANALYZE` of the full queue
//! (as autovacuum would do within a minute). The two orders alternate, `--rounds`
//! times each (default 3), and the ratio of each round is printed, then the medians.
//! The schemas it makes (`bench_claim_*`) are dropped.

mod ids;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use mcp_tasks::{
    ClaimOrder, PostgresStore, TaskStore,
    rate::Rate,
    store::{Claim, NewTask, ToolVersions},
};
use tokio_postgres::NoTls;

struct Setup {
    url: String,
    owners: usize,
    per_owner: usize,
    claimers: usize,
    batch: usize,
}

/// What one measurement claims with.
#[derive(Clone, Copy)]
enum Variant {
    Oldest,
    Turns,
    /// Owners take turns, the tool under per-key limits keyed by owner.
    Keyed,
    /// Owners take turns, routed by version as the runtime claims (the tool at version 1).
    Routed,
}

async fn store(
    setup: &Setup,
    schema: &str,
) -> Result<Arc<PostgresStore>, Box<dyn std::error::Error>> {
    Ok(Arc::new(
        PostgresStore::builder(&setup.url)
            .with_schema(schema)
            .with_pool_size(4)
            .connect()
            .await?,
    ))
}

/// Queues the tasks (owners interleaved, as many callers at once would), untimed.
async fn queue(
    setup: &Setup,
    store: &Arc<PostgresStore>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut creates = tokio::task::JoinSet::new();
    for lane in 0..16 {
        let store = Arc::clone(store);
        let (owners, total) = (setup.owners, setup.owners * setup.per_owner);
        creates.spawn(async move {
            for n in (lane..total).step_by(16) {
                let owner = format!("owner-{:04}", n % owners);
                let task = NewTask::new(
                    Arc::from(ids::task_id()),
                    Arc::from(owner.as_str()),
                    Arc::from("bench"),
                )
                .with_ttl(Some(Duration::from_secs(3600)))
                .with_tool_version(Arc::from("1"))
                .with_limit_key(Arc::from(owner));
                store.create(task).await?;
            }
            Ok::<(), mcp_tasks::store::StoreError>(())
        });
    }
    while let Some(done) = creates.join_next().await {
        done??;
    }
    Ok(())
}

/// Tasks claimed per second with `variant`, in a fresh schema.
async fn measure(
    setup: &Setup,
    variant: Variant,
    round: usize,
) -> Result<f64, Box<dyn std::error::Error>> {
    let (order, order_name) = match variant {
        Variant::Oldest => (ClaimOrder::OldestFirst, "oldest"),
        Variant::Turns => (ClaimOrder::OwnersTakeTurns, "turns"),
        Variant::Keyed => (ClaimOrder::OwnersTakeTurns, "keyed"),
        Variant::Routed => (ClaimOrder::OwnersTakeTurns, "routed"),
    };
    let routed = matches!(variant, Variant::Routed);
    let versions = Arc::new(ToolVersions::new([("bench", "1"), ("other", "3")]));
    let keyed = matches!(variant, Variant::Keyed);
    // Wide enough for every task of an owner: the keyed claim's cost, nothing held back.
    let wide = u32::try_from(setup.per_owner).unwrap_or(u32::MAX);
    let key_limits: Arc<[(Arc<str>, u32)]> = if keyed {
        Arc::from([(Arc::from("bench"), wide)])
    } else {
        Arc::from([])
    };
    let key_rates: Arc<[(Arc<str>, Rate)]> = if keyed {
        Arc::from([(
            Arc::from("bench"),
            Rate::new(wide, Duration::from_secs(3600)),
        )])
    } else {
        Arc::from([])
    };
    let schema = format!("bench_claim_{round}_{order_name}_{}", std::process::id());
    let first = store(setup, &schema).await?;
    queue(setup, &first).await?;
    analyze(&setup.url, &schema).await?;
    let mut stores = vec![first];
    for _ in 1..setup.claimers {
        stores.push(store(setup, &schema).await?);
    }
    let started = Instant::now();
    let mut claimers = tokio::task::JoinSet::new();
    for (i, store) in stores.iter().enumerate() {
        let store = Arc::clone(store);
        let batch = setup.batch;
        let (key_limits, key_rates) = (Arc::clone(&key_limits), Arc::clone(&key_rates));
        let versions = Arc::clone(&versions);
        claimers.spawn(async move {
            let instance = format!("claimer-{i}");
            let cluster = store.cluster().expect("a cluster store");
            let mut claimed = 0usize;
            loop {
                let mut claim = Claim::queued(&instance, Duration::from_secs(600), batch)
                    .with_order(order, &[])
                    .with_key_limits(&key_limits)
                    .with_key_rates(&key_rates);
                if routed {
                    claim = claim.with_versions(&versions);
                }
                let got = cluster.claim(claim).await?.tasks.len();
                if got == 0 {
                    return Ok::<usize, mcp_tasks::store::StoreError>(claimed);
                }
                claimed += got;
            }
        });
    }
    let mut claimed = 0;
    while let Some(done) = claimers.join_next().await {
        claimed += done??;
    }
    let took = started.elapsed();
    drop(stores);
    drop_schema(&setup.url, &schema).await;
    let expected = setup.owners * setup.per_owner;
    if claimed != expected {
        return Err(format!("{claimed} tasks claimed of {expected} queued").into());
    }
    Ok(claimed as f64 / took.as_secs_f64())
}

/// Gives the planner the table's statistics, as autovacuum would within a minute of the
/// queue filling: without them, a table that filled in a second looks empty to it.
async fn analyze(url: &str, schema: &str) -> Result<(), Box<dyn std::error::Error>> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(connection);
    client
        .batch_execute(&format!("ANALYZE \"{schema}\".tasks"))
        .await?;
    Ok(())
}

async fn drop_schema(url: &str, schema: &str) {
    if let Ok((client, connection)) = tokio_postgres::connect(url, NoTls).await {
        tokio::spawn(connection);
        let _ = client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
            .await;
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    if let Err(error) = run().await {
        eprintln!("error: {error}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut setup = Setup {
        url: std::env::var("MCP_TASKS_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into()),
        owners: 1000,
        per_owner: 20,
        claimers: 2,
        batch: 32,
    };
    let mut rounds = 3;
    let (mut keyed, mut routed) = (false, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |name: &str| {
            args.next()
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n > 0)
                .ok_or(format!("{name} takes a number above 0"))
        };
        match arg.as_str() {
            "--owners" => setup.owners = number("--owners")?,
            "--per-owner" => setup.per_owner = number("--per-owner")?,
            "--claimers" => setup.claimers = number("--claimers")?,
            "--batch" => setup.batch = number("--batch")?,
            "--rounds" => rounds = number("--rounds")?,
            "--keyed" => keyed = true,
            "--routed" => routed = true,
            _ if arg.starts_with("--") => return Err(format!("unknown option {arg}").into()),
            _ => setup.url = arg,
        }
    }
    println!(
        "claim_bench: {} owners x {} queued tasks, {} claimers, batches of {}",
        setup.owners, setup.per_owner, setup.claimers, setup.batch
    );
    println!();
    let (a, b) = if keyed {
        println!("| round | per-key limits (tasks/s) | no limit (tasks/s) | ratio |");
        (Variant::Keyed, Variant::Turns)
    } else if routed {
        println!("| round | routed by version (tasks/s) | not routed (tasks/s) | ratio |");
        (Variant::Routed, Variant::Turns)
    } else {
        println!("| round | owners take turns (tasks/s) | oldest first (tasks/s) | ratio |");
        (Variant::Turns, Variant::Oldest)
    };
    println!("| --- | --- | --- | --- |");
    let (mut turns, mut oldest, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which goes first, so neither always meets a warmer cache.
        let (t, o) = if round % 2 == 0 {
            let t = measure(&setup, a, round).await?;
            (t, measure(&setup, b, round).await?)
        } else {
            let o = measure(&setup, b, round).await?;
            (measure(&setup, a, round).await?, o)
        };
        println!("| {} | {t:.0} | {o:.0} | {:.2}x |", round + 1, t / o);
        turns.push(t);
        oldest.push(o);
        ratios.push(t / o);
    }
    println!(
        "| median | {:.0} | {:.0} | {:.2}x |",
        median(turns),
        median(oldest),
        median(ratios)
    );
    Ok(())
}
