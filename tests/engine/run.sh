#!/usr/bin/env bash
# The Python engine (crates/oka-engine) against `oka training-set`:
#
#   bash tests/engine/run.sh target/debug/oka
#
# Builds the oka-engine wheel with maturin (abi3; the dev profile, sharing
# target/ with the workspace's build), installs it into target/engine/venv
# (created once; pip runs again only when requirements.txt changes: pyarrow,
# pandas, polars, PySpark, pytest; about 40 s the first time), writes
# make_data.py's history and entity file, computes the training set of spec.yaml
# with `oka training-set`, then runs test_engine.py: the engine, fed the
# training set's pipeline columns from pyarrow, pandas, polars and Spark's
# mapInArrow (local mode, Java 17), computes its on-demand columns bit for bit,
# releases the GIL while it computes, and refuses what it cannot compute by name.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${1:?usage: tests/engine/run.sh PATH/TO/oka}
[[ -x $BIN ]] || { echo "engine: no executable oka at $BIN" >&2; exit 2; }
WORK=$ROOT/target/engine
mkdir -p "$WORK"

VENV=$WORK/venv
source "$ROOT/scripts/venv.sh"
venv_with "$VENV" "$HERE/requirements.txt"
command -v java >/dev/null || { echo "engine: java is needed for PySpark" >&2; exit 2; }

rm -rf "$WORK/wheels"
(cd "$ROOT/crates/oka-engine" &&
  timeout 1200 "$VENV/bin/maturin" build --locked --profile dev --quiet -o "$WORK/wheels" >"$WORK/maturin.log" 2>&1) || {
  tail -30 "$WORK/maturin.log"; echo "engine: maturin build failed" >&2; exit 1; }
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$WORK"/wheels/oka_engine-*.whl

DATA=$WORK/data
rm -rf "$DATA"
"$VENV/bin/python" "$HERE/make_data.py" "$DATA"
"$BIN" training-set --spec "$HERE/spec.yaml" --entities "$DATA/entities.parquet" \
  --history profile="$DATA/profile.jsonl" --history merchant_risk="$DATA/merchant.jsonl" \
  --history txn="$DATA/txn.jsonl" --out "$DATA/training.parquet" --quiet

export OKA_SPEC=$HERE/spec.yaml OKA_TRAINING=$DATA/training.parquet SPARK_LOCAL_IP=127.0.0.1
# Run from outside the repository so that `import oka_engine` is the installed
# wheel, not crates/oka-engine/python.
cd "$WORK"
timeout 900 "$VENV/bin/python" -m pytest -q -p no:cacheprovider -W ignore::FutureWarning "$HERE/test_engine.py"
echo "engine: ok"
