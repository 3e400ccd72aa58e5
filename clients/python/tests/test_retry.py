"""Retries against real failures: Redis stopped (503 store_unavailable with
Retry-After: 1), Redis paused (504 store_timeout), a server shedding load
(503 overloaded), nothing listening; and 4xx answers, never retried.

The only timed assertions are the waits for Retry-After, with generous bounds.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Dict, Iterator, List, Tuple

import httpx
import pytest

import oka_client
from conftest import READER_KEY, Oka, Redis, async_recording, free_port, recording


@pytest.fixture
def own_store() -> Iterator[Redis]:
    """A Redis of this test's own, to stop or pause."""
    r = Redis()
    yield r
    r.close()


def load(url: str, key: str, value: float) -> None:
    with oka_client.Client(url) as c:
        assert c.ingest("test_feature", [{"id": key, "value": value}]).written == 1


def wait_unready(server: Oka) -> None:
    """Until the server has seen the store go (readyz 503)."""
    for _ in range(100):
        if httpx.get(f"{server.admin}/readyz", timeout=2).status_code == 503:
            return
        time.sleep(0.05)
    raise AssertionError("readyz stayed 200 with Redis stopped")


def statuses(calls: List[Dict[str, Any]]) -> List[Any]:
    return [c["status"] for c in calls]


def test_retry_after_honoured_while_the_store_is_down(own_store: Redis, prefix: str) -> None:
    server = Oka(own_store.url)
    try:
        load(server.url, prefix + "a", 7.0)
        rec, transport = recording()
        restarted = threading.Event()

        def on_answer(entry: Dict[str, Any]) -> None:
            # Redis comes back 0.2 s after the first 503, well inside the 1 s wait.
            if entry["status"] == 503 and not restarted.is_set():
                restarted.set()
                t = threading.Timer(0.2, own_store.start)
                t.start()

        transport.hooks.append(on_answer)
        own_store.save_and_stop()
        wait_unready(server)
        with oka_client.Client(server.url, transport=transport, max_retries=3) as c:
            r = c.get_features("simple_feature", [{"id": prefix + "a"}])
        assert r["simple_feature"][0].record is not None
        assert r["simple_feature"][0].record["value"] == 7.0

        calls = rec.paths("/v1/features")
        # A read in flight when the connection drops may time out (504) first.
        assert statuses(calls)[-2:] == [503, 200], statuses(calls)
        assert set(statuses(calls)[:-2]) <= {504}
        assert calls[-2]["retry_after"] == "1"
        waited = calls[-1]["started"] - calls[-2]["ended"]
        assert 0.95 <= waited <= 3.0, waited
    finally:
        server.stop()


def test_retry_after_honoured_when_the_server_sheds(own_store: Redis, prefix: str) -> None:
    """One worker admitting one request at a time: while a request waits on a
    paused Redis, the next is refused with 503 overloaded and Retry-After: 1;
    the async client waits it out and gets its answer."""
    server = Oka(own_store.url, "--workers", "1", "--max-in-flight-requests", "1", "--store-timeout-ms", "5000")
    try:
        load(server.url, prefix + "a", 5.0)
        load(server.url, prefix + "b", 6.0)
        assert own_store.command("CLIENT", "PAUSE", "1500", "ALL") == b"+OK"
        blocker: List[Any] = []
        slow = threading.Thread(
            target=lambda: blocker.append(
                oka_client.Client(server.url, max_retries=0).get_features("test_feature", [{"id": prefix + "a"}])
            )
        )
        slow.start()
        threading.Event().wait(0.3)  # let it be admitted and block on the store
        rec, transport = async_recording()

        async def shed() -> oka_client.FeatureResponse:
            async with oka_client.AsyncClient(server.url, transport=transport, max_retries=4) as c:
                return await c.get_features("test_feature", [{"id": prefix + "b"}])

        r = asyncio.run(shed())
        slow.join(10)
        assert r["test_feature"][0].record is not None
        assert r["test_feature"][0].record["value"] == 6.0
        calls = rec.paths("/v1/features")
        assert calls[0]["status"] == 503 and calls[0]["retry_after"] == "1"
        assert calls[-1]["status"] == 200
        assert all(c["status"] == 503 for c in calls[:-1])
        for before, after in zip(calls, calls[1:]):
            waited = after["started"] - before["ended"]
            assert 0.95 <= waited <= 3.0, waited
        assert blocker and blocker[0]["test_feature"][0].record["value"] == 5.0
    finally:
        server.stop()


def test_store_timeout_is_retried(own_store: Redis, prefix: str) -> None:
    server = Oka(own_store.url, "--store-timeout-ms", "200")
    try:
        load(server.url, prefix + "a", 2.0)
        rec, transport = recording()
        assert own_store.command("CLIENT", "PAUSE", "1200", "ALL") == b"+OK"
        with oka_client.Client(
            server.url, transport=transport, max_retries=20, backoff=0.1, max_backoff=0.3
        ) as c:
            r = c.get_features("simple_feature", [{"id": prefix + "a"}])
        assert r["simple_feature"][0].record is not None
        assert r["simple_feature"][0].record["value"] == 2.0
        codes = statuses(rec.paths("/v1/features"))
        assert codes[0] == 504 and codes[-1] == 200 and set(codes[:-1]) == {504}
    finally:
        server.stop()


