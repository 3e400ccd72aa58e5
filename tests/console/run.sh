#!/usr/bin/env bash
# The console (/ui on the admin port) in a real browser:
#
#   bash tests/console/run.sh target/debug/oka
#
# Debian's chromium (`apt-get install chromium`; .ci/run installs it), driven by
# Playwright from PyPI (target/console/venv, created once: about 10 s; Playwright's
# own browser downloads are not used). test_console.py starts `oka serve --demo`
# and a 200-feature spec with API keys, and checks every page loads with no console
# error or failed request, the lineage graph against the spec, the live chart
# against /stats under load, the try-it form against curl, HTML in the spec shown
# as text, and the admin-key guard. It writes a screenshot of each page to
# docs/img/console-*.png (check them in when they change). About a minute.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${1:?usage: tests/console/run.sh PATH/TO/oka}
[[ -x $BIN ]] || { echo "console: no executable oka at $BIN" >&2; exit 2; }
CHROMIUM=${OKA_CHROMIUM:-$(command -v chromium || true)}
[[ -x $CHROMIUM ]] || { echo "console: chromium is needed (Debian: apt-get install chromium)" >&2; exit 2; }
WORK=$ROOT/target/console
mkdir -p "$WORK"

VENV=$WORK/venv
source "$ROOT/scripts/venv.sh"
venv_with "$VENV" "$HERE/requirements.txt"

export OKA_BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN") OKA_CHROMIUM=$CHROMIUM OKA_WORK=$WORK
export OKA_SCREENSHOTS=${OKA_SCREENSHOTS:-$ROOT/docs/img}
export PATH=$VENV/bin:$PATH
cd "$WORK"
timeout 600 "$VENV/bin/python" -m pytest -q -s -p no:cacheprovider "$HERE/test_console.py"
echo "console: ok"
