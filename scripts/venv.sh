# Sourced by the test scripts that need Python packages (tests/*/run.sh,
# clients/python/ci.sh):
#
#   source "$ROOT/scripts/venv.sh"; venv_with VENV REQUIREMENTS.txt
#
# Creates the venv once and runs pip again only when the requirements file
# changes (its sha256 is kept in VENV/.requirements.sha256), so a second run
# costs nothing and a changed pin is installed.
venv_with() {
  local venv=$1 requirements=$2 want
  [[ -x $venv/bin/python ]] || python3 -m venv "$venv"
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [[ "$(cat "$venv/.requirements.sha256" 2>/dev/null || true)" != "$want" ]]; then
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements"
    echo "$want" > "$venv/.requirements.sha256"
  fi
}
