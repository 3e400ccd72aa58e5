#!/usr/bin/env bash
# Oka's training sets against Feast's get_historical_features
# (docs/benchmarks.md, "Training sets"):
#
#   bash benches/training/against_feast.sh [ROWS] [RECORDS]
#
# The same data as run.sh (make_data.py, Parquet), the same features without
# the windows (Feast has no window reads at retrieval): five feature views read
# as of each row (ttl 30 days on profile) and two on-demand features (Feast:
# pandas views with the same arithmetic). Feast 0.67 with the `file` offline
# store, from tests/feast's venv (its pins); Oka: the release `oka
# training-set`, its history held in memory. Reports wall time, rows/s and
# peak RSS of each, and compares every value of the two outputs (NaN = null).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ROWS=${1:-100000}
RECORDS=${2:-1000000}
WORK=$ROOT/target/bench-training
mkdir -p "$WORK"
source "$ROOT/scripts/venv.sh"
VENV=$ROOT/target/feast/venv
venv_with "$VENV" "$ROOT/tests/feast/requirements.txt"
source "$HERE/data.sh"
bench_data "$VENV/bin/python" "$ROWS" "$RECORDS"

rm -rf "$WORK/feast-repo"
/usr/bin/time -f '%e %M' -o "$WORK/time-feast" timeout 3600 \
  "$VENV/bin/python" "$HERE/feast_side.py" "$WORK/feast-repo" "$DATA" "$WORK/feast-out.parquet"
args=(training-set --spec "$HERE/spec.yaml" --entities "$DATA/entities.parquet" --out "$WORK/oka-out.parquet"
  --features profile,activity,limits,merchant_risk,merchant_stats,scaled,risk --memory-budget-mib 8192 --quiet)
for f in profile activity limits merchant_risk merchant_stats; do args+=(--history "$f=$DATA/$f.parquet"); done
/usr/bin/time -f '%e %M' -o "$WORK/time-oka" timeout 3600 "$ROOT/target/release/oka" "${args[@]}" 2>"$WORK/log-oka" || {
  cat "$WORK/log-oka"; exit 1; }
read -r fw frss <"$WORK/time-feast"
read -r ow orss <"$WORK/time-oka"
fr=$(cat "$WORK/feast-retrieval-seconds")
awk -v n="$ROWS" -v fw="$fw" -v fr="$fr" -v frss="$frss" -v ow="$ow" -v orss="$orss" 'BEGIN {
  printf "%-28s %10s %16s %14s\n", "", "seconds", "entity_rows_per_s", "peak_rss_mib"
  printf "%-28s %10.1f %16.0f %14.0f\n", "feast (whole process)", fw, n / fw, frss / 1024
  printf "%-28s %10.1f %16.0f %14s\n", "feast (the retrieval alone)", fr, n / fr, "-"
  printf "%-28s %10.1f %16.0f %14.0f\n", "oka training-set", ow, n / ow, orss / 1024
  printf "oka: %.1fx the rows/s of the whole Feast process, %.1fx of its retrieval alone, at %.2f of its peak memory\n",
    fw / ow, fr / ow, orss / frss }'
# Every value Feast returns equals Oka's (NaN = null), and every row Feast
# leaves out has a feature view with no record at or before the row's time.
"$VENV/bin/python" - "$WORK/feast-out.parquet" "$WORK/oka-out.parquet" <<'PY'
import sys
import pyarrow.parquet as pq
feast = pq.read_table(sys.argv[1]).to_pandas().set_index("row")
oka = pq.read_table(sys.argv[2]).to_pandas()
views = ["profile", "activity", "limits", "merchant_risk", "merchant_stats"]
columns = [c for c in feast.columns if "__" in c]
kept = oka.loc[feast.index]
differ = {}
for c in columns:
    a, b = feast[c], kept[c]
    same = (a == b) | (a.isna() & b.isna())
    if not same.all():
        differ[c] = int((~same).sum())
dropped = oka.drop(index=feast.index)
unexplained = int((~(dropped[[f"{v}__status" for v in views]] == "missing").any(axis=1)).sum())
print(f"feast returned {len(feast)} of {len(oka)} rows; on those, {len(columns)} columns compared: "
      + ("all equal" if not differ else f"DIFFER {differ}"))
print(f"the {len(dropped)} rows Feast left out each have a view with no record at or before their time"
      + ("" if unexplained == 0 else f", except {unexplained}"))
sys.exit(1 if differ or unexplained else 0)
PY
