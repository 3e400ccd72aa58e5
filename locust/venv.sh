#!/usr/bin/env bash
# The Locust suite's venv at locust/.venv (idempotent): created once; pip runs again
# only when locust/requirements.txt changes. Used by locust/ci_smoke.sh and
# benches/cluster/run.sh. PYTHON picks the interpreter (default python3).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VENV=$HERE/.venv
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "locust venv: creating $VENV"
  "${PYTHON:-python3}" -m venv "$VENV"
fi
want=$(sha256sum "$HERE/requirements.txt" | cut -d' ' -f1)
stamp=$VENV/.requirements.sha256
if [[ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]] \
   || ! "$VENV/bin/python" -c 'import locust, matplotlib, yaml' 2>/dev/null; then
  echo "locust venv: pip install -r locust/requirements.txt"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$HERE/requirements.txt"
  echo "$want" > "$stamp"
else
  echo "locust venv: reusing $VENV"
fi
