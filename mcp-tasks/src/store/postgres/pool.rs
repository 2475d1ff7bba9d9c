//! Connections of [`PostgresStore`](super::PostgresStore): the pool, transactions that never
//! return a connection to the pool in an unknown state, transparent retry of what is safe to
//! retry, and the errors a user can act on.

use deadpool_postgres::{Object, Pool, PoolError};
use tokio_postgres::{Config, Row, Statement, config::Host, types::ToSql};

use super::{BackendError, ConfigError, StoreError};
use crate::errors::error_chain;

/// Parses a connection string, a URL (`postgres://USER:PASSWORD@HOST:PORT/DATABASE?k=v`) or
/// `key=value` pairs (`host=HOST user=USER password='se cret'`), with the driver's own parser;
/// one that does not parse is a [`StoreError::Config`] that never shows the password.
pub(super) fn parse_config(conninfo: &str) -> Result<Config, StoreError> {
    conninfo.parse().map_err(|error: tokio_postgres::Error| {
        StoreError::Config(ConfigError::new(format!(
            "the connection string is not a valid Postgres URL nor key=value settings ({}): \
             write it as a URL, postgres://USER:PASSWORD@HOST:PORT/DATABASE (percent-encode \
             `@`, `:` and `/` in a password), or as key=value pairs, host=HOST user=USER \
             dbname=DATABASE (quote a value that holds a space: password='...')",
            parse_reason(&error, conninfo)
        )))
    })
}

/// Where the store connects, for error messages: user, hosts and ports, database; the
/// password, if any, as `***`. Built from the parsed settings, not from the text the user
/// wrote, so no way of writing the password (in the URL's user part, as `?password=` or
/// `password=` with quotes and escapes) can reach the message.
pub(super) fn describe(config: &Config) -> String {
    let mut text = String::from("postgres://");
    let password = config.get_password().is_some();
    if let Some(user) = config.get_user() {
        text.push_str(user);
    }
    if password {
        text.push_str(":***");
    }
    if password || config.get_user().is_some() {
        text.push('@');
    }
    let ports = config.get_ports();
    let hosts = config.get_hosts();
    for (i, host) in hosts.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        match host {
            // A host with `@` in it is what is left of a password holding a raw `@` (the URL
            // parser splits the user part at the first one): not shown.
            Host::Tcp(name) if name.contains('@') => text.push_str("***"),
            Host::Tcp(name) if name.contains(':') => text.push_str(&format!("[{name}]")),
            Host::Tcp(name) => text.push_str(name),
            #[cfg(unix)]
            Host::Unix(path) => text.push_str(&path.display().to_string()),
        }
        // One port for every host, or one each.
        if let Some(port) = ports.get(if ports.len() == 1 { 0 } else { i }) {
            text.push_str(&format!(":{port}"));
        }
    }
    if hosts.is_empty()
        && let Some(port) = ports.first()
    {
        text.push_str(&format!(":{port}"));
    }
    text.push('/');
    if let Some(dbname) = config.get_dbname() {
        text.push_str(dbname);
    }
    text
}

/// The connection string as [`describe`] shows it; one that does not parse, not at all.
pub(super) fn shown(conninfo: &str) -> String {
    let parsed = super::tls::split(conninfo)
        .ok()
        .and_then(|(rest, _)| rest.parse::<Config>().ok());
    match parsed {
        Some(config) => describe(&config),
        None => "(not a valid connection string; not shown)".to_owned(),
    }
}

