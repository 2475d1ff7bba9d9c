//! `PostgresStore` over TLS, against a Postgres cluster of the test's own started with
//! `ssl = on` and a CA and server certificate the test makes (with the `openssl` command):
//! each `sslmode` connects or fails as libpq's does, with an error that says what to fix and
//! never shows the password; the store's connections (the pool's and the listener's) are
//! encrypted when they should be, as the server's `pg_stat_ssl` shows.
//!
//! Without Postgres's server programs or `openssl` the test says so and returns, except under
//! CI (env `CI` set), where it fails.

#[path = "support/postgres.rs"]
mod pg;

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use mcp_tasks::{
    PostgresStore, TaskStore,
    store::{ClusterStore, StoreError, postgres::SslMode},
};

/// The certificate's only name: the server is reached at 127.0.0.1, which it does not hold.
const SERVER_NAME: &str = "db.example";
const SECRET: &str = "hunter2xyz";

fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("the `openssl` command is needed to make the test's certificates: {e}")
        });
    assert!(
        output.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Starts `cluster` serving TLS with a server certificate signed by a CA `ca` made in its
/// folder; the CA certificate's path.
fn start_with_tls(cluster: &mut pg::OwnCluster) -> PathBuf {
    let dir = cluster.dir().to_path_buf();
    let ca = make_ca(&dir, "ca");
    make_server_cert(&dir, "ca");
    cluster.configure(&format!(
        "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\n",
        dir.join("server.crt").display(),
        dir.join("server.key").display()
    ));
    cluster.give_to_postgres(&dir);
    cluster.start();
    ca
}

/// A CA (`<name>.crt`, `<name>.key`) in `dir`.
fn make_ca(dir: &Path, name: &str) -> PathBuf {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN=mcp-tasks test {name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
        ],
    );
    dir.join(format!("{name}.crt"))
}

/// The server's certificate for [`SERVER_NAME`] only, signed by the CA `ca`.
fn make_server_cert(dir: &Path, ca: &str) {
    std::fs::write(
        dir.join("server.ext"),
        format!(
            "subjectAltName=DNS:{SERVER_NAME}\nbasicConstraints=CA:FALSE\n\
             keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        ),
    )
    .unwrap();
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            &format!("/CN={SERVER_NAME}"),
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ],
    );
    // The server refuses a key others can read.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        dir.join("server.key"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
}

/// The whole message of an error, with its sources.
fn message(error: &StoreError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// Whether each connection of `application_name` the server has is encrypted.
async fn encrypted(raw: &tokio_postgres::Client, application_name: &str) -> Vec<bool> {
    raw.query(
        "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
         WHERE a.application_name = $1 ORDER BY a.pid",
        &[&application_name],
    )
    .await
    .expect("read pg_stat_ssl")
    .iter()
    .map(|row| row.get(0))
    .collect()
}

/// A store at `conninfo` that works: it migrated its schema (over the connection), answers a
/// read, and has its listening connection open; `name` is its application name (and schema).
async fn usable(
    raw: &tokio_postgres::Client,
    builder: mcp_tasks::store::postgres::PostgresBuilder,
    name: &str,
) -> (PostgresStore, Vec<bool>) {
    let store = builder
        .with_schema(name)
        .with_application_name(name)
        .with_pool_size(2)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("{name}: the store connects: {}", message(&e)));
    assert!(
        store.get("no-such-task").await.expect("a read").is_none(),
        "{name}"
    );
    let _wakeups = store.wakeups();
    // The pool's connection and the listener's.
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen = encrypted(raw, name).await;
        if seen.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        seen.len(),
        2,
        "{name}: the pool's and the listener's connections"
    );
    (store, seen)
}

