#!/usr/bin/env bash
# CI smoke test of the Locust suite against a local `oka serve --demo`.
#
#   bash locust/ci_smoke.sh target/debug/oka
#
# 1. venv at locust/.venv (created once; pip runs again only when requirements.txt changes)
# 2. oka serve --demo on two free loopback ports, 2 workers; stopped by PID on exit
# 3. three short runs through run.py (about 30 s in all):
#      step  native API, stepwise ramp 2 → 8 paced users, 2 keys per request (≈16 s)
#      rate  Volga GET /on_demand_compute/{json}, constant arrival rate 40 then 80 RPS (8 s)
#      neg   a key space twice what the server holds: the checks MUST report failures
# 4. plot.py over the first two runs
# 5. assertions (exit 1 if any fails): no failures and every request's values checked
#    (checked count == requests, values == requests × batch × targets, Locust's own count
#    agrees), server /stats samples with qps > 0, the shape reached its users, the
#    negative control failed as it should, and non-empty PNGs.
# Outputs go to locust/out/ci-smoke/ (recreated each run).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN_ARG=${1:?usage: locust/ci_smoke.sh PATH/TO/oka}
if [[ ! -x "$BIN_ARG" ]]; then
  echo "ci_smoke: no executable oka at $BIN_ARG" >&2
  exit 2
fi
BIN=$(cd "$(dirname "$BIN_ARG")" && pwd)/$(basename "$BIN_ARG")
VENV=$HERE/.venv
OUT=$HERE/out/ci-smoke
PY=${PYTHON:-python3}
t_start=$(date +%s)

# ---- 1. venv (idempotent)
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "ci_smoke: creating $VENV"
  "$PY" -m venv "$VENV"
fi
want=$(sha256sum "$HERE/requirements.txt" | cut -d' ' -f1)
stamp=$VENV/.requirements.sha256
if [[ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]] \
   || ! "$VENV/bin/python" -c 'import locust, matplotlib' 2>/dev/null; then
  echo "ci_smoke: pip install -r locust/requirements.txt"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$HERE/requirements.txt"
  echo "$want" > "$stamp"
else
  echo "ci_smoke: reusing $VENV"
fi
VPY=$VENV/bin/python

rm -rf "$OUT"
mkdir -p "$OUT"

# ---- 2. server on free loopback ports
read -r PORT APORT < <("$VPY" - <<'EOF'
import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])
EOF
)
"$BIN" serve --demo --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$APORT" --workers 2 \
  > "$OUT/oka.log" 2>&1 &
OKA_PID=$!
cleanup() {
  if kill -0 "$OKA_PID" 2>/dev/null; then
    kill "$OKA_PID" 2>/dev/null || true
    wait "$OKA_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT

"$VPY" - "$APORT" "$OKA_PID" <<'EOF'
import os, sys, time, urllib.request
port, pid = sys.argv[1], int(sys.argv[2])
deadline = time.time() + 30
while time.time() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("ci_smoke: oka exited before it was ready")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.2)
sys.exit("ci_smoke: oka not ready after 30 s")
EOF
echo "ci_smoke: oka (pid $OKA_PID) ready on 127.0.0.1:$PORT, admin 127.0.0.1:$APORT"

HOST=http://127.0.0.1:$PORT
ADMIN=http://127.0.0.1:$APORT

# ---- 3. runs (run.py exits with Locust's status: 1 when any request failed)
set +e
"$VPY" "$HERE/run.py" --host "$HOST" --admin-url "$ADMIN" --name ci-step --out "$OUT/step" \
  --timeout 60 -- --oka-shape step --oka-step-users 2 --oka-step-time 4 --oka-max-users 8 \
  --oka-hold 4 --oka-user-rps 20 --oka-batch 2 --oka-keys 10000 --oka-multiplier 2.0
rc_step=$?
"$VPY" "$HERE/run.py" --quiet --host "$HOST" --admin-url "$ADMIN" --name ci-volga-rate \
  --out "$OUT/rate" --timeout 60 -- --oka-api volga --oka-shape rate --oka-rate 40,80 \
  --oka-rate-time 4 --oka-user-rps 20 --oka-multiplier 3.0