/// The driver's reason for rejecting `conninfo`, without what may be part of a password: its
/// messages quote pieces of the input between backticks (an unknown option's name, the
/// character it did not expect), and a password written with an unquoted space parses as
/// such pieces. When the string could hold a password, every quoted piece that is not an
/// option name is shown as `...`.
fn parse_reason(error: &tokio_postgres::Error, conninfo: &str) -> String {
    let reason =
        std::error::Error::source(error).map_or_else(|| error.to_string(), |s| s.to_string());
    if !may_hold_password(conninfo) {
        return reason;
    }
    let pieces = reason.split('`').enumerate().map(|(i, piece)| {
        // Odd pieces are the quoted ones.
        if i % 2 == 1 && !OPTION_NAMES.contains(&piece) && piece != "=" {
            "..."
        } else {
            piece
        }
    });
    pieces.collect::<Vec<_>>().join("`")
}

/// Whether `conninfo` may set a password: it names one (in any case), is a URL with a user
/// part, or has a percent-encoded byte (which could spell `password` in a URL's query).
fn may_hold_password(conninfo: &str) -> bool {
    conninfo.to_ascii_lowercase().contains("password")
        || conninfo.contains('%')
        || ["postgres://", "postgresql://"]
            .iter()
            .any(|scheme| conninfo.starts_with(scheme) && conninfo.contains('@'))
}

/// The connection parameters the driver knows, safe to show in a parse error.
const OPTION_NAMES: &[&str] = &[
    "user",
    "password",
    "dbname",
    "options",
    "application_name",
    "sslmode",
    "sslnegotiation",
    "host",
    "hostaddr",
    "port",
    "connect_timeout",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
];

/// Builds the [`StoreError::Backend`] of a Postgres failure, with what the store was doing
/// and what the server (or the socket) said, in one message (the driver's own error chain is
/// folded into it), the SQLSTATE as its code, and whether it is worth retrying.
pub(super) struct PgError;

impl PgError {
    /// A failed query.
    pub(super) fn query(context: impl Into<String>, error: tokio_postgres::Error) -> StoreError {
        let context = context.into();
        let code = error.as_db_error().map(|db| db.code().code().to_owned());
        StoreError::Backend(
            BackendError::new(format!("{context}{}", detail(&error)))
                .with_code(code)
                .retryable(retryable(&error)),
        )
    }

    /// `error` again, with `note` added to its message: the same code and retryability, for
    /// each caller of a batch that failed.
    pub(super) fn again(error: &StoreError, note: &str) -> StoreError {
        match error {
            StoreError::Backend(backend) => StoreError::Backend(
                BackendError::new(format!("{}{note}", error_chain(backend)))
                    .with_code(backend.code().map(str::to_owned))
                    .retryable(backend.is_retryable()),
            ),
            other => StoreError::backend(format!("{}{note}", error_chain(other))),
        }
    }
}

/// Whether a failed statement may succeed if tried again: the connection is gone, or the
/// server refused it for a passing reason (serialization failure, deadlock, lock not
/// available, too many connections).
fn retryable(error: &tokio_postgres::Error) -> bool {
    connection_lost(error)
        || error
            .as_db_error()
            .is_some_and(|db| matches!(db.code().code(), "40001" | "40P01" | "55P03" | "53300"))
}

/// What the server (or the socket) said, in one line.
fn detail(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return format!(
            ": {} ({} {})",
            db.message(),
            db.severity(),
            db.code().code()
        );
    }
    format!(": {}", error_chain(error))
}

/// Whether the error means the connection is gone (closed socket, a terminated backend, a
/// server shutting down), so that a new connection may succeed.
pub(super) fn connection_lost(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.as_db_error() {
        // Class 08 (connection exception) and 57P01-57P03 (admin / crash shutdown, cannot
        // connect now): the backend is gone.
        Some(db) => {
            let code = db.code().code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
        }
        // No server message: the socket failed.
        None => std::error::Error::source(error)
            .is_some_and(|source| source.downcast_ref::<std::io::Error>().is_some()),
    }
}

/// A connection from the pool, as a [`StoreError`] when none can be had.
pub(super) async fn get(pool: &Pool) -> Result<Object, StoreError> {
    get_or(pool, "could not connect to the Postgres server").await
}

