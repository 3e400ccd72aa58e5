"""The seed workload in Feast's terms (benches/peers/run.sh).

- entity `id` (string join key)
- FeatureView `test_feature`: field `value` (Float64), loaded into the online store
  with `FeatureStore.write_to_online_store` (benches/peers/feast_load.py); its file
  source is only there because a FeatureView needs a batch source
- OnDemandFeatureView `simple_feature` = test_feature.value * multiplier, where
  `multiplier` comes with the request (RequestSource `udf_args`), in Feast's
  "python" mode; `simple_feature_pandas` is the same in "pandas" mode (the pre-run
  measures both and the runs use the faster)
- FeatureView `wide`: 20 features `f00` … `f19` (8 Float64, 6 Int64, 4 String, 2
  Bool) for the Feast-API scenario's 50-entity × 20-feature request
  (benches/peers/feast_api.sh)
"""

import os
from datetime import timedelta

import pandas as pd
from feast import Entity, FeatureView, Field, FileSource, RequestSource, ValueType
from feast.on_demand_feature_view import on_demand_feature_view
from feast.types import Bool, Float64, Int64, String

DATA = os.environ.get("PEERS_FEAST_DATA", "data")

test_entity = Entity(name="id", join_keys=["id"], value_type=ValueType.STRING)

test_source = FileSource(
    name="test_feature_source",
    path=os.path.join(DATA, "test_feature.parquet"),
    timestamp_field="event_timestamp",
)

test_feature = FeatureView(
    name="test_feature",
    entities=[test_entity],
    ttl=timedelta(days=3650),
    schema=[Field(name="value", dtype=Float64)],
    source=test_source,
    online=True,
)

WIDE_TYPES = [Float64] * 8 + [Int64] * 6 + [String] * 4 + [Bool] * 2

wide = FeatureView(
    name="wide",
    entities=[test_entity],
    ttl=timedelta(days=3650),
    schema=[Field(name=f"f{i:02d}", dtype=t) for i, t in enumerate(WIDE_TYPES)],
    source=FileSource(
        name="wide_source",
        path=os.path.join(DATA, "wide.parquet"),
        timestamp_field="event_timestamp",
    ),
    online=True,
)

udf_args = RequestSource(
    name="udf_args",
    schema=[Field(name="multiplier", dtype=Float64)],
)


@on_demand_feature_view(
    sources=[test_feature, udf_args],
    schema=[Field(name="value", dtype=Float64)],
    mode="python",
)
def simple_feature(inputs: dict) -> dict:
    return {"value": [v * m for v, m in zip(inputs["value"], inputs["multiplier"])]}


@on_demand_feature_view(
    sources=[test_feature, udf_args],
    schema=[Field(name="value", dtype=Float64)],
    mode="pandas",
)
def simple_feature_pandas(inputs: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame()
    out["value"] = inputs["value"] * inputs["multiplier"]
    return out
