"""oka-engine (the wheel built from crates/oka-engine) against `oka training-set`.

The training set (OKA_TRAINING, computed by run.sh from spec.yaml and the history
make_data.py wrote) holds, for each entity row, the pipeline features as of the
row's time and the on-demand features computed from them. Given the row's keys,
time, arguments and pipeline columns, the engine must compute the same on-demand
columns, bit for bit, from pyarrow, pandas, polars and Spark's mapInArrow; and
refuse what it cannot compute with a message naming the thing.
"""

import os
import struct
import sys
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from oka_engine import Engine

SPEC_PATH = os.environ["OKA_SPEC"]
SPEC = open(SPEC_PATH, encoding="utf-8").read()
TRAINING = pq.read_table(os.environ["OKA_TRAINING"])
ON_DEMAND = ["scaled", "txn_risk", "scaled_py"]
PIPELINE = ["profile", "merchant_risk"]
INPUT_COLUMNS = [c for c in TRAINING.column_names
                 if not c.startswith(tuple(f"{f}__" for f in ON_DEMAND + ["txn", "spend_1h"]))]
# The engine's input: what oka training-set read or joined before its last step.
INPUT = TRAINING.select(INPUT_COLUMNS)
OUTPUT_COLUMNS = [c for c in TRAINING.column_names if c.startswith(tuple(f"{f}__" for f in ON_DEMAND))]


def bits(v):
    """A value comparable bit for bit (floats by their IEEE bytes)."""
    if isinstance(v, float):
        return ("f64", struct.pack("<d", v))
    if isinstance(v, list):
        return [bits(x) for x in v]
    return v


def assert_same_columns(got: pa.Table, want: pa.Table, columns, key="row"):
    got = got.sort_by(key)
    want = want.sort_by(key)
    assert got.num_rows == want.num_rows
    for c in columns:
        assert got.schema.field(c).type == want.schema.field(c).type, c
        g, w = got[c].to_pylist(), want[c].to_pylist()
        diff = [(i, a, b) for i, (a, b) in enumerate(zip(g, w)) if bits(a) != bits(b)]
        assert not diff, f"{c}: {len(diff)} rows differ, first {diff[:3]}"


def test_the_training_set_exercises_every_status():
    for f in ON_DEMAND:
        statuses = set(TRAINING[f"{f}__status"].to_pylist())
        assert {"present", "missing"} <= statuses, (f, statuses)
    assert "expired" in set(TRAINING["profile__status"].to_pylist())


def test_a_table_gives_what_the_training_set_holds():
    got = Engine(SPEC, origin=SPEC_PATH).compute(INPUT, features=ON_DEMAND)
    assert got.column_names == INPUT_COLUMNS + OUTPUT_COLUMNS
    assert_same_columns(got, TRAINING, INPUT_COLUMNS + OUTPUT_COLUMNS)


def test_record_batches_and_every_feature_by_default():
    engine = Engine(SPEC, origin=SPEC_PATH)
    batches = INPUT.to_batches(max_chunksize=333)
    assert len(batches) > 1
    got = engine.compute(iter(batches), features=ON_DEMAND)
    assert_same_columns(got, TRAINING, OUTPUT_COLUMNS)
    # One batch, and no feature list: every on-demand feature the input can
    # give (spend_1h reads a window, so it is refused by name).
    with pytest.raises(ValueError, match=r"`spend_1h` reads a window .*oka training-set"):
        engine.compute(batches[0])


def test_pandas_with_arrow_dtypes():
    import pandas as pd

    frame = INPUT.to_pandas(types_mapper=pd.ArrowDtype)
    got = Engine(SPEC, origin=SPEC_PATH).compute(frame, features=ON_DEMAND)
    assert_same_columns(got, TRAINING, OUTPUT_COLUMNS)


def test_pandas_numpy_dtypes_are_refused_by_name_where_an_int_became_float():
    # to_pandas() turns an int column with nulls into float64: the engine names
    # the column rather than guess that 754.0 was 754.
    frame = INPUT.to_pandas()
    with pytest.raises(ValueError, match=r"profile__visits"):
        Engine(SPEC, origin=SPEC_PATH).compute(frame, features=ON_DEMAND)


def test_polars():
    import polars as pl

    frame = pl.from_arrow(INPUT)
    got = Engine(SPEC, origin=SPEC_PATH).compute(frame, features=ON_DEMAND)
    assert_same_columns(got, TRAINING, OUTPUT_COLUMNS)


