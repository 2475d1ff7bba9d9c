//! The built-in connector: rustls on the `ring` provider.

use std::{
    ffi::OsStr,
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
    crypto::{WebPkiSupportedAlgorithms, ring},
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
    /// The connector for `mode`, checking against `root_cert`, or for a `verify-` mode
    /// without it, against libpq's default file under `home` (the process's `HOME`).
    pub(super) fn new(
        mode: SslMode,
        root_cert: Option<&str>,
        home: Option<&OsStr>,
    ) -> Result<Self, StoreError> {
        let provider = Arc::new(ring::default_provider());
        let roots = Roots::of(mode, root_cert, home)?;
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .map_err(|e| config_error(format!("could not set up TLS: {e}")))?;
        let algorithms = provider.signature_verification_algorithms;
        let verifier: Arc<dyn ServerCertVerifier> = match &roots {
            None => Arc::new(Lenient {
                chain: None,
                algorithms,
            }),
            Some(roots) => {
                let (named, store) = (&roots.named, Arc::new(load_roots(roots)?));
                let webpki = WebPkiServerVerifier::builder_with_provider(store, provider)
                    .build()
                    .map_err(|e| {
                        config_error(format!("could not use the root certificates {named}: {e}"))
                    })?;
                if mode == SslMode::VerifyFull {
                    webpki
                } else {
                    Arc::new(Lenient {
                        chain: Some(webpki),
                        algorithms,
                    })
                }
            }
        };
        let config = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(Self {
            config: Arc::new(config),
            roots: roots.map(|roots| roots.named),
            mode,
        })
    }
}

/// Where the CA certificates come from.
struct Roots {
    /// A PEM file; `None` for the operating system's store (`sslrootcert=system`).
    file: Option<PathBuf>,
    /// What messages call it: `sslrootcert=...`, or the default file.
    named: String,
}

impl Roots {
    /// `root_cert`; for a `verify-` mode without it, libpq's default file,
    /// `.postgresql/root.crt` under `home` (whatever bytes it holds); `None` when nothing is
    /// checked.
    fn of(
        mode: SslMode,
        root_cert: Option<&str>,
        home: Option<&OsStr>,
    ) -> Result<Option<Self>, StoreError> {
        if let Some(root) = root_cert {
            return Ok(Some(Self {
                file: (root != "system").then(|| PathBuf::from(root)),
                named: format!("sslrootcert={root}"),
            }));
        }
        if !matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull) {
            return Ok(None);
        }
        let home = home.filter(|home| !home.is_empty());
        match home.map(|home| Path::new(home).join(".postgresql").join("root.crt")) {
            Some(file) if file.is_file() => Ok(Some(Self {
                named: format!("the default root certificate file {}", file.display()),
                file: Some(file),
            })),
            _ => Err(config_error(format!(
                "sslmode={mode} checks the server's certificate against trusted CAs, and none \
                 are given: set sslrootcert=/path/to/ca.pem (the CA certificates, PEM), or \
                 sslrootcert=system for the operating system's store, or put them in \
                 ~/.postgresql/root.crt{}",
                if home.is_none() {
                    " (HOME is empty or not set, so there is no such file)"
                } else {
                    ""
                }
            ))),
        }
    }
}

/// The CA certificates of `roots`.
fn load_roots(roots: &Roots) -> Result<RootCertStore, StoreError> {
    let mut store = RootCertStore::empty();
    let named = &roots.named;
    let Some(file) = &roots.file else {
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
    };
    let certs = CertificateDer::pem_file_iter(file)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| {
            config_error(format!(
                "could not read the root certificates from {named}: {e} (give a file of \
                 PEM certificates, -----BEGIN CERTIFICATE-----)"
            ))
        })?;
    for cert in certs {
        store.add(cert).map_err(|e| {
            config_error(format!(
                "a certificate in {named} is not a usable CA certificate: {e}"
            ))
        })?;
    }
    if store.is_empty() {
        return Err(config_error(format!(
            "{named} holds no certificate: give a file of PEM certificates \
             (-----BEGIN CERTIFICATE-----)"
        )));
    }
    Ok(store)
}

/// `require` without root certificates (no `chain`): encrypted, the certificate not checked
/// (libpq's meaning); `verify-ca` (a `chain`): the chain up to a trusted CA, not the host
/// name. The handshake's signatures are always checked, so the server holds the key of the
/// certificate it sent.
#[derive(Debug)]
struct Lenient {
    chain: Option<Arc<WebPkiServerVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        // The name is checked last, once the chain is good: a name error means the chain
        // passed.
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(TlsError::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
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
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

impl MakeTlsConnect<Socket> for MakeRustls {
    type Stream = Stream;
    type TlsConnect = Connect;
    /// A host name rustls cannot use.
    type Error = String;

    fn make_tls_connect(&mut self, host: &str) -> Result<Connect, String> {
        let name = ServerName::try_from(host.to_owned()).map_err(|_| {
            format!("`{host}` is not a host name or IP address TLS can check a certificate for")
        })?;
        Ok(Connect {
            connector: tokio_rustls::TlsConnector::from(Arc::clone(&self.config)),
            name,
            roots: self.roots.clone(),
            mode: self.mode,
            unused: true,
        })
    }
}

/// One TLS handshake.
///
/// The driver asks the server for TLS first and calls [`TlsConnect::connect`] only when the
/// server accepts; a handshake that then fails is the connection's error, under `prefer`
/// too (the driver never retries in the clear: `tokio_postgres`'s `connect_tls`). Under
/// `prefer` a server that does not accept TLS is served in the clear: this connector is then
/// dropped unused, and says so with a warning (also when the connection broke before the
/// server answered, which then fails with its own error).
pub(super) struct Connect {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
    roots: Option<String>,
    mode: SslMode,
    /// Not (yet) used for a handshake.
    unused: bool,
}

impl Drop for Connect {
    fn drop(&mut self) {
        if self.unused && self.mode == SslMode::Prefer {
            tracing::warn!(
                host = %self.name.to_str(),
                "the Postgres server did not accept TLS: with sslmode=prefer this connection \
                 is not encrypted; set sslmode=verify-full (or require) to refuse a server \
                 without TLS"
            );
        }
    }
}

impl TlsConnect<Socket> for Connect {
    type Stream = Stream;
    type Error = io::Error;
    type Future = BoxFuture<'static, io::Result<Stream>>;

    fn connect(mut self, socket: Socket) -> Self::Future {
        self.unused = false;
        let (connector, name) = (self.connector.clone(), self.name.clone());
        let (roots, mode) = (self.roots.take(), self.mode);
        let host = name.to_str().into_owned();
        Box::pin(async move {
            let stream = connector.connect(name, socket).await;
            stream
                .map(Stream)
                .map_err(|error| explain(error, &host, roots.as_deref(), mode))
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
    let roots = roots.unwrap_or("sslrootcert=(none)");
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
            "the server's certificate is not signed by a CA of {roots} \
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

/// A TLS connection to the server. Its writes are never vectored: the driver's stream
/// around it (`MaybeTlsStream`) forwards none.
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
}

impl TlsStream for Stream {
    /// No `tls-server-end-point` binding: SCRAM authenticates without it (the server's
    /// `channel_binding` default); `channel_binding=require` is not supported.
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}