/// [`get`], saying `context` when no connection can be opened.
pub(super) async fn get_or(pool: &Pool, context: &str) -> Result<Object, StoreError> {
    pool.get().await.map_err(|error| match error {
        PoolError::Backend(e) => PgError::query(context, e),
        other => StoreError::Backend(
            BackendError::new(format!(
                "could not get a Postgres connection from the pool: {other}"
            ))
            .retryable(matches!(other, PoolError::Timeout(_))),
        ),
    })
}

/// Runs `step` on a connection from the pool; when that connection turns out to be gone (its
/// backend terminated while it sat idle in the pool), once more on a fresh one. Only for a
/// step that is safe to repeat: a read, or one whose statement never reached the server. A
/// connection whose step failed is closed, never handed back to the pool.
///
/// `step` takes the connection and hands it back with its outcome (a closure over a borrowed
/// connection would make the caller's future not `Send`).
async fn on_live_connection<T, F, Fut>(
    pool: &Pool,
    context: &str,
    step: F,
) -> Result<(Object, T), StoreError>
where
    F: Fn(Object) -> Fut,
    Fut: Future<Output = (Object, Result<T, tokio_postgres::Error>)>,
{
    let mut retried = false;
    loop {
        let (client, outcome) = step(get(pool).await?).await;
        match outcome {
            Ok(value) => return Ok((client, value)),
            Err(error) => {
                drop(Object::take(client));
                if retried || !connection_lost(&error) {
                    return Err(PgError::query(context, error));
                }
                retried = true;
            }
        }
    }
}

/// Counts a statement sent to the server on this thread (prepares aside), for the tests that
/// count a store method's round trips; nothing outside tests.
fn sent() {
    #[cfg(test)]
    scratch::SENT.with(|n| n.set(n.get() + 1));
}

/// Runs one read-only statement, [`on_live_connection`]: a read is safe to repeat.
pub(super) async fn read(
    pool: &Pool,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
    context: &str,
) -> Result<Vec<Row>, StoreError> {
    let (_, rows) = on_live_connection(pool, context, |client| async move {
        let rows = async {
            let statement = client.prepare_cached(sql).await?;
            sent();
            client.query(&statement, params).await
        }
        .await;
        (client, rows)
    })
    .await?;
    Ok(rows)
}

/// Runs one writing statement as its own transaction (autocommit: it is committed when its
/// answer arrives). Retried once on a fresh connection only when the first one turned out to
/// be gone before the statement was sent (while preparing it); a statement that was sent is
/// never repeated: if its answer is lost, whether it committed is unknown, and the error says
/// so.
pub(super) async fn write_one(
    pool: &Pool,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
    context: &str,
) -> Result<Vec<Row>, StoreError> {
    let (client, statement) = on_live_connection(pool, context, |client| async move {
        let statement = client.prepare_cached(sql).await;
        (client, statement)
    })
    .await?;
    sent();
    let rows = client.query(&statement, params).await;
    rows.map_err(|error| {
        let lost = connection_lost(&error);
        drop(Object::take(client));
        let note = " (the connection was lost: whether the change was stored is unknown, read \
                    the task again)";
        PgError::query(format!("{context}{}", if lost { note } else { "" }), error)
    })
}

/// An open transaction on a pooled connection. Committed or rolled back, the connection goes
/// back to the pool; dropped in any other state (an error, or the caller's future dropped
/// mid-way), the connection is closed instead, and the server rolls the transaction back.
pub(super) struct Tx {
    client: Option<Object>,
}

impl Tx {
    /// `BEGIN` on a pooled connection; on a second one if the first turned out to be gone
    /// (nothing was done yet, so this is safe to repeat).
    ///
    /// The connection is held by the `Tx` from before `BEGIN` is sent: if the caller's future
    /// is dropped while `BEGIN` is under way, the connection is closed with it. Handed back to
    /// the pool instead, it would carry the transaction that `BEGIN` opens to its next user,
    /// whose autocommit writes would then never be committed.
    pub(super) async fn begin(pool: &Pool) -> Result<Self, StoreError> {
        Self::begin_with(pool, "BEGIN").await
    }

