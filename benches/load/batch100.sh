#!/usr/bin/env bash
# Feature values per second per core of a 100-key request (issue 18): the server on a
# core of its own (`taskset -c $SERVER_CPUS`, default the last CPU), the load generator
# and Redis on the others; closed loop, 16 connections, 100 keys of simple_feature per
# request, $ROUNDS (default 3) runs of $DURATION s (default 5) per store: memory://,
# Redis, Redis with --cache tracking (after a 2 s warm-up). Values per CPU-second =
# 100 / the server's CPU seconds per request (utime + stime from /proc).
#
#   bash benches/load/batch100.sh
#
# Holds /tmp/oka-bench.lock while measuring; binds 127.0.0.1 only; prints JSON lines
# and the medians.
set -euo pipefail
command -v jq >/dev/null || { echo "batch100.sh needs jq" >&2; exit 2; }
cd "$(dirname "$0")/../.."
N=$(nproc)
SERVER_CPUS=${SERVER_CPUS:-$((N - 1))}
CLIENT_CPUS=${CLIENT_CPUS:-0-$((N > 1 ? N - 2 : 0))}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
OUT=benches/load/out/batch100
BIN=target/release
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"
[[ "${SKIP_BUILD:-0}" == 1 ]] || cargo build --release -q -p oka-cli -p oka-load
# shellcheck source=benches/load/lib.sh
source benches/load/lib.sh
bench_lock
start_redis "$CLIENT_CPUS"
bench_spec "$OUT/spec.yaml"
for variant in "memory|memory://|" "redis|redis://127.0.0.1:$REDIS_PORT|" "redis-cache|redis://127.0.0.1:$REDIS_PORT|--cache tracking"; do
    IFS='|' read -r name url extra <<<"$variant"
    port=$(free_port)
    admin=$(free_port)
    # shellcheck disable=SC2086
    taskset -c "$SERVER_CPUS" "$BIN/oka" serve --spec "$OUT/spec.yaml" --store "$url" \
        --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" $extra 2>"$OUT/oka.log" &
    pid=$!
    PIDS+=("$pid")
    wait_ready "http://127.0.0.1:$admin/readyz"
    [[ -z $extra ]] || taskset -c "$CLIENT_CPUS" "$BIN/oka-load" --addr "127.0.0.1:$port" --batch 100 -d 2 -c 8 >/dev/null
    for _ in $(seq "$ROUNDS"); do
        taskset -c "$CLIENT_CPUS" "$BIN/oka-load" --addr "127.0.0.1:$port" --batch 100 -d "$DURATION" -c 16 \
            --server-pid "$pid" |
            jq -c --arg v "$name" '{variant: $v, rps, values_per_s: .feature_values_per_s,
                cpu_us_per_request: (.server_cpu_s_per_request * 1e6 | round),
                values_per_cpu_s: (100 / .server_cpu_s_per_request | round), p99_ms: .latency_ms.p99}' |
            tee -a "$OUT/runs.jsonl"
    done
    kill "$pid"
    wait "$pid" 2>/dev/null || true
done
jq -s -r 'def median: sort | .[(length / 2 | floor)];
  group_by(.variant) | .[] | "\(.[0].variant): median \([.[].values_per_cpu_s] | median) feature values per CPU-second, \([.[].values_per_s] | median) per second, p99 \([.[].p99_ms] | median) ms"' \
    "$OUT/runs.jsonl" | tee "$OUT/results.md"
