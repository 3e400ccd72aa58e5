#!/usr/bin/env bash
# Oka against Feast's Python feature server, on the same Redis, the same data and the
# same load (issue 18, item 5). docs/benchmarks.md, "Against Feast (benches/peers)",
# has the method and the numbers.
#
#   bash benches/peers/run.sh
#
# 1. venv at benches/peers/.venv with Feast from requirements.txt (pip runs again only
#    when that file's sha256 changes); release builds of oka and oka-load
# 2. a redis-server on a free 127.0.0.1 port (no persistence), loaded with the seed
#    workload twice, once per system: 10,000 keys test-id-0 … test-id-9999, value = i
#      Oka:   oka ingest --spec examples/seed/spec.yaml --feature test_feature
#      Feast: feast apply (benches/peers/feast_repo), then feast_load.py
#             (FeatureStore.write_to_online_store)
# 3. oka serve (default workers) and feast serve on free ports; both answers checked for
#    a handful of keys and multipliers (value × multiplier) before anything is measured
# 4. a Feast pre-run (PRE_DURATION s per run, closed loop at each of CONNS): the
#    on-demand view in "python" vs "pandas" mode, then the worker count (FEAST_WORKER_SWEEP)
#    with --max-requests 0 and gunicorn's default --max-requests 1000; the best
#    (highest mean RPS over CONNS) serves the measured runs
# 5. ROUNDS rounds, alternating Oka, Feast, Oka, Feast, …, DURATION s per run, 1 random
#    key per request of simple_feature, multiplier 2.0: first closed loop at each of
#    CONNS, then open loop at RATE requests/s over OPEN_CONNS connections (default:
#    RATE_FRACTION of Feast's closed-loop RPS, the lowest over CONNS of its medians), the
#    same rate for both. Every load run holds `flock /tmp/oka-bench.lock`
#    (benches/peers/measure.sh, which also reads the servers' and Redis' CPU from /proc).
# 6. benches/peers/out/results.json (every run, the medians, Oka/Feast ratios) and
#    results.md (report.py)
# Both servers stay up for the whole run; the one not under load is idle (its CPU during
# the other's runs is recorded as idle_server_tree_cpu_s).
# Everything binds 127.0.0.1; every process started here is stopped by PID on exit.
#
# Env overrides: DURATION (10), ROUNDS (5), CONNS ("8 32"), RATE (open-loop requests/s;
# default RATE_FRACTION × Feast's closed-loop RPS), RATE_FRACTION (0.5), OPEN_CONNS (32),
# PRE_DURATION (5), KEYS (10000), MULTIPLIER (2.0), FEAST_WORKER_SWEEP ("1 2 3 4"),
# FEAST_WORKERS + FEAST_MAX_REQUESTS + FEAST_FEATURE (skip the pre-run and serve Feast
# thus, e.g. FEAST_WORKERS=2 FEAST_MAX_REQUESTS=0 FEAST_FEATURE=simple_feature),
# OKA_BIN, OKA_ARGS (extra `oka serve` flags), SKIP_INSTALL=1, SKIP_BUILD=1, PYTHON (python3).
set -euo pipefail
trap 'echo "peers: line $LINENO: $BASH_COMMAND failed (rc $?)" >&2' ERR
command -v jq >/dev/null || { echo "run.sh needs jq (apt-get install -y jq)" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "run.sh needs redis-server (apt-get install -y redis-server)" >&2; exit 2; }
command -v flock >/dev/null || { echo "run.sh needs flock (util-linux)" >&2; exit 2; }

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
HERE=$ROOT/benches/peers
OUT=$HERE/out
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-5}
CONNS=${CONNS:-8 32}
RATE=${RATE:-}
RATE_FRACTION=${RATE_FRACTION:-0.5}
OPEN_CONNS=${OPEN_CONNS:-32}
PRE_DURATION=${PRE_DURATION:-5}
KEYS=${KEYS:-10000}
MULTIPLIER=${MULTIPLIER:-2.0}
FEAST_WORKER_SWEEP=${FEAST_WORKER_SWEEP:-1 2 3 4}
OKA_BIN=${OKA_BIN:-$ROOT/target/release/oka}
LOAD_BIN=$ROOT/target/release/oka-load
OKA_ARGS=${OKA_ARGS:-}
PY=${PYTHON:-python3}
LOCK=/tmp/oka-bench.lock
VENV=$HERE/.venv
SPEC=$ROOT/examples/seed/spec.yaml
rm -rf "$OUT"
mkdir -p "$OUT/runs" "$OUT/feast_data"
log() { echo "peers: $*" >&2; }

