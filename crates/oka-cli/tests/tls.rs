//! TLS on `oka serve`'s ports, over real sockets, with certificates made here
//! (rcgen; RSA ones with the `openssl` CLI): curl over HTTPS with HTTP/1.1 and,
//! through ALPN, HTTP/2; an expired, wrong-host or untrusted certificate refused
//! by the client; plain HTTP to the TLS port answered 400; a thousand
//! connections that never finish their handshake closed while a probe is
//! served; bad files at start and on reload named; certificate rotation on
//! reload while an old connection finishes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};

mod common;

use common::{OKA, http, start_oka};

const SEED: &str = r#"{"target_features":["simple_feature"],"keys":[{"id":"test-id-21"}],"udf_args":{"simple_feature":{"multiplier":2.0}}}"#;

/// A CA and what it signed, written to a directory of the test's own.
struct Pki {
    dir: PathBuf,
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

impl Pki {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("oka-tls-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("Oka test CA {name}"));
        let ca = params.self_signed(&ca_key).unwrap();
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        Self { dir, ca, ca_key }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// A leaf for `hosts` (and 127.0.0.1), written as `<stem>.pem` and
    /// `<stem>.key`; `expired` dates it in the past.
    fn leaf(&self, stem: &str, hosts: &[&str], expired: bool) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(hosts.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>())
                .unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let (cert_path, key_path) = (
            self.path(&format!("{stem}.pem")),
            self.path(&format!("{stem}.key")),
        );
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }
}

fn tls_args<'a>(cert: &'a Path, key: &'a Path) -> Vec<&'a str> {
    vec![
        "--demo",
        "--workers",
        "1",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]
}

/// `curl` asked for the seed request at `https://<host>:<port>/v1/features`
/// (`host` resolved to 127.0.0.1), with `extra` flags; prints the body, then the
/// HTTP version on a line of its own.
fn curl(host: &str, port: u16, ca: Option<&Path>, extra: &[&str]) -> Output {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "10", "--resolve"])
        .arg(format!("{host}:{port}:127.0.0.1"))
        .args(["-w", "\n%{http_version}", "-d", SEED])
        .args(extra)
        .arg(format!("https://{host}:{port}/v1/features"));
    if let Some(ca) = ca {
        cmd.arg("--cacert").arg(ca);
    }
    cmd.stdin(Stdio::null()).output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout {}\nstderr {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn https_with_http1_and_http2_and_clients_refuse_bad_certificates() {
    let pki = Pki::new("serve");
    let (cert, key) = pki.leaf("server", &["localhost"], false);
    let oka = start_oka(&tls_args(&cert, &key), None);
    let port = oka.addr.port();
    let ca = pki.path("ca.pem");

    for (flag, version) in [("--http1.1", "1.1"), ("--http2", "2")] {
        let out = curl("localhost", port, Some(&ca), &[flag]);
        let answer = text(&out);
        assert!(out.status.success(), "{answer}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let (body, got) = stdout.rsplit_once('\n').unwrap();
        assert_eq!(got, version, "{answer}");
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["results"]["simple_feature"][0][0]["value"], 42.0);
    }

    // The client refuses a certificate for another host, and one it cannot trust.
    let out = curl("other.example", port, Some(&ca), &[]);
    assert_eq!(out.status.code(), Some(60), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("other.example"),
        "{}",
        text(&out)
    );
    let out = curl("localhost", port, None, &[]);
    assert_eq!(out.status.code(), Some(60), "{}", text(&out));

    // Plain HTTP to the TLS port: a 400 a person can read, then the close.
    let (status, body) = http(oka.addr, "POST", "/v1/features", SEED).unwrap();
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("this port speaks HTTPS"), "{body}");

    // The refusals the server sees counted (the admin port is plain here): the
    // plain request and the untrusted certificate's alert (curl checks the
    // host name after the handshake, and just closes). The server may read
    // the alert after curl has exited.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, metrics) = http(oka.admin, "GET", "/metrics", "").unwrap();
        let counted = metrics.contains("oka_http_tls_failures_total{reason=\"plain_http\"} 1")
            && metrics.contains("oka_http_tls_failures_total{reason=\"handshake\"} 1");
        if counted {
            break;
        }
        assert!(Instant::now() < deadline, "{metrics}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_expired_certificate_is_refused_by_the_client() {
    let pki = Pki::new("expired");
    let (cert, key) = pki.leaf("old", &["localhost"], true);
    let oka = start_oka(&tls_args(&cert, &key), None);
    let out = curl("localhost", oka.addr.port(), Some(&pki.path("ca.pem")), &[]);
    assert_eq!(out.status.code(), Some(60), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("expired"),
        "{}",
        text(&out)
    );
}

#[test]
fn rsa_certificates_and_https_on_the_admin_port() {
    let pki = Pki::new("rsa");
    let (cert, key) = (pki.path("rsa.pem"), pki.path("rsa.key"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=localhost", "-addext"])
        .arg("subjectAltName=DNS:localhost,IP:127.0.0.1")
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made));
    let (port, admin_port) = (common::free_port(), common::free_port());
    let _server = common::Server(
        Command::new(OKA)
            .args(["serve", "--demo", "--workers", "1"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin_port}")])
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .arg("--admin-tls-cert")
            .arg(&cert)
            .arg("--admin-tls-key")
            .arg(&key)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The probe, over HTTPS on the admin port.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "5",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
            ])
            .arg("--cacert")
            .arg(&cert)
            .arg(format!("https://127.0.0.1:{admin_port}/readyz"))
            .output()
            .unwrap();
        if out.stdout == b"200" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never ready over HTTPS: {}",
            text(&out)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = curl("localhost", port, Some(&cert), &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("42.0"),
        "{}",
        text(&out)
    );
}

#[test]
fn connections_that_never_finish_the_handshake_are_closed_and_a_probe_is_served() {
    let pki = Pki::new("stall");
    let (cert, key) = pki.leaf("server", &["localhost"], false);
    let mut args = tls_args(&cert, &key);
    args.extend(["--header-read-timeout-ms", "1500"]);
    let oka = start_oka(&args, None);
    // Half send nothing, half the first bytes of a TLS record and then nothing.
    let stalled: Vec<TcpStream> = (0..1000)
        .map(|i| {
            let mut s = TcpStream::connect(oka.addr).unwrap();
            if i % 2 == 1 {
                s.write_all(&[0x16, 0x03, 0x01]).unwrap();
            }
            s
        })
        .collect();
    let out = curl("localhost", oka.addr.port(), Some(&pki.path("ca.pem")), &[]);
    assert!(
        out.status.success(),
        "a probe while 1,000 stall: {}",
        text(&out)
    );
    let started = Instant::now();
    for mut s in stalled {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 64];
        let closed = match s.read(&mut buf) {
            Ok(0) | Err(_) => true,
            Ok(_) => false,
        };
        assert!(closed, "a stalled handshake was answered, not closed");
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stalled connections closed by the header-read timeout"
    );
    let (_, metrics) = http(oka.admin, "GET", "/metrics", "").unwrap();
    assert!(
        metrics.contains("oka_http_connection_timeouts_total{phase=\"header_read\"} 1000"),
        "{metrics}"
    );
}

