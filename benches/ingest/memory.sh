#!/usr/bin/env bash
# Ingest memory bench: peak memory of `oka ingest` on a large file and of `oka serve`
# under concurrent 4 MiB ingest bodies, both writing to a local Redis.
#
#   bash benches/ingest/memory.sh
#
# Needs redis-server (Debian: apt-get install -y redis-server) and python3. Starts
# redis-server on a free loopback port (REDIS_PORT to choose it; --save "" --appendonly no),
# then runs the parts named in $PARTS (default "ingest serve"):
#   ingest  (a) writes out/records_<SIZE_MB>mb.jsonl, SIZE_MB (default 1024) MiB of JSON
#           Lines {"id":"k<i mod 100000>","value":<i>.25} (kept and reused while its size
#           matches; KEEP_FILE=0 deletes it at the end), then
#           (b) runs `oka ingest --spec examples/seed/spec.yaml --feature test_feature
#           --file <it> --store redis://…` under a Python wrapper that takes the child's peak
#           RSS from getrusage, and reports input size, records, elapsed, records/s, peak RSS.
#           Skipped when `free -g` shows less than MIN_FREE_GB (default 8) available: an
#           older binary may hold the whole file in memory. The run is killed after
#           INGEST_TIMEOUT_S (default 3600).
#   serve   (c) starts `oka serve --spec examples/seed/spec.yaml --store redis://… --workers 2`
#           (explicit --listen/--admin-listen), waits for /readyz, then POSTs 16 (BODIES)
#           concurrent /v1/ingest bodies of just under 4 MiB (the default --max-body-bytes)
#           of tiny records {"id":"k<n mod 1000>","value":<n>} from Python threads, checks
#           each answer is 200 with `written` equal to the body's record count, and reports
#           the server's VmHWM (peak RSS, /proc/<pid>/status) before and after.
# Prints a summary and writes out/memory.json (every number) and out/memory.md (a Markdown
# table), under benches/ingest/out/ (git-ignored). Exits non-zero if a part failed.
# Everything binds 127.0.0.1 only; redis-server and oka serve are stopped by PID on exit.
# Env overrides: OKA_BIN (the `oka` binary, default target/release/oka; e.g. one built from
# an older commit, with PARTS=ingest SIZE_MB=200, to show its memory), SIZE_MB, PARTS,
# BODIES, MIN_FREE_GB, INGEST_TIMEOUT_S, KEEP_FILE, REDIS_PORT, OKA_PORT (18124),
# ADMIN_PORT (19124), SKIP_BUILD=1.
set -euo pipefail
command -v redis-server >/dev/null ||
    { echo "memory.sh needs redis-server (apt-get install -y redis-server)" >&2; exit 2; }
command -v jq >/dev/null || { echo "memory.sh needs jq (apt-get install -y jq)" >&2; exit 2; }

cd "$(dirname "$0")/../.."
SIZE_MB=${SIZE_MB:-1024}
PARTS=${PARTS:-ingest serve}
BODIES=${BODIES:-16}
MIN_FREE_GB=${MIN_FREE_GB:-8}
INGEST_TIMEOUT_S=${INGEST_TIMEOUT_S:-3600}
OKA_PORT=${OKA_PORT:-18124}
ADMIN_PORT=${ADMIN_PORT:-19124}
OUT=benches/ingest/out
OKA_BIN=${OKA_BIN:-target/release/oka}
SPEC=examples/seed/spec.yaml
mkdir -p "$OUT"

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    cargo build --release -q -p oka-cli
fi

PIDS=()
FILE=
cleanup() {
    # Newest first: oka serve before the redis-server it writes to.
    local i
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        kill "${PIDS[i]}" 2>/dev/null || true
        wait "${PIDS[i]}" 2>/dev/null || true
    done
    if [[ "${KEEP_FILE:-1}" == 0 && -n $FILE ]]; then rm -f "$FILE" "$FILE.records"; fi
}
trap cleanup EXIT