    /// [`Tx::begin`] with `begin`: `BEGIN` and, in the same round trip, `SET LOCAL`s for the
    /// transaction.
    pub(super) async fn begin_with(pool: &Pool, begin: &str) -> Result<Self, StoreError> {
        let mut retried = false;
        loop {
            let tx = Self {
                client: Some(get(pool).await?),
            };
            sent();
            let begun = tx.client()?.batch_execute(begin).await;
            // On an error `tx` is dropped, which closes the connection.
            match begun {
                Ok(()) => return Ok(tx),
                Err(error) if retried || !connection_lost(&error) => {
                    return Err(PgError::query("could not begin a transaction", error));
                }
                Err(_) => retried = true,
            }
        }
    }

    /// The connection. Only `commit` and `rollback` take it, and they consume `self`, so
    /// this answers an error only if that ever changed.
    fn client(&self) -> Result<&Object, StoreError> {
        self.client.as_ref().ok_or_else(ended)
    }

    /// The connection and `sql` prepared on it (once per connection), for one statement.
    async fn prepare(&self, sql: &str, context: &str) -> Result<(&Object, Statement), StoreError> {
        let client = self.client()?;
        let statement = client
            .prepare_cached(sql)
            .await
            .map_err(|e| PgError::query(context, e))?;
        sent();
        Ok((client, statement))
    }

    /// Runs one statement and returns its rows.
    pub(super) async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        context: &str,
    ) -> Result<Vec<Row>, StoreError> {
        let (client, statement) = self.prepare(sql, context).await?;
        client
            .query(&statement, params)
            .await
            .map_err(|e| PgError::query(context, e))
    }

    /// Runs one statement and returns the number of rows it changed.
    pub(super) async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        context: &str,
    ) -> Result<u64, StoreError> {
        let (client, statement) = self.prepare(sql, context).await?;
        client
            .execute(&statement, params)
            .await
            .map_err(|e| PgError::query(context, e))
    }

    /// `COMMIT`. An error means the outcome is unknown to this process: the connection is
    /// closed, never reused.
    pub(super) async fn commit(mut self) -> Result<(), StoreError> {
        let client = self.client.take().ok_or_else(ended)?;
        sent();
        let committed = client.batch_execute("COMMIT").await;
        committed.map_err(|error| {
            drop(Object::take(client));
            let context = "the commit failed (whether the change was stored is unknown: read the \
                           task again)";
            PgError::query(context, error)
        })
    }

    /// `ROLLBACK`; a connection that cannot roll back is closed instead.
    pub(super) async fn rollback(mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        sent();
        if client.batch_execute("ROLLBACK").await.is_err() {
            drop(Object::take(client));
        }
    }
}

/// The error of a transaction used after it ended.
fn ended() -> StoreError {
    StoreError::backend("the transaction has ended already")
}

impl Drop for Tx {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            drop(Object::take(client));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "hunter2xyz";

    /// `text` holds no piece of the password (the whole of it, or a part of it that the
    /// connection string split off).
    fn assert_hidden(text: &str, pieces: &[&str]) {
        for piece in pieces.iter().chain(&[SECRET]) {
            assert!(!text.contains(piece), "`{piece}` shown in: {text}");
        }
    }

    fn described(conninfo: &str) -> String {
        describe(&parse_config(conninfo).expect("parses"))
    }

    #[test]
    fn url_userinfo_password_is_hidden() {
        let text = described("postgres://app:hunter2xyz@db.example:5433/tasks");
        assert_eq!(text, "postgres://app:***@db.example:5433/tasks");
        // Percent-encoded characters in the password.
        let text = described("postgresql://app:hunter2xyz%40%3A%2F@db.example/tasks");
        assert_hidden(&text, &["%40", "@:/"]);
        assert_eq!(text, "postgres://app:***@db.example:5432/tasks");
    }

