#!/usr/bin/env bash
# Does the default worker count win? (issue 18, item 4)
#
#   bash benches/load/workers.sh
#
# The server gets cores of its own: `oka serve` runs under `taskset -c $SERVER_CPUS`
# (default: the last CPU), the load generator and Redis under `taskset -c
# $CLIENT_CPUS` (default: the others). The default worker count is what `oka serve`
# picks without --workers: the CPUs its affinity allows. For each store in $STORES
# (default "memory redis") and each worker count in $COUNTS (default "default 1 2 3"),
# closed loop at $CONNS (default 32) connections, 1 key of simple_feature, $DURATION s
# (default 5); $ROUNDS (default 3) alternating rounds; medians, and each count's RPS
# relative to the default's. Holds /tmp/oka-bench.lock while measuring.
# Writes benches/load/out/workers/{runs.jsonl,results.md}. Binds 127.0.0.1 only.
set -euo pipefail
command -v jq >/dev/null || { echo "workers.sh needs jq" >&2; exit 2; }
cd "$(dirname "$0")/../.."
N=$(nproc)
SERVER_CPUS=${SERVER_CPUS:-$((N - 1))}
CLIENT_CPUS=${CLIENT_CPUS:-0-$((N > 1 ? N - 2 : 0))}
STORES=${STORES:-memory redis}
COUNTS=${COUNTS:-default 1 2 3}
CONNS=${CONNS:-32}
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
OUT=benches/load/out/workers
BIN=target/release
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"
[[ "${SKIP_BUILD:-0}" == 1 ]] || cargo build --release -q -p oka-cli -p oka-load
# shellcheck source=benches/load/lib.sh
source benches/load/lib.sh
bench_lock
start_redis "$CLIENT_CPUS"
bench_spec "$OUT/spec.yaml"

for r in $(seq 1 "$ROUNDS"); do
    for store in $STORES; do
        url=memory://
        [[ $store == redis ]] && url=redis://127.0.0.1:$REDIS_PORT
        for count in $COUNTS; do
            args=()
            [[ $count == default ]] || args=(--workers "$count")
            port=$(free_port)
            admin=$(free_port)
            taskset -c "$SERVER_CPUS" "$BIN/oka" serve --spec "$OUT/spec.yaml" --store "$url" \
                --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" "${args[@]}" \
                2>"$OUT/oka.log" &
            pid=$!
            PIDS+=("$pid")
            wait_ready "http://127.0.0.1:$admin/readyz"
            workers=$(curl -s "http://127.0.0.1:$admin/metrics" | grep -c '^oka_worker_requests_total' || true)
            echo "== round $r, $store, workers $count ($workers)" >&2
            taskset -c "$CLIENT_CPUS" "$BIN/oka-load" --addr "127.0.0.1:$port" --duration "$DURATION" \
                --connections "$CONNS" --server-pid "$pid" --label "$store $count" |
                jq -c --arg s "$store" --arg w "$count" --argjson n "$workers" --argjson r "$r" \
                    '. + {store: $s, workers: $w, worker_threads: $n, round: $r}' >>"$OUT/runs.jsonl"
            kill "$pid"
            wait "$pid" 2>/dev/null || true
        done
    done
done

jq -s -r --arg cpus "$SERVER_CPUS" '
  def median: sort | .[(length / 2 | floor)];
  group_by(.store)
  | map(. as $s
      | ([$s[] | select(.workers == "default") | .rps] | median) as $d
      | group_by(.workers)
      | map("| \(.[0].store) | \(.[0].workers) (\(.[0].worker_threads)) | \([.[].rps] | median | floor) | \(([.[].rps] | median) / $d * 100 | round / 100) | \([.[].latency_ms.p99] | median) | \([.[].server_cpu_s_per_request] | median | . * 1e6 | round) |"))
  | flatten
  | ["server on CPUs \($cpus)", "", "| store | --workers (threads) | RPS (median) | relative to the default | p99 ms | server CPU µs/req |", "|---|---|---:|---:|---:|---:|"] + .
  | .[]' "$OUT/runs.jsonl" | tee "$OUT/results.md"
