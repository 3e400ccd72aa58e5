#!/usr/bin/env bash
# The request path's own cost (issue 31), measured with `wrk` (Debian's package), a
# generator that costs less per request than the servers it drives:
#
#   bash benches/load/wrk.sh                  # 1 key per request, 8 and 32 connections
#   BATCH=100 CONNS_LIST=16 bash benches/load/wrk.sh     # 100 keys per request
#
# Each round runs, closed loop, for $DURATION s (default 5) at each of $CONNS_LIST
# (default "8 32") connections, $BATCH (default 1) keys of the seed's simple_feature
# per request drawn from the demo's 10,000 (benches/load/wrk/features.lua):
#   ceiling    oka-ceiling: bare axum parsing the body and answering a fixed document
#   memory     oka serve --store memory://          (only when VARIANTS names it)
#   redis      oka serve --store redis://…          (no cache)
#   tracking   … --cache tracking                   (after a 3 s warm-up)
# $VARIANTS (default "ceiling redis tracking") picks and orders them; rounds alternate
# ($ROUNDS, default 3). With BASE_BIN=path/to/an/older/oka, every `oka serve` variant
# runs a second time in each round with that binary, as `<variant>@base`: a before and
# after in the same run. Every server runs $WORKERS (default 2) workers on the machine's
# cores, beside wrk ($WRK_THREADS threads, default 2) and Redis. For each run: RPS, the
# server's CPU per request (utime + stime from /proc), wrk's own CPU per request (from
# /usr/bin/time), p50/p99/p99.9 from wrk, and each run's ratio to the ceiling of its own
# round (RPS, and CPU per request). The table gives medians.
#
# Holds /tmp/oka-bench.lock (flock); binds 127.0.0.1 only; stops what it starts by PID.
# Writes benches/load/out/wrk/{runs.jsonl,results.md}.
set -euo pipefail
for tool in wrk jq redis-server; do
    command -v "$tool" >/dev/null || { echo "wrk.sh needs $tool (apt-get install -y wrk jq redis-server)" >&2; exit 2; }
done
[[ -x /usr/bin/time ]] || { echo "wrk.sh needs /usr/bin/time (apt-get install -y time)" >&2; exit 2; }
cd "$(dirname "$0")/../.."
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
CONNS_LIST=${CONNS_LIST:-8 32}
WORKERS=${WORKERS:-2}
WRK_THREADS=${WRK_THREADS:-2}
BATCH=${BATCH:-1}
VARIANTS=${VARIANTS:-ceiling redis tracking}
OKA_BIN=${OKA_BIN:-target/release/oka}
OUT=${OUT:-benches/load/out/wrk}
BIN=target/release
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"
[[ "${SKIP_BUILD:-0}" == 1 ]] || cargo build --release -q -p oka-cli -p oka-load
# shellcheck source=benches/load/lib.sh
source benches/load/lib.sh
bench_lock
start_redis ""
bench_spec "$OUT/spec.yaml"
TICK_S=$(awk "BEGIN{print 1/$(getconf CLK_TCK)}")

cpu_s() { # PID → utime + stime in seconds
    awk -v t="$TICK_S" '{sub(/.*\) /, ""); print ($12 + $13) * t}' "/proc/$1/stat"
}

run() { # VARIANT ROUND CONNS PID ADDR
    local v=$1 r=$2 c=$3 pid=$4 addr=$5 before after out
    before=$(cpu_s "$pid")
    out=$(OKA_BATCH=$BATCH /usr/bin/time -f 'wrk-cpu %U %S' wrk -t "$WRK_THREADS" -c "$c" -d "${DURATION}s" \
        -s benches/load/wrk/features.lua "http://$addr" 2>&1)
    after=$(cpu_s "$pid")
    local json cpu
    json=$(sed -n 's/^wrk-json //p' <<<"$out")
    cpu=$(awk '/^wrk-cpu/{print $2 + $3}' <<<"$out")
    [[ -n $json ]] || { echo "wrk printed no result for $v c$c: $out" >&2; return 1; }
    jq -c --arg v "$v" --argjson r "$r" --argjson c "$c" --argjson b "$BATCH" \
        --argjson srv "$(awk "BEGIN{print $after - $before}")" --argjson gen "$cpu" '
        (.requests / (.duration_us / 1e6)) as $rps
        | {variant: $v, round: $r, conns: $c, batch: $b, rps: $rps,
           errors: (.errors | add), p50_ms: (.latency_us.p50 / 1e3), p99_ms: (.latency_us.p99 / 1e3),
           p999_ms: (.latency_us.p999 / 1e3),
           server_cpu_us: ($srv / .requests * 1e6), wrk_cpu_us: ($gen / .requests * 1e6),
           values_per_server_cpu_s: (if $srv > 0 then .requests * $b / $srv else null end)}' \
        <<<"$json" | tee -a "$OUT/runs.jsonl" >&2
}

