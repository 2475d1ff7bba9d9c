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
        self.builder_via(self.url.clone())
    }

    /// [`Db::builder`] connecting to `url` instead (the same server reached another way,
    /// e.g. through a test's proxy).
    pub fn builder_via(&self, url: String) -> PostgresBuilder {
        PostgresStore::builder(url)
            .with_schema(self.schema.clone())
            .with_pool_size(3)
            .with_application_name(self.schema.clone())
    }

    /// A store on this schema with the test defaults.
    pub async fn store(&self) -> Result<PostgresStore, StoreError> {
        self.builder().connect().await
    }

    /// `n` stores, each on a schema of its own and connected now, with their schemas
    /// (dropped on drop); `None` when the Postgres tests cannot run here. A test that pauses
    /// time connects first: a paused clock jumps ahead while a connection handshake waits on
    /// the socket (and so would time a connect out); once connected, each store reuses its
    /// one connection.
    pub async fn stores(n: usize) -> Option<(Vec<Self>, Vec<PostgresStore>)> {
        let (mut dbs, mut stores) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            let db = Self::new().await?;
            stores.push(db.store().await.expect("connect to a fresh schema"));
            dbs.push(db);
        }
        Some((dbs, stores))
    }

    /// Three instances (`a`, `b`, `c`) over this schema, each serving `tools()` with at most
    /// `max_running` tasks at once and claiming every `claim_interval`; not started (serving
    /// starts them).
    pub async fn three_instances(
        &self,
        tools: impl Fn() -> mcp_tasks::Toolkit,
        max_running: usize,
        claim_interval: Duration,
    ) -> Vec<mcp_tasks::Engine> {
        let mut engines = Vec::new();
        for id in ["a", "b", "c"] {
            let store = std::sync::Arc::new(self.store().await.expect("connect"));
            let config = mcp_tasks::ClusterConfig::default().with_claim_interval(claim_interval);
            let engine = mcp_tasks::Engine::builder(tools())
                .with_shared_store(store)
                .with_instance_id(id)
                .with_max_running(max_running)
                .with_cluster(config)
                .build();
            engines.push(engine);
        }
        engines
    }

    /// How many of this schema's store connections are listening for notices now (one per
    /// instance that listens), read over `raw` (a connection of [`Db::raw`]).
    pub async fn listeners(&self, raw: &tokio_postgres::Client) -> i64 {
        raw.query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' \
             AND application_name = $1",
            &[&self.schema],
        )
        .await
        .expect("count the listening connections")
        .get::<_, i64>(0)
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

/// A Postgres cluster of the test's own, in a temp folder on a free port, that the test
/// configures, restarts and stops (TLS, a server restart): unlike the shared server, nothing
/// else uses it. Stopped and removed on drop.
///
/// Under CI a cluster that cannot be made fails the test (`expect`); elsewhere
/// [`OwnCluster::init`] answers `None` (after one line saying why) when Postgres's server
/// programs are not installed.
pub struct OwnCluster {
    dir: PathBuf,
    port: u16,
    pg_ctl: PathBuf,
    /// `runuser -u postgres --` when the tests run as root (Postgres refuses root).
    runas: Vec<String>,
    running: bool,
}

impl OwnCluster {
    /// `initdb` in a fresh folder (trust authentication, user `postgres`), not started:
    /// write configuration with [`OwnCluster::configure`] and files into
    /// [`OwnCluster::dir`], then [`OwnCluster::start`].
    pub fn init() -> Option<Self> {
        let found = (|| Some((tool("initdb")?, tool("pg_ctl")?)))();
        let Some((initdb, pg_ctl)) = found else {
            let line = "no initdb/pg_ctl installed (Debian's `postgresql` package)";
            assert!(
                std::env::var_os("CI").is_none(),
                "{line} (CI requires them)"
            );
            eprintln!("skipped: {line}");
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir =
            std::env::temp_dir().join(format!("mcp-tasks-own-pg-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the cluster's folder");
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        let runas: Vec<String> = if root {
            ["runuser", "-u", "postgres", "--"]
                .map(String::from)
                .to_vec()
        } else {
            Vec::new()
        };
        let cluster = Self {
            dir,
            port,
            pg_ctl,
            runas,
            running: false,
        };
        cluster.give_to_postgres(&cluster.dir);
        let data = cluster.data();
        let status = cluster
            .command(&initdb)
            .args(["-U", "postgres", "--auth=trust", "-D"])
            .arg(&data)
            .stdout(Stdio::null())
            .status()
            .expect("run initdb");
        assert!(status.success(), "initdb failed for {}", data.display());
        cluster.configure(&format!(
            "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             max_connections = 100\n",
            cluster.dir.display()
        ));
        Some(cluster)
    }

    /// The folder the cluster lives in (its data folder is `data` inside it): certificates
    /// and other files the configuration names go here.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`, with `extra` appended to the query
    /// (e.g. `sslmode=require`).
    pub fn url(&self, extra: &str) -> String {
        let query = if extra.is_empty() {
            String::new()
        } else {
            format!("?{extra}")
        };
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres{query}",
            self.port
        )
    }

    /// Appends `lines` to `postgresql.conf` (takes effect at the next start or restart).
    pub fn configure(&self, lines: &str) {
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(self.data().join("postgresql.conf"))
            .expect("open postgresql.conf");
        writeln!(file, "{lines}").expect("write postgresql.conf");
    }

    /// Makes `path` (a file or folder the test wrote) owned by the user the server runs as.
    pub fn give_to_postgres(&self, path: &Path) {
        if !self.runas.is_empty() {
            let status = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(path)
                .status()
                .expect("run chown");
            assert!(status.success(), "chown postgres {}", path.display());
        }
    }

    fn command(&self, program: &Path) -> Command {
        let mut command = match self.runas.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(program);
                c
            }
            None => Command::new(program),
        };
        command.stdin(Stdio::null());
        command
    }

    fn pg_ctl(&self, action: &str) {
        let status = self
            .command(&self.pg_ctl)
            .args(["-D"])
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.join("log"))
            .args(["-m", "fast", "-w", "-t", "60", action])
            .stdout(Stdio::null())
            .status()
            .expect("run pg_ctl");
        assert!(
            status.success(),
            "pg_ctl {action} failed; the server's log: {}",
            std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
        );
    }

    /// Starts the server and waits until it accepts connections.
    pub fn start(&mut self) {
        self.pg_ctl("start");
        self.running = true;
    }

    /// `pg_ctl restart -m fast`: every connection is closed, the server comes back on the
    /// same port; returns once it accepts connections again.
    pub fn restart(&mut self) {
        self.pg_ctl("restart");
        self.running = true;
    }

    /// `pg_ctl stop -m fast`.
    pub fn stop(&mut self) {
        if self.running {
            self.pg_ctl("stop");
            self.running = false;
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        if self.running {
            let _ = self
                .command(&self.pg_ctl)
                .args(["-D"])
                .arg(self.data())
                .args(["-m", "immediate", "-w", "stop"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
