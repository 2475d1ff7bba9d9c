//! TLS of [`PostgresStore`](super::PostgresStore)'s connections: the `sslmode` and
//! `sslrootcert` of a connection string, with libpq's meaning, and the connector every
//! connection of a store opens with (the pool's and the listener's).
//!
//! | `sslmode` | encrypted | the server's certificate |
//! | --- | --- | --- |
//! | `disable` | never | — |
//! | `prefer` (the default) | when the server offers TLS (and this build has TLS); a server that offers it and then fails the handshake is an error, never a fallback to the clear; a server without TLS is served in the clear, with a warning logged per connection | as `require` |
//! | `require` | always | not checked; with `sslrootcert`, as `verify-ca` |
//! | `verify-ca` | always | signed by a CA of `sslrootcert` |
//! | `verify-full` | always | signed by a CA of `sslrootcert` and issued for the host name |
//!
//! `sslrootcert` is a PEM file of CA certificates, or `system` for the operating system's
//! store; `verify-ca` and `verify-full` without it read `~/.postgresql/root.crt`, as libpq
//! does. The driver (`tokio_postgres`) knows only `disable`, `prefer` and `require`: the store
//! takes `sslmode` and `sslrootcert` out of the connection string before the driver parses it,
//! and sets the driver's mode itself (`require` for the two `verify-` modes).
//!
//! The rustls connector is built only with the `postgres-tls` feature. Without it, a
//! connection string that needs TLS is refused with an error that names the feature, unless a
//! connector of the user's own is given ([`PostgresBuilder::with_tls`](super::PostgresBuilder::with_tls)).

use std::{pin::Pin, sync::Arc};

use deadpool_postgres::{Manager, ManagerConfig};
use futures::{Stream, future::BoxFuture};
use tokio_postgres::{
    AsyncMessage, Client, Config, Socket,
    tls::{MakeTlsConnect, TlsConnect},
};

use super::{ConfigError, StoreError};

/// How a connection of the store uses TLS: libpq's `sslmode`, with every value it has but
/// `allow`. See the [`tls` module docs](self) for what each one checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// TLS when the server offers it, else plain; the certificate is checked as with
    /// [`SslMode::Require`].
    Prefer,
    /// Always TLS; the certificate is not checked, unless a root certificate is set (then as
    /// [`SslMode::VerifyCa`]).
    Require,
    /// Always TLS; the server's certificate must be signed by a trusted CA.
    VerifyCa,
    /// Always TLS; the server's certificate must be signed by a trusted CA and issued for the
    /// host name the store connects to.
    VerifyFull,
}

impl SslMode {
    /// The value as a connection string writes it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }

    fn parse(value: &str) -> Result<Self, StoreError> {
        Ok(match value {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            // The value is not shown: a password written with a raw `&` in a URL's query can
            // end up here.
            _ => {
                return Err(config_error(
                    "the connection string's `sslmode` is not one the store knows: use \
                     disable, prefer, require, verify-ca or verify-full",
                ));
            }
        })
    }

    /// The driver's mode for this one.
    fn driver(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Driver;
        match self {
            Self::Disable => Driver::Disable,
            Self::Prefer => Driver::Prefer,
            Self::Require | Self::VerifyCa | Self::VerifyFull => Driver::Require,
        }
    }

    fn from_driver(mode: tokio_postgres::config::SslMode) -> Self {
        use tokio_postgres::config::SslMode as Driver;
        match mode {
            Driver::Disable => Self::Disable,
            Driver::Require => Self::Require,
            _ => Self::Prefer,
        }
    }

    /// Whether a connection in this mode is never made without TLS.
    #[cfg(not(feature = "postgres-tls"))]
    fn needs_tls(self) -> bool {
        matches!(self, Self::Require | Self::VerifyCa | Self::VerifyFull)
    }
}

impl std::fmt::Display for SslMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn config_error(message: impl Into<String>) -> StoreError {
    StoreError::Config(ConfigError::new(message.into()))
}

/// The TLS settings of a connection string, taken out of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Settings {
    pub(super) mode: Option<SslMode>,
    pub(super) root_cert: Option<String>,
}