#[test]
fn bad_files_are_named_at_start() {
    let pki = Pki::new("bad");
    let (cert, key) = pki.leaf("server", &["localhost"], false);
    let (other_cert, _) = pki.leaf("other", &["localhost"], false);
    let garbage = pki.path("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let missing = pki.path("missing.pem");
    let start = |cert: &Path, key: &Path| {
        Command::new(OKA)
            .args([
                "serve",
                "--demo",
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
            ])
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .output()
            .unwrap()
    };
    for (cert, key, says) in [
        (
            &garbage,
            &key,
            "garbage.pem (--tls-cert): no `-----BEGIN CERTIFICATE-----` block",
        ),
        (
            &cert,
            &garbage,
            "garbage.pem (--tls-key): no private key in it",
        ),
        (
            &missing,
            &key,
            "missing.pem (--tls-cert): cannot be read: no such file",
        ),
        (
            &other_cert,
            &key,
            "server.key (--tls-key): not the key of the certificate in other.pem",
        ),
    ] {
        let out = start(cert, key);
        assert!(!out.status.success(), "{}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{says}: {err}");
        assert!(!err.contains("Error {") && !err.contains("Os {"), "{err}");
    }
    // A certificate without its key is refused by the flags themselves.
    let out = Command::new(OKA)
        .args(["serve", "--demo", "--tls-cert"])
        .arg(&cert)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--tls-key"),
        "{}",
        text(&out)
    );
}

