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
    let dir = cluster.dir().to_path_buf();
    let ca = make_ca(&dir, "ca");
    let other_ca = make_ca(&dir, "other-ca");
    make_server_cert(&dir, "ca");
    cluster.configure(&format!(
        "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\n",
        dir.join("server.crt").display(),
        dir.join("server.key").display()
    ));
    cluster.give_to_postgres(&dir);
    cluster.start();
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