def test_args_for_rows_without_an_argument_column():
    engine = Engine(SPEC, origin=SPEC_PATH)
    no_factor = INPUT.drop_columns(["scaled.factor"])
    default = engine.compute(no_factor, features=["scaled"])
    given_default = engine.compute(no_factor, features=["scaled"], args={"scaled": {"factor": 1.5}})
    assert_same_columns(given_default, default, ["scaled__v"])
    doubled = engine.compute(no_factor, features=["scaled"], args={"scaled": {"factor": 2.0}})
    for row in doubled.to_pylist():
        if row["scaled__status"] == "present":
            assert bits(row["scaled__v"]) == bits(row["profile__balance"] * 2.0 + float(row["profile__visits"]))
        else:
            assert row["scaled__v"] is None
    # A column wins over args where it is not null.
    got = engine.compute(INPUT, features=["scaled"], args={"scaled": {"factor": 2.0}})
    for row in got.to_pylist():
        if row["scaled__status"] == "present":
            factor = row["scaled.factor"] if row["scaled.factor"] is not None else 2.0
            assert bits(row["scaled__v"]) == bits(row["profile__balance"] * factor + float(row["profile__visits"]))


def test_the_gil_is_released_while_a_batch_computes():
    engine = Engine(SPEC, origin=SPEC_PATH)
    big = pa.concat_tables([INPUT] * 60).combine_chunks().to_batches()[0]
    # The CEL features: a Python UDF takes the GIL back for its own batches.
    cel = ["scaled", "txn_risk"]
    state = {"inside": False, "seen": []}

    def work():
        state["inside"] = True
        start = time.perf_counter()
        engine._engine.compute_batch(big, cel, "{}", "timestamp")
        state["took"] = time.perf_counter() - start
        state["inside"] = False

    worker = threading.Thread(target=work)
    worker.start()
    while worker.is_alive():
        if state["inside"]:
            state["seen"].append(time.perf_counter())
    worker.join()
    seen = state["seen"]
    # Held GIL: this thread would run only around the call (a switch interval,
    # 5 ms). Released: it runs for most of the call.
    assert state["took"] > 0.05, state["took"]
    assert seen and seen[-1] - seen[0] > 0.5 * state["took"], (len(seen), state["took"])


def test_refusals_name_the_thing():
    with pytest.raises(ValueError, match=r"invalid spec"):
        Engine("version: 1\nfeatures: {x: {kind: nope}}\n")
    engine = Engine(SPEC, origin=SPEC_PATH)
    with pytest.raises(ValueError, match=r"profile__balance"):
        engine.compute(INPUT.drop_columns(["profile__balance"]), features=ON_DEMAND)
    with pytest.raises(ValueError, match=r"merchant_id"):
        engine.compute(INPUT.drop_columns(["merchant_id"]), features=["txn_risk"])
    with pytest.raises(ValueError, match=r"user_id"):
        engine.compute(INPUT.set_column(INPUT.schema.get_field_index("user_id"), "user_id",
                                        pa.array(range(INPUT.num_rows))), features=ON_DEMAND)
    with pytest.raises(ValueError, match=r"nope"):
        engine.compute(INPUT, features=["nope"])
    with pytest.raises(ValueError, match=r"args\[scaled\]\[facter\]"):
        engine.compute(INPUT, features=["scaled"], args={"scaled": {"facter": 1.0}})
    with pytest.raises(ValueError, match=r"args\[scaled\]\[factor\]"):
        engine.compute(INPUT, features=["scaled"], args={"scaled": {"factor": "high"}})
    with pytest.raises(ValueError, match=r"args must be a dict"):
        engine.compute(INPUT, features=["scaled"], args=[("scaled", 2.0)])
    with pytest.raises(TypeError, match=r"pyarrow Table"):
        engine.compute(42)


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    # Spark's Python workers must import oka_engine: this interpreter has it.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[2]").appName("oka-engine-test")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .getOrCreate())
    yield session
    session.stop()


def test_spark_map_in_arrow(spark, tmp_path):
    path = str(tmp_path / "input.parquet")
    # Spark SQL reads a dot in a column name as a path: the argument's column
    # is named `<feature>__<arg>` instead.
    pq.write_table(INPUT.rename_columns([c.replace("scaled.factor", "scaled__factor") for c in INPUT_COLUMNS]), path)
    engine = Engine(SPEC, origin=SPEC_PATH)
    df = spark.read.parquet(path).repartition(3)
    out = df.mapInArrow(engine.spark_map(ON_DEMAND), engine.spark_schema(df.schema, ON_DEMAND))
    got = out.toArrow()
    assert got.num_rows == INPUT.num_rows
    assert_same_columns(got, TRAINING, OUTPUT_COLUMNS)