rc_rate=$?
"$VPY" "$HERE/run.py" --quiet --host "$HOST" --admin-url "$ADMIN" --name ci-negative \
  --out "$OUT/neg" --timeout 60 -- --oka-shape rate --oka-rate 40 --oka-rate-time 2 \
  --oka-user-rps 20 --oka-keys 20000 > "$OUT/neg.out" 2>&1
rc_neg=$?
set -e

# ---- 4. plots
"$VPY" "$HERE/plot.py" "$OUT/step" "$OUT/rate" -o "$OUT/plots" \
  || echo "ci_smoke: plot.py failed (the PNG checks below will fail)"

# ---- 5. assertions
"$VPY" - "$OUT" "$rc_step" "$rc_rate" "$rc_neg" <<'EOF'
import json, os, sys
out, rc_step, rc_rate, rc_neg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
passed, failed = [], []

def check(name, ok, detail=""):
    (passed if ok else failed).append(name)
    print(f"  {'ok  ' if ok else 'FAIL'} {name}" + (f" ({detail})" if detail else ""))

def load(run):
    p = os.path.join(out, run, "result.json")
    return json.load(open(p)) if os.path.exists(p) else None

for run, rc, want_users in (("step", rc_step, 8), ("rate", rc_rate, 4)):
    r = load(run)
    check(f"{run}: result.json written", r is not None)
    if r is None:
        continue
    sm, ck, md = r["summary"], r["checks"], r["run_metadata"]
    o = md["oka_options"]
    n, nf = sm["requests"], sm["failures"]
    check(f"{run}: run.py/Locust exit 0", rc == 0 and md["locust_exit_code"] == 0, f"rc {rc}")
    check(f"{run}: requests > 0 and no failures", n > 0 and nf == 0, f"{n} requests, {nf} failures")
    lt = sm.get("locust_totals") or {}
    check(f"{run}: Locust's own count agrees", lt.get("requests") == n and lt.get("failures") == 0,
          f"locust {lt.get('requests')}/{lt.get('failures')}")
    targets = len(o["oka_targets"].split(","))
    want_vals = n * o["oka_batch"] * targets
    bad = {k: v for k, v in ck.items() if k.startswith("fail_")}
    check(f"{run}: every request's values checked",
          ck.get("requests_checked") == n and ck.get("values_checked") == want_vals and not bad,
          f"{ck.get('requests_checked')} requests, {ck.get('values_checked')} values "
          f"(want {n}, {want_vals}), failures {bad}")
    # Only /stats samples whose 5 s window lies inside this run count (run.py keeps those in
    # the per-second samples), so the previous run's traffic cannot satisfy this.
    smp = r["samples"]
    srv = [s["server_qps"] for s in smp if s.get("server_qps") is not None]
    check(f"{run}: server /stats samples with qps > 0",
          len(r["server_samples"]) > 0 and len(srv) > 0 and max(srv) > 0,
          f"{len(r['server_samples'])} samples, {len(srv)} inside the run, "
          f"max qps {max(srv, default=0)}")
    p99 = [s["client_p99"] for s in smp if s.get("client_p99") is not None]
    check(f"{run}: per-second client samples with p99", len(p99) >= 5, f"{len(p99)} seconds")
    mu = max((s.get("users") or 0 for s in smp), default=0)
    check(f"{run}: shape reached {want_users} users", mu == want_users, f"max users {mu}")

r = load("neg")
ck = (r or {}).get("checks", {})
nf = ck.get("fail_not_present", 0) + ck.get("fail_missing", 0)
check("negative control: unpopulated keys are reported as failures",
      r is not None and rc_neg == 1 and nf > 0 and r["summary"]["failures"] == nf,
      f"rc {rc_neg}, check failures {nf}, failures {(r or {}).get('summary', {}).get('failures')}")

for png in ("step_timeline.png", "rate_timeline.png", "latency_vs_rps.png", "scaling.png"):
    p = os.path.join(out, "plots", png)
    ok = os.path.exists(p) and os.path.getsize(p) > 1000 and open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    check(f"plot {png} written", ok, f"{os.path.getsize(p) if os.path.exists(p) else 0} bytes")

print(f"locust-smoke: {len(passed)} passed, {len(failed)} failed")
sys.exit(1 if failed else 0)
EOF
echo "ci_smoke: done in $(( $(date +%s) - t_start )) s"
