//! TLS of [`PostgresStore`](super::PostgresStore)'s connections: the `sslmode` and
//! `sslrootcert` of a connection string, with libpq's meaning, and the connector every
//! connection of a store opens with (the pool's and the listener's).
//!
//! | `sslmode` | encrypted | the server's certificate |
//! | --- | --- | --- |
//! | `disable` | never | — |
//! | `prefer` (the default) | when the server offers TLS (and this build has TLS) | as `require` |
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
    Ok((rest.unwrap_or_else(|| conninfo.to_owned()), settings))
}

type Take<'a> = dyn FnMut(&str, &str) -> Result<bool, StoreError> + 'a;

/// The URL without the query parameters `take` took, or `None` when it took none.
fn split_url(url: &str, take: &mut Take<'_>) -> Result<Option<String>, StoreError> {
    let Some((head, query)) = url.split_once('?') else {
        return Ok(None);
    };
    let mut kept = Vec::new();
    let mut took = false;
    for piece in query.split('&') {
        let taken = match piece.split_once('=') {
            Some((key, value)) => match (percent_decode(key), percent_decode(value)) {
                (Some(key), Some(value)) => take(&key, &value)?,
                _ => false,
            },
            None => false,
        };
        if taken {
            took = true;
        } else {
            kept.push(piece);
        }
    }
    Ok(took.then(|| {
        if kept.is_empty() {
            head.to_owned()
        } else {
            format!("{head}?{}", kept.join("&"))
        }
    }))
}

/// `%XX` decoded, as UTF-8; `None` when it is not valid.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `key=value` pairs, read as the driver reads them (whitespace around `=`, values quoted
/// with `'` or bare, `\` escaping the next character), written back without the pairs `take`
/// took, every value quoted; `None` when it took none or the string does not parse.
fn split_pairs(conninfo: &str, take: &mut Take<'_>) -> Result<Option<String>, StoreError> {
    let Some(pairs) = pairs(conninfo) else {
        return Ok(None);
    };
    let mut kept = Vec::new();
    let mut took = false;
    for (key, value) in pairs {
        if take(key, &value)? {
            took = true;
        } else {
            let quoted = value.replace('\\', "\\\\").replace('\'', "\\'");
            kept.push(format!("{key}='{quoted}'"));
        }
    }
    Ok(took.then(|| kept.join(" ")))
}

