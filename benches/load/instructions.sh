#!/usr/bin/env bash
# Instructions a served request costs over a real socket, counted by callgrind (which
# this shared machine's noise does not move): the server under valgrind with one
# worker; 500 requests of $BATCH keys (default 1) of simple_feature over one keep-alive
# connection to warm it, then `callgrind_control -z` (counts zeroed), 2,000 requests,
# `callgrind_control -d` (counts dumped): the dump's total ÷ 2,000. Start-up, warm-up
# and shutdown are not counted.
#
#   bash benches/load/instructions.sh [PATH/TO/oka]     (default target/release/oka)
#   STORE=redis://127.0.0.1:6379 EXTRA="--cache tracking" bash benches/load/instructions.sh
#   BATCH=100 bash benches/load/instructions.sh
#   CEILING=target/release/oka-ceiling bash benches/load/instructions.sh   # the bare-axum ceiling
#
# `oka serve` runs the demo's spec (`oka demo-spec`, its source writing the 10,000 keys
# once) on $STORE (default memory://); every request's keys are present, and the counted
# requests start once they are. EXTRA="…" adds flags to `oka serve` (default
# `--shutdown-delay-s 0`; an older binary may lack it: EXTRA=""). CALLGRIND_OUT=FILE
# keeps the profile (FILE.1) for callgrind_annotate. Needs valgrind, python3, curl;
# binds 127.0.0.1 only. About a minute per run.
#
# Another server and request (benches/peers/feast_instructions.sh does): SERVE="…"
# replaces `--spec … --store …`; REQ_PATH (default /v1/features); BODY, the body
# with `{keys}` where the keys go; KEY, one key with `%d` for its number (default
# `{"id":"test-id-%d"}`); PRESENT, the answer's word for a present value (default
# `"present"`) and PER_KEY, how many a key's answer holds (default 1).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-target/release/oka}
STORE=${STORE:-memory://}
EXTRA=${EXTRA---shutdown-delay-s 0}
BATCH=${BATCH:-1}
CEILING=${CEILING:-}
SERVE=${SERVE:-}
REQ_PATH=${REQ_PATH:-/v1/features}
BODY=${BODY:-'{"target_features":["simple_feature"],"keys":[{keys}],"udf_args":{"simple_feature":{"multiplier":2.0}}}'}
KEY=${KEY:-'{"id":"test-id-%d"}'}
PRESENT=${PRESENT:-'"present"'}
PER_KEY=${PER_KEY:-1}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
"$BIN" demo-spec | sed 's/period_s: 5$/period_s: 3600/' >"$WORK/spec.yaml"
# send PORT PID: warm-up, zero the counts, N requests, dump (each answered 200 and, from
# Oka, with every key present: the first requests wait until the demo source has
# written the keys).
N=2000
send() {
  python3 - "$1" "$2" "$N" "$BATCH" "$([[ -n $CEILING ]] && echo 0 || echo 1)" \
    "$REQ_PATH" "$BODY" "$KEY" "$PRESENT" "$PER_KEY" <<'PY'
import socket, subprocess, sys, time
port, pid, n, batch, check = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
path, template, key, present, per_key = sys.argv[6:11]
present, expected = present.encode(), batch * int(per_key)
keys = ",".join(key % (21 + i) for i in range(batch))
body = template.replace("{keys}", keys).encode()
req = b"POST %s HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % (path.encode(), len(body)) + body
s = socket.create_connection(("127.0.0.1", port)); f = s.makefile("rb")
def one():
    s.sendall(req)
    assert int(f.readline().split()[1]) == 200
    length = 0
    while (h := f.readline()) not in (b"\r\n", b""):
        k, _, v = h.decode().partition(":")
        length = int(v) if k.lower() == "content-length" else length
    return f.read(length)
for _ in range(600):  # up to 60 s for the demo source's first write
    if not check or one().count(present) == expected:
        break
    time.sleep(0.1)
else:
    sys.exit("the demo's keys never became present")
for _ in range(500):
    one()
subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
for _ in range(n):
    one()
subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
PY
}
total() {
  local out=$1 port aport pid
  port=$(free_port); aport=$(free_port)
  if [[ -n $CEILING ]]; then
    valgrind --tool=callgrind --callgrind-out-file="$out" "$CEILING" --listen "127.0.0.1:$port" \
      >/dev/null 2>"$WORK/err" &
    pid=$!
    for _ in $(seq 1 300); do curl -s -o /dev/null "localhost:$port/" && break; sleep 0.2; done
  else
    local serve=(--spec "$WORK/spec.yaml" --store "$STORE")
    # shellcheck disable=SC2206
    [[ -z $SERVE ]] || serve=($SERVE)
    # shellcheck disable=SC2086
    valgrind --tool=callgrind --callgrind-out-file="$out" "$BIN" serve "${serve[@]}" --workers 1 --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$aport" $EXTRA \
      >/dev/null 2>"$WORK/err" &
    pid=$!
    for _ in $(seq 1 300); do curl -sf "localhost:$aport/healthz" >/dev/null 2>&1 && break; sleep 0.2; done
  fi
  send "$port" "$pid"
  kill -TERM "$pid"; wait "$pid" || true
  awk '/^summary:/{print $2}' "$out.1"
}
OUT=${CALLGRIND_OUT:-$WORK/callgrind.out}
total=$(total "$OUT")
echo "${CEILING:-$BIN} (${SERVE:-$STORE}${EXTRA:+ $EXTRA}, $REQ_PATH, $BATCH key(s)): $((total / N)) instructions per served request"