# ---- 1. venv and binaries
if [[ "${SKIP_INSTALL:-0}" != 1 ]]; then
    [[ -x "$VENV/bin/python" ]] || { log "creating $VENV"; "$PY" -m venv "$VENV"; }
    want=$(sha256sum "$HERE/requirements.txt" | cut -d' ' -f1)
    stamp=$VENV/.requirements.sha256
    if [[ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]] \
       || ! "$VENV/bin/python" -c 'import feast, redis' 2>/dev/null; then
        log "pip install -r benches/peers/requirements.txt (Feast is big: minutes)"
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$HERE/requirements.txt"
        echo "$want" >"$stamp"
    else
        log "reusing $VENV"
    fi
fi
[[ -x "$VENV/bin/feast" ]] || { log "no Feast in $VENV (run without SKIP_INSTALL=1)"; exit 2; }
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    log "cargo build --release -p oka-load -p oka-cli"
    cargo build --release -q -p oka-load -p oka-cli
fi

PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT

free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
REDIS_PORT=$(free_port)
OKA_PORT=$(free_port)
OKA_ADMIN_PORT=$(free_port)
FEAST_PORT=$(free_port)

# ---- 2. Redis and the data
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    >"$OUT/redis.log" 2>&1 &
REDIS_PID=$!
PIDS+=("$REDIS_PID")
for _ in $(seq 100); do
    redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break
    sleep 0.1
done
redis-cli -p "$REDIS_PORT" ping >/dev/null
log "redis-server on 127.0.0.1:$REDIS_PORT (pid $REDIS_PID)"

seq 0 $((KEYS - 1)) | awk '{printf "{\"id\":\"test-id-%d\",\"value\":%d.0}\n", $1, $1}' >"$OUT/seed.jsonl"
"$OKA_BIN" ingest --spec "$SPEC" --store "redis://127.0.0.1:$REDIS_PORT" \
    --feature test_feature --file "$OUT/seed.jsonl" >"$OUT/oka-ingest.log" 2>&1
log "oka ingest: $(tail -n 1 "$OUT/oka-ingest.log")"

export PEERS_REDIS_PORT=$REDIS_PORT PEERS_FEAST_DATA=$OUT/feast_data
FEAST=("$VENV/bin/feast" -c "$HERE/feast_repo" --log-level WARNING)
(cd "$HERE/feast_repo" && "${FEAST[@]}" apply) >"$OUT/feast-apply.log" 2>&1
"$VENV/bin/python" "$HERE/feast_load.py" "$HERE/feast_repo" "$KEYS" 2>>"$OUT/feast-apply.log" | tee -a "$OUT/feast-apply.log" >&2
log "redis keys: $(redis-cli -p "$REDIS_PORT" dbsize)"

# ---- 3. servers
wait_http() { # URL: up to 60 s for a 200 on GET
    for _ in $(seq 600); do
        [[ $(curl -s -o /dev/null -w '%{http_code}' "$1" 2>/dev/null || true) == 200 ]] && return 0
        sleep 0.1
    done
    log "timed out waiting for $1"
    return 1
}

# shellcheck disable=SC2086
"$OKA_BIN" serve --spec "$SPEC" --store "redis://127.0.0.1:$REDIS_PORT" \
    --listen "127.0.0.1:$OKA_PORT" --admin-listen "127.0.0.1:$OKA_ADMIN_PORT" $OKA_ARGS \
    >"$OUT/oka.log" 2>&1 &
OKA_PID=$!
PIDS+=("$OKA_PID")
wait_http "http://127.0.0.1:$OKA_ADMIN_PORT/readyz"
log "oka serve on 127.0.0.1:$OKA_PORT (pid $OKA_PID)"

FEAST_PID=
start_feast() { # WORKERS MAX_REQUESTS
    stop_feast
    "${FEAST[@]}" serve -h 127.0.0.1 -p "$FEAST_PORT" --no-access-log \
        --workers "$1" --max-requests "$2" >"$OUT/feast-serve-w$1-mr$2.log" 2>&1 &
    FEAST_PID=$!
    PIDS+=("$FEAST_PID")
    wait_http "http://127.0.0.1:$FEAST_PORT/health"
    # /health answers as soon as one worker is up: give the others time to boot.
    local n=0
    for _ in $(seq 300); do
        n=$(pgrep -c -P "$FEAST_PID" || true)
        [[ $n -ge $1 ]] && break
        sleep 0.1
    done
    sleep 2
    log "feast serve --workers $1 --max-requests $2 on 127.0.0.1:$FEAST_PORT (pid $FEAST_PID, $n workers)"
}
stop_feast() {
    if [[ -n $FEAST_PID ]]; then
        kill "$FEAST_PID" 2>/dev/null || true
        wait "$FEAST_PID" 2>/dev/null || true
        FEAST_PID=
    fi
}