serve() { # VARIANT[@base] → starts oka serve; sets OKA_PID, ADDR
    local store=redis://127.0.0.1:$REDIS_PORT extra=() bin=$OKA_BIN
    [[ $1 != *@base ]] || bin=$BASE_BIN
    case ${1%@base} in
        memory) store=memory:// ;;
        tracking) extra=(--cache tracking) ;;
    esac
    local port admin
    port=$(free_port)
    admin=$(free_port)
    "$bin" serve --spec "$OUT/spec.yaml" --workers "$WORKERS" --store "$store" \
        --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" "${extra[@]}" 2>>"$OUT/oka-${1%@base}.log" &
    OKA_PID=$!
    PIDS+=("$OKA_PID")
    ADDR=127.0.0.1:$port
    wait_ready "http://127.0.0.1:$admin/readyz"
    # Every key written once by the demo source before measuring, then a warm-up (which
    # fills the cache for `tracking`).
    OKA_BATCH=$BATCH wrk -t 1 -c 8 -d 3s -s benches/load/wrk/features.lua "http://$ADDR" >/dev/null
}

round() {
    local r=$1 v all=()
    for v in $VARIANTS; do
        all+=("$v")
        [[ -z ${BASE_BIN:-} || $v == ceiling ]] || all+=("$v@base")
    done
    for v in "${all[@]}"; do
        if [[ $v == ceiling ]]; then
            local port
            port=$(free_port)
            "$BIN/oka-ceiling" --listen "127.0.0.1:$port" --workers "$WORKERS" 2>/dev/null &
            OKA_PID=$!
            PIDS+=("$OKA_PID")
            ADDR=127.0.0.1:$port
            sleep 0.5
        else
            serve "$v"
        fi
        for c in $CONNS_LIST; do run "$v" "$r" "$c" "$OKA_PID" "$ADDR"; done
        kill "$OKA_PID"
        wait "$OKA_PID" 2>/dev/null || true
    done
}

for r in $(seq 1 "$ROUNDS"); do
    echo "== round $r of $ROUNDS ($VARIANTS; $BATCH key(s) per request)" >&2
    round "$r"
done

# Medians per (variant, conns); ratios to the ceiling of the same round and conns.
jq -s -r '
  def median: map(select(. != null)) | sort | if length == 0 then null else .[(length / 2 | floor)] end;
  def r2: if . == null then "" else . * 100 | round / 100 end;
  def r1: if . == null then "" else . * 10 | round / 10 end;
  . as $runs
  | [ $runs[] | . as $x
      | ([$runs[] | select(.variant == "ceiling" and .round == $x.round and .conns == $x.conns)] | first) as $c
      | $x + {ratio: (if $c then $x.rps / $c.rps else null end),
              cpu_ratio: (if $c then $x.server_cpu_us / $c.server_cpu_us else null end)} ]
  | group_by([.variant, .conns])
  | ["| variant | conns | keys | RPS | ratio to ceiling | server CPU µs/req | CPU ratio to ceiling | wrk CPU µs/req | p50 ms | p99 ms | p99.9 ms | values per server CPU-s | errors |",
     "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"] +
    map("| \(.[0].variant) | \(.[0].conns) | \(.[0].batch) | \([.[].rps] | median | floor) | \([.[].ratio] | median | r2) | \([.[].server_cpu_us] | median | r1) | \([.[].cpu_ratio] | median | r2) | \([.[].wrk_cpu_us] | median | r1) | \([.[].p50_ms] | median) | \([.[].p99_ms] | median) | \([.[].p999_ms] | median) | \([.[].values_per_server_cpu_s] | median | floor) | \([.[].errors] | add) |")
  | .[]' "$OUT/runs.jsonl" | tee "$OUT/results.md"
