#!/usr/bin/env bash
# Reload flood: what a flood of `POST /admin/reload` does to serving latency.
#
#   bash benches/load/reload_flood.sh
#
# Starts `oka serve --workers $WORKERS` (release build) on the demo spec (`oka demo-spec`,
# its mock source's period raised to $SOURCE_PERIOD_S as in run.sh, so no write burst
# lands in either measured run), memory store, explicit --listen/--admin-listen ports,
# waits for /readyz and one 200 from POST /v1/features, then with oka-load:
#   1. closed       closed loop for $CLOSED_DURATION s (default 5): the maximum RPS
#   2. baseline     open loop at $FRACTION (default 0.5) of (1)'s RPS for $DURATION s
#                   (default 10); RATE=<req/s> fixes the rate instead (to compare two
#                   binaries at the same offered load)
#   3. flood        the same open-loop run while $FLOOD_CONNS (default 16) keep-alive
#                   connections POST /admin/reload back to back (a Python flooder, one
#                   thread per connection; it starts 1 s before the run and stops 1 s
#                   after it), answers counted by status
# Prints, and writes to $OUT/reload_flood.json and $OUT/reload_flood.md (one Markdown
# table row), the baseline and flood p50/p99, the flood/baseline p99 ratio, and the
# reload answers by status (200, 429, others, transport errors). The server has no API
# keys, so the reloads need none. On a small machine the flooder and the admin port's
# answers take CPU from serving whatever the reloads cost: FLOOD_METHOD=GET
# FLOOD_PATH=/healthz floods a route that does no work, as the control.
# Everything binds 127.0.0.1 only; the server and the flooder are stopped by PID on exit.
# Env overrides: OKA_BIN (the `oka` binary, default target/release/oka; e.g. one built
# from an older commit for an A/B run), DURATION, CLOSED_DURATION, FRACTION, CONNS (load
# connections, 16), RATE, WORKERS (2), FLOOD_CONNS, SOURCE_PERIOD_S (3600), OKA_PORT (18123),
# ADMIN_PORT (19123), OUT (default benches/load/out/reload_flood), FLOOD_METHOD (POST),
# FLOOD_PATH (/admin/reload), SKIP_BUILD=1,
# OKA_ARGS (extra `oka serve` flags, e.g. OKA_ARGS="--reload-min-interval-ms 0").
set -euo pipefail
command -v jq >/dev/null || { echo "reload_flood.sh needs jq (apt-get install -y jq)" >&2; exit 2; }

cd "$(dirname "$0")/../.."
DURATION=${DURATION:-10}
CLOSED_DURATION=${CLOSED_DURATION:-5}
FRACTION=${FRACTION:-0.5}
CONNS=${CONNS:-16}
WORKERS=${WORKERS:-2}
FLOOD_CONNS=${FLOOD_CONNS:-16}
FLOOD_METHOD=${FLOOD_METHOD:-POST}
FLOOD_PATH=${FLOOD_PATH:-/admin/reload}
OKA_PORT=${OKA_PORT:-18123}
ADMIN_PORT=${ADMIN_PORT:-19123}
OUT=${OUT:-benches/load/out/reload_flood}
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

# The flooder: FLOOD_CONNS threads, each sending FLOOD_METHOD FLOOD_PATH over its own
# keep-alive connection (reconnecting when the server closes it) until the deadline;
# prints the answers by status as JSON.
FLOODER='
import collections, http.client, json, sys, threading, time
host, port, conns, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
method, path = sys.argv[5], sys.argv[6]
total, lock = collections.Counter(), threading.Lock()
start = time.monotonic()
end = start + seconds
def flood():
    seen, conn = collections.Counter(), None
    while time.monotonic() < end:
        try:
            if conn is None:
                conn = http.client.HTTPConnection(host, port, timeout=30)
            conn.request(method, path)
            answer = conn.getresponse()
            answer.read()
            seen[str(answer.status)] += 1
            if answer.will_close:
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException) as error:
            seen["transport_error"] += 1
            if conn is not None:
                conn.close()
            conn = None
    with lock:
        total.update(seen)
threads = [threading.Thread(target=flood) for _ in range(conns)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"method": method, "path": path, "connections": conns,
                  "duration_s": round(time.monotonic() - start, 3),
                  "requests": sum(total.values()), "by_status": dict(total)}))
'

# The demo spec with the mock source writing its 10,000 keys once at start (as in run.sh).
"$OKA_BIN" demo-spec >"$OUT/spec.yaml"
sed -i "s/period_s: 5\$/period_s: ${SOURCE_PERIOD_S:-3600}/" "$OUT/spec.yaml"
grep -q "period_s: ${SOURCE_PERIOD_S:-3600}\$" "$OUT/spec.yaml" ||
    { echo "could not set the demo source's period" >&2; exit 1; }