oka_body() { # KEY MULT
    printf '{"target_features":["simple_feature"],"keys":[{"id":"%s"}],"udf_args":{"simple_feature":{"multiplier":%s}}}' "$1" "$2"
}
feast_body() { # FEATURE KEY MULT
    printf '{"features":["%s:value"],"entities":{"id":["%s"],"multiplier":[%s]}}' "$1" "$2" "$3"
}
# check_values FEATURE: each server answers value × multiplier for a handful of keys.
check_values() {
    local feature=$1 i m want got
    for i in 0 1 7 4242 $((KEYS - 1)); do
        for m in 2.0 3.5; do
            want=$(jq -n "$i * $m")
            got=$(curl -sf -X POST -H 'content-type: application/json' \
                --data "$(oka_body "test-id-$i" "$m")" "http://127.0.0.1:$OKA_PORT/v1/features" \
                | jq '.. | objects | select(has("value")) | .value' | head -n 1)
            [[ $(jq -n "$got == $want") == true ]] || { log "oka: test-id-$i × $m = $got, want $want"; exit 1; }
            # Feast answers [entity id, test_feature value, on-demand value] in that order.
            got=$(curl -sf -X POST -H 'content-type: application/json' \
                --data "$(feast_body "$feature" "test-id-$i" "$m")" "http://127.0.0.1:$FEAST_PORT/get-online-features" \
                | jq '.results[-1].values[0]')
            [[ $(jq -n "$got == $want") == true ]] || { log "feast ($feature): test-id-$i × $m = $got, want $want"; exit 1; }
        done
    done
    log "values checked: 5 keys × 2 multipliers, Oka and Feast ($feature)"
}

# ---- load runs
oka_template=$(oka_body '{key}' "$MULTIPLIER")
# measure NAME SYSTEM FEATURE oka-load-args…: one run under the bench lock.
measure() {
    local name=$1 system=$2 feature=$3
    shift 3
    local args=(--duration "$DURATION" --keys "$KEYS" --label "$name" "$@")
    local server idle
    if [[ $system == oka ]]; then
        server=$OKA_PID idle=$FEAST_PID
        args+=(--addr "127.0.0.1:$OKA_PORT" --path /v1/features --feature simple_feature
            --body-template "$oka_template" --server-pid "$OKA_PID")
    else
        server=$FEAST_PID idle=$OKA_PID
        args+=(--addr "127.0.0.1:$FEAST_PORT" --path /get-online-features --feature "$feature"
            --body-template "$(feast_body "$feature" '{key}' "$MULTIPLIER")")
    fi
    flock "$LOCK" bash "$HERE/measure.sh" "$OUT/runs/$name.json" "$server" "$idle" "$REDIS_PID" -- \
        "$LOAD_BIN" "${args[@]}" >/dev/null
    jq -r --arg n "$name" '"peers: \($n): \(.rps) rps, p50 \(.latency_ms.p50) ms, p99 \(.latency_ms.p99) ms, errors \(.errors), \(.server_tree_cpu_s) cpu s"' "$OUT/runs/$name.json" >&2
}
rps_of() { jq '.rps' "$OUT/runs/$1.json"; }
mean_rps() { # NAME-PREFIX: mean RPS over CONNS of the runs PREFIX-cN
    local sum=0 n=0 c
    for c in $CONNS; do sum=$(jq -n "$sum + $(rps_of "$1-c$c")"); n=$((n + 1)); done
    jq -n "$sum / $n"
}

# ---- 4. Feast pre-run
if [[ -n "${FEAST_WORKERS:-}" ]]; then
    FEAST_MAX_REQUESTS=${FEAST_MAX_REQUESTS:-0}
    FEAST_FEATURE=${FEAST_FEATURE:-simple_feature}
    start_feast "$FEAST_WORKERS" "$FEAST_MAX_REQUESTS"
    check_values "$FEAST_FEATURE"
else
    DURATION_MAIN=$DURATION
    DURATION=$PRE_DURATION
    start_feast 1 0
    check_values simple_feature
    check_values simple_feature_pandas
    best_mode= best_rps=0
    for feature in simple_feature simple_feature_pandas; do
        for c in $CONNS; do measure "pre-feast-$feature-w1-mr0-c$c" feast "$feature" --connections "$c"; done
        r=$(mean_rps "pre-feast-$feature-w1-mr0")
        if [[ $(jq -n "$r > $best_rps") == true ]]; then best_rps=$r best_mode=$feature; fi
    done
    FEAST_FEATURE=$best_mode
    best_w=1 best_mr=0
    for w in $FEAST_WORKER_SWEEP; do
        for mr in 0 1000; do
            [[ $w == 1 && $mr == 0 ]] && continue   # measured above
            start_feast "$w" "$mr"
            for c in $CONNS; do measure "pre-feast-$FEAST_FEATURE-w$w-mr$mr-c$c" feast "$FEAST_FEATURE" --connections "$c"; done
            r=$(mean_rps "pre-feast-$FEAST_FEATURE-w$w-mr$mr")
            if [[ $(jq -n "$r > $best_rps") == true ]]; then best_rps=$r best_w=$w best_mr=$mr; fi
        done
    done
    FEAST_WORKERS=$best_w FEAST_MAX_REQUESTS=$best_mr
    log "pre-run: best Feast configuration: $FEAST_FEATURE, --workers $FEAST_WORKERS --max-requests $FEAST_MAX_REQUESTS ($best_rps rps mean)"
    start_feast "$FEAST_WORKERS" "$FEAST_MAX_REQUESTS"
    check_values "$FEAST_FEATURE"
    DURATION=$DURATION_MAIN
