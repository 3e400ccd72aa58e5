"""An on-demand view Oka's Python workers do not run (it aggregates):
tests/feast/run.sh starts Oka on a copy of the repository with it."""

from feast import Field
from feast.aggregation import Aggregation
from feast.on_demand_feature_view import on_demand_feature_view
from feast.types import Float64

from features import driver, driver_stats


@on_demand_feature_view(
    sources=[driver_stats],
    schema=[Field(name="sum_acc_rate", dtype=Float64)],
    entities=[driver],
    aggregations=[Aggregation(column="acc_rate", function="sum")],
    mode="python",
)
def driver_totals(inputs: dict) -> dict:
    return {"sum_acc_rate": inputs["acc_rate"]}