def test_gives_up_after_max_retries(own_store: Redis, prefix: str) -> None:
    server = Oka(own_store.url)
    try:
        own_store.stop()
        wait_unready(server)
        rec, transport = recording()
        with oka_client.Client(server.url, transport=transport, max_retries=2) as c:
            with pytest.raises(oka_client.Unavailable) as e:
                c.get_features("simple_feature", [{"id": prefix + "a"}])
        assert e.value.code == "store_unavailable" and e.value.status == 503
        assert e.value.retry_after == 1.0 and e.value.attempts == 3
        assert statuses(rec.paths("/v1/features")) == [503, 503, 503]
    finally:
        server.stop()


def test_retry_deadline_bounds_the_retries(own_store: Redis, prefix: str) -> None:
    """Retry-After: 1 and 1.5 s of retry budget: one retry, not ten."""
    server = Oka(own_store.url)
    try:
        own_store.stop()
        wait_unready(server)
        rec, transport = recording()
        with oka_client.Client(server.url, transport=transport, max_retries=10, retry_deadline=1.5) as c:
            with pytest.raises(oka_client.Unavailable) as e:
                c.get_features("simple_feature", [{"id": prefix + "a"}])
        assert e.value.attempts == 2
        assert len(rec.paths("/v1/features")) == 2

        # A budget shorter than Retry-After: raised at once, not waited for.
        with oka_client.Client(server.url, max_retries=3, retry_deadline=0.5) as c:
            with pytest.raises(oka_client.Unavailable) as fast:
                c.get_features("simple_feature", [{"id": prefix + "a"}])
        assert fast.value.attempts == 1 and fast.value.retry_after == 1.0
    finally:
        server.stop()


FOUR_XX: List[Tuple[Dict[str, Any], type, str, int]] = [
    ({"targets": "nope", "keys": [{"id": "x"}]}, oka_client.NotFound, "unknown_feature", 404),
    ({"targets": "simple_feature", "keys": [{"id": 5}]}, oka_client.BadRequest, "invalid_key", 400),
    ({"targets": "simple_feature", "keys": [{"id": "x"}], "udf_args": {"simple_feature": {"mult": 2}}},
     oka_client.BadRequest, "unknown_udf_arg", 400),
    ({"targets": "test_feature", "keys": [{"id": "x"}], "query_args": {"test_feature": {"n": 0}}},
     oka_client.BadRequest, "invalid_query_arg", 400),
    ({"targets": "simple_feature", "keys": []}, oka_client.BadRequest, "missing_keys", 400),
]


@pytest.mark.parametrize("request_, cls, code, status", FOUR_XX)
def test_4xx_is_never_retried(oka: Oka, request_: Dict[str, Any], cls: type, code: str, status: int) -> None:
    rec, transport = recording()
    with oka_client.Client(oka.url, transport=transport, max_retries=5) as c:
        with pytest.raises(cls) as e:
            c.get_features(**request_)
    assert isinstance(e.value, oka_client.ClientError)
    assert (e.value.code, e.value.status, e.value.attempts) == (code, status, 1)
    assert len(rec.calls) == 1

    arec, atransport = async_recording()

    async def run() -> None:
        async with oka_client.AsyncClient(oka.url, transport=atransport, max_retries=5) as c:
            await c.get_features(**request_)

    with pytest.raises(cls):
        asyncio.run(run())
    assert len(arec.calls) == 1


def test_401_is_never_retried(auth_oka: Oka) -> None:
    rec, transport = recording()
    with oka_client.Client(auth_oka.url, transport=transport, max_retries=5) as c:
        with pytest.raises(oka_client.Unauthenticated):
            c.get_features("simple_feature", [{"id": "x"}])
    with oka_client.Client(auth_oka.url, api_key=READER_KEY, transport=transport, max_retries=5) as c:
        with pytest.raises(oka_client.Forbidden):
            c.ingest("test_feature", [{"id": "x", "value": 1.0}])
    assert statuses(rec.calls) == [401, 403]


def test_deadline_exceeded_is_not_retried(oka: Oka) -> None:
    rec, transport = recording()
    with oka_client.Client(oka.url, transport=transport, max_retries=5) as c:
        with pytest.raises(oka_client.DeadlineExceeded) as e:
            # 10,000 keys in 1 ms: the store read alone takes longer.
            c.get_features(
                ["simple_feature", "ratio_feature"], [{"id": f"d{i}"} for i in range(10_000)], deadline_ms=1
            )
    assert isinstance(e.value, oka_client.Timeout)
    assert (e.value.code, e.value.status) == ("deadline_exceeded", 504)
    assert statuses(rec.calls) == [504]


def test_connection_failures_are_retried() -> None:
    rec, transport = recording()
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with oka_client.Client(url, transport=transport, max_retries=3, backoff=0.01) as c:
        with pytest.raises(oka_client.ConnectionFailed) as e:
            c.get_features("simple_feature", [{"id": "x"}])
    assert e.value.attempts == 4 and e.value.status is None and e.value.code is None
    assert len(rec.calls) == 4 and all(c["status"] is None for c in rec.calls)
    assert "ConnectError" in str(e.value)
