#!/usr/bin/env bash
# Feast's API served by Feast and by Oka (issue 28): the same requests to
# `feast serve`'s and to `oka serve --feast-repo`'s POST /get-online-features, over
# the same Redis data (written by Feast's SDK), the same generator (oka-load),
# alternating rounds. docs/benchmarks.md, "Feast's API: feast serve and oka serve
# --feast-repo", has the method and the numbers.
#
#   bash benches/peers/feast_api.sh
#
# 1. Feast in target/feast/venv (feast_setup.sh's feast_venv); release builds of
#    oka and oka-load (SKIP_BUILD=1 to skip)
# 2. Redis and Feast's data (feast_setup.sh's feast_data): 10,000 ids, test_feature
#    and the 20 features of `wide`, written by Feast's SDK
# 3. oka serve --feast-repo benches/peers/feast_repo --spec feast_overlay.yaml
#    --cache CACHE --grpc-listen … (default workers: per core, pinned: the
#    on-demand view in CEL),
#    a second oka serve --feast-repo … --cache CACHE --python VENV/bin/python without the overlay
#    ("oka-python": the on-demand view run by Feast's SDK in Oka's Python workers,
#    one per core; measured for `odfv` only) and feast serve
#    --no-access-log --workers FEAST_WORKERS --max-requests 0 (the best configuration
#    of benches/peers/run.sh's pre-run: 3); both answers checked equal (parsed JSON,
#    columns by name) for every scenario before anything is measured
# 4. ROUNDS rounds, Oka then Feast, DURATION s per run, under `flock
#    /tmp/oka-bench.lock` (benches/peers/measure.sh: the server's process tree, Redis
#    and the generator's CPU from /proc):
#      one     {"features":["wide:f00","wide:f08","wide:f14"],"entities":{"id":["<key>"]}}
#      odfv    {"features":["simple_feature:value"],"entities":{"id":["<key>"],"multiplier":[2.0]}}
#      wide    the 20 features of `wide` for 50 random ids
#    closed loop at each of CONNS (`odfv` also through oka-python), then `one`
#    open loop at RATE_FRACTION of Feast's
#    closed-loop RPS over 32 connections
# 5. gRPC, when `ghz` is on PATH (or GHZ=…): `one` through Oka's ServingService at
#    each of CONNS (ghz's own numbers; Oka's CPU from /proc)
# 6. benches/peers/out-feast-api/results.md and results.json (feast_api_report.py)
# Everything binds 127.0.0.1; every process started here is stopped by PID on exit.
#
# Env overrides: DURATION (10), ROUNDS (3), CONNS ("8 32"), SCENARIOS ("one odfv
# wide"; the open loop runs when `one` is among them), RATE_FRACTION (0.5), CACHE
# (Oka's --cache: `tracking`, the read cache kept exact by Redis; `off`),
# FEAST_WORKERS (3), KEYS (10000), SKIP_BUILD=1, GHZ (path to ghz).
set -euo pipefail
trap 'echo "feast-api: line $LINENO: $BASH_COMMAND failed (rc $?)" >&2' ERR
for tool in jq redis-server flock curl; do
    command -v "$tool" >/dev/null || { echo "feast_api.sh needs $tool" >&2; exit 2; }
done
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
HERE=$ROOT/benches/peers
OUT=$HERE/out-feast-api
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-8 32}
RATE_FRACTION=${RATE_FRACTION:-0.5}
FEAST_WORKERS=${FEAST_WORKERS:-3}
KEYS=${KEYS:-10000}
CACHE=${CACHE:-tracking}
OKA_BIN=$ROOT/target/release/oka
LOAD_BIN=$ROOT/target/release/oka-load
GHZ=${GHZ:-$(command -v ghz || true)}
LOCK=/tmp/oka-bench.lock
rm -rf "$OUT"
mkdir -p "$OUT/runs"
log() { echo "feast-api: $*" >&2; }

# shellcheck source=benches/peers/feast_setup.sh
source "$HERE/feast_setup.sh"

# ---- 1. venv and binaries
feast_venv
[[ ${SKIP_BUILD:-0} == 1 ]] || cargo build --release -q -p oka-load -p oka-cli

PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
OKA_PORT=$(free_port) OKA_ADMIN=$(free_port) OKA_GRPC=$(free_port) FEAST_PORT=$(free_port)
PY_PORT=$(free_port) PY_ADMIN=$(free_port)

# ---- 2. Redis and Feast's data
feast_data
log "redis keys: $(redis-cli -p "$REDIS_PORT" dbsize)"

