#!/usr/bin/env bash
# The Kafka source bench: records/s from Kafka into Redis by batch size, and the time
# from produce to servable at steady rates (issue 20).
#
#   bash benches/kafka/run.sh
#
# Starts a single-node Kafka (.ci/kafka.sh, under target/bench-kafka; or uses
# KAFKA_BROKERS) and a redis-server without persistence on free loopback ports, builds
# target/release/oka and the producer (benches/examples/kafka_load.rs), then:
#   throughput  for each batch size in BATCHES (default "100 500 2000"): a fresh topic of
#               PARTITIONS (3) partitions is filled with COUNT (200000) records
#               {"id":"k<i mod 100000>","value":<i>} (no timestamp: the Kafka time is the
#               event time), then `oka source kafka` starts on it with batch.max_records
#               = the size; records/s = COUNT / (time from joining the group to the last
#               record written, polled on /metrics every 50 ms).
#   steady      for each rate in RATES (default "2000 10000") records/s, and max_wait_ms
#               in WAITS (default "100 10"): the consumer runs first, the producer paces
#               DURATION_S (20) seconds of records; the produce-to-servable quantiles come
#               from the consumer's oka_kafka_delivery_seconds histogram (the store's
#               acknowledgement minus each message's CreateTime, linear within buckets),
#               and the highest oka_kafka_consumer_lag_seconds seen while it ran.
# Prints a Markdown table of both, also written to benches/kafka/out/results.md
# (git-ignored). Everything binds 127.0.0.1; every process started is stopped by PID.
# Env: KAFKA_BROKERS, COUNT, PARTITIONS, BATCHES, RATES, WAITS, DURATION_S, SKIP_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=benches/load/lib.sh
source benches/load/lib.sh
bench_lock

COUNT=${COUNT:-200000}
PARTITIONS=${PARTITIONS:-3}
BATCHES=${BATCHES:-100 500 2000}
RATES=${RATES:-2000 10000}
WAITS=${WAITS:-100 10}
DURATION_S=${DURATION_S:-20}
OUT=benches/kafka/out
mkdir -p "$OUT"
command -v redis-server >/dev/null || { echo "needs redis-server" >&2; exit 2; }

if [[ -z ${SKIP_BUILD:-} ]]; then
    cargo build --release --locked -p oka-cli
    cargo build --release --locked -p oka-benches --example kafka_load
fi
OKA=target/release/oka
LOAD=target/release/examples/kafka_load

