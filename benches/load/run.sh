#!/usr/bin/env bash
# End-to-end load harness for Oka: the memory store, and Redis when redis-server is
# installed (STORES="memory redis" by default then).
#
#   bash benches/load/run.sh
#
# Builds release binaries, then runs, each for $DURATION seconds (default 5):
#   1. ceiling          oka-ceiling (bare axum + serde_json), closed loop, 1 key
# and for each store:
#   2. seed closed      oka serve --demo, closed loop, 1 key (simple_feature × multiplier)
#   3. seed open 50%    open loop at 50% of (2)'s RPS, latency from the scheduled send time
#   4. batch100 closed  closed loop, 100 keys per request
# Writes benches/load/out/results.json and benches/load/out/results.md.
# Everything binds 127.0.0.1 only. Env overrides: DURATION, CONNS, WORKERS, OKA_PORT,
# ADMIN_PORT, CEILING_PORT, REDIS_PORT, STORES, SKIP_BUILD=1, OKA_ARGS (extra `oka serve`
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
kill "$CEILING_PID"
wait "$CEILING_PID" 2>/dev/null || true

# 2–4 per store. Oka with the demo spec: its mock source writes test-id-0 … test-id-9999
# into the store before the server listens. Redis runs when redis-server is installed.
if [[ -z "${STORES:-}" ]]; then
    STORES=memory
    command -v redis-server >/dev/null && STORES="memory redis"
fi
FILES=("$OUT/ceiling_closed.json")
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
    "$BIN/oka" serve --demo --workers "$WORKERS" --store "$url" --listen "127.0.0.1:$OKA_PORT" \
        --admin-listen "127.0.0.1:$ADMIN_PORT" --log-format text ${OKA_ARGS:-} 2>"$OUT/oka-$store.log" &
    OKA_PID=$!
    PIDS+=("$OKA_PID")
    wait_for "http://127.0.0.1:$ADMIN_PORT/readyz"
    wait_for "http://127.0.0.1:$OKA_PORT/v1/features" POST
    ADDR="127.0.0.1:$OKA_PORT"

    echo "== oka $store seed, closed loop" >&2
    load --addr "$ADDR" --server-pid "$OKA_PID" --label "oka $store seed closed" \
        >"$OUT/${store}_seed_closed.json"
    HALF=$(jq '.rps / 2 | floor' "$OUT/${store}_seed_closed.json")

    echo "== oka $store seed, open loop at $HALF req/s" >&2
    load --addr "$ADDR" --server-pid "$OKA_PID" --rate "$HALF" \
        --label "oka $store seed open 50%" >"$OUT/${store}_seed_open50.json"

    echo "== oka $store batch of 100, closed loop" >&2
    load --addr "$ADDR" --server-pid "$OKA_PID" --batch 100 \
        --label "oka $store batch100 closed" >"$OUT/${store}_batch100_closed.json"
    FILES+=("$OUT/${store}_seed_closed.json" "$OUT/${store}_seed_open50.json" "$OUT/${store}_batch100_closed.json")

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
  (.runs[] | "| \(.label) | \(.mode)\(if .offered_rps then " @ \(.offered_rps) req/s" else "" end) | \(.batch) | \(.rps) | \(.feature_values_per_s) | \(.latency_ms.p50) | \(.latency_ms.p90) | \(.latency_ms.p99) | \(.latency_ms.p99_9) | \(.errors) | \(.server_cpu_s_per_request | us) | \(.server_cores_used | if . == null then "–" else (. * 100 | round / 100 | tostring) end) | \(if .target == "ceiling" then "1.0" else (.ratio_to_ceiling | n) end) |")
' "$OUT/results.json" >"$OUT/results.md"

cat "$OUT/results.md"
