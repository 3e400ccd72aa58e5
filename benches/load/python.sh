#!/usr/bin/env bash
# Python UDFs against CEL and against reading the pipeline feature directly (issues 42
# and 46), measured with `wrk`:
#
#   bash benches/load/python.sh
#
# Two `oka serve`s (memory store, the demo's 10,000 keys, --workers $WORKERS, default 2,
# --python-workers $PY_WORKERS, default 2), one with Python UDFs compiled (the default)
# and one with --python-compile=off, serve four variants of the same record:
#   direct    test_feature     the pipeline record as stored
#   cel       simple_feature   `test_feature.value * multiplier` in CEL
#   compiled  simple_py        the same in Python (benches/load/python/udfs.py), compiled
#   python    simple_py        the same, run in the Python workers (the second server)
# Each round runs, closed loop, $DURATION s (default 5) per variant, for each of
# $CONNS_LIST (default "8 32") connections and $BATCHES (default "1 100") keys per
# request; rounds alternate ($ROUNDS, default 3). For each run: requests/s, p50/p99, the
# server's CPU per request and its Python workers' (utime + stime from /proc), wrk's own
# CPU per request, and the keys per Python batch (from /metrics). The table gives
# medians, and the ratios the issues set targets for (python/direct at 1 key, python/cel
# at 100 keys, compiled/cel).
#
# Holds /tmp/oka-bench.lock; binds 127.0.0.1 only; stops what it starts by PID.
# Writes benches/load/out/python/{runs.jsonl,results.md}.
set -euo pipefail
for tool in wrk jq python3 curl; do
    command -v "$tool" >/dev/null || { echo "python.sh needs $tool (apt-get install -y wrk jq python3 curl)" >&2; exit 2; }
done
[[ -x /usr/bin/time ]] || { echo "python.sh needs /usr/bin/time (apt-get install -y time)" >&2; exit 2; }
cd "$(dirname "$0")/../.."
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
CONNS_LIST=${CONNS_LIST:-8 32}
BATCHES=${BATCHES:-1 100}
WORKERS=${WORKERS:-2}
PY_WORKERS=${PY_WORKERS:-2}
WRK_THREADS=${WRK_THREADS:-2}
VARIANTS=${VARIANTS:-direct cel compiled python}
OUT=${OUT:-benches/load/out/python}
BIN=target/release
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"
[[ "${SKIP_BUILD:-0}" == 1 ]] || cargo build --release -q -p oka-cli
# shellcheck source=benches/load/lib.sh
source benches/load/lib.sh
bench_lock
TICK_S=$(awk "BEGIN{print 1/$(getconf CLK_TCK)}")

# The demo spec, its source writing once, and the seed's feature in Python beside it.
bench_spec "$OUT/spec.yaml"
cp benches/load/python/udfs.py "$OUT/udfs.py"
cat >>"$OUT/spec.yaml" <<'EOF'
  simple_py:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    args: {multiplier: {type: float, default: 1.0}}
    udf: {python: {file: udfs.py, function: simple_feature}}
EOF

start() { # ON|OFF → sets PORT_x, ADMIN_x, PID_x
    local which=$1 port admin
    port=$(free_port)
    admin=$(free_port)
    "$BIN/oka" serve --spec "$OUT/spec.yaml" --workers "$WORKERS" --python-workers "$PY_WORKERS" \
        --python-compile "${which,,}" \
        --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" >"$OUT/oka-${which,,}.log" 2>&1 &
    PIDS+=("$!")
    printf -v "PID_$which" '%s' "$!"
    printf -v "PORT_$which" '%s' "$port"
    printf -v "ADMIN_$which" '%s' "$admin"
    wait_ready "http://127.0.0.1:$admin/readyz"
}
start ON
start OFF
grep -q "simple_py.*runs compiled" "$OUT/oka-on.log" ||
    { echo "simple_py was not compiled: see $OUT/oka-on.log" >&2; exit 1; }

cpu_s() { # PID… → their utime + stime, seconds
    local total=0 p
    for p in "$@"; do
        total=$(awk -v t="$TICK_S" -v acc="$total" '{sub(/.*\) /, ""); print acc + ($12 + $13) * t}' "/proc/$p/stat")
    done
    echo "$total"
}
py_pids() { pgrep -P "$OKA_PID" | tr '\n' ' '; }
batches() { # → "sum count" of oka_python_batch_keys
    curl -s "http://127.0.0.1:$ADMIN/metrics" |
        awk '/^oka_python_batch_keys_sum/{s=$2} /^oka_python_batch_keys_count/{c=$2} END{print s+0, c+0}'
}

