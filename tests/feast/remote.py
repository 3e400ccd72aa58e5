"""Feast's Python SDK with `online_store: {type: remote, path: URL}`, once against
`feast serve` and once against Oka, on the same Redis (tests/feast/run.sh):

    python remote.py REPO_DIR FEAST_URL OKA_URL

For each request, `get_online_features(...).to_dict()` (or the exception Feast's
client raises) must be the same through both servers.
"""

import re
import shutil
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")

from feast import FeatureStore  # noqa: E402

REQUESTS = [
    (["driver_stats:conv_rate", "driver_stats:acc_rate", "driver_stats:rating"],
     [{"driver_id": 1001}, {"driver_id": 1002}]),
    (["driver_profile:name", "driver_profile:avatar"], [{"driver_id": 1001}, {"driver_id": 1002}]),
    (["driver_lists:trips64", "driver_lists:tags", "driver_lists:flags"],
     [{"driver_id": 1001}, {"driver_id": 1002}]),
    (["customer_profile:tier", "customer_profile:lifetime_value"],
     [{"customer_id": "c-1"}, {"customer_id": "c-2"}]),
    (["driver_customer_trips:trips_together"], [{"driver_id": 1001, "customer_id": "c-1"}]),
    # On-demand views (Oka: the overlay), request data per row.
    (["fare_estimate:expected_fare", "driver_stats:acc_rate"],
     [{"driver_id": 1001, "distance_km": 10.0, "surge": 1.5},
      {"driver_id": 1002, "distance_km": 2.5, "surge": 1.0}]),
    (["dispatch_priority:priority"], [{"driver_id": 1001, "customer_id": "c-1"}]),
    # Nulls and missing entities: Feast's remote client raises on some of these,
    # whichever server answers; the same error is expected from both.
    (["driver_stats:conv_rate", "driver_stats:active"], [{"driver_id": 1003}, {"driver_id": 4242}]),
]


def remote_repo(repo: str, url: str) -> str:
    copy = tempfile.mkdtemp(prefix="feast-remote-")
    shutil.copy(f"{repo}/feature_store.yaml", copy)
    shutil.copy(f"{repo}/features.py", copy)
    path = f"{copy}/feature_store.yaml"
    text = open(path).read()
    text = re.sub(r"online_store:\n(  .*\n)+", f"online_store:\n  type: remote\n  path: {url}\n", text)
    text = text.replace("registry: data/registry.db", f"registry: {repo}/data/registry.db")
    open(path, "w").write(text)
    return copy


def outcome(store: FeatureStore, features, rows):
    try:
        return store.get_online_features(features=features, entity_rows=rows).to_dict()
    except Exception as e:  # noqa: BLE001 - the error is the outcome compared
        return f"{type(e).__name__}: {e}"


def main() -> int:
    repo, feast_url, oka_url = sys.argv[1:4]
    via_feast = FeatureStore(repo_path=remote_repo(repo, feast_url))
    via_oka = FeatureStore(repo_path=remote_repo(repo, oka_url))
    for features, rows in REQUESTS:
        a, b = outcome(via_feast, features, rows), outcome(via_oka, features, rows)
        if a != b:
            print(f"FAIL {features} {rows}:\n through feast serve: {a}\n through Oka:         {b}")
            return 1
    print(f"feast-remote: {len(REQUESTS)} SDK reads equal through feast serve and Oka")
    return 0


if __name__ == "__main__":
    sys.exit(main())