/// A TLS client trusting `ca`, keeping its connection.
struct Client(rustls::StreamOwned<rustls::ClientConnection, TcpStream>);

impl Client {
    fn connect(addr: SocketAddr, ca: &Path) -> Self {
        Self::connect_alpn(addr, ca, Vec::new())
    }

    /// [`Client::connect`] offering `alpn` (e.g. `h2`).
    fn connect_alpn(addr: SocketAddr, ca: &Path, alpn: Vec<Vec<u8>>) -> Self {
        use rustls::pki_types::pem::PemObject as _;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let mut config = config;
        config.alpn_protocols = alpn;
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut client = Self(rustls::StreamOwned::new(conn, tcp));
        while client.0.conn.is_handshaking() {
            client.0.conn.complete_io(&mut client.0.sock).unwrap();
        }
        client
    }

    /// The certificate the server presented (DER).
    fn leaf(&self) -> Vec<u8> {
        self.0.conn.peer_certificates().unwrap()[0].to_vec()
    }

    /// The seed request on this connection (kept alive): status and body.
    fn ask(&mut self) -> (u16, String) {
        write!(
            self.0,
            "POST /v1/features HTTP/1.1\r\nhost: localhost\r\ncontent-length: {}\r\n\r\n{SEED}",
            SEED.len()
        )
        .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            self.0.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).unwrap();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let mut body = vec![0u8; length];
        self.0.read_exact(&mut body).unwrap();
        (
            head[9..12].parse().unwrap(),
            String::from_utf8(body).unwrap(),
        )
    }
}

fn der(pem_file: &Path) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject as _;
    rustls::pki_types::CertificateDer::from_pem_file(pem_file)
        .unwrap()
        .to_vec()
}

#[test]
fn a_rotated_certificate_is_served_after_reload_while_old_connections_finish() {
    let pki = Pki::new("rotate");
    let (cert, key) = pki.leaf("live", &["localhost"], false);
    let first = der(&cert);
    let oka = start_oka(&tls_args(&cert, &key), None);
    let ca = pki.path("ca.pem");
    let mut old = Client::connect(oka.addr, &ca);
    assert_eq!(old.leaf(), first);
    assert_eq!(old.ask().0, 200);

    // cert-manager's way: new files in place, then a reload.
    let (next_cert, next_key) = pki.leaf("next", &["localhost"], false);
    std::fs::copy(&next_cert, &cert).unwrap();
    std::fs::copy(&next_key, &key).unwrap();
    let second = der(&cert);
    assert_ne!(first, second);
    let (status, body) = http(oka.admin, "POST", "/admin/reload", "").unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("TLS certificates of 1 port(s) re-read"),
        "{body}"
    );
    let mut new = Client::connect(oka.addr, &ca);
    assert_eq!(
        new.leaf(),
        second,
        "a new connection gets the new certificate"
    );
    assert_eq!(new.ask().0, 200);
    let (status, body) = old.ask();
    assert_eq!(status, 200, "the old connection is still served: {body}");

    // A bad file on reload: refused, named, and the certificate in use stays.
    std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nnot base64!\n").unwrap();
    std::thread::sleep(Duration::from_millis(1100)); // the reload interval
    let (status, body) = http(oka.admin, "POST", "/admin/reload", "").unwrap();
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("live.pem (--tls-cert): a PEM block has no `-----END` line"),
        "{body}"
    );
    let mut after = Client::connect(oka.addr, &ca);
    assert_eq!(after.leaf(), second, "the certificate in use is kept");
    assert_eq!(after.ask().0, 200);
}

impl Pki {
    /// A client certificate naming `uri` (a SPIFFE ID) and `dns`, written as
    /// `<stem>.pem` and `<stem>.key`.
    fn client(&self, stem: &str, uri: &str, dns: &str) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec![dns.to_owned()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::URI(rcgen::Ia5String::try_from(uri).unwrap()));
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let (cert_path, key_path) = (
            self.path(&format!("{stem}.pem")),
            self.path(&format!("{stem}.key")),
        );
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }
}

