"""Writes tests/engine's history (JSON Lines, the ingest format) and entity
file (Parquet) into DIR: 300 users, 40 merchants, 2,000 entity rows at random
moments, some users and merchants never seen, half the rows with a per-row
`scaled.factor`.

    python make_data.py DIR
"""

import json
import random
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SPAN_S = 20_000


def at(rng: random.Random) -> datetime:
    return T0 + timedelta(microseconds=rng.randrange(SPAN_S * 1_000_000))


def rfc3339(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def main(out: Path) -> None:
    rng = random.Random(29)
    out.mkdir(parents=True, exist_ok=True)
    users = [f"u{i}" for i in range(300)]
    with open(out / "profile.jsonl", "w") as f:
        for u in users[:260]:
            for _ in range(rng.randrange(1, 5)):
                f.write(json.dumps({
                    "user_id": u, "ts": rfc3339(at(rng)), "balance": rng.uniform(-50, 500),
                    "visits": rng.randrange(1000), "tier": rng.choice(["gold", "silver", "none"]),
                    "tags": [rng.choice("abc") for _ in range(rng.randrange(4))],
                }) + "\n")
    with open(out / "merchant.jsonl", "w") as f:
        for m in range(35):
            for _ in range(rng.randrange(1, 4)):
                f.write(json.dumps({"merchant_id": m, "ts": rfc3339(at(rng)), "risk": rng.random()}) + "\n")
    with open(out / "txn.jsonl", "w") as f:
        for u in users[:100]:
            for _ in range(5):
                f.write(json.dumps({"user_id": u, "ts": rfc3339(at(rng)), "amount": rng.uniform(1, 90)}) + "\n")
    rows = 2000
    pq.write_table(pa.table({
        "row": pa.array(range(rows), pa.int64()),
        "user_id": [rng.choice(users) for _ in range(rows)],
        "merchant_id": pa.array([rng.randrange(40) for _ in range(rows)], pa.int64()),
        "timestamp": pa.array([at(rng) for _ in range(rows)], pa.timestamp("us", tz="UTC")),
        "scaled.factor": pa.array([rng.uniform(0, 3) if rng.random() < 0.5 else None for _ in range(rows)],
                                  pa.float64()),
        "label": [rng.random() < 0.1 for _ in range(rows)],
    }), out / "entities.parquet")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
