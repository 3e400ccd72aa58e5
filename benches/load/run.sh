#!/usr/bin/env bash
# End-to-end load harness for Oka: the memory store, and Redis when redis-server is
# installed (STORES="memory redis" by default then).
#
#   bash benches/load/run.sh
#
# Builds release binaries, then runs, each for $DURATION seconds (default 5):
#   1. ceiling          oka-ceiling (bare axum + serde_json), closed loop, 1 key
# and for each store:
#   2. seed closed      oka serve with the demo spec (its mock source writes test-id-0 …
#                       test-id-9999 at start, then every $SOURCE_PERIOD_S s, default 3600),
#                       closed loop, 1 key (simple_feature × multiplier)
#   3. seed open        open loop at each fraction in $SWEEP (default 0.1 0.25 0.5 0.75 0.9)
#                       of (2)'s RPS, latency from the scheduled send time; the 0.5 run is
#                       "seed open 50%", the target run
#   4. batch100 closed  closed loop, 100 keys per request
#   5. chained closed   closed loop, 1 key of chained_feature (two UDFs in a chain)
# Then plots latency percentiles against offered load (benches/load/plot.py, matplotlib;
# a venv under benches/load/.venv is made if python3 lacks it) into out/latency_vs_load.png.
# Writes benches/load/out/results.json and benches/load/out/results.md.
# Everything binds 127.0.0.1 only. Env overrides: DURATION, CONNS, WORKERS, OKA_PORT,
# ADMIN_PORT, CEILING_PORT, REDIS_PORT, STORES, SWEEP, SOURCE_PERIOD_S, SKIP_BUILD=1, SKIP_PLOT=1, OKA_BIN (the `oka` binary to
# measure, e.g. one built from an older commit for an A/B run), OKA_ARGS (extra `oka serve`
# flags, e.g. OKA_ARGS="--store-worker-connections false").
set -euo pipefail
command -v jq >/dev/null || { echo "run.sh needs jq (apt-get install -y jq)" >&2; exit 2; }

cd "$(dirname "$0")/../.."
DURATION=${DURATION:-5}
CONNS=${CONNS:-16}
WORKERS=${WORKERS:-2}
OKA_PORT=${OKA_PORT:-18122}
ADMIN_PORT=${ADMIN_PORT:-19122}
CEILING_PORT=${CEILING_PORT:-18199}
OUT=benches/load/out
BIN=target/release
OKA_BIN=${OKA_BIN:-$BIN/oka}
mkdir -p "$OUT"

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    cargo build --release -q -p oka-cli -p oka-load
fi

PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT

SEED_BODY='{"target_features":["simple_feature"],"keys":[{"id":"test-id-1"}],"udf_args":{"simple_feature":{"multiplier":2.0}}}'

# wait_for URL [METHOD]: up to 30 s for a 200.
wait_for() {
    local url=$1 method=${2:-GET}
    for _ in $(seq 300); do
        local code
        if [[ $method == POST ]]; then
            code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: application/json' \
                --data "$SEED_BODY" "$url" || true)
        else
            code=$(curl -s -o /dev/null -w '%{http_code}' "$url" || true)
        fi
        [[ $code == 200 ]] && return 0
        sleep 0.1
    done
    echo "timed out waiting for $url" >&2
    return 1
}

load() { "$BIN/oka-load" --duration "$DURATION" --connections "$CONNS" "$@"; }

# 1. Ceiling.
"$BIN/oka-ceiling" --listen "127.0.0.1:$CEILING_PORT" --workers "$WORKERS" 2>"$OUT/ceiling.log" &
CEILING_PID=$!
PIDS+=("$CEILING_PID")
wait_for "http://127.0.0.1:$CEILING_PORT/v1/features" POST
echo "== ceiling, closed loop" >&2
load --addr "127.0.0.1:$CEILING_PORT" --ceiling --server-pid "$CEILING_PID" \
    --label "ceiling closed" >"$OUT/ceiling_closed.json"
# The ceiling's own latency under open-loop load: what this machine's scheduling, HTTP
# stack and load generator add at all (the baseline of Oka's latency targets).
CEILING_FILES=()
for frac in ${SWEEP:-0.1 0.25 0.5 0.75 0.9}; do
    RATE=$(jq --argjson f "$frac" '.rps * $f | floor' "$OUT/ceiling_closed.json")
    PCT=$(jq -n --argjson f "$frac" '$f * 100 | round')
    echo "== ceiling, open loop at $RATE req/s ($PCT% of closed)" >&2
    load --addr "127.0.0.1:$CEILING_PORT" --ceiling --server-pid "$CEILING_PID" --rate "$RATE" \
        --label "ceiling open $PCT%" >"$OUT/ceiling_open$PCT.json"
    CEILING_FILES+=("$OUT/ceiling_open$PCT.json")
done
kill "$CEILING_PID"
wait "$CEILING_PID" 2>/dev/null || true

# 2–4 per store. Oka with the demo spec: its mock source writes test-id-0 … test-id-9999
# into the store before the server listens. Redis runs when redis-server is installed.
if [[ -z "${STORES:-}" ]]; then
    STORES=memory
    command -v redis-server >/dev/null && STORES="memory redis"
