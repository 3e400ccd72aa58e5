# shellcheck shell=bash
# Shared by benches/load/{cache,workers,batch100,syscalls}.sh (sourced, not run): free ports,
# processes stopped by PID on exit, readiness, a throwaway Redis, the bench lock.

# A free 127.0.0.1 port.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Every process started: stopped by PID on exit.
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# wait_ready URL: up to 30 s for a 2xx.
wait_ready() { for _ in $(seq 300); do curl -sf "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "timed out: $1" >&2; return 1; }

# start_redis [taskset CPUS]: a redis-server without persistence on a free port; sets
# REDIS_PORT.
start_redis() {
    REDIS_PORT=$(free_port)
    local pin=()
    [[ -z ${1:-} ]] || pin=(taskset -c "$1")
    "${pin[@]}" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "redis-server did not start on $REDIS_PORT" >&2
    return 1
}

# The demo spec with its source writing the 10,000 keys once (then hourly), so no
# writes happen during the runs: written to $1.
bench_spec() { "$BIN/oka" demo-spec | sed 's/period_s: 5$/period_s: 3600/' >"$1"; }

# Measure only while no other benchmark on this machine measures.
bench_lock() { exec 9>/tmp/oka-bench.lock; flock 9; }
