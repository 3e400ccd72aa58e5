"""Requests over the server's limits are split and merged back in order, by
the sync and the async client alike, against a server with --max-keys 5 and
--max-targets 2 (and its answers compared with one unsplit request to a server
with the default limits, on the same Redis)."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional

import pytest

import oka_client
from conftest import Oka, async_recording, recording

TARGETS = ["test_feature", "simple_feature", "ratio_feature"]


def comparable(r: oka_client.FeatureResponse) -> Dict[str, List[Any]]:
    """Per target: (key, status, records), with the on-demand features'
    timestamps (the request time `now`, different per request) left out."""
    out: Dict[str, List[Any]] = {}
    for result in r:
        rows = []
        for v in result:
            recs: Optional[List[Dict[str, Any]]] = None
            if v.records is not None:
                recs = [
                    {k: x for k, x in rec.items() if not (k == "timestamp" and result.name != "test_feature")}
                    for rec in v.records
                ]
            rows.append((v.key, v.status, recs))
        out[result.name] = rows
    return out


def seed(url: str, prefix: str, n: int) -> List[Dict[str, str]]:
    """n keys, every third one missing, value 0 for key 1 (a UDF error)."""
    records = [{"id": f"{prefix}{i}", "value": float(i % 7)} for i in range(n) if i % 3 != 2]
    with oka_client.Client(url) as c:
        assert c.ingest("test_feature", records).written == len(records)
    return [{"id": f"{prefix}{i}"} for i in range(n)]


def test_split_beyond_the_key_and_target_limits(oka: Oka, small_oka: Oka, prefix: str) -> None:
    keys = seed(oka.url, prefix, 23)
    rec, transport = recording()
    with oka_client.Client(
        small_oka.url, max_keys_per_request=5, max_targets_per_request=2, transport=transport
    ) as c:
        split = c.get_features(TARGETS, keys, udf_args={"simple_feature": {"multiplier": 3}})
    sent = rec.paths("/v1/features")
    # 2 target groups (2 + 1 targets) x ceil(23 / 5) = 5 key slices.
    assert len(sent) == 10
    assert all(c["status"] == 200 for c in sent)
    assert all(len(c["body"]["keys"]) <= 5 and len(c["body"]["target_features"]) <= 2 for c in sent)
    assert [k["id"] for c in sent[:5] for k in c["body"]["keys"]] == [k["id"] for k in keys]

    with oka_client.Client(oka.url) as c:
        whole = c.get_features(TARGETS, keys, udf_args={"simple_feature": {"multiplier": 3}})
    assert comparable(split) == comparable(whole)
    assert [v.key["id"] for v in split["ratio_feature"]] == [k["id"] for k in keys]
    assert split["simple_feature"].statuses[:3] == ["present", "present", "missing"]
    assert split["ratio_feature"].statuses[:3] == ["error", "present", "missing"]
    assert split["simple_feature"][4].record is not None
    assert split["simple_feature"][4].record["value"] == 12.0
    assert len(split.server_ids) == 10


def test_the_server_refuses_what_the_client_would_split(small_oka: Oka, prefix: str) -> None:
    """The limit is real: unsplit, the same request is a 400."""
    keys = [{"id": f"{prefix}{i}"} for i in range(6)]
    with oka_client.Client(small_oka.url) as c:
        with pytest.raises(oka_client.BadRequest) as e:
            c.get_features(["simple_feature"], keys)
    assert e.value.code == "invalid_request"
    assert "6 keys in one request; the limit is 5" in e.value.message


def test_split_with_feature_keys(oka: Oka, small_oka: Oka, prefix: str) -> None:
    """Key lists per feature (Volga's form), one under a dependency's name: the
    client resolves which list each target uses from the registry, as the
    server does, and splits each list."""
    keys = seed(oka.url, prefix, 12)
    other = list(reversed(keys[:7]))
    kwargs: Dict[str, Any] = {
        "feature_keys": {"test_feature": keys, "ratio_feature": other},
    }
    rec, transport = recording()
    with oka_client.Client(small_oka.url, max_keys_per_request=5, max_targets_per_request=2, transport=transport) as c:
        split = c.get_features(["simple_feature", "ratio_feature"], **kwargs)
    assert len(rec.paths("/v1/features")) == 1 + 3 + 2  # the registry, 12 keys in 3, 7 in 2
    with oka_client.Client(oka.url) as c:
        whole = c.get_features(["simple_feature", "ratio_feature"], **kwargs)
    assert comparable(split) == comparable(whole)
    assert [v.key for v in whole["simple_feature"]] == keys
    assert [v.key for v in whole["ratio_feature"]] == other


def test_split_refuses_unused_feature_keys(small_oka: Oka) -> None:
    keys = [{"id": f"k{i}"} for i in range(6)]
    with oka_client.Client(small_oka.url, max_keys_per_request=5) as c:
        with pytest.raises(oka_client.BadRequest) as e:
            c.get_features(["test_feature"], keys, feature_keys={"ratio_feature": keys})
    assert e.value.code == "invalid_request" and e.value.status is None


def test_async_and_sync_agree(oka: Oka, small_oka: Oka, prefix: str) -> None:
    keys = seed(oka.url, prefix, 23)
    requests: List[Dict[str, Any]] = [
        {"targets": TARGETS, "keys": keys},
        {"targets": ["simple_feature"], "keys": keys[:4], "udf_args": {"simple_feature": {"multiplier": 0.5}}},
        {"targets": "test_feature", "keys": keys[:6], "query_args": {"test_feature": {"n": 3}}},
    ]
    sync_answers = []
    with oka_client.Client(small_oka.url, max_keys_per_request=5, max_targets_per_request=2) as c:
        for req in requests:
            sync_answers.append(comparable(c.get_features(**req)))

    rec, transport = async_recording()

    async def run() -> List[Dict[str, List[Any]]]:
        async with oka_client.AsyncClient(
            small_oka.url,
            max_keys_per_request=5,
            max_targets_per_request=2,
            max_concurrency=3,
            transport=transport,
        ) as c:
            return [comparable(await c.get_features(**req)) for req in requests]

    async_answers = asyncio.run(run())
    assert async_answers == sync_answers
    assert len(rec.paths("/v1/features")) == 10 + 1 + 2
    # The batches of the first call overlapped (bounded at 3 in flight).
    first = rec.paths("/v1/features")[:10]
    overlap = max(
        sum(1 for o in first if o["started"] <= c["started"] < o["ended"]) for c in first
    )
    assert 1 <= overlap <= 3