async fn refused(builder: mcp_tasks::store::postgres::PostgresBuilder) -> String {
    let error = builder
        .with_schema("refused")
        .with_connect_timeout(Duration::from_secs(10))
        .connect()
        .await
        .expect_err("the connection is refused");
    assert!(matches!(error, StoreError::Backend(_)), "{error:?}");
    let text = message(&error);
    assert!(!text.contains(SECRET), "the password is shown: {text}");
    eprintln!("refused: {text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_sslmode_connects_or_fails_as_libpq_does() {
    let Some(mut cluster) = pg::OwnCluster::init() else {
        return;
    };
    let other_ca = make_ca(cluster.dir(), "other-ca");
    let ca = start_with_tls(&mut cluster);
    let port = cluster.port();
    let (raw, connection) = tokio_postgres::connect(&cluster.url(""), tokio_postgres::NoTls)
        .await
        .expect("a plain connection for the checks");
    tokio::spawn(connection);
    let ca = ca.display().to_string();
    let other_ca = other_ca.display().to_string();

    // `require` without a root certificate: encrypted, the certificate not checked (it is
    // not issued for 127.0.0.1, nor signed by a CA the store knows).
    let (_require, seen) = usable(
        &raw,
        PostgresStore::builder(cluster.url("sslmode=require")),
        "tls_require",
    )
    .await;
    assert_eq!(seen, [true, true], "require: every connection encrypted");

    // `verify-full` with the right CA, reaching the server by the certificate's name
    // (`hostaddr` picks the address): key=value settings, the password quoted.
    let (_full, seen) = usable(
        &raw,
        PostgresStore::builder(format!(
            "host={SERVER_NAME} hostaddr=127.0.0.1 port={port} user=postgres \
             password='{SECRET} x' dbname=postgres sslmode=verify-full sslrootcert='{ca}'"
        )),
        "tls_verify_full",
    )
    .await;
    assert_eq!(
        seen,
        [true, true],
        "verify-full: every connection encrypted"
    );

    // `verify-full` by a host name the certificate does not hold.
    let text = refused(PostgresStore::builder(format!(
        "postgres://postgres:{SECRET}@127.0.0.1:{port}/postgres?sslmode=verify-full&sslrootcert={ca}"
    )))
    .await;
    assert!(
        text.contains(&format!(
            "could not connect to the Postgres server at postgres://postgres:***@127.0.0.1:{port}/postgres"
        )),
        "{text}"
    );
    assert!(
        text.contains("the server's certificate is not issued for the host name `127.0.0.1`"),
        "{text}"
    );
    assert!(
        text.contains("sslmode=verify-ca"),
        "the fix is named: {text}"
    );

    // `verify-ca` checks the chain only: the same host name connects with the right CA...
    let (_ca_only, seen) = usable(
        &raw,
        PostgresStore::builder(cluster.url(&format!("sslmode=verify-ca&sslrootcert={ca}"))),
        "tls_verify_ca",
    )
    .await;
    assert_eq!(seen, [true, true], "verify-ca: every connection encrypted");
    // ...and fails with a CA that did not sign the server's certificate.
    let text = refused(PostgresStore::builder(format!(
        "postgres://postgres:{SECRET}@127.0.0.1:{port}/postgres?sslmode=verify-ca&sslrootcert={other_ca}"
    )))
    .await;
    assert!(
        text.contains(&format!(
            "the server's certificate is not signed by a CA of sslrootcert={other_ca}"
        )),
        "{text}"
    );
    // `require` with a root certificate checks the chain too (libpq's rule).
    let text = refused(PostgresStore::builder(
        cluster.url(&format!("sslmode=require&sslrootcert={other_ca}")),
    ))
    .await;
    assert!(
        text.contains("is not signed by a CA of sslrootcert"),
        "{text}"
    );

    // `verify-full` without any root certificate says where to give one.
    let error = PostgresStore::builder(cluster.url("sslmode=verify-full"))
        .connect()
        .await
        .expect_err("no CA to check against");
    if std::env::var_os("HOME")
        .is_none_or(|home| !Path::new(&home).join(".postgresql/root.crt").exists())
    {
        assert!(matches!(error, StoreError::Config(_)), "{error:?}");
        assert!(
            message(&error).contains("sslrootcert=/path/to/ca.pem"),
            "{error}"
        );
    }

    // `disable` against a server with `ssl = on`: in the clear.
    let (_plain, seen) = usable(
        &raw,
        PostgresStore::builder(cluster.url("sslmode=disable")),
        "tls_disable",
    )
    .await;
    assert_eq!(seen, [false, false], "disable: no connection encrypted");

    // A driver configuration of the caller's own, with the checks set on the builder.
    let mut config = tokio_postgres::Config::new();
    config
        .host(SERVER_NAME)
        .hostaddr("127.0.0.1".parse().unwrap())
        .port(port)
        .user("postgres")
        .dbname("postgres");
    let (_own, seen) = usable(
        &raw,
        PostgresStore::builder_from_config(config.clone())
            .with_ssl_mode(SslMode::VerifyFull)
            .with_ssl_root_cert(&ca),
        "tls_own_config",
    )
    .await;
    assert_eq!(seen, [true, true], "own config: every connection encrypted");
    // The same with the wrong CA fails.
    let text = refused(
        PostgresStore::builder_from_config(config)
            .with_ssl_mode(SslMode::VerifyFull)
            .with_ssl_root_cert(&other_ca),
    )
    .await;
    assert!(
        text.contains("is not signed by a CA of sslrootcert"),
        "{text}"
    );
    cluster.stop();
}

/// The warnings logged in this test binary, by message.
fn warnings() -> Vec<String> {
    use std::sync::{Mutex, OnceLock};
    use tracing_subscriber::layer::SubscriberExt;

    static SEEN: OnceLock<std::sync::Arc<Mutex<Vec<String>>>> = OnceLock::new();
    struct Record(std::sync::Arc<Mutex<Vec<String>>>);
    struct Message<'a>(&'a mut String);
    impl tracing::field::Visit for Message<'_> {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                *self.0 = format!("{value:?}");
            }
        }
    }
    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Record {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            if *event.metadata().level() == tracing::Level::WARN {
                let mut message = String::new();
                event.record(&mut Message(&mut message));
                self.0.lock().unwrap().push(message);
            }
        }
    }
    let seen = SEEN.get_or_init(|| {
        let seen = std::sync::Arc::default();
        let subscriber = tracing_subscriber::registry().with(Record(std::sync::Arc::clone(&seen)));
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
        seen
    });
    seen.lock().unwrap().clone()
}