"$OKA_BIN" serve --spec "$OUT/spec.yaml" --workers "$WORKERS" --store memory:// \
    --listen "127.0.0.1:$OKA_PORT" --admin-listen "127.0.0.1:$ADMIN_PORT" --log-format text \
    ${OKA_ARGS:-} 2>"$OUT/oka.log" &
OKA_PID=$!
PIDS+=("$OKA_PID")
wait_for "http://127.0.0.1:$ADMIN_PORT/readyz"
wait_for "http://127.0.0.1:$OKA_PORT/v1/features" POST
ADDR="127.0.0.1:$OKA_PORT"
load() { "$BIN/oka-load" --addr "$ADDR" --connections "$CONNS" --server-pid "$OKA_PID" "$@"; }

echo "== closed loop, $CLOSED_DURATION s" >&2
load --duration "$CLOSED_DURATION" --label "closed" >"$OUT/closed.json"
RATE=${RATE:-$(jq --argjson f "$FRACTION" '.rps * $f | floor' "$OUT/closed.json")}

echo "== baseline: open loop at $RATE req/s, $DURATION s" >&2
load --duration "$DURATION" --rate "$RATE" --label "baseline" >"$OUT/baseline.json"

echo "== flood: open loop at $RATE req/s, $DURATION s, $FLOOD_CONNS connections of $FLOOD_METHOD $FLOOD_PATH" >&2
python3 -c "$FLOODER" 127.0.0.1 "$ADMIN_PORT" "$FLOOD_CONNS" "$((DURATION + 2))" "$FLOOD_METHOD" "$FLOOD_PATH" \
    >"$OUT/flooder.json" &
FLOOD_PID=$!
PIDS+=("$FLOOD_PID")
sleep 1
load --duration "$DURATION" --rate "$RATE" --label "flood" >"$OUT/flood.json"
wait "$FLOOD_PID"
# The server's own count of reloads by result, where it has the metric.
curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | grep '^oka_admin_reloads_total' >"$OUT/reload_metrics.txt" || true

jq -n --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg host "$(uname -n)" \
    --argjson cpus "$(nproc)" --argjson workers "$WORKERS" --arg bin "$OKA_BIN" \
    --argjson fraction "$FRACTION" --argjson rate "$RATE" \
    --slurpfile closed "$OUT/closed.json" --slurpfile base "$OUT/baseline.json" \
    --slurpfile flood "$OUT/flood.json" --slurpfile flooder "$OUT/flooder.json" \
    --rawfile metrics "$OUT/reload_metrics.txt" '
    def ms: . * 1000 | round / 1000;
    {date: $date, host: $host, cpus: $cpus, oka_workers: $workers, oka_bin: $bin,
     closed_rps: $closed[0].rps, fraction: $fraction, offered_rps: $rate,
     baseline: {p50_ms: $base[0].latency_ms.p50, p99_ms: $base[0].latency_ms.p99,
                rps: $base[0].rps, errors: $base[0].errors},
     flood: {p50_ms: $flood[0].latency_ms.p50, p99_ms: $flood[0].latency_ms.p99,
             rps: $flood[0].rps, errors: $flood[0].errors},
     p99_ratio: (if $base[0].latency_ms.p99 > 0
                 then ($flood[0].latency_ms.p99 / $base[0].latency_ms.p99 | ms) else null end),
     reloads: ($flooder[0] + {ok_200: ($flooder[0].by_status["200"] // 0),
                              too_many_429: ($flooder[0].by_status["429"] // 0)}),
     server_reload_metrics: ($metrics | split("\n") | map(select(length > 0))),
     runs: {closed: $closed[0], baseline: $base[0], flood: $flood[0]}}' >"$OUT/reload_flood.json"

jq -r '
  "| oka | flood | closed RPS | offered RPS | baseline p50 ms | baseline p99 ms | flood p50 ms | flood p99 ms | p99 flood/baseline | flood answers 200 | 429 | other | load errors (baseline/flood) |",
  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
  "| \(.oka_bin) | \(.reloads.method) \(.reloads.path) × \(.reloads.connections) | \(.closed_rps) | \(.offered_rps) | \(.baseline.p50_ms) | \(.baseline.p99_ms) | \(.flood.p50_ms) | \(.flood.p99_ms) | \(.p99_ratio) | \(.reloads.ok_200) | \(.reloads.too_many_429) | \(.reloads.requests - .reloads.ok_200 - .reloads.too_many_429) | \(.baseline.errors)/\(.flood.errors) |"
' "$OUT/reload_flood.json" >"$OUT/reload_flood.md"
cat "$OUT/reload_flood.md"