KAFKA_DIR=target/bench-kafka
if [[ -z ${KAFKA_BROKERS:-} ]]; then
    kport=$(python3 -c '
import socket
while True:
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", p + 1)); print(p); break
    except OSError:
        pass
    finally:
        a.close(); b.close()
')
    bash .ci/kafka.sh start "$KAFKA_DIR" "$kport"
    trap 'bash .ci/kafka.sh stop "$KAFKA_DIR" >/dev/null; cleanup' EXIT
    bash .ci/kafka.sh wait "$KAFKA_DIR" "$kport"
    KAFKA_BROKERS=127.0.0.1:$kport
fi
start_redis
STORE=redis://127.0.0.1:$REDIS_PORT
RUN=$(date +%s)

# spec TOPIC MAX_RECORDS MAX_WAIT_MS > file
spec() {
    cat <<EOF
version: 1
entities:
  TestEntity: {keys: {id: string}, timestamp: timestamp, fields: {value: float}}
features:
  test_feature:
    kind: pipeline
    entity: TestEntity
    history: 10
    source:
      kafka: {topic: $1, group: g-$1, batch: {max_records: $2, max_wait_ms: $3}}
EOF
}

# metric ADMIN NAME: the sum of NAME's series.
metric() {
    curl -s "http://$1/metrics" | awk -v n="$2" '$1 ~ "^"n"({|$)" {s += $NF} END {printf "%.0f\n", s}'
}

# consumer SPEC ADMIN LOG: starts oka source kafka, waits until it joined; sets CPID.
consumer() {
    "$OKA" source kafka --spec "$1" --store "$STORE" --brokers "$KAFKA_BROKERS" \
        --admin-listen "$2" --store-key-prefix "bench-$RUN:" >"$3" 2>&1 &
    CPID=$!
    PIDS+=("$CPID")
    for _ in $(seq 600); do
        [[ $(curl -s -o /dev/null -w '%{http_code}' "http://$2/readyz") == 200 ]] && return 0
        sleep 0.1
    done
    echo "the consumer did not join; its log: $3" >&2
    return 1
}

stop_consumer() { kill -TERM "$CPID"; wait "$CPID" 2>/dev/null || true; }

echo "| batch.max_records | records | seconds | records/s |" >"$OUT/throughput.md"
echo "|---|---|---|---|" >>"$OUT/throughput.md"
for b in $BATCHES; do
    topic=bench-$RUN-b$b
    "$LOAD" "$KAFKA_BROKERS" create "$topic" "$PARTITIONS" >/dev/null
    "$LOAD" "$KAFKA_BROKERS" produce "$topic" "$COUNT"
    spec "$topic" "$b" 100 >"$OUT/spec-$b.yaml"
    admin=127.0.0.1:$(free_port)
    consumer "$OUT/spec-$b.yaml" "$admin" "$OUT/consumer-$b.log"
    t0=$(date +%s.%N)
    while (($(metric "$admin" oka_kafka_records_written_total) < COUNT)); do sleep 0.05; done
    t1=$(date +%s.%N)
    stop_consumer
    python3 - "$b" "$COUNT" "$t0" "$t1" >>"$OUT/throughput.md" <<'PY'
import sys
b, n, t0, t1 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
print(f"| {b} | {n} | {t1 - t0:.2f} | {n / (t1 - t0):,.0f} |")
PY
    tail -1 "$OUT/throughput.md"
done

echo "| rate (records/s) | max_wait_ms | records | p50 | p99 | max lag_seconds seen |" >"$OUT/steady.md"
echo "|---|---|---|---|---|---|" >>"$OUT/steady.md"
for w in $WAITS; do
    for r in $RATES; do
        topic=bench-$RUN-r$r-w$w
        "$LOAD" "$KAFKA_BROKERS" create "$topic" "$PARTITIONS" >/dev/null
        spec "$topic" 500 "$w" >"$OUT/spec-r$r-w$w.yaml"
        admin=127.0.0.1:$(free_port)
        consumer "$OUT/spec-r$r-w$w.yaml" "$admin" "$OUT/consumer-r$r-w$w.log"
        n=$((r * DURATION_S))
        "$LOAD" "$KAFKA_BROKERS" produce "$topic" "$n" "$r" &
        ppid=$!
        maxlag=0
        while kill -0 "$ppid" 2>/dev/null; do
            lag=$(curl -s "http://$admin/metrics" | awk '$1 ~ /^oka_kafka_consumer_lag_seconds/ {if ($NF > m) m = $NF} END {print m + 0}')
            maxlag=$(python3 -c "print(max($maxlag, $lag))")
            sleep 0.5
        done
        wait "$ppid"
        while (($(metric "$admin" oka_kafka_records_written_total) < n)); do sleep 0.05; done
        curl -s "http://$admin/metrics" >"$OUT/metrics-r$r-w$w.txt"
        stop_consumer
        python3 - "$r" "$w" "$n" "$maxlag" "$OUT/metrics-r$r-w$w.txt" >>"$OUT/steady.md" <<'PY'
import re, sys
rate, wait, n, maxlag, path = sys.argv[1:6]
buckets = []
for line in open(path):
    m = re.match(r'oka_kafka_delivery_seconds_bucket\{[^}]*le="([^"]+)"[^}]*\} (\S+)', line)
    if m:
        buckets.append((float("inf") if m.group(1) == "+Inf" else float(m.group(1)), float(m.group(2))))
buckets.sort()
total = buckets[-1][1]
def q(p):
    want, lo, below = p * total, 0.0, 0.0
    for le, c in buckets:
        if c >= want:
            if le == float("inf"):
                return f"> {lo * 1e3:.0f} ms"
            return f"{(lo + (le - lo) * (want - below) / max(c - below, 1)) * 1e3:.0f} ms"
        lo, below = le, c
print(f"| {int(rate):,} | {wait} | {int(n):,} | {q(0.5)} | {q(0.99)} | {float(maxlag):.2f} s |")
PY
        tail -1 "$OUT/steady.md"
    done
done

{
    echo "Kafka source bench, $(date -u +%FT%TZ), $(nproc) CPUs, kafka_2.13 ${OKA_KAFKA_VERSION:-4.1.1}, Redis $(redis-server --version | awk '{sub("v=", "", $3); print $3}'), $PARTITIONS partitions"
    echo
    echo "Throughput (a backlog of $COUNT records, one consumer):"
    echo
    cat "$OUT/throughput.md"
    echo
    echo "Produce to servable at steady rates ($DURATION_S s each, batch.max_records 500):"
    echo
    cat "$OUT/steady.md"
} >"$OUT/results.md"
cat "$OUT/results.md"
