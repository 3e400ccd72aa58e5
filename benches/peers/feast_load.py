"""Loads the seed workload into Feast's online store (benches/peers/run.sh).

10,000 rows test-id-0 … test-id-9999, value = i (float), and the same ids'
20 features of `wide`, written with FeatureStore.write_to_online_store into the
Redis that feature_store.yaml names.
Also writes the FeatureView's parquet source (same rows), and checks a few keys
through FeatureStore.get_online_features (value × multiplier).
Usage: python feast_load.py REPO_DIR KEYS
"""

import os
import sys
from datetime import datetime, timezone

import pandas as pd
from feast import FeatureStore


def main() -> None:
    repo, keys = sys.argv[1], int(sys.argv[2])
    now = datetime.now(timezone.utc)
    df = pd.DataFrame(
        {
            "id": [f"test-id-{i}" for i in range(keys)],
            "value": [float(i) for i in range(keys)],
            "event_timestamp": [now] * keys,
        }
    )
    data = os.environ["PEERS_FEAST_DATA"]
    os.makedirs(data, exist_ok=True)
    df.to_parquet(os.path.join(data, "test_feature.parquet"))
    store = FeatureStore(repo_path=repo)
    store.write_to_online_store("test_feature", df)
    # The 20-feature view of the Feast-API scenario (benches/peers/feast_api.sh).
    wide = {"id": df["id"], "event_timestamp": df["event_timestamp"]}
    for j in range(20):
        if j < 8:
            wide[f"f{j:02d}"] = [i * 0.5 + j for i in range(keys)]
        elif j < 14:
            wide[f"f{j:02d}"] = [i * 1000 + j for i in range(keys)]
        elif j < 18:
            wide[f"f{j:02d}"] = [f"v{i}-{j}" for i in range(keys)]
        else:
            wide[f"f{j:02d}"] = [(i + j) % 2 == 0 for i in range(keys)]
    wide = pd.DataFrame(wide)
    wide.to_parquet(os.path.join(data, "wide.parquet"))
    store.write_to_online_store("wide", wide)
    probe = [0, 1, 7, keys - 1]
    for feature in ("simple_feature:value", "simple_feature_pandas:value"):
        got = store.get_online_features(
            features=[feature],
            entity_rows=[{"id": f"test-id-{i}", "multiplier": 2.0} for i in probe],
        ).to_dict()
        want = [2.0 * i for i in probe]
        if got["value"] != want:
            sys.exit(f"feast_load: {feature} gave {got['value']}, want {want}")
    print(f"feast_load: wrote {keys} rows; {probe} x 2.0 read back through the SDK")


if __name__ == "__main__":
    main()