REDIS_PORT=${REDIS_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no >"$OUT/redis.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$REDIS_PORT" ping >/dev/null || { echo "redis-server did not start" >&2; exit 1; }
STORE="redis://127.0.0.1:$REDIS_PORT"

RESULTS=()
FAILED=0

if [[ " $PARTS " == *" ingest "* ]]; then
    # (a) The input: exactly SIZE_MB MiB of whole lines; its record count beside it.
    FILE="$OUT/records_${SIZE_MB}mb.jsonl"
    BYTES=$((SIZE_MB * 1024 * 1024))
    if [[ ! -f $FILE.records || $(stat -c %s "$FILE" 2>/dev/null || echo 0) != "$BYTES" ]]; then
        echo "== writing $FILE ($SIZE_MB MiB)" >&2
        python3 - "$FILE" "$BYTES" <<'PY'
import sys
path, target = sys.argv[1], int(sys.argv[2])
written = records = 0
with open(path, "w") as out:
    i = 0
    while written < target:
        chunk = "".join(f'{{"id":"k{j % 100000}","value":{j}.25}}\n' for j in range(i, i + 100_000))
        i += 100_000
        if written + len(chunk) > target:
            chunk = chunk[: chunk.rfind("\n", 0, target - written) + 1]
            if not chunk:
                break
        out.write(chunk)
        written += len(chunk)
        records += chunk.count("\n")
with open(path + ".records", "w") as out:
    out.write(f"{records}\n")
PY
    fi
    RECORDS=$(cat "$FILE.records")
    INPUT_BYTES=$(stat -c %s "$FILE")

    # (b) oka ingest under a wrapper reporting the child's elapsed time and peak RSS.
    AVAIL_GB=$(free -g | awk '/^Mem:/ {print $7}')
    if ((AVAIL_GB < MIN_FREE_GB)); then
        echo "== skipping oka ingest: $AVAIL_GB GB available, under MIN_FREE_GB=$MIN_FREE_GB" >&2
        RESULTS+=("$(jq -n --argjson a "$AVAIL_GB" '{part: "ingest", skipped: "available memory \($a) GB"}')")
    else
        echo "== $OKA_BIN ingest of $INPUT_BYTES bytes, $RECORDS records" >&2
        set +e
        python3 - "$INGEST_TIMEOUT_S" "$OUT/ingest.log" "$OKA_BIN" ingest --spec "$SPEC" \
            --feature test_feature --file "$FILE" --store "$STORE" >"$OUT/ingest_run.json" <<'PY'
import json, resource, subprocess, sys, time
timeout, log, cmd = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
start = time.monotonic()
with open(log, "w") as out:
    try:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
elapsed = time.monotonic() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": rc, "elapsed_s": round(elapsed, 3), "peak_rss_kib": peak}))
sys.exit(0 if rc == 0 else 1)
PY
        rc=$?
        set -e
        ((rc == 0)) || { echo "oka ingest failed; see $OUT/ingest.log" >&2; FAILED=1; }
        WROTE=$(grep -o 'wrote [0-9]* records' "$OUT/ingest.log" | grep -o '[0-9]*' | tail -1 || true)
        RESULTS+=("$(jq --arg bin "$OKA_BIN" --argjson bytes "$INPUT_BYTES" --argjson records "$RECORDS" \
            --arg wrote "${WROTE:-}" --arg summary "$(tail -n 3 "$OUT/ingest.log")" '
            {part: "ingest", oka_bin: $bin, input_bytes: $bytes, input_mib: ($bytes / 1048576 | round),
             records: $records, wrote: ($wrote | if . == "" then null else tonumber end),
             rc: .rc, elapsed_s: .elapsed_s,
             records_per_s: ($records / .elapsed_s | round),
             peak_rss_kib: .peak_rss_kib, peak_rss_mib: (.peak_rss_kib / 1024 | round),
             peak_rss_over_input: (.peak_rss_kib * 1024 / $bytes * 1000 | round / 1000),
             summary: $summary}' "$OUT/ingest_run.json")")
    fi
fi

if [[ " $PARTS " == *" serve "* ]]; then
    # (c) oka serve under concurrent ingest bodies of just under 4 MiB.
    "$OKA_BIN" serve --spec "$SPEC" --store "$STORE" --workers 2 --listen "127.0.0.1:$OKA_PORT" \
        --admin-listen "127.0.0.1:$ADMIN_PORT" --log-format text 2>"$OUT/oka-serve.log" &
    OKA_PID=$!
    PIDS+=("$OKA_PID")
    for _ in $(seq 300); do
        [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ADMIN_PORT/readyz" || true) == 200 ]] && break
        sleep 0.1
    done
    hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$OKA_PID/status"; }
    rss() { awk '/^VmRSS:/ {print $2}' "/proc/$OKA_PID/status"; }
    HWM_BEFORE=$(hwm)
    echo "== $BODIES concurrent ingest bodies of just under 4 MiB" >&2
    set +e
    python3 - 127.0.0.1 "$OKA_PORT" "$BODIES" >"$OUT/serve_run.json" <<'PY'
import collections, http.client, json, sys, threading, time
host, port, bodies = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
parts, size, n = ['{"feature":"test_feature","records":['], 0, 0
size = len(parts[0]) + 2
while True:
    record = ('' if n == 0 else ',') + f'{{"id":"k{n % 1000}","value":{n}}}'
    if size + len(record) > 4 * 1024 * 1024 - 64:
        break
    parts.append(record)
    size += len(record)
    n += 1
parts.append("]}")
body = "".join(parts).encode()
answers, lock = [], threading.Lock()
def post():
    try:
        conn = http.client.HTTPConnection(host, port, timeout=300)
        conn.request("POST", "/v1/ingest", body, {"content-type": "application/json"})
        answer = conn.getresponse()
        text = answer.read().decode(errors="replace")
        try:
            written = json.loads(text).get("written")
        except ValueError:
            written = None
        result = {"status": answer.status, "written": written, "body": text[:300]}
    except (OSError, http.client.HTTPException) as error:
        result = {"status": None, "written": None, "body": repr(error)}
    with lock:
        answers.append(result)
start = time.monotonic()
threads = [threading.Thread(target=post) for _ in range(bodies)]
for t in threads:
    t.start()
for t in threads:
    t.join()
elapsed = time.monotonic() - start
ok = sum(1 for a in answers if a["status"] == 200 and a["written"] == n)
print(json.dumps({"bodies": bodies, "body_bytes": len(body), "records_per_body": n,
                  "elapsed_s": round(elapsed, 3), "ok": ok,
                  "statuses": dict(collections.Counter(str(a["status"]) for a in answers)),
                  "failures": [a for a in answers if not (a["status"] == 200 and a["written"] == n)]}))
sys.exit(0 if ok == bodies else 1)
PY
    rc=$?
    set -e
    ((rc == 0)) || { echo "some ingest bodies failed; see $OUT/serve_run.json" >&2; FAILED=1; }
    HWM_AFTER=$(hwm)
    RSS_AFTER=$(rss)
    RESULTS+=("$(jq --arg bin "$OKA_BIN" --argjson before "$HWM_BEFORE" --argjson after "$HWM_AFTER" \
        --argjson rss "$RSS_AFTER" '
        {part: "serve", oka_bin: $bin} + .
        + {vmhwm_before_kib: $before, vmhwm_after_kib: $after, vmrss_after_kib: $rss,
           vmhwm_before_mib: ($before / 1024 | round), vmhwm_after_mib: ($after / 1024 | round)}' \
        "$OUT/serve_run.json")")
fi

printf '%s\n' "${RESULTS[@]}" | jq -s --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    --arg host "$(uname -n)" --argjson cpus "$(nproc)" \
    '{date: $date, host: $host, cpus: $cpus, parts: .}' >"$OUT/memory.json"
jq -r '
  "| part | oka | input | records | elapsed s | records/s | peak RSS MiB | notes |",
  "|---|---|---:|---:|---:|---:|---:|---|",
  (.parts[] |
    if .skipped then "| \(.part) | – | – | – | – | – | – | skipped: \(.skipped) |"
    elif .part == "ingest" then
      "| oka ingest | \(.oka_bin) | \(.input_mib) MiB | \(.records) | \(.elapsed_s) | \(.records_per_s) | \(.peak_rss_mib) | peak RSS / input \(.peak_rss_over_input); exit \(.rc); wrote \(.wrote) |"
    else
      "| oka serve, \(.bodies) × \(.body_bytes) B bodies | \(.oka_bin) | \(.bodies * .body_bytes / 1048576 | round) MiB | \(.bodies * .records_per_body) | \(.elapsed_s) | \(.bodies * .records_per_body / .elapsed_s | round) | \(.vmhwm_after_mib) | VmHWM before \(.vmhwm_before_mib) MiB; \(.ok)/\(.bodies) answered 200 with every record written; statuses \(.statuses | tostring) |"
    end)
' "$OUT/memory.json" >"$OUT/memory.md"
cat "$OUT/memory.md"
exit "$FAILED"
