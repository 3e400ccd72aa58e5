//! TLS for a [`Listener`](super::Listener): a certificate chain and key read from
//! PEM files (ECDSA, Ed25519 or RSA; TLS 1.2 and 1.3; ALPN `h2` and `http/1.1`),
//! optionally client certificates required and checked against a CA, and re-read
//! on reload so a rotated certificate needs no restart.
//!
//! A reload is two steps, so it can be all or nothing with the rest of what the
//! process reloads: [`Tls::prepare`] reads and checks the files (the certificate
//! in use stays until then, and stays for good when they are bad), then
//! [`Tls::install`] makes the new configuration the one every new handshake
//! uses. Connections already open keep the certificate they were made with.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

/// The files a TLS listener is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first (PEM).
    pub cert: PathBuf,
    /// The leaf's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// Client certificates must be signed by one of these CAs (PEM), when given.
    pub client_ca: Option<PathBuf>,
    /// The flag the files were given with (`--tls` or `--admin-tls`), named in
    /// errors.
    pub flag: &'static str,
}

/// Why a TLS configuration could not be made from its files. The message names
/// the file, the flag it came from and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TlsError {
    /// With the files' paths as configured (logs, `admin` callers).
    pub message: String,
    /// With the files' names only (callers that are not authenticated).
    pub public: String,
}

impl TlsError {
    /// `<path> (<flag>): <what>`, and the same with the file's name only.
    fn at(path: &Path, flag: &str, what: impl std::fmt::Display) -> Self {
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        Self {
            message: format!("{} ({flag}): {what}", path.display()),
            public: format!("{name} ({flag}): {what}"),
        }
    }
}

/// A listener's TLS configuration, replaceable while it serves.
#[derive(Debug)]
pub struct Tls {
    files: TlsFiles,
    current: RwLock<Arc<ServerConfig>>,
}

/// What [`Tls::prepare`] read: installed by [`Tls::install`].
#[derive(Debug)]
pub struct Prepared(Arc<ServerConfig>);

/// The most bytes read from one PEM file: certificate chains and keys are a few
/// KB; a larger file is a mistake (a log, a bundle of everything) and is refused.
const MAX_PEM_BYTES: u64 = 1 << 20;

impl Tls {
    /// Reads `files` into a configuration (at start: a bad file is an error).
    pub fn load(files: TlsFiles) -> Result<Arc<Self>, TlsError> {
        let config = build(&files)?;
        Ok(Arc::new(Self {
            files,
            current: RwLock::new(config),
        }))
    }

    /// Re-reads the files; the configuration in use is unchanged until
    /// [`install`](Self::install).
    pub fn prepare(&self) -> Result<Prepared, TlsError> {
        build(&self.files).map(Prepared)
    }

    /// Makes `prepared` the configuration of every handshake from now on.
    pub fn install(&self, prepared: Prepared) {
        match self.current.write() {
            Ok(mut current) => *current = prepared.0,
            Err(poisoned) => *poisoned.into_inner() = prepared.0,
        }
    }

    /// The configuration for a new connection's handshake.
    pub fn config(&self) -> Arc<ServerConfig> {
        match self.current.read() {
            Ok(current) => Arc::clone(&current),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// The files, for messages.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Whether client certificates are required.
    pub fn mutual(&self) -> bool {
        self.files.client_ca.is_some()
    }
}

/// The ALPN protocols offered, preferred first.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

fn build(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let flag = files.flag;
    let certs = read_certs(&files.cert, &format!("{flag}-cert"))?;
    let key = read_key(&files.key, &format!("{flag}-key"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| {
            TlsError::at(
                &files.cert,
                &format!("{flag}-cert"),
                format!("TLS set-up failed: {e}"),
            )
        })?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let ca_flag = format!("{flag}-client-ca");
            let roots = read_roots(ca, &ca_flag, "the client certificates")?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| {
                    TlsError::at(
                        ca,
                        &ca_flag,
                        format!("cannot check client certificates with it ({e})"),
                    )
                })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        let cert = files.cert.file_name().map_or_else(
            || files.cert.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let what = match e {
            rustls::Error::InconsistentKeys(_) => format!(
                "not the key of the certificate in {cert}; give the key the certificate was issued for"
            ),
            e => format!(
                "this key and the certificate in {cert} cannot be used together ({e}); give an ECDSA, Ed25519 or RSA key and the certificate issued for it"
            ),
        };
        TlsError::at(&files.key, &format!("{flag}-key"), what)
    })?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// The CA certificates of a PEM file (at most [`MAX_PEM_BYTES`]) as trust roots
/// for checking `what` (e.g. "the client certificates"); errors name the file and
/// its flag.
pub fn read_roots(path: &Path, flag: &str, what: &str) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(path, flag)? {
        roots.add(cert).map_err(|e| {
            TlsError::at(path, flag, format!(
                "a certificate in it is not a usable CA certificate ({e}); give the PEM of the CA that signs {what}"
            ))
        })?;
    }
    Ok(roots)
}

/// Reads a file of at most [`MAX_PEM_BYTES`], naming it and its flag on error.
fn read_pem_file(path: &Path, flag: &str) -> Result<Vec<u8>, TlsError> {
    use io::Read as _;
    let file = std::fs::File::open(path).map_err(|e| {
        TlsError::at(
            path,
            flag,
            format!(
                "cannot be read: {}; give the path of a PEM file this process may read",
                crate::words::io_reason(&e)
            ),
        )
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            TlsError::at(
                path,
                flag,
                format!("reading it failed: {}", crate::words::io_reason(&e)),
            )
        })?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(TlsError::at(
            path,
            flag,
            format!(
                "larger than {} KB; a PEM certificate or key is a few KB, is it the right file?",
                MAX_PEM_BYTES / 1024
            ),
        ));
    }
    Ok(bytes)
}

