//! Postgres for the tests: the server at `MCP_TASKS_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); where none answers and `initdb`/`postgres`/
//! `pg_ctl` are installed (PATH or Debian's /usr/lib/postgresql/*/bin), a throwaway cluster in a temp
//! folder on a free port, stopped when the test process ends; where neither, one line saying
//! how to enable the tests, and the test returns without running, except under CI (env
//! `CI` set), where it fails.
//!
//! Each test takes its own schema ([`Db::schema`]): a random name, dropped when the [`Db`]
//! is dropped, so tests run in parallel on one server.
#![allow(
    dead_code,
    reason = "each test binary uses a different part of the support"
)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::OnceLock,
    time::Duration,
};

use mcp_tasks::{
    PostgresStore,
    store::{StoreError, postgres::PostgresBuilder},
};

pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The URL of a server that answers, or `None` (after printing why) when the Postgres tests
/// cannot run here. Panics under CI instead of skipping.
pub async fn url() -> Option<String> {
    static URL: OnceLock<Option<String>> = OnceLock::new();
    if let Some(url) = URL.get() {
        return url.clone();
    }
    let configured = std::env::var("MCP_TASKS_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_URL.into());
    let found = if answers(&configured).await {
        Some(configured.clone())
    } else {
        let started = tokio::task::spawn_blocking(throwaway_cluster)
            .await
            .ok()
            .flatten();
        match started {
            Some(url) if answers(&url).await => Some(url),
            _ => None,
        }
    };
    if found.is_none() {
        let line = format!(
            "Postgres tests skipped: no server answers at {configured} and no initdb/postgres \
             is installed; set MCP_TASKS_POSTGRES_URL or install Debian's `postgresql` package"
        );
        assert!(
            std::env::var_os("CI").is_none(),
            "{line} (CI requires them)"
        );
        eprintln!("{line}");
    }
    URL.get_or_init(|| found).clone()
}

async fn answers(url: &str) -> bool {
    let Ok(mut config) = url.parse::<tokio_postgres::Config>() else {
        return false;
    };
    config.connect_timeout(Duration::from_secs(3));
    match config.connect(tokio_postgres::NoTls).await {
        Ok((client, connection)) => {
            tokio::spawn(connection);
            client.simple_query("SELECT 1").await.is_ok()
        }
        Err(_) => false,
    }
}

/// Finds `name` on PATH or in /usr/lib/postgresql/*/bin.
fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    if let Ok(versions) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<PathBuf> = versions.flatten().map(|e| e.path().join("bin")).collect();
        versions.sort();
        dirs.extend(versions.into_iter().rev());
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// Starts a cluster in a temp folder on a free port, watched by a shell that stops it (and
/// removes the folder) once this test process is gone. Its URL, or `None`.
fn throwaway_cluster() -> Option<String> {
    let (initdb, postgres, pg_ctl) = (tool("initdb")?, tool("postgres")?, tool("pg_ctl")?);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let dir = std::env::temp_dir().join(format!("mcp-tasks-pg-{}-{port}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Postgres refuses to run as root: run it as the `postgres` user then.
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    let runas = if root { "runuser -u postgres -- " } else { "" };
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{runas}{} -U postgres --auth=trust -D {}",
            initdb.display(),
            dir.display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return None;
    }
    let script = format!(
        "{runas}{postgres} -D {dir} -p {port} -k {dir} -c listen_addresses=127.0.0.1 \
         -c max_connections=200 >{dir}/log 2>&1 & pg=$!; \
         while kill -0 {parent} 2>/dev/null; do sleep 1; done; \
         {runas}{pg_ctl} -D {dir} -m fast -w stop >/dev/null 2>&1; wait $pg; rm -rf {dir}",
        postgres = postgres.display(),
        pg_ctl = pg_ctl.display(),
        dir = dir.display(),
        parent = std::process::id(),
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    wait_ready(&dir, port)?;
    let createdb = Command::new(tool("createdb")?)
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "postgres",
            "test",
        ])
        .status()
        .is_ok_and(|s| s.success());
    createdb.then(|| format!("postgres://postgres@127.0.0.1:{port}/test"))
}

fn wait_ready(dir: &Path, port: u16) -> Option<()> {
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            && dir.join("postmaster.pid").exists()
        {
            std::thread::sleep(Duration::from_millis(300));
            return Some(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

/// One test's schema on the server, dropped (with everything in it) on drop.
pub struct Db {
    pub url: String,
    pub schema: String,
}

impl Db {
    /// A fresh schema name (nothing is created until a store connects), or `None` when the
    /// Postgres tests cannot run here.
    pub async fn new() -> Option<Self> {
        let url = url().await?;
        Some(Self {
            url,
            schema: unique_schema(),
        })
    }

    /// A builder for a store on this schema, with a small pool (tests run in parallel on one
    /// server) and an application name that tells this test's connections apart.
    pub fn builder(&self) -> PostgresBuilder {
        PostgresStore::builder(self.url.clone())
            .with_schema(self.schema.clone())
            .with_pool_size(3)
            .with_application_name(self.schema.clone())
    }

    /// A store on this schema with the test defaults.
    pub async fn store(&self) -> Result<PostgresStore, StoreError> {
        self.builder().connect().await
    }

    /// A plain connection for what the test does behind the store's back.
    pub async fn raw(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url, tokio_postgres::NoTls)
            .await
            .expect("connect to the test server");
        tokio::spawn(connection);
        client
            .batch_execute(&format!("SET search_path = \"{}\"", self.schema))
            .await
            .expect("set search_path");
        client
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let (url, schema) = (self.url.clone(), self.schema.clone());
        // A thread of its own: drop may run inside or outside a runtime.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .ok()?;
                tokio::spawn(connection);
                client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                    .await
                    .ok()
            })
        })
        .join();
    }
}

/// `t_<pid>_<counter>_<random>`: unique across parallel tests and test processes.
pub fn unique_schema() -> String {
    use std::hash::{BuildHasher, Hasher};
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(n);
    format!(
        "t_{}_{n}_{:08x}",
        std::process::id(),
        hasher.finish() as u32
    )
}