/// How many warnings say a `prefer` connection went in the clear.
fn plaintext_warnings() -> usize {
    warnings()
        .iter()
        .filter(|w| w.contains("did not accept TLS") && w.contains("sslmode=prefer"))
        .count()
}

/// A plain connection to `cluster` for the checks (the server's own view of connections).
async fn checker(cluster: &pg::OwnCluster) -> tokio_postgres::Client {
    let (raw, connection) = tokio_postgres::connect(&cluster.url(""), tokio_postgres::NoTls)
        .await
        .expect("a plain connection for the checks");
    tokio::spawn(connection);
    raw
}

/// `sslmode=prefer` uses TLS when the server offers it, and fails (never retrying in the
/// clear) when the server offers TLS and the handshake then fails; against a server without
/// TLS it connects in the clear and logs a warning per connection, while `require`,
/// `verify-ca` and `verify-full` refuse it with an error saying the server has no TLS and
/// open no connection. `sslrootcert=system` checks against the operating system's store
/// (which does not hold the test's CA).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefer_never_falls_back_to_the_clear_and_required_tls_never_connects_without_it() {
    let Some(mut cluster) = pg::OwnCluster::init() else {
        return;
    };
    warnings();
    let ca = start_with_tls(&mut cluster).display().to_string();
    let port = cluster.port();
    let raw = checker(&cluster).await;

    // A server with TLS: `prefer` encrypts every connection, and warns of nothing.
    let (prefer, seen) = usable(
        &raw,
        PostgresStore::builder(cluster.url("sslmode=prefer")),
        "tls_prefer",
    )
    .await;
    assert_eq!(seen, [true, true], "prefer: every connection encrypted");
    assert_eq!(plaintext_warnings(), 0, "{:?}", warnings());
    drop(prefer);

    // `sslrootcert=system`: the system's CAs, which did not sign the test's certificate.
    let text = refused(PostgresStore::builder(format!(
        "host={SERVER_NAME} hostaddr=127.0.0.1 port={port} user=postgres \
         password={SECRET} dbname=postgres sslmode=verify-full sslrootcert=system"
    )))
    .await;
    assert!(
        text.contains("is not signed by a CA of sslrootcert=system"),
        "{text}"
    );

    // The server offers TLS, and the handshake fails (it speaks no TLS version rustls
    // does): `prefer` fails, and no connection is made in the clear.
    cluster.configure("ssl_min_protocol_version = 'TLSv1'\nssl_max_protocol_version = 'TLSv1.1'");
    cluster.restart();
    let raw = checker(&cluster).await;
    let text = refused(
        PostgresStore::builder(cluster.url("sslmode=prefer&application_name=tls_prefer_failed"))
            .with_application_name("tls_prefer_failed"),
    )
    .await;
    assert!(text.contains("error performing TLS handshake"), "{text}");
    assert!(
        encrypted(&raw, "tls_prefer_failed").await.is_empty(),
        "no connection in the clear after a failed handshake"
    );

    // A server without TLS.
    cluster.configure("ssl = off");
    cluster.restart();
    let raw = checker(&cluster).await;
    let before = plaintext_warnings();
    let (_plain, seen) = usable(
        &raw,
        PostgresStore::builder(cluster.url("sslmode=prefer")),
        "tls_prefer_plain",
    )
    .await;
    assert_eq!(seen, [false, false], "prefer without TLS: in the clear");
    assert!(
        plaintext_warnings() >= before + 2,
        "a warning for each connection in the clear: {:?}",
        warnings()
    );
    for (mode, name) in [
        ("sslmode=require".to_owned(), "tls_no_require"),
        (
            format!("sslmode=verify-ca&sslrootcert={ca}"),
            "tls_no_verify_ca",
        ),
        (
            format!("sslmode=verify-full&sslrootcert={ca}"),
            "tls_no_verify_full",
        ),
    ] {
        let text = refused(
            PostgresStore::builder(cluster.url(&format!("{mode}&application_name={name}")))
                .with_application_name(name),
        )
        .await;
        assert!(
            text.contains("server does not support TLS"),
            "{mode}: {text}"
        );
        assert!(
            encrypted(&raw, name).await.is_empty(),
            "{mode}: no connection in the clear"
        );
    }
    cluster.stop();
}
