#!/usr/bin/env bash
# Training-set throughput and peak memory (docs/benchmarks.md, "Training sets"):
#
#   bash benches/training/run.sh [ROWS] [RECORDS] [BUDGET_MIB...]
#
# Writes ROWS entity rows (default 1,000,000) and RECORDS history records
# (default 10,000,000; Parquet) with make_data.py into target/bench-training
# (kept and reused for the same sizes), then runs the release `oka
# training-set` over spec.yaml's 10 features once per budget (default: 4096,
# all held in memory, and 256, spilled), reporting wall time, rows/s, CPU
# seconds and peak RSS (/usr/bin/time). Bounded: each run at most 30 minutes.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ROWS=${1:-1000000}
RECORDS=${2:-10000000}
shift $(( $# < 2 ? $# : 2 ))
if (($#)); then BUDGETS=("$@"); else BUDGETS=(4096 256); fi
WORK=$ROOT/target/bench-training
mkdir -p "$WORK"
source "$ROOT/scripts/venv.sh"
venv_with "$WORK/venv" "$HERE/requirements.txt"

source "$HERE/data.sh"
bench_data "$WORK/venv/bin/python" "$ROWS" "$RECORDS"
BIN=$ROOT/target/release/oka

echo "entity rows: $ROWS, history records: $RECORDS, 10 features; $(nproc) cores"
printf '%-12s %10s %12s %10s %12s\n' budget_mib wall_s rows_per_s cpu_s peak_rss_mib
for budget in "${BUDGETS[@]}"; do
  out=$WORK/out-$budget.parquet
  args=(training-set --spec "$HERE/spec.yaml" --entities "$DATA/entities.parquet" --out "$out"
    --features profile,activity,limits,merchant_risk,merchant_stats,txn,spend_1d,last_10,scaled,risk
    --memory-budget-mib "$budget" --quiet)
  for f in profile activity limits txn merchant_risk merchant_stats; do
    args+=(--history "$f=$DATA/$f.parquet")
  done
  /usr/bin/time -f '%e %U %S %M' -o "$WORK/time-$budget" timeout 1800 "$BIN" "${args[@]}" 2>"$WORK/log-$budget" || {
    cat "$WORK/log-$budget"; echo "training bench: the run with budget $budget failed" >&2; exit 1; }
  read -r wall user sys rss <"$WORK/time-$budget"
  awk -v b="$budget" -v w="$wall" -v u="$user" -v s="$sys" -v r="$rss" -v n="$ROWS" \
    'BEGIN { printf "%-12s %10.1f %12.0f %10.1f %12.0f\n", b, w, n / w, u + s, r / 1024 }'
  grep -q "spilled" "$WORK/log-$budget" && grep "spilled" "$WORK/log-$budget" | sed 's/^ */    /'
done
# The runs must agree: the spilled output equals the in-memory one.
if ((${#BUDGETS[@]} > 1)); then
  "$WORK/venv/bin/python" - "$WORK" "${BUDGETS[@]}" <<'PY'
import sys
import pyarrow.parquet as pq
work, budgets = sys.argv[1], sys.argv[2:]
first = pq.read_table(f"{work}/out-{budgets[0]}.parquet")
for b in budgets[1:]:
    assert pq.read_table(f"{work}/out-{b}.parquet").equals(first), f"budget {b} differs from {budgets[0]}"
print(f"outputs equal across budgets {', '.join(budgets)}")
PY
fi
