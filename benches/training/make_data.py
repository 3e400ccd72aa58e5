"""Writes benches/training's data into DIR as Parquet: ROWS entity rows and
RECORDS history records in all (half of them txn, the rest spread over the
five other pipeline features), over 30 days, keys drawn uniformly.

    python make_data.py DIR ROWS RECORDS
"""

import sys
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

T0_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
SPAN_US = 30 * 86_400 * 1_000_000
CHUNK = 2_000_000


def times(rng, n):
    return pa.array(T0_US + rng.integers(0, SPAN_US, n), pa.timestamp("us", tz="UTC"))


def write(path, n, users, make):
    rng = np.random.default_rng(zlib.crc32(path.name.encode()))
    writer = None
    for lo in range(0, n, CHUNK):
        table = make(rng, min(CHUNK, n - lo), users)
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
    if writer:
        writer.close()


def main(out: Path, rows: int, records: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    users, merchants = max(rows // 10, 1), 10_000
    txn, rest = records // 2, records - records // 2
    write(out / "txn.parquet", txn, users, lambda r, n, u: pa.table({
        "user_id": r.integers(0, u, n), "ts": times(r, n), "amount": r.uniform(1, 500, n)}))
    each = rest // 5
    for name in ["profile", "activity", "limits"]:
        write(out / f"{name}.parquet", each, users, lambda r, n, u: pa.table({
            "user_id": r.integers(0, u, n), "ts": times(r, n),
            "balance": r.uniform(-100, 1000, n), "visits": r.integers(0, 1000, n)}))
    for name in ["merchant_risk", "merchant_stats"]:
        write(out / f"{name}.parquet", each, merchants, lambda r, n, m: pa.table({
            "merchant_id": r.integers(0, m, n), "ts": times(r, n), "risk": r.random(n)}))
    rng = np.random.default_rng(7)
    write_entities = pq.ParquetWriter(out / "entities.parquet", pa.schema([
        ("user_id", pa.int64()), ("merchant_id", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")),
        ("label", pa.bool_())]))
    for lo in range(0, rows, CHUNK):
        n = min(CHUNK, rows - lo)
        write_entities.write_table(pa.table({
            "user_id": rng.integers(0, users, n), "merchant_id": rng.integers(0, merchants, n),
            "timestamp": times(rng, n), "label": rng.random(n) < 0.1}))
    write_entities.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