/// Takes `sslmode` and `sslrootcert` out of `conninfo` (a URL's query or `key=value` pairs):
/// the string for the driver, and the settings. A string this cannot read is handed to the
/// driver as it is, whose parser then says what is wrong with it.
pub(super) fn split(conninfo: &str) -> Result<(String, Settings), StoreError> {
    let mut settings = Settings::default();
    let mut take = |key: &str, value: &str| -> Result<bool, StoreError> {
        match key {
            "sslmode" => settings.mode = Some(SslMode::parse(value)?),
            "sslrootcert" => settings.root_cert = Some(value.to_owned()),
            _ => return Ok(false),
        }
        Ok(true)
    };
    let rest = if conninfo.starts_with("postgres://") || conninfo.starts_with("postgresql://") {
        split_url(conninfo, &mut take)?
    } else {
        split_pairs(conninfo, &mut take)?
    };
    // Nothing taken: the string as it is.
    let rest = rest.filter(|_| settings != Settings::default());
    Ok((rest.unwrap_or_else(|| conninfo.to_owned()), settings))
}

type Take<'a> = dyn FnMut(&str, &str) -> Result<bool, StoreError> + 'a;

/// The URL without the query parameters `take` took; `None` when it has no query.
fn split_url(url: &str, take: &mut Take<'_>) -> Result<Option<String>, StoreError> {
    let Some((head, query)) = url.split_once('?') else {
        return Ok(None);
    };
    let decode = |text| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .ok()
    };
    let mut kept = Vec::new();
    for piece in query.split('&') {
        let pair = piece.split_once('=');
        if let Some((key, value)) = pair.and_then(|(k, v)| Some((decode(k)?, decode(v)?)))
            && take(&key, &value)?
        {
            continue;
        }
        kept.push(piece);
    }
    Ok(Some(if kept.is_empty() {
        head.to_owned()
    } else {
        format!("{head}?{}", kept.join("&"))
    }))
}

/// `key=value` pairs, read as the driver reads them (whitespace around `=`, values quoted
/// with `'` or bare, `\` escaping the next character), written back without the pairs `take`
/// took, every value quoted; `None` when the string does not parse.
fn split_pairs(conninfo: &str, take: &mut Take<'_>) -> Result<Option<String>, StoreError> {
    let Some(pairs) = pairs(conninfo) else {
        return Ok(None);
    };
    let mut kept = Vec::new();
    for (key, value) in pairs {
        if !take(key, &value)? {
            let quoted = value.replace('\\', "\\\\").replace('\'', "\\'");
            kept.push(format!("{key}='{quoted}'"));
        }
    }
    Ok(Some(kept.join(" ")))
}

fn pairs(conninfo: &str) -> Option<Vec<(&str, String)>> {
    let mut out = Vec::new();
    let mut rest = conninfo.trim_start();
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| c.is_whitespace() || c == '=')
            .unwrap_or(rest.len());
        let key = Some(&rest[..end]).filter(|key| !key.is_empty())?;
        rest = rest[end..].trim_start().strip_prefix('=')?.trim_start();
        let mut value = String::new();
        let quoted = rest.starts_with('\'');
        let mut chars = rest.char_indices().skip(usize::from(quoted));
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => value.push(chars.next()?.1),
                Some((i, '\'')) if quoted => break i + 1,
                Some((i, c)) if c.is_whitespace() && !quoted => break i,
                Some((_, c)) => value.push(c),
                // A quoted value must end with its quote; a bare one may end with the string.
                None if quoted => return None,
                None => break rest.len(),
            }
        };
        if !quoted && value.is_empty() {
            return None;
        }
        out.push((key, value));
        rest = rest[end..].trim_start();
    }
    Some(out)
}

/// The messages of a connection the store listens on.
pub(super) type Messages =
    Pin<Box<dyn Stream<Item = Result<AsyncMessage, tokio_postgres::Error>> + Send>>;

/// A connector, whatever its type: what the pool is built with and the listener connects with.
pub(super) trait Connector: Send + Sync {
    fn manager(&self, config: Config, manager: ManagerConfig) -> Manager;
    fn connect(
        &self,
        config: Config,
    ) -> BoxFuture<'static, Result<(Client, Messages), tokio_postgres::Error>>;
}

pub(super) struct Generic<T>(pub(super) T);