fn pairs(conninfo: &str) -> Option<Vec<(&str, String)>> {
    let mut out = Vec::new();
    let mut rest = conninfo.trim_start();
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| c.is_whitespace() || c == '=')
            .unwrap_or(rest.len());
        let key = &rest[..end];
        if key.is_empty() {
            return None;
        }
        rest = rest[end..].trim_start().strip_prefix('=')?.trim_start();
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let quoted = rest.starts_with('\'');
        if quoted {
            chars.next();
        }
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => value.push(chars.next()?.1),
                '\'' if quoted => {
                    end = Some(i + 1);
                    break;
                }
                c if c.is_whitespace() && !quoted => {
                    end = Some(i);
                    break;
                }
                c => value.push(c),
            }
        }
        let end = match end {
            Some(end) => end,
            None if quoted => return None,
            None => rest.len(),
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
trait Connector: Send + Sync {
    fn manager(&self, config: Config, manager: ManagerConfig) -> Manager;
    fn connect(
        &self,
        config: Config,
    ) -> BoxFuture<'static, Result<(Client, Messages), tokio_postgres::Error>>;
}

struct Generic<T>(T);

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

/// A TLS connector of the user's own, as [`PostgresBuilder::with_tls`](super::PostgresBuilder::with_tls)
/// takes it.
#[derive(Clone)]
pub(super) struct UserTls(Arc<dyn Connector>);

impl UserTls {
    pub(super) fn new<T>(tls: T) -> Self
    where
        T: MakeTlsConnect<Socket> + Clone + Sync + Send + 'static,
        T::Stream: Sync + Send,
        T::TlsConnect: Sync + Send,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        Self(Arc::new(Generic(tls)))
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
        user: Option<UserTls>,
    ) -> Result<Self, StoreError> {
        let mode = settings
            .mode
            .unwrap_or_else(|| SslMode::from_driver(config.get_ssl_mode()));
        config.ssl_mode(mode.driver());
        if let Some(UserTls(tls)) = user {
            if matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull)
                || settings.root_cert.is_some()
            {
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
            return Ok(Self { config, tls });
        }
        let tls = builtin(mode, settings.root_cert.as_deref())?;
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
    Ok(Arc::new(Generic(rustls::MakeRustls::new(mode, root_cert)?)))
}

#[cfg(feature = "postgres-tls")]
mod rustls {
    //! The built-in connector: rustls on the `ring` provider.

    use std::{
        io,
        path::{Path, PathBuf},
        pin::Pin,
        sync::Arc,
        task::{Context, Poll},
    };

    use futures::future::BoxFuture;
    use rustls::{
        CertificateError, ClientConfig, DigitallySignedStruct, Error as TlsError, RootCertStore,
        SignatureScheme,
        client::{
            WebPkiServerVerifier,
            danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
        },
        crypto::{CryptoProvider, ring},
        pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject},
    };
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
    use tokio_postgres::{
        Socket,
        tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream},
    };

    use super::{SslMode, StoreError, config_error};

    /// Makes a rustls connection for each host the driver connects to.
    #[derive(Clone)]
    pub(super) struct MakeRustls {
        config: Arc<ClientConfig>,
        /// What the certificate is checked against, for error messages.
        roots: Option<String>,
        mode: SslMode,
    }

    impl MakeRustls {
        pub(super) fn new(mode: SslMode, root_cert: Option<&str>) -> Result<Self, StoreError> {
            let provider = Arc::new(ring::default_provider());
            // `verify-` modes without `sslrootcert`: libpq's default file.
            let default_file;
            let root_cert = match root_cert {
                Some(root) => Some(root),
                None if matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull) => {
                    default_file = default_root_file().ok_or_else(|| {
                        config_error(format!(
                            "sslmode={mode} checks the server's certificate against trusted \
                             CAs, and none are given: set sslrootcert=/path/to/ca.pem (the \
                             CA certificates, PEM), or sslrootcert=system for the operating \
                             system's store, or put them in ~/.postgresql/root.crt"
                        ))
                    })?;
                    Some(default_file.to_str().unwrap_or_default())
                }
                None => None,
            };
            let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
                .with_protocol_versions(rustls::DEFAULT_VERSIONS)
                .map_err(|e| config_error(format!("could not set up TLS: {e}")))?;
            let verifier: Arc<dyn ServerCertVerifier> = match root_cert {
                None => Arc::new(Unchecked(provider)),
                Some(root) => {
                    let roots = Arc::new(load_roots(root)?);
                    let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                        .build()
                        .map_err(|e| {
                            config_error(format!("could not use the root certificates {root}: {e}"))
                        })?;
                    if mode == SslMode::VerifyFull {
                        webpki
                    } else {
                        Arc::new(ChainOnly(webpki))
                    }
                }
            };
            let config = builder
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth();
            Ok(Self {
                config: Arc::new(config),
                roots: root_cert.map(str::to_owned),
                mode,
            })
        }
    }

    fn default_root_file() -> Option<PathBuf> {
        let home = std::env::var_os("HOME")?;
        let file = Path::new(&home).join(".postgresql").join("root.crt");
        file.is_file().then_some(file)
    }

    /// The CA certificates of `root`: a PEM file, or `system`.
    fn load_roots(root: &str) -> Result<RootCertStore, StoreError> {
        let mut store = RootCertStore::empty();
        if root == "system" {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(config_error(format!(
                    "sslrootcert=system and no CA certificate was found in the operating \
                     system's store{}: install the CA certificates (Debian: the \
                     `ca-certificates` package) or name a CA file in sslrootcert",
                    found
                        .errors
                        .first()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                )));
            }
            return Ok(store);
        }
        let certs = CertificateDer::pem_file_iter(root)
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(|e| {
                config_error(format!(
                    "could not read the root certificates from sslrootcert={root}: {e} (give \
                     a file of PEM certificates, -----BEGIN CERTIFICATE-----)"
                ))
            })?;
        for cert in certs {
            store.add(cert).map_err(|e| {
                config_error(format!(
                    "a certificate in sslrootcert={root} is not a usable CA certificate: {e}"
                ))
            })?;
        }
        if store.is_empty() {
            return Err(config_error(format!(
                "sslrootcert={root} holds no certificate: give a file of PEM certificates \
                 (-----BEGIN CERTIFICATE-----)"
            )));
        }
        Ok(store)
    }

    /// `require` without root certificates: encrypted, the certificate not checked (libpq's
    /// meaning); the handshake's signatures are still checked, so the server holds the key
    /// of the certificate it sent.
    #[derive(Debug)]
    struct Unchecked(Arc<CryptoProvider>);

    impl ServerCertVerifier for Unchecked {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, TlsError> {
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, TlsError> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, TlsError> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }

    /// `verify-ca`: the chain up to a trusted CA, not the host name.
    #[derive(Debug)]
    struct ChainOnly(Arc<WebPkiServerVerifier>);

    impl ServerCertVerifier for ChainOnly {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            intermediates: &[CertificateDer<'_>],
            server_name: &ServerName<'_>,
            ocsp: &[u8],
            now: UnixTime,
        ) -> Result<ServerCertVerified, TlsError> {
            // The name is checked last, once the chain is good: a name error means the chain
            // passed.
            match self
                .0
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
            {
                Err(TlsError::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                )) => Ok(ServerCertVerified::assertion()),
                other => other,
            }
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, TlsError> {
            self.0.verify_tls12_signature(message, cert, dss)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, TlsError> {
            self.0.verify_tls13_signature(message, cert, dss)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.supported_verify_schemes()
        }
    }

    /// The error of a host name rustls cannot use.
    #[derive(Debug)]
    pub(super) struct BadName(String);

    impl std::fmt::Display for BadName {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(
                f,
                "`{}` is not a host name or IP address TLS can check a certificate for",
                self.0
            )
        }
    }

    impl std::error::Error for BadName {}

    impl MakeTlsConnect<Socket> for MakeRustls {
        type Stream = Stream;
        type TlsConnect = Connect;
        type Error = BadName;

        fn make_tls_connect(&mut self, host: &str) -> Result<Connect, BadName> {
            let name = ServerName::try_from(host.to_owned()).map_err(|_| BadName(host.into()))?;
            Ok(Connect {
                connector: tokio_rustls::TlsConnector::from(Arc::clone(&self.config)),
                name,
                roots: self.roots.clone(),
                mode: self.mode,
            })
        }
    }

    /// One TLS handshake.
    pub(super) struct Connect {
        connector: tokio_rustls::TlsConnector,
        name: ServerName<'static>,
        roots: Option<String>,
        mode: SslMode,
    }

    impl TlsConnect<Socket> for Connect {
        type Stream = Stream;
        type Error = io::Error;
        type Future = BoxFuture<'static, io::Result<Stream>>;

        fn connect(self, socket: Socket) -> Self::Future {
            Box::pin(async move {
                let host = self.name.to_str().into_owned();
                match self.connector.connect(self.name, socket).await {
                    Ok(stream) => Ok(Stream(stream)),
                    Err(error) => Err(explain(error, &host, self.roots.as_deref(), self.mode)),
                }
            })
        }
    }

    /// The handshake's error, with what to fix when the certificate was refused.
    fn explain(error: io::Error, host: &str, roots: Option<&str>, mode: SslMode) -> io::Error {
        let Some(TlsError::InvalidCertificate(reason)) = error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<TlsError>())
        else {
            return error;
        };
        let roots = roots.unwrap_or("(none)");
        let hint = match reason {
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                format!(
                    "the server's certificate is not issued for the host name `{host}` \
                     (sslmode={mode} checks it): connect by a name the certificate holds \
                     (host=NAME, with hostaddr=IP to choose the address), or set \
                     sslmode=verify-ca to check the CA only"
                )
            }
            CertificateError::UnknownIssuer | CertificateError::BadSignature => format!(
                "the server's certificate is not signed by a CA of sslrootcert={roots} \
                 (sslmode={mode} checks it): name the CA that issued the server's \
                 certificate in sslrootcert"
            ),
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => format!(
                "the server's certificate has expired (sslmode={mode} checks it): renew it \
                 on the server"
            ),
            _ => format!("the server's certificate was refused (sslmode={mode})"),
        };
        io::Error::new(error.kind(), format!("{hint}: {reason}"))
    }

    /// A TLS connection to the server.
    pub(super) struct Stream(tokio_rustls::client::TlsStream<Socket>);

    impl AsyncRead for Stream {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Stream {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.0).poll_write(cx, buf)
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_flush(cx)
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_shutdown(cx)
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
        }

        fn is_write_vectored(&self) -> bool {
            self.0.is_write_vectored()
        }
    }

    impl TlsStream for Stream {
        /// No `tls-server-end-point` binding: SCRAM authenticates without it (the server's
        /// `channel_binding` default); `channel_binding=require` is not supported.
        fn channel_binding(&self) -> ChannelBinding {
            ChannelBinding::none()
        }
    }
}

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
        let user = || Some(UserTls::new(tokio_postgres::NoTls));
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
}
