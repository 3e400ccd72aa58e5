"""Writes the test repository's offline data (tests/feast/repo/data/*.parquet),
deterministic but for `now`: every value type, nulls, three drivers, two customers
(one with a row older than customer_profile's 1-day ttl), and driver x customer pairs.

    python make_data.py REPO_DIR NOW_ISO
"""

import sys
from datetime import datetime, timedelta

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


def write(repo: str, name: str, table: pa.Table) -> None:
    pq.write_table(table, f"{repo}/data/{name}.parquet")


def main() -> None:
    repo, now = sys.argv[1], pd.Timestamp(sys.argv[2])
    hour = timedelta(hours=1)
    ts = lambda n: [now - hour * (i + 1) for i in range(n)]  # noqa: E731
    tsf = pa.timestamp("us", tz="UTC")

    drivers = [1001, 1002, 1003]
    write(repo, "driver_stats", pa.table({
        "driver_id": pa.array(drivers, pa.int64()),
        "conv_rate": pa.array([0.5, 0.25, None], pa.float32()),
        "acc_rate": pa.array([0.9, 0.123456789012345, 1e-300], pa.float64()),
        "avg_daily_trips": pa.array([10, -(2**62), None], pa.int64()),
        "rating": pa.array([5, -3, 2**31 - 1], pa.int32()),
        "active": pa.array([True, False, None], pa.bool_()),
        "event_timestamp": pa.array(ts(3), tsf),
        "created": pa.array(ts(3), tsf),
    }))
    write(repo, "driver_profile", pa.table({
        "driver_id": pa.array(drivers[:2], pa.int64()),
        "name": pa.array(["Ada Lovelace", "Émile \"quoted\" ✓"], pa.string()),
        "avatar": pa.array([b"\x00\x01\xffpng", b""], pa.binary()),
        "signed_up": pa.array([1_600_000_000, None], pa.timestamp("s", tz="UTC")),
        "event_timestamp": pa.array(ts(2), tsf),
        "created": pa.array(ts(2), tsf),
    }))
    write(repo, "driver_lists", pa.table({
        "driver_id": pa.array(drivers[:2], pa.int64()),
        "ratings32": pa.array([[1, 2, 3], []], pa.list_(pa.int32())),
        "trips64": pa.array([[2**40, -1], [0]], pa.list_(pa.int64())),
        "scores32": pa.array([[0.1, 1.5], [3.25]], pa.list_(pa.float32())),
        "scores64": pa.array([[0.1, 2.5e-10], []], pa.list_(pa.float64())),
        "tags": pa.array([["a", "b,c"], ["日本"]], pa.list_(pa.string())),
        "blobs": pa.array([[b"\x00", b"xy"], []], pa.list_(pa.binary())),
        "flags": pa.array([[True, False], [False]], pa.list_(pa.bool_())),
        "logins": pa.array([[1_700_000_000, 1_700_000_100], []], pa.list_(pa.int64())),
        "event_timestamp": pa.array(ts(2), tsf),
        "created": pa.array(ts(2), tsf),
    }))
    write(repo, "customer_profile", pa.table({
        "customer_id": pa.array(["c-1", "c-2"], pa.string()),
        "tier": pa.array(["gold", "silver"], pa.string()),
        "lifetime_value": pa.array([1234.5, 10.0], pa.float64()),
        # c-2's row is two days old: past the view's 1-day ttl.
        "event_timestamp": pa.array([now - hour, now - timedelta(days=2)], tsf),
        "created": pa.array([now - hour, now - timedelta(days=2)], tsf),
    }))
    write(repo, "driver_customer_trips", pa.table({
        "driver_id": pa.array([1001, 1001, 1002], pa.int64()),
        "customer_id": pa.array(["c-1", "c-2", "c-1"], pa.string()),
        "trips_together": pa.array([3, 1, 7], pa.int64()),
        "last_rating": pa.array([4.5, 3.0, None], pa.float32()),
        "event_timestamp": pa.array(ts(3), tsf),
        "created": pa.array(ts(3), tsf),
    }))
    # The stream feature view's batch source (what materialize writes).
    write(repo, "driver_stream", pa.table({
        "driver_id": pa.array([1001, 1003], pa.int64()),
        "speed": pa.array([42.5, None], pa.float64()),
        "zone": pa.array(["north", "ünïcode"], pa.string()),
        "event_timestamp": pa.array(ts(2), tsf),
        "created": pa.array(ts(2), tsf),
    }))


if __name__ == "__main__":
    main()