impl<T> Connector for Generic<T>
where
    T: MakeTlsConnect<Socket> + Clone + Sync + Send + 'static,
    T::Stream: Sync + Send,
    T::TlsConnect: Sync + Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    fn manager(&self, config: Config, manager: ManagerConfig) -> Manager {
        Manager::from_config(config, self.0.clone(), manager)
    }

    fn connect(
        &self,
        config: Config,
    ) -> BoxFuture<'static, Result<(Client, Messages), tokio_postgres::Error>> {
        let tls = self.0.clone();
        Box::pin(async move {
            let (client, mut connection) = config.connect(tls).await?;
            let messages: Messages = Box::pin(futures::stream::poll_fn(move |cx| {
                connection.poll_message(cx)
            }));
            Ok((client, messages))
        })
    }
}

/// The settings and the connector of every connection a store opens.
#[derive(Clone)]
pub(super) struct Connect {
    config: Config,
    tls: Arc<dyn Connector>,
}

impl Connect {
    /// The connector for `config` with the TLS `settings` of its connection string (or the
    /// builder), or `user`'s own connector. Sets the driver's `sslmode`.
    ///
    /// # Errors
    /// [`StoreError::Config`] when the settings ask for TLS this build cannot give, or for
    /// certificate checks beside a connector of the user's own (whose checks are its own), or
    /// when the root certificates cannot be read.
    pub(super) fn new(
        mut config: Config,
        settings: &Settings,
        user: Option<Arc<dyn Connector>>,
    ) -> Result<Self, StoreError> {
        let mode = settings
            .mode
            .unwrap_or_else(|| SslMode::from_driver(config.get_ssl_mode()));
        config.ssl_mode(mode.driver());
        let checks = matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull);
        let tls = match user {
            Some(_) if checks || settings.root_cert.is_some() => {
                return Err(config_error(format!(
                    "sslmode={mode}{} checks the server's certificate with the store's own TLS, \
                     and a connector of your own is given (with_tls): the connector checks \
                     certificates its own way; set sslmode=require (or prefer) and configure \
                     the checks in the connector, or drop with_tls",
                    if settings.root_cert.is_some() {
                        " with sslrootcert"
                    } else {
                        ""
                    }
                )));
            }
            Some(tls) => tls,
            None => builtin(mode, settings.root_cert.as_deref())?,
        };
        Ok(Self { config, tls })
    }

    pub(super) fn config(&self) -> &Config {
        &self.config
    }

    /// A pool manager that opens its connections with this connector.
    pub(super) fn manager(&self, manager: ManagerConfig) -> Manager {
        self.tls.manager(self.config.clone(), manager)
    }

    /// One connection outside the pool (the listener's).
    pub(super) async fn connect(&self) -> Result<(Client, Messages), tokio_postgres::Error> {
        self.tls.connect(self.config.clone()).await
    }
}

#[cfg(not(feature = "postgres-tls"))]
fn builtin(mode: SslMode, root_cert: Option<&str>) -> Result<Arc<dyn Connector>, StoreError> {
    if mode.needs_tls() || root_cert.is_some() {
        let what = if mode.needs_tls() {
            format!("sslmode={mode}")
        } else {
            "sslrootcert".to_owned()
        };
        return Err(config_error(format!(
            "the connection string asks for TLS ({what}) and this build of mcp-tasks has no \
             TLS: enable the `postgres-tls` feature of mcp-tasks, give a connector of your own \
             with PostgresBuilder::with_tls, or set sslmode=disable"
        )));
    }
    Ok(Arc::new(Generic(tokio_postgres::NoTls)))
}

#[cfg(feature = "postgres-tls")]
fn builtin(mode: SslMode, root_cert: Option<&str>) -> Result<Arc<dyn Connector>, StoreError> {
    if mode == SslMode::Disable {
        return Ok(Arc::new(Generic(tokio_postgres::NoTls)));
    }
    let home = std::env::var_os("HOME");
    let tls = rustls::MakeRustls::new(mode, root_cert, home.as_deref())?;
    Ok(Arc::new(Generic(tls)))
}