    #[test]
    fn url_password_with_a_raw_at_sign_is_hidden() {
        // The parser splits the user part at the first `@`: the rest of the password lands in
        // the host.
        let text = described("postgres://app:hunter@2xyz@db.example/tasks");
        assert_hidden(&text, &["hunter", "2xyz"]);
        assert_eq!(text, "postgres://app:***@***:5432/tasks");
    }

    #[test]
    fn url_query_password_is_hidden() {
        let text = described(
            "postgres://app@db.example:5433/tasks?password=hunter2xyz&application_name=x",
        );
        assert_eq!(text, "postgres://app:***@db.example:5433/tasks");
        // The key percent-encoded (`%77` is `w`).
        let text = described("postgres://db.example/tasks?user=app&pass%77ord=hunter2xyz");
        assert_eq!(text, "postgres://app:***@db.example:5432/tasks");
    }

    #[test]
    fn key_value_password_is_hidden() {
        let text = described("host=db.example port=5433 user=app password=hunter2xyz dbname=tasks");
        assert_eq!(text, "postgres://app:***@db.example:5433/tasks");
        let text = described("host=db.example user=app password = hunter2xyz\\ more dbname=tasks");
        assert_hidden(&text, &["more"]);
        assert_eq!(text, "postgres://app:***@db.example/tasks");
    }

    #[test]
    fn quoted_key_value_password_with_escapes_is_hidden() {
        let text =
            described(r"host=db.example user=app password='hunter 2xyz \'q\\ x' dbname=tasks");
        assert_hidden(&text, &["hunter", "2xyz", "\\'q", "q\\"]);
        assert_eq!(text, "postgres://app:***@db.example/tasks");
    }

    #[test]
    fn several_hosts_and_sockets_stay_readable() {
        let text = described("postgres://app@a.example:5433,[::1]:5434/tasks");
        assert_eq!(text, "postgres://app@a.example:5433,[::1]:5434/tasks");
        let text = described("host=/run/postgresql dbname=tasks");
        assert_eq!(text, "postgres:///run/postgresql/tasks");
    }

