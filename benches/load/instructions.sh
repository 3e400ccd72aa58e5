#!/usr/bin/env bash
# Instructions a served request costs `oka serve` over a real socket, counted by
# callgrind (which this shared machine's noise does not move): `oka serve --workers 1
# --spec examples/seed/spec.yaml` (memory store) under valgrind, N seed requests over
# one keep-alive connection, then SIGTERM; the count of a 3,000-request run minus a
# 1,000-request run, ÷ 2,000, so start-up and shutdown cancel out.
#
#   bash benches/load/instructions.sh [PATH/TO/oka]     (default target/release/oka)
#
# EXTRA="…" adds flags to `oka serve` (an older binary may lack --shutdown-delay-s:
# EXTRA="" for it). Needs valgrind, python3, curl; binds 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-target/release/oka}
EXTRA=${EXTRA---shutdown-delay-s 0}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
send() {
  python3 - "$1" "$2" <<'PY'
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
body = b'{"target_features":["simple_feature"],"keys":[{"id":"test-id-21"}],"udf_args":{"simple_feature":{"multiplier":2.0}}}'
req = b"POST /v1/features HTTP/1.1\r\nhost: t\r\ncontent-length: %d\r\n\r\n" % len(body) + body
s = socket.create_connection(("127.0.0.1", port)); f = s.makefile("rb")
for _ in range(n):
    s.sendall(req)
    assert int(f.readline().split()[1]) == 200
    length = 0
    while (h := f.readline()) not in (b"\r\n", b""):
        k, _, v = h.decode().partition(":")
        length = int(v) if k.lower() == "content-length" else length
    f.read(length)
PY
}
total() {
  local n=$1 port aport pid
  port=$(free_port); aport=$(free_port)
  # shellcheck disable=SC2086
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" serve --spec examples/seed/spec.yaml \
    --workers 1 --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$aport" $EXTRA \
    >/dev/null 2>"$WORK/err" &
  pid=$!
  for _ in $(seq 1 300); do curl -sf "localhost:$aport/healthz" >/dev/null 2>&1 && break; sleep 0.2; done
  send "$port" "$n"
  kill -TERM "$pid"; wait "$pid" || true
  awk '/Collected/{print $4}' "$WORK/err"
}
a=$(total 1000)
b=$(total 3000)
echo "$BIN: $(((b - a) / 2000)) instructions per served request"
