"""Feast's side of benches/training/against_feast.sh: a Feast repository over the
same Parquet history (FileSource, the `file` offline store), the same features
(five feature views read as of each row; `scaled` and `risk` as pandas on-demand
views with the same arithmetic as spec.yaml's CEL), then one timed
`get_historical_features(...).to_df()` over the entity file, written to OUT.

    python feast_side.py REPO DATA OUT
"""

import resource
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

DEFINITIONS = '''
from datetime import timedelta

import pandas as pd
from feast import Entity, FeatureView, Field, FileSource, ValueType
from feast.on_demand_feature_view import on_demand_feature_view
from feast.types import Float64, Int64

DATA = "{data}"
user = Entity(name="user", join_keys=["user_id"], value_type=ValueType.INT64)
merchant = Entity(name="merchant", join_keys=["merchant_id"], value_type=ValueType.INT64)


def view(name, entity, fields, ttl):
    source = FileSource(name=name + "_source", path=f"{{DATA}}/{{name}}.parquet", timestamp_field="ts")
    return FeatureView(name=name, entities=[entity], ttl=ttl, schema=fields, source=source, online=False)


USER_FIELDS = [Field(name="balance", dtype=Float64), Field(name="visits", dtype=Int64)]
profile = view("profile", user, USER_FIELDS, timedelta(days=30))
activity = view("activity", user, USER_FIELDS, timedelta(0))
limits = view("limits", user, USER_FIELDS, timedelta(0))
merchant_risk = view("merchant_risk", merchant, [Field(name="risk", dtype=Float64)], timedelta(0))
merchant_stats = view("merchant_stats", merchant, [Field(name="risk", dtype=Float64)], timedelta(0))


@on_demand_feature_view(sources=[profile, activity], schema=[Field(name="v", dtype=Float64)], mode="pandas")
def scaled(df: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({{"v": df["profile__balance"] * 1.5 + df["activity__visits"].astype("float64")}})


@on_demand_feature_view(sources=[profile, activity, merchant_risk], schema=[Field(name="score", dtype=Float64)], mode="pandas")
def risk(df: pd.DataFrame) -> pd.DataFrame:
    v = df["profile__balance"] * 1.5 + df["activity__visits"].astype("float64")
    return pd.DataFrame({{"score": df["merchant_risk__risk"] * v}})
'''

FEATURES = [f"{v}:{f}" for v in ("profile", "activity", "limits") for f in ("balance", "visits")] + [
    "merchant_risk:risk", "merchant_stats:risk", "scaled:v", "risk:score"]


def main(repo: Path, data: Path, out: Path) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "feature_store.yaml").write_text(
        "project: oka_training_bench\nprovider: local\n"
        f"registry: {repo}/registry.db\n"
        f"online_store: {{type: sqlite, path: {repo}/online.db}}\n"
        "offline_store: {type: file}\nentity_key_serialization_version: 3\n")
    (repo / "definitions.py").write_text(DEFINITIONS.format(data=data))
    subprocess.run([str(Path(sys.executable).parent / "feast"), "apply"], cwd=repo, check=True,
                   stdout=subprocess.DEVNULL)
    from feast import FeatureStore

    store = FeatureStore(repo_path=str(repo))
    entities = pq.read_table(data / "entities.parquet").to_pandas()
    entities = entities.rename(columns={"timestamp": "event_timestamp"})
    entities["row"] = range(len(entities))
    started = time.perf_counter()
    df = store.get_historical_features(entity_df=entities, features=FEATURES, full_feature_names=True).to_df()
    took = time.perf_counter() - started
    df.sort_values("row").to_parquet(out, index=False)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"feast: get_historical_features(...).to_df() returned {len(df)} of {len(entities)} rows "
          f"in {took:.1f} s; peak RSS {rss:.0f} MiB")
    (out.parent / "feast-retrieval-seconds").write_text(f"{took:.3f}\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
