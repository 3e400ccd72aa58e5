"""The test feature repository: three entities (an int64 key, a string key, and a
view keyed by both), five feature views covering every value type Feast's Redis
store writes, a ttl, a feature service with an alias projection, two on-demand
views, a push source and a stream feature view fed by another. Data: tests/feast/make_data.py."""

from datetime import timedelta

import pandas as pd

from feast import (
    Entity,
    FeatureService,
    FeatureView,
    Field,
    FileSource,
    PushSource,
    RequestSource,
    ValueType,
)
from feast.on_demand_feature_view import on_demand_feature_view
from feast.stream_feature_view import StreamFeatureView
from feast.types import (
    Array,
    Bool,
    Bytes,
    Float32,
    Float64,
    Int32,
    Int64,
    String,
    UnixTimestamp,
)

driver = Entity(name="driver", join_keys=["driver_id"], value_type=ValueType.INT64)
customer = Entity(name="customer", join_keys=["customer_id"], value_type=ValueType.STRING)


def source(name: str) -> FileSource:
    return FileSource(
        name=f"{name}_source",
        path=f"data/{name}.parquet",
        timestamp_field="event_timestamp",
        created_timestamp_column="created",
    )


driver_stats = FeatureView(
    name="driver_stats",
    entities=[driver],
    ttl=timedelta(days=3650),
    schema=[
        Field(name="conv_rate", dtype=Float32),
        Field(name="acc_rate", dtype=Float64),
        Field(name="avg_daily_trips", dtype=Int64),
        Field(name="rating", dtype=Int32),
        Field(name="active", dtype=Bool),
    ],
    online=True,
    source=source("driver_stats"),
)

driver_profile = FeatureView(
    name="driver_profile",
    entities=[driver],
    ttl=timedelta(days=3650),
    schema=[
        Field(name="name", dtype=String),
        Field(name="avatar", dtype=Bytes),
        Field(name="signed_up", dtype=UnixTimestamp),
    ],
    online=True,
    source=source("driver_profile"),
)

driver_lists = FeatureView(
    name="driver_lists",
    entities=[driver],
    ttl=timedelta(days=3650),
    schema=[
        Field(name="ratings32", dtype=Array(Int32)),
        Field(name="trips64", dtype=Array(Int64)),
        Field(name="scores32", dtype=Array(Float32)),
        Field(name="scores64", dtype=Array(Float64)),
        Field(name="tags", dtype=Array(String)),
        Field(name="blobs", dtype=Array(Bytes)),
        Field(name="flags", dtype=Array(Bool)),
        Field(name="logins", dtype=Array(UnixTimestamp)),
    ],
    online=True,
    source=source("driver_lists"),
)

customer_profile = FeatureView(
    name="customer_profile",
    entities=[customer],
    # Short: the rows made older than this by make_data.py are expired when read.
    ttl=timedelta(days=1),
    schema=[
        Field(name="tier", dtype=String),
        Field(name="lifetime_value", dtype=Float64),
    ],
    online=True,
    source=source("customer_profile"),
)

trip_push = PushSource(name="trip_push", batch_source=source("driver_customer_trips"))

driver_customer_trips = FeatureView(
    name="driver_customer_trips",
    entities=[driver, customer],
    ttl=timedelta(days=3650),
    schema=[
        Field(name="trips_together", dtype=Int64),
        Field(name="last_rating", dtype=Float32),
    ],
    online=True,
    source=trip_push,
)

# A stream feature view fed by a push source: served from the same hashes as a
# batch view.
driver_stream = StreamFeatureView(
    name="driver_stream",
    entities=[driver],
    ttl=timedelta(days=3650),
    schema=[
        Field(name="speed", dtype=Float64),
        Field(name="zone", dtype=String),
    ],
    online=True,
    source=PushSource(name="driver_stream_push", batch_source=source("driver_stream")),
    timestamp_field="event_timestamp",
)

trip_request = RequestSource(
    name="trip_request",
    schema=[Field(name="distance_km", dtype=Float64), Field(name="surge", dtype=Float64)],
)