/// `curl` with a client certificate (or none) asking `path` with `body`:
/// the exit, and the body then the status on its own line. HTTP/1.1: over
/// HTTP/2 a refusal answered before the body is read ends with RST_STREAM
/// NO_ERROR (RFC 9113 §8.1), which Debian 12's curl 7.88 sometimes reports as
/// error 92 instead of the answer (docs/operations.md).
fn curl_as(
    port: u16,
    ca: &Path,
    client: Option<&(PathBuf, PathBuf)>,
    path: &str,
    body: &str,
) -> Output {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--http1.1", "--max-time", "10", "--resolve"])
        .arg(format!("localhost:{port}:127.0.0.1"))
        .arg("--cacert")
        .arg(ca)
        .args(["-w", "\n%{http_code}", "-d", body])
        .arg(format!("https://localhost:{port}{path}"));
    if let Some((cert, key)) = client {
        cmd.arg("--cert").arg(cert).arg("--key").arg(key);
    }
    cmd.stdin(Stdio::null()).output().unwrap()
}

fn status_and_body(out: &Output) -> (String, String) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (body, status) = stdout.rsplit_once('\n').unwrap_or_default();
    (status.to_owned(), body.to_owned())
}

#[test]
fn mutual_tls_requires_a_trusted_certificate_and_gives_identities_scopes() {
    let pki = Pki::new("mtls");
    let other = Pki::new("mtls-other");
    let (cert, key) = pki.leaf("server", &["localhost"], false);
    let reader = pki.client(
        "reader",
        "spiffe://cluster.local/ns/ml/sa/ranker",
        "ranker.ml.svc",
    );
    let writer = pki.client(
        "writer",
        "spiffe://cluster.local/ns/ml/sa/loader",
        "loader.ml.svc",
    );
    let unlisted = pki.client(
        "unlisted",
        "spiffe://cluster.local/ns/ml/sa/other",
        "other.ml.svc",
    );
    let foreign = other.client(
        "foreign",
        "spiffe://cluster.local/ns/ml/sa/ranker",
        "ranker.ml.svc",
    );
    let keys = pki.path("keys.txt");
    std::fs::write(
        &keys,
        "# identities from client certificates (mutual TLS)\ncert:spiffe://cluster.local/ns/ml/sa/ranker read\ncert:loader.ml.svc read,write\nreader-key-0123456789 read\n",
    )
    .unwrap();
    let mut args = tls_args(&cert, &key);
    let ca = pki.path("ca.pem");
    args.extend(["--tls-client-ca", ca.to_str().unwrap()]);
    args.extend(["--api-keys-file", keys.to_str().unwrap()]);
    let oka = start_oka(&args, None);
    let port = oka.addr.port();
    let ingest = r#"{"feature":"test_feature","records":[{"id":"m-1","value":1.0}]}"#;

    // No certificate, and one from another CA: the handshake is refused.
    for client in [None, Some(&foreign)] {
        let out = curl_as(port, &ca, client, "/v1/features", SEED);
        assert!(!out.status.success(), "{}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr).to_lowercase();
        assert!(
            err.contains("alert") || err.contains("certificate"),
            "{}",
            text(&out)
        );
    }

    // A trusted certificate whose identity has no scopes: 403, saying what to add.
    let out = curl_as(port, &ca, Some(&unlisted), "/v1/features", SEED);
    let (status, body) = status_and_body(&out);
    assert_eq!(status, "403", "{}", text(&out));
    assert!(
        body.contains("`spiffe://cluster.local/ns/ml/sa/other`"),
        "{body}"
    );
    assert!(body.contains("cert:<identity> read"), "{body}");

    // `read` only (by its URI name): features yes, ingest 403.
    let (status, body) = status_and_body(&curl_as(port, &ca, Some(&reader), "/v1/features", SEED));
    assert_eq!(status, "200", "{body}");
    assert!(body.contains("42.0"), "{body}");
    let (status, body) = status_and_body(&curl_as(port, &ca, Some(&reader), "/v1/ingest", ingest));
    assert_eq!(status, "403", "{body}");
    assert!(body.contains("lacks the `write` scope"), "{body}");

    // `read,write` (by its DNS name): ingest is served.
    let (status, body) = status_and_body(&curl_as(port, &ca, Some(&writer), "/v1/ingest", ingest));
    assert_eq!(status, "200", "{body}");

    // A key still works beside the certificate, and decides when sent.
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--resolve"])
        .arg(format!("localhost:{port}:127.0.0.1"))
        .arg("--cacert")
        .arg(&ca)
        .arg("--cert")
        .arg(&unlisted.0)
        .arg("--key")
        .arg(&unlisted.1)
        .args([
            "-H",
            "x-api-key: reader-key-0123456789",
            "-w",
            "\n%{http_code}",
            "-d",
            SEED,
        ])
        .arg(format!("https://localhost:{port}/v1/features"))
        .output()
        .unwrap();
    assert_eq!(status_and_body(&out).0, "200", "{}", text(&out));
}

/// One HTTP/2 frame: length, type, flags, stream, payload.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut f = vec![len[1], len[2], len[3], kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK: each header a literal without indexing (names and values short).
fn hpack(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in headers {
        out.push(0);
        out.push(u8::try_from(name.len()).unwrap());
        out.extend_from_slice(name.as_bytes());
        out.push(u8::try_from(value.len()).unwrap());
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// Reads what an HTTP/2 server sends for `span`, acknowledging its SETTINGS;
/// true once it has closed the connection.
fn h2_read_until_closed(c: &mut Client, pending: &mut Vec<u8>, span: Duration) -> bool {
    let until = Instant::now() + span;
    let mut buf = [0u8; 4096];
    while Instant::now() < until {
        match c.0.read(&mut buf) {
            Ok(0) => return true,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
        while pending.len() >= 9 {
            let len = usize::from(pending[1]) << 8 | usize::from(pending[2]);
            if pending.len() < 9 + len {
                break;
            }
            let (kind, flags) = (pending[3], pending[4]);
            pending.drain(..9 + len);
            if kind == 4 && flags & 1 == 0 {
                c.0.write_all(&h2_frame(4, 1, 0, &[])).unwrap(); // SETTINGS ACK
                c.0.flush().unwrap();
            }
        }
    }
    false
}

#[test]
fn an_http2_stream_the_client_resets_gives_its_connection_back_to_the_idle_timeout() {
    // A request waiting on a store that does not answer (Redis stopped, no
    // command timeout) keeps its connection busy, so no idle timeout; once the
    // client resets that stream, hyper drops the request and the connection is
    // idle again: the idle timeout must close it.
    let redis_port = common::free_port();
    let redis = common::redis_server(redis_port, &[]);
    let store = format!("redis://127.0.0.1:{redis_port}");
    std::thread::sleep(Duration::from_millis(300));
    let pki = Pki::new("h2-reset");
    let (cert, key) = pki.leaf("server", &["localhost"], false);
    let mut args = tls_args(&cert, &key);
    args.extend(["--store", &store, "--store-timeout-ms", "0"]);
    args.extend(["--idle-timeout-ms", "1000", "--deadline-ms", "600000"]);
    let oka = start_oka(&args, None);
    let pid = redis.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success()
    );
    let mut c = Client::connect_alpn(oka.addr, &pki.path("ca.pem"), vec![b"h2".to_vec()]);
    assert_eq!(c.0.conn.alpn_protocol(), Some(&b"h2"[..]));
    c.0.sock
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(h2_frame(4, 0, 0, &[])); // SETTINGS
    let head = hpack(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":path", "/v1/features"),
        (":authority", "localhost"),
    ]);
    out.extend(h2_frame(1, 0x4, 1, &head)); // HEADERS, END_HEADERS
    out.extend(h2_frame(0, 0x1, 1, SEED.as_bytes())); // DATA, END_STREAM
    c.0.write_all(&out).unwrap();
    c.0.flush().unwrap();
    let mut pending = Vec::new();
    // Waiting on the store: three idle timeouts pass, the connection stays.
    assert!(
        !h2_read_until_closed(&mut c, &mut pending, Duration::from_secs(3)),
        "closed while a request was in flight"
    );
    c.0.write_all(&h2_frame(3, 0, 1, &8u32.to_be_bytes()))
        .unwrap(); // RST_STREAM CANCEL
    c.0.flush().unwrap();
    let closed = h2_read_until_closed(&mut c, &mut pending, Duration::from_secs(8));
    let _ = Command::new("kill").args(["-CONT", &pid]).status();
    assert!(
        closed,
        "the connection was not closed by the idle timeout after its only stream was reset"
    );
    let (_, metrics) = http(oka.admin, "GET", "/metrics", "").unwrap();
    assert!(
        metrics.contains("oka_http_connection_timeouts_total{phase=\"idle\"} 1"),
        "{metrics}"
    );
}

#[test]
fn out_of_file_descriptors_a_tls_port_closes_new_connections_without_plain_text() {
    let pki = Pki::new("fd-limit");
    let (cert, key) = pki.leaf("server", &["localhost"], false);
    let (port, admin_port) = (common::free_port(), common::free_port());
    let log = common::tmp_file("tls-fd-limit.log", "");
    // 48 descriptors: the server needs about 25 of them before any connection.
    let _server = common::Server(
        Command::new("bash")
            .args(["-c", "ulimit -n 48 && exec \"$0\" \"$@\"", OKA, "serve"])
            .args(tls_args(&cert, &key))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin_port}")])
            .args(["--header-read-timeout-ms", "60000"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{admin_port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while http(admin, "GET", "/readyz", "").map(|(s, _)| s) != Some(200) {
        assert!(Instant::now() < deadline, "server did not become ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    // More silent connections than there are descriptors left: those refused
    // are closed, and none is sent a plain-text answer its handshake would choke on.
    let held: Vec<TcpStream> = (0..40).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut closed = 0;
    for mut s in held.iter() {
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut buf = [0u8; 64];
        match s.read(&mut buf) {
            Ok(0) => closed += 1,
            Ok(n) => panic!(
                "a refused TLS connection was sent {:?}",
                String::from_utf8_lossy(&buf[..n])
            ),
            Err(_) => {}
        }
    }
    assert!(
        closed > 0,
        "no connection was refused at the descriptor limit"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("out of file descriptors"), "{logged}");
}

#[test]
fn an_idle_http2_connection_gets_its_goaway_when_the_drain_starts() {
    let pki = Pki::new("h2-drain");
    let (cert, key) = pki.leaf("server", &["localhost"], false);
    let mut args = tls_args(&cert, &key);
    args.extend(["--shutdown-delay-s", "10"]);
    let mut oka = start_oka(&args, None);
    let mut c = Client::connect_alpn(oka.addr, &pki.path("ca.pem"), vec![b"h2".to_vec()]);
    assert_eq!(c.0.conn.alpn_protocol(), Some(&b"h2"[..]));
    c.0.sock
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(h2_frame(4, 0, 0, &[])); // SETTINGS
    c.0.write_all(&out).unwrap();
    c.0.flush().unwrap();
    // Idle: what the server sends first (its SETTINGS) is read, then nothing.
    let mut pending = Vec::new();
    let goaway = |pending: &mut Vec<u8>, c: &mut Client, span: Duration| {
        let until = Instant::now() + span;
        let mut buf = [0u8; 4096];
        while Instant::now() < until {
            if let Ok(n) = c.0.read(&mut buf) {
                pending.extend_from_slice(&buf[..n]);
            }
            while pending.len() >= 9 {
                let len = usize::from(pending[1]) << 8 | usize::from(pending[2]);
                if pending.len() < 9 + len {
                    break;
                }
                let (kind, flags) = (pending[3], pending[4]);
                pending.drain(..9 + len);
                if kind == 7 {
                    return true;
                }
                if kind == 4 && flags & 1 == 0 {
                    c.0.write_all(&h2_frame(4, 1, 0, &[])).unwrap(); // SETTINGS ACK
                    c.0.flush().unwrap();
                }
            }
        }
        false
    };
    assert!(!goaway(&mut pending, &mut c, Duration::from_millis(500)));
    let started = Instant::now();
    assert!(
        Command::new("kill")
            .args(["-TERM", &oka.server.0.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    // The drain (10 s before the listeners close) tells it to go at once.
    assert!(
        goaway(&mut pending, &mut c, Duration::from_secs(5)),
        "no GOAWAY within 5 s of the drain's start"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let _ = oka.server.0.kill();
}
