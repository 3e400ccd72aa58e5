"""Reads every feature of every online feature view, for every entity of the
test data and some that do not exist, through Feast's own SDK (on the Redis its
`feast materialize` wrote) and through Oka's /v1/features (`oka serve
--feast-repo` on the same Redis), and fails on the first value that differs.

    python compare.py REPO_DIR OKA_URL

Oka answers Oka's JSON; the comparison maps it as docs/migrating-from-feast.md
says: bytes are base64 strings, timestamps RFC 3339 with microseconds, a key with
no record of the view is `missing` (Feast: every value None).
"""

import base64
import json
import sys
import urllib.request
import warnings
from datetime import datetime

warnings.filterwarnings("ignore")

from feast import FeatureStore  # noqa: E402


def oka(url: str, body: dict) -> dict:
    req = urllib.request.Request(
        url + "/v1/features",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def same(feast_value, oka_value) -> bool:
    if isinstance(feast_value, (bytes, bytearray)):
        return oka_value == base64.b64encode(feast_value).decode()
    if isinstance(feast_value, datetime):
        return oka_value is not None and datetime.fromisoformat(oka_value) == feast_value
    if isinstance(feast_value, (list, tuple)):
        return isinstance(oka_value, list) and len(feast_value) == len(oka_value) and all(
            same(a, b) for a, b in zip(feast_value, oka_value)
        )
    if isinstance(feast_value, float) and isinstance(oka_value, (int, float)):
        return feast_value == float(oka_value)
    return feast_value == oka_value


def main() -> int:
    repo, url = sys.argv[1], sys.argv[2]
    fs = FeatureStore(repo_path=repo)
    checked = 0
    entities = {
        ("driver_id",): [{"driver_id": d} for d in (1001, 1002, 1003, 4242)],
        ("customer_id",): [{"customer_id": c} for c in ("c-1", "c-2", "nobody")],
        ("driver_id", "customer_id"): [
            {"driver_id": d, "customer_id": c}
            for d in (1001, 1002, 4242)
            for c in ("c-1", "c-2")
        ],
    }
    for view in fs.list_feature_views():
        if not view.online:
            continue
        join_keys = tuple(c.name for c in view.entity_columns)
        rows = entities[join_keys]
        names = [f.name for f in view.features]
        want = fs.get_online_features(
            features=[f"{view.name}:{n}" for n in names], entity_rows=rows
        ).to_dict()
        got = oka(url, {"target_features": [view.name], "keys": rows})
        for i, row in enumerate(rows):
            record = got["results"][view.name][i]
            status = got["statuses"][view.name][i]
            feast_values = {n: want[n][i] for n in names}
            if record is None:
                if status != "missing" or any(v is not None for v in feast_values.values()):
                    print(f"FAIL {view.name} {row}: Oka {status}, Feast {feast_values}")
                    return 1
                checked += 1
                continue
            for n in names:
                if not same(feast_values[n], record[0][n]):
                    print(f"FAIL {view.name} {row} {n}: Feast {feast_values[n]!r}, Oka {record[0][n]!r}")
                    return 1
                checked += 1
    print(f"feast-compare: {checked} values and missing records equal")
    return 0 if checked > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