# ---- 3. servers
wait_http() {
    for _ in $(seq 600); do
        [[ $(curl -s -o /dev/null -w '%{http_code}' "$1" 2>/dev/null || true) == 200 ]] && return 0
        sleep 0.1
    done
    log "timed out waiting for $1"; return 1
}
# Oka reads feature_store.yaml as Feast does, with the environment variables filled.
"$OKA_BIN" serve --feast-repo "$HERE/feast_repo" --spec "$HERE/feast_overlay.yaml" --cache "$CACHE" \
    --listen "127.0.0.1:$OKA_PORT" --admin-listen "127.0.0.1:$OKA_ADMIN" \
    --grpc-listen "127.0.0.1:$OKA_GRPC" >"$OUT/oka.log" 2>&1 &
OKA_PID=$!
PIDS+=("$OKA_PID")
wait_http "http://127.0.0.1:$OKA_ADMIN/readyz"
"$OKA_BIN" serve --feast-repo "$HERE/feast_repo" --python "$VENV/bin/python" --cache "$CACHE" \
    --listen "127.0.0.1:$PY_PORT" --admin-listen "127.0.0.1:$PY_ADMIN" >"$OUT/oka-python.log" 2>&1 &
PY_PID=$!
PIDS+=("$PY_PID")
wait_http "http://127.0.0.1:$PY_ADMIN/readyz"
"${FEAST[@]}" serve -h 127.0.0.1 -p "$FEAST_PORT" --no-access-log --workers "$FEAST_WORKERS" \
    --max-requests 0 >"$OUT/feast-serve.log" 2>&1 &
FEAST_PID=$!
PIDS+=("$FEAST_PID")
wait_http "http://127.0.0.1:$FEAST_PORT/health"
sleep 3   # /health answers once one worker is up; let the others boot
log "oka on $OKA_PORT (gRPC $OKA_GRPC, --cache $CACHE), feast serve ($FEAST_WORKERS workers) on $FEAST_PORT"

wide_features=$(for i in $(seq 0 19); do printf '"wide:f%02d",' "$i"; done | sed 's/,$//')
declare -A BODY=(
    [one]='{"features":["wide:f00","wide:f08","wide:f14"],"entities":{"id":["{key}"]}}'
    [odfv]='{"features":["simple_feature:value"],"entities":{"id":["{key}"],"multiplier":[2.0]}}'
    [wide]="{\"features\":[$wide_features],\"entities\":{\"id\":[{keys}]}}"
)
declare -A BATCH=([one]=1 [odfv]=1 [wide]=50)
SCENARIOS=${SCENARIOS:-one odfv wide}

