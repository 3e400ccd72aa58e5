#!/usr/bin/env bash
# System calls and CPU per request of `oka serve`, counted by the kernel's tracepoints
# (`perf stat`, no ptrace: the server runs at full speed), for issue 18's item 3:
#
#   bash benches/load/syscalls.sh
#
# For each store variant (memory, redis, redis with --cache tracking) and each of
# $CONNS_LIST (default "8 32") connections: `oka serve --workers 1` (one worker, so
# coalescing is per process), a 2 s warm-up (the cache fills), then a $DURATION s
# (default 5) closed-loop run of 1-key `simple_feature` requests while `perf stat`
# counts the server's system calls by name, its context switches and its CPU time;
# every count is divided by the requests the server admitted in that window
# (oka_worker_requests_total). Needs root (or perf_event_paranoid ≤ -1) for the
# syscall tracepoints. Writes benches/load/out/syscalls/results.md. Binds 127.0.0.1
# only; holds /tmp/oka-bench.lock. The counts do not depend on a quiet machine; the
# CPU column does.
set -euo pipefail
command -v perf >/dev/null || { echo "syscalls.sh needs perf (apt-get install -y linux-perf)" >&2; exit 2; }
command -v jq >/dev/null || { echo "syscalls.sh needs jq (apt-get install -y jq)" >&2; exit 2; }
cd "$(dirname "$0")/../.."
DURATION=${DURATION:-5}
CONNS_LIST=${CONNS_LIST:-8 32}
OUT=benches/load/out/syscalls
BIN=${BIN:-target/release}
mkdir -p "$OUT"
[[ "${SKIP_BUILD:-0}" == 1 ]] || cargo build --release -q -p oka-cli -p oka-load
# shellcheck source=benches/load/lib.sh
source benches/load/lib.sh
bench_lock
start_redis ""
bench_spec "$OUT/spec.yaml"

EVENTS=(writev recvfrom epoll_wait write read sendto futex)
perf_events=raw_syscalls:sys_enter
for e in "${EVENTS[@]}"; do perf_events+=",syscalls:sys_enter_$e"; done
perf_events+=",context-switches,task-clock"

# utime and stime of a process, in clock ticks.
cpu_ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }

admitted() { curl -s "http://$1/metrics" | awk '/^oka_worker_requests_total/ {s += $2} END {print s + 0}'; }

header="| store | conns | RPS | all syscalls | $(printf '%s | ' "${EVENTS[@]}")context switches | server CPU µs | of it in the kernel |"
{
    echo "$header"
    echo "|---|---:|---:|---:|$(printf -- '---:|%.0s' "${EVENTS[@]}")---:|---:|---:|"
} >"$OUT/results.md"

for variant in memory redis redis-cache; do
    store="redis://127.0.0.1:$REDIS_PORT"
    extra=()
    case $variant in
        memory) store=memory:// ;;
        redis-cache) extra=(--cache tracking) ;;
    esac
    for conns in $CONNS_LIST; do
        port=$(free_port)
        admin=$(free_port)
        "$BIN/oka" serve --spec "$OUT/spec.yaml" --workers 1 --store "$store" \
            --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" "${extra[@]}" 2>>"$OUT/oka.log" &
        pid=$!
        PIDS+=("$pid")
        wait_ready "http://127.0.0.1:$admin/readyz"
        "$BIN/oka-load" --addr "127.0.0.1:$port" --duration 2 --connections "$conns" >/dev/null
        before=$(admitted "127.0.0.1:$admin")
        read -r u0 s0 < <(cpu_ticks "$pid")
        perf stat -x, -e "$perf_events" -p "$pid" -o "$OUT/perf.txt" &
        perf_pid=$!
        sleep 0.2
        "$BIN/oka-load" --addr "127.0.0.1:$port" --duration "$DURATION" --connections "$conns" >"$OUT/load.json"
        kill -INT "$perf_pid"
        wait "$perf_pid" || true
        after=$(admitted "127.0.0.1:$admin")
        read -r u1 s1 < <(cpu_ticks "$pid")
        kernel=$(awk -v u=$((u1 - u0)) -v s=$((s1 - s0)) 'BEGIN { if (u + s > 0) printf "%.0f %%", 100 * s / (u + s); else print "–" }')
        kill "$pid"
        wait "$pid" 2>/dev/null || true
        n=$((after - before))
        rps=$(jq -r '.rps | floor' "$OUT/load.json")
        # perf -x, lines: value,unit,event,… ; task-clock is in ms.
        row=$(awk -F, -v n="$n" -v names="raw_syscalls:sys_enter ${EVENTS[*]/#/syscalls:sys_enter_} context-switches task-clock" '
            $1 ~ /^[0-9.]+$/ { v[$3] = $1 }
            END {
                k = split(names, order, " ")
                for (i = 1; i <= k; i++) {
                    x = v[order[i]] / n
                    if (order[i] == "task-clock") printf " %.1f |", x * 1000
                    else printf " %.2f |", x
                }
            }' "$OUT/perf.txt")
        echo "| $variant | $conns | $rps |$row $kernel |" | tee -a "$OUT/results.md"
    done
done
echo "wrote $OUT/results.md" >&2
