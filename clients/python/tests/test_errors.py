"""Exceptions carry the server's code, message and status; bodies that are not
Oka's JSON still give a readable exception; API keys."""

from __future__ import annotations

import urllib.parse

import httpx
import pytest

import oka_client
from conftest import READER_KEY, WRITER_KEY, Oka, recording
from oka_client._errors import error_from_response


def test_errors_carry_code_message_status(oka: Oka) -> None:
    with oka_client.Client(oka.url) as c:
        with pytest.raises(oka_client.NotFound) as e:
            c.get_features(["nope"], [{"id": "x"}])
        with pytest.raises(oka_client.BadRequest) as bad:
            c.get_features("simple_feature", [{"id": "x"}], udf_args={"simple_feature": {"multiplier": "two"}})
    assert (e.value.code, e.value.status) == ("unknown_feature", 404)
    assert e.value.message == "unknown feature `nope` in `target_features`"
    assert str(e.value) == "404 unknown_feature: unknown feature `nope` in `target_features`"
    assert isinstance(e.value, oka_client.ClientError) and isinstance(e.value, oka_client.OkaError)
    assert bad.value.code == "invalid_udf_arg"
    assert bad.value.message == "`udf_args.simple_feature.multiplier`: expected float, got string"


def test_a_plain_text_error_body_is_readable(oka: Oka) -> None:
    """Oka's Volga routes answer errors as `code: message` plain text: the
    exception keeps that text as its message."""
    path = "/on_demand_compute/" + urllib.parse.quote('{"target_features":["nope"]', safe="")
    raw = httpx.get(oka.url + path)
    assert raw.headers["content-type"].startswith("text/plain")
    err = error_from_response(raw.status_code, raw.content, raw.headers.get("retry-after"), raw.reason_phrase)
    assert isinstance(err, oka_client.BadRequest) and err.status == 400 and err.code is None
    assert err.message.startswith("malformed_request: ")


def test_a_proxy_answer_is_readable_and_only_503_is_retried() -> None:
    """Answers from something in front of Oka (a fake proxy, here): an HTML
    502 is a ServerError with its text, not retried; an empty 503 is retried."""
    seen = []

    def proxy(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if len(seen) == 1:
            return httpx.Response(502, text="<html><body>502 Bad Gateway</body></html>")
        if len(seen) == 2:
            return httpx.Response(503)
        return httpx.Response(200, json={"results": {"f": [None]}, "statuses": {"f": ["missing"]}, "server_id": "x/0"})

    with oka_client.Client("http://oka.invalid", transport=httpx.MockTransport(proxy), backoff=0.01) as c:
        with pytest.raises(oka_client.ServerError) as e:
            c.get_features("f", [{"id": "a"}])
        assert (e.value.status, e.value.code, e.value.attempts) == (502, None, 1)
        assert "502 Bad Gateway" in e.value.message
        r = c.get_features("f", [{"id": "a"}])
    assert r["f"].statuses == ["missing"] and len(seen) == 3


def test_api_keys(auth_oka: Oka, prefix: str) -> None:
    with oka_client.Client(auth_oka.url) as c:
        with pytest.raises(oka_client.Unauthenticated) as none:
            c.get_features("simple_feature", [{"id": "x"}])
    assert (none.value.code, none.value.status) == ("unauthenticated", 401)

    with oka_client.Client(auth_oka.url, api_key="not-a-real-key-000000") as c:
        with pytest.raises(oka_client.Unauthenticated) as unknown:
            c.features()
    assert unknown.value.message == "unknown API key"

    with oka_client.Client(auth_oka.url, api_key=WRITER_KEY) as c:
        assert c.ingest("test_feature", [{"id": prefix + "a", "value": 9.0}]).written == 1

    rec, transport = recording()
    with oka_client.Client(auth_oka.url, api_key=READER_KEY, transport=transport) as c:
        r = c.get_features("simple_feature", [{"id": prefix + "a"}])
        with pytest.raises(oka_client.Forbidden) as forbidden:
            c.ingest("test_feature", [{"id": prefix + "b", "value": 1.0}])
    assert r["simple_feature"][0].record is not None
    assert r["simple_feature"][0].record["value"] == 9.0
    assert (forbidden.value.code, forbidden.value.status) == ("forbidden", 403)
    assert forbidden.value.message == "this API key lacks the `write` scope"


def test_client_side_checks() -> None:
    with oka_client.Client("http://127.0.0.1:9") as c:
        with pytest.raises(TypeError):
            c.get_features("f", {"id": "a"})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"keys\[1\] is a key object"):
            c.get_features("f", [{"id": "a"}, "b"])  # type: ignore[list-item]
        with pytest.raises(ValueError):
            c.get_features([], [{"id": "a"}])
        with pytest.raises(ValueError):
            c.get_features("f", [{"id": "a"}], deadline_ms=-1)
    with pytest.raises(ValueError):
        oka_client.Client("http://127.0.0.1:9", max_keys_per_request=0)