# Both servers give the same answer (columns by name) for each scenario's request.
for s in $SCENARIOS; do
    keys=$(for i in $(seq 1 "${BATCH[$s]}"); do printf '"test-id-%d",' $((i * 97 % KEYS)); done | sed 's/,$//')
    body=${BODY[$s]//\{keys\}/$keys}
    body=${body//\{key\}/test-id-4242}
    norm='[.metadata.feature_names, .results] | transpose | map({(.[0]): .[1]}) | add'
    a=$(curl -sf -X POST -H 'content-type: application/json' -d "$body" "http://127.0.0.1:$OKA_PORT/get-online-features" | jq -S "$norm")
    b=$(curl -sf -X POST -H 'content-type: application/json' -d "$body" "http://127.0.0.1:$FEAST_PORT/get-online-features" | jq -S "$norm")
    # Feast answers an on-demand view's input feature beside it when their names
    # collide (`value`); compare the on-demand column, which is the last.
    if [[ $s == odfv ]]; then
        a=$(curl -sf -X POST -d "$body" "http://127.0.0.1:$OKA_PORT/get-online-features" | jq '.results[-1].values')
        b=$(curl -sf -X POST -H 'content-type: application/json' -d "$body" "http://127.0.0.1:$FEAST_PORT/get-online-features" | jq '.results[-1].values')
    fi
    [[ "$a" == "$b" ]] || { log "$s: Oka and Feast differ"; diff <(echo "$a") <(echo "$b") | head -20 >&2; exit 1; }
    if [[ $s == odfv ]]; then
        a=$(curl -sf -X POST -d "$body" "http://127.0.0.1:$PY_PORT/get-online-features" | jq '.results[-1].values')
        [[ "$a" == "$b" ]] || { log "odfv: Oka's Python workers and Feast differ: $a, $b"; exit 1; }
    fi
done
log "answers equal for: $SCENARIOS"

# ---- 4. HTTP runs
measure() { # NAME SYSTEM SCENARIO oka-load-args…
    local name=$1 system=$2 s=$3 port server idle
    shift 3
    case $system in
        oka) port=$OKA_PORT server=$OKA_PID idle=$FEAST_PID ;;
        okapy) port=$PY_PORT server=$PY_PID idle=$FEAST_PID ;;
        *) port=$FEAST_PORT server=$FEAST_PID idle=$OKA_PID ;;
    esac
    flock "$LOCK" bash "$HERE/measure.sh" "$OUT/runs/$name.json" "$server" "$idle" "$REDIS_PID" -- \
        "$LOAD_BIN" --duration "$DURATION" --keys "$KEYS" --label "$name" --addr "127.0.0.1:$port" \
        --path /get-online-features --feature simple_feature --batch "${BATCH[$s]}" \
        --body-template "${BODY[$s]}" "$@" >/dev/null
    jq -r --arg n "$name" '"feast-api: \($n): \(.rps) rps, p99 \(.latency_ms.p99) ms, errors \(.errors)"' "$OUT/runs/$name.json" >&2
}
DURATION_MAIN=$DURATION DURATION=2
for s in $SCENARIOS; do measure "warmup-oka-$s" oka "$s" --connections 8; measure "warmup-feast-$s" feast "$s" --connections 8; done
[[ " $SCENARIOS " != *" odfv "* ]] || measure warmup-okapy-odfv okapy odfv --connections 8
DURATION=$DURATION_MAIN
for r in $(seq "$ROUNDS"); do
    for s in $SCENARIOS; do
        for c in $CONNS; do
            systems="oka feast"
            [[ $s == odfv ]] && systems="oka okapy feast"
            for system in $systems; do measure "r$r-$system-$s-c$c" "$system" "$s" --connections "$c"; done
        done
    done
done
RATE=0
if [[ " $SCENARIOS " == *" one "* ]]; then
    RATE=$(for r in $(seq "$ROUNDS"); do for c in $CONNS; do jq .rps "$OUT/runs/r$r-feast-one-c$c.json"; done; done \
        | sort -n | awk -v f="$RATE_FRACTION" '{v[NR]=$1} END {print int(v[int((NR+1)/2)] * f)}')
    log "open loop at $RATE requests/s"
    for r in $(seq "$ROUNDS"); do
        for system in oka feast; do measure "r$r-$system-one-open" "$system" one --connections 32 --rate "$RATE"; done
    done
fi

# ---- 5. gRPC (Oka's ServingService; feast serve has none)
if [[ -n $GHZ ]]; then
    for r in $(seq "$ROUNDS"); do
        for c in $CONNS; do
            t0=$(awk '{print $14 + $15}' "/proc/$OKA_PID/stat")
            flock "$LOCK" "$GHZ" --insecure --import-paths "$ROOT/crates/oka-feast/proto" \
                --proto feast/serving/ServingService.proto \
                --call feast.serving.ServingService/GetOnlineFeatures \
                -d '{"features":{"val":["wide:f00","wide:f08","wide:f14"]},"entities":{"id":{"val":[{"string_val":"test-id-{{randomInt 0 9999}}"}]}}}' \
                -c "$c" --connections "$c" -z "${DURATION}s" -O json "127.0.0.1:$OKA_GRPC" >"$OUT/runs/r$r-grpc-one-c$c.json"
            t1=$(awk '{print $14 + $15}' "/proc/$OKA_PID/stat")
            jq --argjson cpu "$(jq -n "($t1 - $t0) / $(getconf CLK_TCK)")" '. + {server_cpu_s: $cpu}' \
                "$OUT/runs/r$r-grpc-one-c$c.json" >"$OUT/runs/r$r-grpc-one-c$c.tmp" && mv "$OUT/runs/r$r-grpc-one-c$c.tmp" "$OUT/runs/r$r-grpc-one-c$c.json"
            log "grpc c$c: $(jq .rps "$OUT/runs/r$r-grpc-one-c$c.json") rps"
        done
    done
else
    log "no ghz on PATH: the gRPC runs are skipped"
fi

# ---- 6. report
"$VENV/bin/python" "$HERE/feast_api_report.py" "$OUT" "$RATE" "$FEAST_WORKERS" \
    "$(git rev-parse --short HEAD)" "$(redis-server --version | awk '{print $3}')"
cat "$OUT/results.md"