run() { # VARIANT ROUND CONNS BATCH
    local v=$1 r=$2 c=$3 b=$4 feature args
    case $v in
        direct) feature=test_feature args='{}' ;;
        cel) feature=simple_feature args='{"simple_feature":{"multiplier":2.0}}' ;;
        compiled | python) feature=simple_py args='{"simple_py":{"multiplier":2.0}}' ;;
    esac
    if [[ $v == python ]]; then
        OKA_PID=$PID_OFF PORT=$PORT_OFF ADMIN=$ADMIN_OFF
    else
        OKA_PID=$PID_ON PORT=$PORT_ON ADMIN=$ADMIN_ON
    fi
    local py; py=$(py_pids)
    # shellcheck disable=SC2086
    local srv0 py0 b0 out srv1 py1 b1
    srv0=$(cpu_s "$OKA_PID"); py0=$(cpu_s $py); b0=$(batches)
    out=$(OKA_BATCH=$b OKA_FEATURE=$feature OKA_UDF_ARGS=$args /usr/bin/time -f 'wrk-cpu %U %S' \
        wrk -t "$WRK_THREADS" -c "$c" -d "${DURATION}s" -s benches/load/wrk/features.lua "http://127.0.0.1:$PORT" 2>&1)
    # shellcheck disable=SC2086
    srv1=$(cpu_s "$OKA_PID"); py1=$(cpu_s $py); b1=$(batches)
    local json gen
    json=$(sed -n 's/^wrk-json //p' <<<"$out")
    gen=$(awk '/^wrk-cpu/{print $2 + $3}' <<<"$out")
    [[ -n $json ]] || { echo "wrk printed no result for $v c$c b$b: $out" >&2; return 1; }
    jq -c --arg v "$v" --argjson r "$r" --argjson c "$c" --argjson b "$b" \
        --argjson srv "$(awk "BEGIN{print $srv1 - $srv0}")" --argjson py "$(awk "BEGIN{print $py1 - $py0}")" \
        --argjson gen "$gen" --argjson bk "$(awk -v a="$b0" -v z="$b1" 'BEGIN{split(a,x," "); split(z,y," "); print y[1]-x[1]}')" \
        --argjson bn "$(awk -v a="$b0" -v z="$b1" 'BEGIN{split(a,x," "); split(z,y," "); print y[2]-x[2]}')" '
        (.requests / (.duration_us / 1e6)) as $rps
        | {variant: $v, round: $r, conns: $c, batch: $b, rps: $rps,
           errors: (.errors | add), p50_ms: (.latency_us.p50 / 1e3), p99_ms: (.latency_us.p99 / 1e3),
           server_cpu_us: ($srv / .requests * 1e6), python_cpu_us: ($py / .requests * 1e6),
           wrk_cpu_us: ($gen / .requests * 1e6),
           keys_per_batch: (if $bn > 0 then $bk / $bn else null end)}' \
        <<<"$json" | tee -a "$OUT/runs.jsonl" >&2
}

for b in $BATCHES; do
    for r in $(seq "$ROUNDS"); do
        for c in $CONNS_LIST; do
            for v in $VARIANTS; do
                run "$v" "$r" "$c" "$b"
            done
        done
    done
done

{
    echo "# Python UDFs, compiled and in the workers, against CEL and the direct read ($(date -u +%F), $(nproc) cores, --workers $WORKERS --python-workers $PY_WORKERS, ${DURATION}s × $ROUNDS rounds, medians)"
    echo
    echo "| keys | conns | variant | req/s | p50 ms | p99 ms | server CPU µs/req | Python CPU µs/req | wrk CPU µs/req | keys per Python batch | errors |"
    echo "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    jq -s -r '
        def median: sort | if length == 0 then null else .[(length / 2 | floor)] end;
        group_by([.batch, .conns, .variant]) | map({
            batch: .[0].batch, conns: .[0].conns, variant: .[0].variant,
            rps: (map(.rps) | median), p50: (map(.p50_ms) | median), p99: (map(.p99_ms) | median),
            srv: (map(.server_cpu_us) | median), py: (map(.python_cpu_us) | median),
            gen: (map(.wrk_cpu_us) | median), kpb: (map(.keys_per_batch // 0) | median),
            errors: (map(.errors) | add)})
        | sort_by(.batch, .conns, (.variant | {"direct": 0, "cel": 1, "compiled": 2, "python": 3}[.]))
        | .[] | "| \(.batch) | \(.conns) | \(.variant) | \(.rps | floor) | \(.p50) | \(.p99) | \(.srv * 10 | round / 10) | \(.py * 10 | round / 10) | \(.gen * 10 | round / 10) | \(if .variant == "python" then (.kpb * 10 | round / 10) else "–" end) | \(.errors) |"' \
        "$OUT/runs.jsonl"
    echo
    echo "Ratios (medians of each round's ratio):"
    jq -s -r '
        def median: sort | if length == 0 then null else .[(length / 2 | floor)] end;
        [group_by([.round, .batch, .conns])[]
         | {batch: .[0].batch, conns: .[0].conns,
            direct: (map(select(.variant == "direct")) | .[0].rps),
            cel: (map(select(.variant == "cel")) | .[0].rps),
            compiled: (map(select(.variant == "compiled")) | .[0].rps),
            python: (map(select(.variant == "python")) | .[0].rps)}]
        | group_by([.batch, .conns]) | .[]
        | "- \(.[0].batch) key(s), \(.[0].conns) connections: python/direct \(map(.python / .direct) | median * 100 | round / 100), python/cel \(map(.python / .cel) | median * 100 | round / 100), compiled/cel \(map(.compiled / .cel) | median * 100 | round / 100)"' \
        "$OUT/runs.jsonl"
} >"$OUT/results.md"
cat "$OUT/results.md"
