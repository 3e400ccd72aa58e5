"""Values and statuses, range/last_n answers, DataFrames, the registry: data
loaded through the client's own ingest, read back from a real server."""

from __future__ import annotations

import math
from typing import Any, Dict, List

import pytest

import oka_client
from conftest import Oka

TS = ["2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"]


def load(url: str, records: List[Dict[str, Any]]) -> None:
    with oka_client.Client(url) as c:
        s = c.ingest("test_feature", records)
    assert (s.written, s.rejected) == (len(records), 0), s


def test_values_and_statuses(oka: Oka, prefix: str) -> None:
    a, z, missing = prefix + "a", prefix + "zero", prefix + "missing"
    load(oka.url, [{"id": a, "value": 3.0}, {"id": z, "value": 0.0}])
    with oka_client.Client(oka.url) as c:
        r = c.get_features(
            ["simple_feature", "ratio_feature", "test_feature", "simple_feature"],
            [{"id": a}, {"id": z}, {"id": missing}],
            udf_args={"simple_feature": {"multiplier": 2.0}},
        )
    # Duplicates dropped, request order kept, as the server does.
    assert r.targets == ["simple_feature", "ratio_feature", "test_feature"]
    simple = r["simple_feature"]
    assert simple.statuses == ["present", "present", "missing"]
    assert [v.key for v in simple] == [{"id": a}, {"id": z}, {"id": missing}]
    assert simple[0].record is not None and simple[0].record["value"] == 6.0
    assert simple[0].records is not None and len(simple[0].records) == 1
    assert simple[1].record is not None and simple[1].record["value"] == 0.0
    assert simple[2].records is None and simple[2].record is None and not simple[2].present

    ratio = r["ratio_feature"]
    assert ratio.statuses == ["present", "error", "missing"]
    assert ratio[0].record == {"id": a, "timestamp": ratio[0].record["timestamp"], "ratio": 33}  # type: ignore[index]
    assert ratio[1].records is None and not ratio[1].present

    stored = r["test_feature"]
    assert stored.statuses == ["present", "present", "missing"]
    assert [list(rec) for rec in stored[0].records or []] == [["id", "value", "timestamp"]]
    assert len(r.server_ids) == 1


def test_last_n_and_range_are_lists_of_records(oka: Oka, prefix: str) -> None:
    k, empty = prefix + "k", prefix + "none"
    load(oka.url, [{"id": k, "value": float(i), "timestamp": ts} for i, ts in enumerate(TS)])
    with oka_client.Client(oka.url) as c:
        last2 = c.get_features(
            "test_feature", [{"id": k}, {"id": empty}], query_args={"test_feature": {"n": 2}}
        )["test_feature"]
        ranged = c.get_features(
            "test_feature",
            [{"id": k}],
            query_args={"test_feature": {"start": TS[0], "end": "2026-01-01T00:01:30Z"}},
        )["test_feature"]
    assert [rec["value"] for rec in last2[0].records or []] == [1.0, 2.0]  # oldest first
    assert last2[0].record is not None and last2[0].record["value"] == 2.0  # the newest
    # No records under last_n is an empty list with status present, not missing.
    assert last2[1].records == [] and last2[1].status == "present" and last2[1].record is None
    assert [rec["value"] for rec in ranged[0].records or []] == [0.0, 1.0]
    assert ranged[0].records is not None
    assert ranged[0].records[0]["timestamp"].startswith("2026-01-01T00:00:00")


def test_to_pandas_and_polars(oka: Oka, prefix: str) -> None:
    a, missing = prefix + "a", prefix + "missing"
    load(oka.url, [{"id": a, "value": 4.0}])
    with oka_client.Client(oka.url) as c:
        r = c.get_features(["simple_feature", "ratio_feature"], [{"id": a}, {"id": missing}])

    df = r.to_pandas()
    assert list(df.columns) == ["feature", "key_index", "status", "id", "value", "timestamp", "ratio"]
    assert df["feature"].tolist() == ["simple_feature", "simple_feature", "ratio_feature", "ratio_feature"]
    assert df["status"].tolist() == ["present", "missing", "present", "missing"]
    assert df["id"].tolist() == [a, missing, a, missing]
    assert df["value"].iloc[0] == 4.0 and math.isnan(df["value"].iloc[1])
    assert df["ratio"].iloc[2] == 25

    one = r["simple_feature"].to_pandas()
    assert list(one.columns) == ["key_index", "status", "id", "value", "timestamp"]
    assert one["id"].tolist() == [a, missing]

    pl = r["ratio_feature"].to_polars()
    assert pl.columns == ["key_index", "status", "id", "timestamp", "ratio"]
    assert pl["ratio"].to_list() == [25, None]
    assert r.to_polars().height == 4


def test_to_pandas_all_records(oka: Oka, prefix: str) -> None:
    k = prefix + "k"
    load(oka.url, [{"id": k, "value": float(i), "timestamp": ts} for i, ts in enumerate(TS)])
    with oka_client.Client(oka.url) as c:
        r = c.get_features("test_feature", [{"id": k}], query_args={"test_feature": {"n": 3}})
    df = r["test_feature"].to_pandas(records="all")
    assert df["record_index"].tolist() == [0, 1, 2]
    assert df["value"].tolist() == [0.0, 1.0, 2.0]
    assert r["test_feature"].to_pandas()["value"].tolist() == [2.0]
    with pytest.raises(ValueError):
        r.to_pandas(records="first")


def test_registry(oka: Oka) -> None:
    with oka_client.Client(oka.url) as c:
        reg = c.features()
    names = [f["name"] for f in reg["features"]]
    assert sorted(names) == ["ratio_feature", "simple_feature", "test_feature"]
    assert reg["entities"]["TestEntity"]["keys"] == ["id"]