@on_demand_feature_view(
    sources=[driver_stats, trip_request],
    schema=[Field(name="expected_fare", dtype=Float64)],
    mode="python",
)
def fare_estimate(inputs: dict) -> dict:
    return {
        "expected_fare": [
            d * s * (1.0 + a)
            for d, s, a in zip(inputs["distance_km"], inputs["surge"], inputs["acc_rate"])
        ]
    }


@on_demand_feature_view(
    sources=[driver_stats, customer_profile],
    schema=[Field(name="priority", dtype=Float64)],
    mode="pandas",
)
def dispatch_priority(inputs: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame()
    out["priority"] = inputs["acc_rate"] * inputs["lifetime_value"]
    return out


@on_demand_feature_view(
    sources=[driver_stats, driver_profile, trip_request],
    schema=[
        Field(name="label", dtype=String),
        Field(name="log_rating", dtype=Float64),
        Field(name="avatar_len", dtype=Int64),
    ],
    mode="python",
    singleton=True,
)
def trip_label(inputs: dict) -> dict:
    # singleton: called once per row, with that row's values. (Feast pickles the
    # function with dill: modules are imported inside it.)
    import math

    return {
        "label": f"{inputs['name']} · {inputs['distance_km']:.2f} km × {inputs['surge']:g}",
        "log_rating": math.log1p(abs(inputs["rating"])),
        "avatar_len": len(inputs["avatar"] or b""),
    }


@on_demand_feature_view(
    sources=[driver_stats],
    schema=[
        Field(name="acc_sqrt", dtype=Float64),
        Field(name="trips_sign", dtype=Int64),
        Field(name="rating_third", dtype=Float32),
        Field(name="rating_thirds", dtype=Array(Float32)),
    ],
    mode="python",
)
def driver_math(inputs: dict) -> dict:
    import numpy as np

    acc = np.asarray(inputs["acc_rate"], dtype=np.float64)
    return {
        "acc_sqrt": np.sqrt(acc).tolist(),
        "trips_sign": [0 if t is None else int(np.sign(t)) for t in inputs["avg_daily_trips"]],
        "rating_third": [np.float32(r / 3.0) for r in inputs["rating"]],
        "rating_thirds": [[np.float32(r / 3.0), np.float32(0.1)] for r in inputs["rating"]],
    }


@on_demand_feature_view(
    sources=[driver_stats, trip_request],
    schema=[Field(name="checked_fare", dtype=Float64)],
    mode="python",
)
def checked_fare(inputs: dict) -> dict:
    for d in inputs["distance_km"]:
        if d < 0:
            raise ValueError(f"distance_km must not be negative, got {d}")
    return {"checked_fare": [d * a for d, a in zip(inputs["distance_km"], inputs["acc_rate"])]}


# Transformed when written (by `feast materialize` of its source, and feast
# serve's /write-to-online-store), stored, and read back from the online store.
@on_demand_feature_view(
    sources=[driver_stats],
    schema=[Field(name="stored_score", dtype=Float64)],
    entities=[driver],
    mode="python",
    write_to_online_store=True,
)
def stored_score(inputs: dict) -> dict:
    return {"stored_score": [a * 100.0 for a in inputs["acc_rate"]]}


# The same in pandas mode: Feast calls it with the written DataFrame.
@on_demand_feature_view(
    sources=[driver_stats],
    schema=[Field(name="trips_tenths", dtype=Float64), Field(name="rate_pct", dtype=Float64)],
    entities=[driver],
    mode="pandas",
    write_to_online_store=True,
)
def stored_band(inputs: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame()
    out["trips_tenths"] = inputs["avg_daily_trips"] / 10.0
    out["rate_pct"] = inputs["acc_rate"] * 100.0
    return out


driver_activity = FeatureService(
    name="driver_activity",
    features=[
        driver_stats[["conv_rate", "avg_daily_trips"]],
        driver_profile.with_name("profile")[["name"]],
    ],
)