#[cfg(feature = "postgres-tls")]
mod rustls;

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(mode: Option<SslMode>, root_cert: Option<&str>) -> Settings {
        Settings {
            mode,
            root_cert: root_cert.map(str::to_owned),
        }
    }

    #[test]
    fn url_tls_parameters_are_taken_out() {
        let (rest, found) = split(
            "postgres://app:pw@db.example/tasks?sslmode=verify-full&application_name=x&sslrootcert=%2Fetc%2Fca.pem",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgres://app:pw@db.example/tasks?application_name=x"
        );
        assert_eq!(
            found,
            settings(Some(SslMode::VerifyFull), Some("/etc/ca.pem"))
        );
        let (rest, found) = split("postgresql://db.example/tasks?sslmode=require").unwrap();
        assert_eq!(rest, "postgresql://db.example/tasks");
        assert_eq!(found, settings(Some(SslMode::Require), None));
        // Nothing to take: the string is untouched.
        let url = "postgres://db.example/tasks?application_name=x";
        assert_eq!(split(url).unwrap(), (url.to_owned(), Settings::default()));
    }

    #[test]
    fn key_value_tls_parameters_are_taken_out() {
        let (rest, found) = split(
            r"host=db.example sslmode = verify-ca password='se cret \'q' sslrootcert='/a b/ca.pem'",
        )
        .unwrap();
        assert_eq!(
            found,
            settings(Some(SslMode::VerifyCa), Some("/a b/ca.pem"))
        );
        let config: Config = rest.parse().expect("the rest parses");
        assert_eq!(config.get_password(), Some(&b"se cret 'q"[..]));
        assert_eq!(
            config.get_hosts(),
            &[tokio_postgres::config::Host::Tcp("db.example".into())]
        );
        // A string that does not parse goes to the driver as it is.
        let broken = "host=db.example password='unterminated sslmode=require";
        assert_eq!(split(broken).unwrap().0, broken);
    }

    #[test]
    fn key_value_pairs_end_where_the_driver_ends_them() {
        let owned = |pairs: &[(&'static str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|&(k, v)| (k, v.to_owned()))
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            pairs(r" a=1  b = 'x \'y' c=\z"),
            owned(&[("a", "1"), ("b", "x 'y"), ("c", "z")])
        );
        // No value, an escape with nothing after it, an open quote, no `=`, no key.
        for broken in ["a=", r"a=1\", "a='1", "a", "=1"] {
            assert_eq!(pairs(broken), None, "{broken}");
        }
    }

    #[test]
    fn an_unknown_sslmode_is_refused_without_showing_it() {
        for conninfo in [
            "postgres://db.example/tasks?sslmode=hunter2xyz",
            "host=db.example sslmode=hunter2xyz",
            "postgres://db.example/tasks?sslmode=allow",
        ] {
            let error = split(conninfo).expect_err("refused").to_string();
            assert!(!error.contains("hunter2xyz"), "{error}");
            assert!(error.contains("verify-full"), "{error}");
        }
    }

    #[cfg(not(feature = "postgres-tls"))]
    #[test]
    fn without_the_feature_tls_is_refused_with_the_feature_named() {
        for mode in [SslMode::Require, SslMode::VerifyCa, SslMode::VerifyFull] {
            let error = Connect::new(Config::new(), &settings(Some(mode), None), None)
                .err()
                .expect("refused")
                .to_string();
            assert!(error.contains("`postgres-tls` feature"), "{error}");
            assert!(error.contains(&format!("sslmode={mode}")), "{error}");
        }
        let error = Connect::new(Config::new(), &settings(None, Some("/ca.pem")), None)
            .err()
            .expect("refused")
            .to_string();
        assert!(error.contains("sslrootcert"), "{error}");
        // Prefer (the default) and disable connect in the clear.
        for mode in [None, Some(SslMode::Prefer), Some(SslMode::Disable)] {
            assert!(Connect::new(Config::new(), &settings(mode, None), None).is_ok());
        }
    }

    #[test]
    fn certificate_checks_beside_a_connector_of_ones_own_are_refused() {
        let user = || Some(Arc::new(Generic(tokio_postgres::NoTls)) as Arc<dyn Connector>);
        for (mode, root) in [
            (Some(SslMode::VerifyFull), None),
            (Some(SslMode::VerifyCa), None),
            (Some(SslMode::Require), Some("/ca.pem")),
        ] {
            let error = Connect::new(Config::new(), &settings(mode, root), user())
                .err()
                .expect("refused")
                .to_string();
            assert!(error.contains("with_tls"), "{error}");
        }
        let connect = Connect::new(
            Config::new(),
            &settings(Some(SslMode::Require), None),
            user(),
        )
        .unwrap();
        assert_eq!(
            connect.config().get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
    }

    #[cfg(feature = "postgres-tls")]
    #[test]
    fn root_certificates_that_cannot_be_read_are_a_clear_error() {
        let error = Connect::new(
            Config::new(),
            &settings(Some(SslMode::VerifyFull), Some("/nonexistent/ca.pem")),
            None,
        )
        .err()
        .expect("refused")
        .to_string();
        assert!(
            error.contains(
                "could not read the root certificates from sslrootcert=/nonexistent/ca.pem"
            ),
            "{error}"
        );
        let empty =
            std::env::temp_dir().join(format!("mcp-tasks-empty-{}.pem", std::process::id()));
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let error = Connect::new(
            Config::new(),
            &settings(Some(SslMode::VerifyCa), empty.to_str()),
            None,
        )
        .err()
        .expect("refused")
        .to_string();
        let _ = std::fs::remove_file(&empty);
        assert!(error.contains("holds no certificate"), "{error}");
    }

    /// A CA certificate (self-signed, P-256, valid until 2126), for the tests that need one
    /// to load.
    #[cfg(feature = "postgres-tls")]
    const CA: &str = "-----BEGIN CERTIFICATE-----
MIIBjzCCATWgAwIBAgIUPesxY6nG85rHOslWm2Opgg2rjQMwCgYIKoZIzj0EAwIw
HDEaMBgGA1UEAwwRbWNwLXRhc2tzIHRlc3QgQ0EwIBcNMjYxMjA2MDYzMTEzWhgP
MjEyNjExMTIwNjMxMTNaMBwxGjAYBgNVBAMMEW1jcC10YXNrcyB0ZXN0IENBMFkw
EwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEGuQ0pLNBHALlmsCxhRZAJs56aKqOeKFB
Bov8BBqAv4V9i48g4sjd5JyeZo52siYOddh32pr1T6RxrfCy4xnnUaNTMFEwHQYD
VR0OBBYEFHojphVjoXBfsiHvfxQcAgr4KPBZMB8GA1UdIwQYMBaAFHojphVjoXBf
siHvfxQcAgr4KPBZMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIg
cakWzMHc8zSdt6lEZH+pKQmx7+FPOtTjWJNMPmC4g4YCIQCH5ygAHKXBkK0cBbaS
jXk5yoMnTzu5ZXSqeU7edS4TPQ==
-----END CERTIFICATE-----
";

    /// `verify-` modes without `sslrootcert` read `.postgresql/root.crt` under HOME, whatever
    /// bytes HOME holds (here one that is not UTF-8); an error about that file names it as
    /// the default file, and one without HOME says that HOME is not set.
    #[cfg(feature = "postgres-tls")]
    #[cfg(unix)]
    #[test]
    fn the_default_root_certificates_are_read_under_any_home() {
        use std::os::unix::ffi::OsStrExt;

        let made = |mode, home: Option<&std::path::Path>| {
            rustls::MakeRustls::new(mode, None, home.map(std::path::Path::as_os_str))
                .err()
                .map(|error| error.to_string())
        };
        let base = std::env::temp_dir().join(format!("mcp-tasks-home-{}", std::process::id()));
        let home = base.join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
        let file = home.join(".postgresql").join("root.crt");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, CA).unwrap();
        let good = made(SslMode::VerifyFull, Some(&home));
        std::fs::write(&file, "not a certificate\n").unwrap();
        let bad = made(SslMode::VerifyCa, Some(&home));
        let _ = std::fs::remove_dir_all(&base);
        assert_eq!(good, None, "the CA under a HOME that is not UTF-8 is read");
        let bad = bad.expect("a file without a certificate is refused");
        assert!(
            bad.contains("the default root certificate file /")
                && bad.contains("/.postgresql/root.crt holds no certificate"),
            "{bad}"
        );
        let none = made(SslMode::VerifyFull, None).expect("no CA to check against");
        assert!(
            none.contains("sslrootcert=/path/to/ca.pem")
                && none.contains("HOME is empty or not set"),
            "{none}"
        );
    }
}