fn read_certs(path: &Path, flag: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read_pem_file(path, flag)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, flag, &e))?;
    if certs.is_empty() {
        return Err(TlsError::at(
            path,
            flag,
            "no `-----BEGIN CERTIFICATE-----` block in it; give a PEM certificate (chain)",
        ));
    }
    Ok(certs)
}

fn read_key(path: &Path, flag: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read_pem_file(path, flag)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        pem::Error::NoItemsFound => TlsError::at(
            path,
            flag,
            "no private key in it (`-----BEGIN PRIVATE KEY-----`, `RSA PRIVATE KEY` or `EC PRIVATE KEY`); give the certificate's key in PEM",
        ),
        e => pem_error(path, flag, &e),
    })
}

fn pem_error(path: &Path, flag: &str, e: &pem::Error) -> TlsError {
    let what = match e {
        pem::Error::MissingSectionEnd { .. } => "a PEM block has no `-----END` line".to_owned(),
        pem::Error::IllegalSectionStart { .. } => "a `-----BEGIN` line is malformed".to_owned(),
        pem::Error::Base64Decode(_) => "a PEM block's base64 is corrupt".to_owned(),
        pem::Error::NoItemsFound => "nothing usable in it".to_owned(),
        _ => "it is not PEM".to_owned(),
    };
    TlsError::at(path, flag, format!("{what}; give the file in PEM"))
}

/// Who a client certificate says the caller is: the URI and DNS names among its
/// subject alternative names (a SPIFFE ID is a URI name). Present on every
/// request of a connection that gave a certificate (mutual TLS), as a request
/// extension; the API-keys file gives identities scopes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity(Arc<[String]>);

/// The most names kept from one certificate (a certificate with more is not a
/// workload's; the rest are ignored).
const MAX_IDENTITY_NAMES: usize = 32;

impl ClientIdentity {
    /// The identity in a client's leaf certificate (DER), already verified by
    /// the handshake. A certificate without URI or DNS names has an empty one.
    pub fn of(der: &[u8]) -> Self {
        use x509_parser::extensions::GeneralName;
        let names = x509_parser::parse_x509_certificate(der)
            .ok()
            .and_then(|(_, cert)| {
                cert.subject_alternative_name().ok().flatten().map(|san| {
                    san.value
                        .general_names
                        .iter()
                        .filter_map(|name| match name {
                            GeneralName::URI(uri) => Some((*uri).to_owned()),
                            GeneralName::DNSName(dns) => Some((*dns).to_owned()),
                            _ => None,
                        })
                        .take(MAX_IDENTITY_NAMES)
                        .collect::<Vec<_>>()
                })
            })
            .unwrap_or_default();
        Self(names.into())
    }

    /// From names (tests, and callers that know them).
    pub fn from_names(names: impl IntoIterator<Item = String>) -> Self {
        Self(names.into_iter().take(MAX_IDENTITY_NAMES).collect())
    }

    /// The URI and DNS names.
    pub fn names(&self) -> &[String] {
        &self.0
    }
}
