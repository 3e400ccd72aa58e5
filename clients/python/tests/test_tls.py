"""The client over HTTPS: server certificates checked against a CA, HTTP/1.1
through httpx's TLS, and mutual TLS with a client certificate whose SPIFFE ID
the server's keys file gives scopes (certificates made with the openssl CLI)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import uuid
from pathlib import Path
from typing import Iterator, Tuple

import httpx
import pytest

import oka_client
from conftest import Oka, Redis

SPIFFE = "spiffe://cluster.local/ns/ml/sa/ranker"


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def signed(dir: Path, name: str, subject_alt_names: str) -> Tuple[Path, Path]:
    """A P-256 key and a certificate for it signed by dir/ca.pem."""
    key, csr, cert, ext = (dir / f"{name}.{s}" for s in ("key", "csr", "pem", "ext"))
    ext.write_text(f"subjectAltName={subject_alt_names}\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(csr))
    openssl("x509", "-req", "-in", str(csr), "-CA", str(dir / "ca.pem"), "-CAkey", str(dir / "ca.key"),
            "-days", "2", "-out", str(cert), "-extfile", str(ext))
    return cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.fail("the openssl CLI is needed to make the test certificates")
    dir = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=oka client test CA", "-keyout", str(dir / "ca.key"), "-out", str(dir / "ca.pem"))
    signed(dir, "server", "DNS:localhost,IP:127.0.0.1")
    signed(dir, "ranker", f"URI:{SPIFFE}")
    return dir


@pytest.fixture(scope="module")
def tls_oka(redis: Redis, pki: Path) -> Iterator[Oka]:
    server = Oka(
        redis.url,
        "--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key"),
        "--tls-client-ca", str(pki / "ca.pem"),
        env={"OKA_API_KEYS": f"cert:{SPIFFE} read"},
    )
    yield server
    server.stop()


def context(pki: Path, client_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if client_cert:
        ctx.load_cert_chain(str(pki / "ranker.pem"), str(pki / "ranker.key"))
    return ctx


def test_features_over_https_with_a_client_certificate(tls_oka: Oka, pki: Path) -> None:
    url = f"https://localhost:{tls_oka.port}"
    transport = httpx.HTTPTransport(verify=context(pki, client_cert=True))
    prefix = f"t-{uuid.uuid4().hex[:10]}-"
    with oka_client.Client(url, transport=transport, max_retries=0) as c:
        r = c.get_features("simple_feature", [{"id": f"{prefix}1"}], udf_args={"simple_feature": {"multiplier": 2.0}})
        assert r["simple_feature"].statuses == ["missing"]
        # The identity has `read` only: ingest is refused with the server's reason.
        with pytest.raises(oka_client.Forbidden) as e:
            c.ingest("test_feature", [{"id": f"{prefix}1", "value": 1.0}])
    assert e.value.status == 403
    assert "lacks the `write` scope" in e.value.message


def test_without_a_client_certificate_or_trust_the_connection_fails(tls_oka: Oka, pki: Path) -> None:
    url = f"https://localhost:{tls_oka.port}"
    # No client certificate: the server ends the handshake.
    no_cert = httpx.HTTPTransport(verify=context(pki, client_cert=False))
    with oka_client.Client(url, transport=no_cert, max_retries=0) as c:
        with pytest.raises(oka_client.ConnectionFailed):
            c.get_features("simple_feature", [{"id": "x"}])
    # The system's CAs do not know the test CA: the client refuses the server.
    with oka_client.Client(url, max_retries=0) as c:
        with pytest.raises(oka_client.ConnectionFailed) as e:
            c.get_features("simple_feature", [{"id": "x"}])
    assert "CERTIFICATE_VERIFY_FAILED" in str(e.value) or "certificate" in str(e.value).lower()
