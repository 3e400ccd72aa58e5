"""Added to the test repository after the first `feast apply` (tests/feast/run.sh):
a new feature view, served after `feast apply` and a reload."""

from datetime import timedelta

from feast import FeatureView, Field, FileSource
from feast.types import Float64, Int64

from features import driver

driver_extra = FeatureView(
    name="driver_extra",
    entities=[driver],
    ttl=timedelta(days=3650),
    schema=[
        Field(name="acc_rate", dtype=Float64),
        Field(name="avg_daily_trips", dtype=Int64),
    ],
    online=True,
    source=FileSource(
        name="driver_extra_source",
        path="data/driver_stats.parquet",
        timestamp_field="event_timestamp",
    ),
)
