#!/usr/bin/env bash
# Oka's Volga routes checked with Volga's client stack (aiohttp + pydantic 1.10)
# against `oka serve --demo`: see check.py.
#
#   bash tests/volga-client/run.sh target/debug/oka
#
# The venv is tests/volga-client/.venv (created once; pip runs again only when
# requirements.txt changes). The server binds free loopback ports and is stopped
# by PID on exit.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=${1:?usage: tests/volga-client/run.sh PATH/TO/oka}
[[ -x $BIN ]] || { echo "volga-client: no executable oka at $BIN" >&2; exit 2; }
VENV=$HERE/.venv
source "$HERE/../../scripts/venv.sh"
venv_with "$VENV" "$HERE/requirements.txt"
read -r PORT APORT < <(python3 -c '
import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')
log=$(mktemp)
"$BIN" serve --demo --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$APORT" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$APORT/readyz" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { cat "$log"; echo "volga-client: oka exited" >&2; exit 1; }
  sleep 0.2
done
"$VENV/bin/python" "$HERE/check.py" "http://127.0.0.1:$PORT"
