"""ingest(): records streamed in batches from any iterable, per-record
rejections with their input index, then read back through get_features."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any, AsyncIterator, Dict, Iterator, List

import pytest

import oka_client
from conftest import Oka, async_recording, recording


def test_ingest_then_read_back(oka: Oka, prefix: str) -> None:
    consumed: List[int] = []

    def records() -> Iterator[Dict[str, Any]]:
        for i in range(2500):
            consumed.append(i)
            if i == 10:
                yield {"id": f"{prefix}{i}", "value": "high"}  # wrong type: rejected by the server
            elif i == 1500:
                yield {"value": 1.0}  # no key: rejected by the server
            elif i == 2001:
                yield {"id": f"{prefix}{i}", "value": float("nan")}  # no JSON form: rejected here
            else:
                yield {"id": f"{prefix}{i}", "value": float(i)}

    rec, transport = recording()
    consumed_at_send: List[int] = []
    transport.hooks.append(
        lambda entry: consumed_at_send.append(len(consumed)) if entry["path"] == "/v1/ingest" else None
    )
    with oka_client.Client(oka.url, transport=transport) as c:
        summary = c.ingest("test_feature", records(), batch_size=1000)
        r = c.get_features("test_feature", [{"id": f"{prefix}{i}"} for i in (0, 10, 1499, 1500, 2001, 2499)])

    assert (summary.written, summary.rejected, summary.batches) == (2497, 3, 3)
    assert [(e.index, e.message) for e in summary.errors] == [
        (10, "field `value`: expected float, got string"),
        (1500, "missing key field `id`"),
        (2001, "a float that is NaN or infinite (JSON has no form for it)"),
    ]
    assert not summary.errors_truncated
    # Streamed: each batch went out before the generator ran past the next record.
    assert consumed_at_send == [1000, 2000, 2500]
    assert [len(c["body"]["records"]) for c in rec.paths("/v1/ingest")] == [1000, 1000, 499]

    values = [v.record["value"] if v.record else None for v in r["test_feature"]]
    assert values == [0.0, None, 1499.0, None, None, 2499.0]
    assert r["test_feature"].statuses == ["present", "missing", "present", "missing", "missing", "present"]


def test_ingest_timestamps_and_batch_bytes(oka: Oka, prefix: str) -> None:
    k = prefix + "k"
    naive = dt.datetime(2026, 1, 1, 12, 0, 0)
    aware = dt.datetime(2026, 1, 1, 14, 0, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    rows = [
        {"id": k, "value": 1.0, "timestamp": naive},  # taken as UTC
        {"id": k, "value": 2.0, "timestamp": aware},  # 13:00 UTC
        {"id": k, "value": 3.0, "timestamp": "2026-01-01T12:30:00Z"},
    ]
    rec, transport = recording()
    with oka_client.Client(oka.url, transport=transport) as c:
        summary = c.ingest("test_feature", iter(rows), batch_bytes=80)
        r = c.get_features("test_feature", [{"id": k}], query_args={"test_feature": {"n": 5}})
    assert (summary.written, summary.rejected) == (3, 0)
    assert len(rec.paths("/v1/ingest")) == 3  # each record alone is over half of 80 bytes
    got = [(rec_["value"], rec_["timestamp"][:19]) for rec_ in r["test_feature"][0].records or []]
    assert got == [(1.0, "2026-01-01T12:00:00"), (3.0, "2026-01-01T12:30:00"), (2.0, "2026-01-01T13:00:00")]


def test_ingest_errors(oka: Oka, prefix: str) -> None:
    with oka_client.Client(oka.url) as c:
        with pytest.raises(oka_client.NotFound) as e:
            c.ingest("nope", [{"id": "x", "value": 1.0}])
        assert e.value.code == "unknown_feature"
        assert e.value.ingest_summary is not None and e.value.ingest_summary.written == 0

        with pytest.raises(oka_client.BadRequest) as bad:
            c.ingest("simple_feature", [{"id": "x", "value": 1.0}])
        assert bad.value.code == "invalid_request"

        # Nothing to send: no request, an empty summary.
        assert c.ingest("test_feature", []).batches == 0

        # A failing later batch: the summary tells what the earlier ones wrote.
        def then_not_an_object() -> Iterator[Any]:
            yield {"id": prefix + "ok", "value": 1.0}
            yield [1, 2]

        s = c.ingest("test_feature", then_not_an_object(), batch_size=1)
        assert (s.written, s.rejected) == (1, 1)
        assert "a record is an object" in s.errors[0].message and s.errors[0].index == 1


def test_async_ingest_from_an_async_generator(oka: Oka, prefix: str) -> None:
    async def records() -> AsyncIterator[Dict[str, Any]]:
        for i in range(30):
            await asyncio.sleep(0)
            yield {"id": f"{prefix}{i}", "value": float(i) * 2}

    rec, transport = async_recording()

    async def run() -> oka_client.FeatureResponse:
        async with oka_client.AsyncClient(oka.url, transport=transport) as c:
            s = await c.ingest("test_feature", records(), batch_size=7)
            assert (s.written, s.rejected, s.batches) == (30, 0, 5)
            return await c.get_features("simple_feature", [{"id": f"{prefix}{i}"} for i in range(30)])

    r = asyncio.run(run())
    assert [v.record["value"] if v.record else None for v in r["simple_feature"]] == [i * 2.0 for i in range(30)]
    assert [len(c["body"]["records"]) for c in rec.paths("/v1/ingest")] == [7, 7, 7, 7, 2]
