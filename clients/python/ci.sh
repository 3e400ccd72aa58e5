#!/usr/bin/env bash
# The Python client's checks: mypy --strict on the package, then its pytest suite
# against real `oka serve` processes on a real Redis (tests/conftest.py starts both
# on free loopback ports and stops them by PID).
#
#   bash clients/python/ci.sh target/debug/oka
#
# The venv is target/python-client/.venv inside the clone (created once; the pinned
# requirements are installed again only when requirements-ci.txt changes). The
# package itself is installed from this directory, not editable, on every run.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${1:?usage: clients/python/ci.sh PATH/TO/oka}
[[ -x $BIN ]] || { echo "python-client: no executable oka at $BIN" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

if ! command -v redis-server >/dev/null 2>&1; then
  echo "python-client: installing redis-server from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq redis-server >/dev/null
fi

VENV=$ROOT/target/python-client/.venv
source "$ROOT/scripts/venv.sh"
venv_with "$VENV" "$HERE/requirements-ci.txt"
PY=$VENV/bin/python
# The package with its extras, resolved against the pins (all installed above).
"$PY" -m pip install -q --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps \
  "$HERE[pandas,polars]"
"$PY" -m pip install -q --disable-pip-version-check --no-build-isolation -c "$HERE/requirements-ci.txt" \
  "$HERE[pandas,polars]"
"$PY" -m pip check

echo "== python client: the package parses as Python 3.9"
"$PY" - "$HERE/src/oka_client" <<'PYEOF'
import ast, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.py")):
    ast.parse(path.read_text(), str(path), feature_version=(3, 9))
print("ok")
PYEOF

echo "== python client: mypy --strict (the package; then its tests and bench.py)"
(cd "$HERE" && "$VENV/bin/mypy" --strict && "$VENV/bin/mypy" --strict tests bench.py)

echo "== python client: pytest against oka serve on Redis"
# Run from the tests' folder's parent, with the installed package (not src/) on the path.
cd "$HERE"
OKA_BIN=$BIN "$PY" -m pytest -q -p no:cacheprovider tests