fi
FILES=("$OUT/ceiling_closed.json" "${CEILING_FILES[@]}")
# The demo spec, its mock source writing the 10,000 keys once at start and then only
# every $SOURCE_PERIOD_S seconds (default 3600: no ingest during the runs; the demo's own
# 5 reproduces serving under a 10,000-row write burst every 5 s).
"$OKA_BIN" demo-spec | sed "s/period_s: 5\$/period_s: ${SOURCE_PERIOD_S:-3600}/" >"$OUT/bench-spec.yaml"
grep -q "period_s: ${SOURCE_PERIOD_S:-3600}\$" "$OUT/bench-spec.yaml" ||
    { echo "could not set the demo source's period" >&2; exit 1; }
for store in $STORES; do
    url=memory://
    if [[ $store == redis ]]; then
        REDIS_PORT=${REDIS_PORT:-18379}
        redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
            >"$OUT/redis.log" 2>&1 &
        REDIS_PID=$!
        PIDS+=("$REDIS_PID")
        for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
        url="redis://127.0.0.1:$REDIS_PORT"
    fi
    "$OKA_BIN" serve --spec "$OUT/bench-spec.yaml" --workers "$WORKERS" --store "$url" --listen "127.0.0.1:$OKA_PORT" \
        --admin-listen "127.0.0.1:$ADMIN_PORT" --log-format text ${OKA_ARGS:-} 2>"$OUT/oka-$store.log" &
    OKA_PID=$!
    PIDS+=("$OKA_PID")
    wait_for "http://127.0.0.1:$ADMIN_PORT/readyz"
    wait_for "http://127.0.0.1:$OKA_PORT/v1/features" POST
    ADDR="127.0.0.1:$OKA_PORT"

    echo "== oka $store seed, closed loop" >&2
    load --addr "$ADDR" --server-pid "$OKA_PID" --label "oka $store seed closed" \
        >"$OUT/${store}_seed_closed.json"
    FILES+=("$OUT/${store}_seed_closed.json")
    for frac in ${SWEEP:-0.1 0.25 0.5 0.75 0.9}; do
        RATE=$(jq --argjson f "$frac" '.rps * $f | floor' "$OUT/${store}_seed_closed.json")
        PCT=$(jq -n --argjson f "$frac" '$f * 100 | round')
        echo "== oka $store seed, open loop at $RATE req/s ($PCT% of closed)" >&2
        load --addr "$ADDR" --server-pid "$OKA_PID" --rate "$RATE" \
            --label "oka $store seed open $PCT%" >"$OUT/${store}_seed_open$PCT.json"
        FILES+=("$OUT/${store}_seed_open$PCT.json")
    done

    echo "== oka $store batch of 100, closed loop" >&2
    load --addr "$ADDR" --server-pid "$OKA_PID" --batch 100 \
        --label "oka $store batch100 closed" >"$OUT/${store}_batch100_closed.json"

    echo "== oka $store chained feature, closed loop" >&2
    load --addr "$ADDR" --server-pid "$OKA_PID" --feature chained_feature \
        --label "oka $store chained closed" >"$OUT/${store}_chained_closed.json"
    FILES+=("$OUT/${store}_batch100_closed.json" "$OUT/${store}_chained_closed.json")

    kill "$OKA_PID"
    wait "$OKA_PID" 2>/dev/null || true
    if [[ $store == redis ]]; then
        kill "$REDIS_PID"
        wait "$REDIS_PID" 2>/dev/null || true
    fi
done

# Results.
jq -s --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg host "$(uname -n)" \
    --argjson cpus "$(nproc)" --argjson workers "$WORKERS" --arg stores "$STORES" '
    (.[0].rps) as $ceil
    | {date: $date, host: $host, cpus: $cpus, oka_workers: $workers, stores: $stores,
       ceiling_rps: $ceil,
       runs: [.[] | . + {ratio_to_ceiling:
           (if .mode == "closed" and .batch == 1 then ((.rps / $ceil * 1000 | round) / 1000) else null end)}]}' \
    "${FILES[@]}" >"$OUT/results.json"

jq -r '
  def n: if . == null then "–" else tostring end;
  def us: if . == null then "–" else (. * 1e6 | . * 10 | round / 10 | tostring) end;
  "Stores: \(.stores); Oka workers: \(.oka_workers); CPUs: \(.cpus); \(.date)\n",
  "| run | mode | keys/req | RPS | feature values/s | p50 ms | p90 ms | p99 ms | p99.9 ms | errors | server CPU µs/req | server cores | Oka/ceiling |",
  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  (.runs[] | "| \(.label) | \(.mode)\(if .offered_rps then " @ \(.offered_rps) req/s" else "" end) | \(.batch) | \(.rps) | \(.feature_values_per_s) | \(.latency_ms.p50) | \(.latency_ms.p90) | \(.latency_ms.p99) | \(.latency_ms.p99_9) | \(.errors) | \(.server_cpu_s_per_request | us) | \(.server_cores_used | if . == null then "–" else (. * 100 | round / 100 | tostring) end) | \(if .target == "ceiling" and .mode == "closed" then "1.0" else (.ratio_to_ceiling | n) end) |")
' "$OUT/results.json" >"$OUT/results.md"

cat "$OUT/results.md"

if [[ "${SKIP_PLOT:-0}" != 1 ]]; then
    PY=python3
    if ! python3 -c 'import matplotlib' 2>/dev/null; then
        if [[ ! -x benches/load/.venv/bin/python ]]; then
            python3 -m venv benches/load/.venv
            benches/load/.venv/bin/pip install -q matplotlib==3.11.2
        fi
        PY=benches/load/.venv/bin/python
    fi
    "$PY" benches/load/plot.py "$OUT/results.json" "$OUT/latency_vs_load.png"
fi