fi
# ---- 5. measured rounds
# Warm-up (not recorded): 2 s each.
DURATION_MAIN=$DURATION DURATION=2
measure warmup-oka oka simple_feature --connections 8
measure warmup-feast feast "$FEAST_FEATURE" --connections 8
DURATION=$DURATION_MAIN
# 5a. closed loop, alternating Oka, Feast, Oka, Feast, …
for r in $(seq "$ROUNDS"); do
    for system in oka feast; do
        for c in $CONNS; do
            measure "r$r-$system-closed-c$c" "$system" "$FEAST_FEATURE" --connections "$c"
        done
    done
done
# 5b. the open-loop rate: RATE_FRACTION of Feast's closed-loop capacity, taken as the
# lowest over CONNS of the median over the rounds (Feast's throughput varies from run to
# run with how gunicorn's workers happen to split the connections).
if [[ -z $RATE ]]; then
    RATE=$(for c in $CONNS; do
            for r in $(seq "$ROUNDS"); do rps_of "r$r-feast-closed-c$c"; done | sort -n \
                | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'
        done | sort -n | head -n 1 | awk -v f="$RATE_FRACTION" '{print int($1 * f)}')
fi
log "open loop at $RATE requests/s over $OPEN_CONNS connections"
for r in $(seq "$ROUNDS"); do
    for system in oka feast; do
        measure "r$r-$system-open-r$RATE" "$system" "$FEAST_FEATURE" --connections "$OPEN_CONNS" --rate "$RATE"
    done
done

# ---- 6. report
versions=$(jq -n \
    --arg feast "$("$VENV/bin/python" -c 'import feast; print(feast.__version__)')" \
    --arg python "$("$VENV/bin/python" -c 'import platform; print(platform.python_version())')" \
    --arg pkgs "$("$VENV/bin/python" -m pip freeze --disable-pip-version-check 2>/dev/null | grep -iE '^(gunicorn|uvicorn|uvicorn-worker|uvloop|httptools|fastapi|starlette|pydantic|redis|hiredis|pandas|numpy|pyarrow|protobuf)==' | tr '\n' ' ')" \
    --arg oka "$("$OKA_BIN" --version 2>/dev/null || echo unknown) ($(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates 2>/dev/null || echo '+uncommitted crates/'))" \
    --arg redis "$(redis-server --version | awk '{print $3}')" \
    --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
    --arg nproc "$(nproc)" \
    '{feast: $feast, python: $python, python_packages: $pkgs, oka: $oka, redis: $redis, cpu: $cpu, cores: ($nproc|tonumber)}')
config=$(jq -n --argjson duration "$DURATION" --argjson rounds "$ROUNDS" --arg conns "$CONNS" \
    --argjson rate "$RATE" --argjson open_conns "$OPEN_CONNS" --argjson keys "$KEYS" \
    --argjson multiplier "$MULTIPLIER" --argjson fw "$FEAST_WORKERS" --argjson fmr "$FEAST_MAX_REQUESTS" \
    --arg ff "$FEAST_FEATURE" --arg oka_args "$OKA_ARGS" --argjson rate_fraction "$RATE_FRACTION" \
    '{duration_s: $duration, rounds: $rounds, connections: ($conns | split(" ") | map(select(. != "") | tonumber)),
      open_rate_rps: $rate, rate_fraction: $rate_fraction, open_connections: $open_conns, keys: $keys,
      multiplier: $multiplier,
      feast: {workers: $fw, max_requests: $fmr, feature: $ff,
              odfv_mode: (if $ff == "simple_feature_pandas" then "pandas" else "python" end),
              command: "feast serve --no-access-log --workers \($fw) --max-requests \($fmr)"},
      oka: {command: ("oka serve --spec examples/seed/spec.yaml --store redis://… " + $oka_args)}}')
"$PY" "$HERE/report.py" "$OUT" "$versions" "$config"
cat "$OUT/results.md"
