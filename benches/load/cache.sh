#!/usr/bin/env bash
# The read cache and cross-worker coalescing against the bare-axum ceiling, on Redis,
# in the same run (issue 18):
#
#   bash benches/load/cache.sh
#
# Each round runs, closed loop, 1 key of the seed's simple_feature per request, keys
# drawn from the demo's 10,000, for $DURATION s (default 5) at each of $CONNS_LIST
# (default "8 32") connections:
#   ceiling     oka-ceiling (bare axum answering a fixed body)
#   plain       oka serve --store redis://…                  (the default: no cache)
#   tracking    … --cache tracking                           (after one warm-up run)
#   across      … --store-coalesce-across-workers true
# Rounds alternate the variants ($ROUNDS, default 3); the table gives medians and each
# variant's ratio to the ceiling of its own round. The script holds
# /tmp/oka-bench.lock (flock) so other benchmarks on the machine do not overlap.
# Writes benches/load/out/cache/{runs.jsonl,results.md}. Binds 127.0.0.1 only.
set -euo pipefail
command -v jq >/dev/null || { echo "cache.sh needs jq (apt-get install -y jq)" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "cache.sh needs redis-server" >&2; exit 2; }
cd "$(dirname "$0")/../.."
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
CONNS_LIST=${CONNS_LIST:-8 32}
WORKERS=${WORKERS:-2}
OUT=benches/load/out/cache
BIN=target/release
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"
[[ "${SKIP_BUILD:-0}" == 1 ]] || cargo build --release -q -p oka-cli -p oka-load
# shellcheck source=benches/load/lib.sh
source benches/load/lib.sh
bench_lock
start_redis ""
bench_spec "$OUT/spec.yaml"

run() { # LABEL ROUND CONNS PID ADDR [extra oka-load args]
    local label=$1 round=$2 conns=$3 pid=$4 addr=$5
    shift 5
    "$BIN/oka-load" --addr "$addr" --duration "$DURATION" --connections "$conns" \
        --server-pid "$pid" --label "$label" "$@" |
        jq -c --arg v "$label" --argjson r "$round" --argjson c "$conns" '. + {variant: $v, round: $r, conns: $c}' \
            >>"$OUT/runs.jsonl"
}

serve() { # VARIANT → starts oka serve with the variant's flags; sets OKA_PID, ADDR, ADMIN
    local extra=()
    case $1 in
        tracking) extra=(--cache tracking) ;;
        across) extra=(--store-coalesce-across-workers true) ;;
    esac
    local port admin
    port=$(free_port)
    admin=$(free_port)
    "$BIN/oka" serve --spec "$OUT/spec.yaml" --workers "$WORKERS" --store "redis://127.0.0.1:$REDIS_PORT" \
        --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" "${extra[@]}" 2>>"$OUT/oka-$1.log" &
    OKA_PID=$!
    PIDS+=("$OKA_PID")
    ADDR=127.0.0.1:$port
    ADMIN=127.0.0.1:$admin
    wait_ready "http://$ADMIN/readyz"
}

round() {
    local r=$1
    local cport
    cport=$(free_port)
    "$BIN/oka-ceiling" --listen "127.0.0.1:$cport" --workers "$WORKERS" 2>/dev/null &
    local cpid=$!
    PIDS+=("$cpid")
    sleep 0.5
    for c in $CONNS_LIST; do run ceiling "$r" "$c" "$cpid" "127.0.0.1:$cport" --ceiling; done
    kill "$cpid"; wait "$cpid" 2>/dev/null || true
    for v in plain tracking across; do
        serve "$v"
        if [[ $v == tracking ]]; then # warm the cache: every key read once
            "$BIN/oka-load" --addr "$ADDR" --duration 3 --connections 8 >/dev/null
        fi
        for c in $CONNS_LIST; do run "$v" "$r" "$c" "$OKA_PID" "$ADDR"; done
        curl -s "http://$ADMIN/metrics" | grep -E '^oka_(cache_(hits|misses)_total|storage_coalesced_reads_total)' |
            sed "s/^/  round $r $v: /" >&2 || true
        kill "$OKA_PID"; wait "$OKA_PID" 2>/dev/null || true
    done
}

for r in $(seq 1 "$ROUNDS"); do
    echo "== round $r of $ROUNDS" >&2
    round "$r"
done

# Medians per (variant, conns), and each run's ratio to its round's ceiling.
jq -s -r '
  def median: sort | if length == 0 then null else .[(length / 2 | floor)] end;
  . as $runs
  | [ $runs[] | . as $x
      | ($runs[] | select(.variant == "ceiling" and .round == $x.round and .conns == $x.conns) | .rps) as $c
      | $x + {ratio: ($x.rps / $c)} ]
  | group_by([.variant, .conns])
  | ["| variant | conns | RPS (median) | ratio to the ceiling (median) | p50 ms | p99 ms | server CPU µs/req |",
     "|---|---:|---:|---:|---:|---:|---:|"] +
    map("| \(.[0].variant) | \(.[0].conns) | \([.[].rps] | median | floor) | \([.[].ratio] | median | . * 100 | round / 100) | \([.[].latency_ms.p50] | median) | \([.[].latency_ms.p99] | median) | \([.[].server_cpu_s_per_request] | median | . * 1e6 | round) |")
  | .[]' "$OUT/runs.jsonl" | tee "$OUT/results.md"