    fn parse_error(conninfo: &str) -> String {
        match parse_config(conninfo) {
            Err(StoreError::Config(error)) => error.to_string(),
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    #[test]
    fn a_string_that_does_not_parse_never_shows_its_password() {
        // The reason stays readable: the option at fault.
        let text = parse_error("postgres://app:hunter2xyz@db.example:port/tasks");
        assert_hidden(&text, &[]);
        assert!(text.contains("invalid value for option `port`"), "{text}");
        let text = parse_error("host=db.example port=x user=app password='hunter2xyz'");
        assert_hidden(&text, &[]);
        assert!(text.contains("invalid value for option `port`"), "{text}");
        // An unquoted space in the password: the parser reads its second half as an option.
        let text = parse_error("host=db.example user=app password=hunter 2xyz=1");
        assert_hidden(&text, &["hunter", "2xyz"]);
        assert!(text.contains("unknown option `...`"), "{text}");
        let text = parse_error("host=db.example user=app password=hunter 2xyz q");
        assert_hidden(&text, &["hunter", "2xyz", "`q`"]);
        // An unterminated quote.
        let text = parse_error("host=db.example password='hunter2xyz");
        assert_hidden(&text, &[]);
        assert!(text.contains("unterminated"), "{text}");
        // A URL query password with a raw `&`.
        let text = parse_error("postgres://db.example/tasks?password=hunter&2xyz=1");
        assert_hidden(&text, &["hunter", "2xyz"]);
        // The same, its key percent-encoded (`%77` is `w`).
        let text = parse_error("postgres://db.example/tasks?pass%77ord=hunter&2xyz=1");
        assert_hidden(&text, &["hunter", "2xyz"]);
    }

    #[test]
    fn a_string_without_a_password_shows_the_whole_reason() {
        let text = parse_error("host=db.example dbnmae=tasks");
        assert!(text.contains("unknown option `dbnmae`"), "{text}");
    }

    #[test]
    fn a_builder_debug_never_shows_the_password() {
        for conninfo in [
            "postgres://app:hunter2xyz@db.example/tasks",
            "postgres://app@db.example/tasks?password=hunter2xyz",
            "host=db.example user=app password='hunter2xyz x' dbname=tasks",
            "host=db.example user=app password='hunter2xyz",
            "postgres://app:hunter2xyz@db.example/tasks?sslmode=verify-full&sslrootcert=/ca.pem",
            "host=db.example password='hunter2xyz x' sslmode=verify-ca sslrootcert=/ca.pem",
        ] {
            let text = format!("{:?}", super::super::PostgresStore::builder(conninfo));
            assert_hidden(&text, &[]);
            assert!(text.contains("schema: \"mcp_tasks\""), "{text}");
        }
        let text = format!(
            "{:?}",
            super::super::PostgresStore::builder("postgres://app:hunter2xyz@db.example/tasks")
        );
        assert!(
            text.contains("url: \"postgres://app:***@db.example:5432/tasks\""),
            "{text}"
        );
    }

    /// The whole message of an error, with its sources.
    fn full_message(error: &StoreError) -> String {
        error_chain(error)
    }

    /// Through [`PostgresStore::connect`](super::super::PostgresStore::connect), to a port
    /// nobody listens on: the error that really comes back names where it tried and shows no
    /// password, for every way of writing one.
    #[tokio::test]
    async fn connect_errors_never_show_the_password() {
        let forms = [
            "postgres://app:hunter2xyz@127.0.0.1:1/tasks?connect_timeout=5",
            "postgres://app@127.0.0.1:1/tasks?password=hunter2xyz&connect_timeout=5",
            "host=127.0.0.1 port=1 user=app password=hunter2xyz dbname=tasks connect_timeout=5",
            r"host=127.0.0.1 port=1 user=app password='hunter2xyz \'x' dbname=tasks",
            "postgres://app:hunter2xyz@127.0.0.1:1/tasks?sslmode=disable&connect_timeout=5",
            "host=127.0.0.1 port=1 user=app password='hunter2xyz x' dbname=tasks sslmode=prefer",
        ];
        for form in forms {
            let error = super::super::PostgresStore::connect(form)
                .await
                .expect_err("nothing listens on port 1");
            let text = full_message(&error);
            assert_hidden(&text, &[]);
            assert!(
                text.contains("could not connect to the Postgres server at postgres://app:***@127.0.0.1:1/tasks"),
                "{text}"
            );
        }
        let error =
            super::super::PostgresStore::connect("postgres://app:hunter2xyz@127.0.0.1:x/tasks")
                .await
                .expect_err("the port does not parse");
        assert!(matches!(error, StoreError::Config(_)), "{error:?}");
        assert_hidden(&full_message(&error), &[]);
    }
}

/// What the unit tests that need a Postgres server share.
#[cfg(test)]
pub(super) mod scratch {
    thread_local! {
        /// The statements [`sent`](super::sent) counted on this thread.
        pub(crate) static SENT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// A store in a schema of its own on the server at `MCP_TASKS_POSTGRES_URL` (default the
    /// local test server), for the unit tests that need one; `None`, with a line, when no
    /// server answers, unless under CI.
    pub(crate) struct Scratch {
        pub(crate) store: super::super::PostgresStore,
        pub(crate) schema: String,
        /// A connection of its own, outside the store's pool.
        pub(crate) raw: tokio_postgres::Client,
    }

    impl Scratch {
        pub(crate) async fn new(name: &str, pool_size: usize) -> Option<Self> {
            let url = std::env::var("MCP_TASKS_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos();
            let schema = format!("{name}_{}_{nanos}", std::process::id());
            let connected = super::super::PostgresStore::builder(&url)
                .with_schema(&schema)
                .with_pool_size(pool_size)
                .with_application_name(&schema)
                .connect()
                .await;
            let store = match connected {
                Ok(store) => store,
                Err(error) if std::env::var_os("CI").is_none() => {
                    eprintln!("skipped: no Postgres server answers at {url} ({error})");
                    return None;
                }
                Err(error) => panic!("no Postgres server at {url}: {error}"),
            };
            let (raw, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("a connection of the test's own");
            tokio::spawn(connection);
            Some(Self { store, schema, raw })
        }

        /// Drops the store and its schema.
        pub(crate) async fn end(self) {
            drop(self.store);
            let drop_schema = format!("DROP SCHEMA \"{}\" CASCADE", self.schema);
            self.raw
                .batch_execute(&drop_schema)
                .await
                .expect("drop the test schema");
        }
    }
}

/// The retry on a fresh connection.
#[cfg(test)]
mod stale {
    use std::time::Duration;

    use super::*;

    /// Ends the backends of the store's connections, and waits until they are gone, without
    /// letting the runtime run (a single-threaded test), so the pool's connection tasks do not
    /// see the sockets close: the pool hands the dead connection out as if it were alive, as
    /// when a backend is terminated while its connection sits idle.
    async fn terminate(raw: &tokio_postgres::Client, application_name: &str) {
        let killed = raw
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = $1",
                &[&application_name],
            )
            .await
            .expect("terminate");
        assert_eq!(killed.len(), 1, "the pool's one connection was ended");
        std::thread::sleep(Duration::from_millis(300));
    }

    #[tokio::test]
    async fn a_read_a_begin_and_a_prepare_move_to_a_fresh_connection() {
        let Some(scratch) = scratch::Scratch::new("pool_stale", 1).await else {
            return;
        };
        let (store, schema, raw) = (&scratch.store, &scratch.schema, &scratch.raw);
        read(&store.pool, "SELECT 1", &[], "warm up")
            .await
            .expect("a first read");

        terminate(raw, schema).await;
        let rows = read(&store.pool, "SELECT 2", &[], "read")
            .await
            .expect("the read is repeated on a fresh connection");
        assert_eq!(rows[0].get::<_, i32>(0), 2);

        terminate(raw, schema).await;
        let tx = Tx::begin(&store.pool)
            .await
            .expect("BEGIN is repeated on a fresh connection");
        tx.rollback().await;

        terminate(raw, schema).await;
        let rows = write_one(&store.pool, "SELECT 3", &[], "write")
            .await
            .expect("a statement not sent yet is prepared again on a fresh connection");
        assert_eq!(rows[0].get::<_, i32>(0), 3);

        // A transaction's future dropped while its BEGIN is under way: the connection does
        // not go back to the pool with a transaction open, where the next autocommit write
        // would run inside it and never be committed.
        raw.batch_execute(&format!("CREATE TABLE \"{schema}\".probe (n int)"))
            .await
            .expect("a probe table");
        {
            let begin = Tx::begin(&store.pool);
            tokio::pin!(begin);
            // One poll takes the pool's one connection and sends BEGIN; its answer cannot
            // arrive before this single-threaded runtime runs the connection's task.
            let polled = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(begin.as_mut().poll(cx).is_pending())
            })
            .await;
            assert!(polled, "BEGIN is under way");
            assert_eq!(store.pool.status().available, 0, "its connection is taken");
        }
        write_one(
            &store.pool,
            &format!("INSERT INTO \"{schema}\".probe VALUES (1)"),
            &[],
            "write",
        )
        .await
        .expect("an autocommit write");
        let seen: i64 = raw
            .query_one(&format!("SELECT count(*) FROM \"{schema}\".probe"), &[])
            .await
            .expect("count")
            .get(0);
        assert_eq!(seen, 1, "the write was committed");
        scratch.end().await;
    }
}
