#!/usr/bin/env bash
# CI smoke test of the Locust suite against a local `oka serve --demo` (the seed workload)
# and a local `oka serve --spec examples/workloads/payments/spec.yaml` (a non-seed one).
#
#   bash locust/ci_smoke.sh target/debug/oka
#
# 1. venv at locust/.venv (created once; pip runs again only when requirements.txt changes)
# 2. oka serve --demo on two free loopback ports, 2 workers; the payments spec on two
#    more, 1 worker, its data.jsonl loaded through POST /v1/ingest (locust/ingest.py);
#    both stopped by PID on exit
# 3. short runs through run.py (about 35 s in all; the last three side by side):
#      step      seed, native API, stepwise ramp 2 → 8 paced users, 2 keys per request (≈16 s)
#      rate      seed, Volga GET /on_demand_compute/{json}, 40 then 80 RPS (8 s)
#      neg       seed, a key space twice what the server holds: MUST fail (not_present)
#      pay       payments workload file (keys user_id + merchant; a pipeline read, a CEL
#                feature with arguments, a last_n aggregate), Volga GET, 2 keys per
#                request, 40 then 80 RPS (4 s): every value checked
#      pay-neg   the same with one deliberately wrong expectation (a JSON workload written
#                here): MUST fail with wrong_value and nothing else
#      pay-reg   the workload built from the server's GET /v1/features (--oka-workload
#                registry, --oka-key patterns), native API (2 s)
# 4. plot.py over step, rate and pay (two worker counts, so scaling.png is drawn), and
#    over rate alone (one worker count: no scaling.png, a note instead)
# 5. assertions (exit 1 if any fails): no failures and every request's values checked
#    (checked count == requests, values == requests × batch × targets, field checks ==
#    requests × batch × the workload's checks per key, none for presence only, Locust's
#    own count agrees), server /stats samples with qps > 0, the shape reached its users,
#    the negative controls failed as they should, and non-empty PNGs.
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
t_start=$(date +%s)

# ---- 1. venv (idempotent)
bash "$HERE/venv.sh"
VPY=$VENV/bin/python

rm -rf "$OUT"
mkdir -p "$OUT"

# ---- 2. servers on free loopback ports
REPO=$(cd "$HERE/.." && pwd)
PAY=$REPO/examples/workloads/payments
"$BIN" validate --spec "$PAY/spec.yaml"
read -r PORT APORT PPORT PAPORT < <("$VPY" - <<'EOF'
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
}
trap cleanup EXIT

"$BIN" serve --demo --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$APORT" --workers 2 \
  > "$OUT/oka.log" 2>&1 &
OKA_PID=$!
PIDS+=("$OKA_PID")
# No --store: the in-memory store (it warns that the data lasts as long as the process).
"$BIN" serve --spec "$PAY/spec.yaml" --listen "127.0.0.1:$PPORT" --admin-listen "127.0.0.1:$PAPORT" \
  --workers 1 > "$OUT/oka-payments.log" 2>&1 &
PAY_PID=$!
PIDS+=("$PAY_PID")

wait_ready() {  # ADMIN_PORT PID LOG
  "$VPY" - "$1" "$2" "$3" <<'EOF'
import os, sys, time, urllib.request
port, pid, logf = sys.argv[1], int(sys.argv[2]), sys.argv[3]
deadline = time.time() + 30
while time.time() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit(f"ci_smoke: oka exited before it was ready; see {logf}")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.2)
sys.exit(f"ci_smoke: oka not ready after 30 s; see {logf}")
EOF
}
wait_ready "$APORT" "$OKA_PID" "$OUT/oka.log"
echo "ci_smoke: oka --demo (pid $OKA_PID) ready on 127.0.0.1:$PORT, admin 127.0.0.1:$APORT"
wait_ready "$PAPORT" "$PAY_PID" "$OUT/oka-payments.log"
echo "ci_smoke: oka --spec payments (pid $PAY_PID) ready on 127.0.0.1:$PPORT, admin 127.0.0.1:$PAPORT"
"$VPY" "$HERE/ingest.py" --url "http://127.0.0.1:$PPORT" "purchases=$PAY/data.jsonl"

HOST=http://127.0.0.1:$PORT
ADMIN=http://127.0.0.1:$APORT
PHOST=http://127.0.0.1:$PPORT
PADMIN=http://127.0.0.1:$PAPORT
# The payments workload with one deliberately wrong expectation (total off by 1.0), as
# JSON: pay-neg must fail with wrong_value on every request.
"$VPY" - "$PAY/workload.yaml" "$OUT/wrong-workload.json" <<'EOF'
import json, sys, yaml
w = yaml.safe_load(open(sys.argv[1]))
total = w["checks"]["spend_last3"]["fields"]["total"]
total["expect"] = f"({total['expect']}) + 1.0"
json.dump(w, open(sys.argv[2], "w"), indent=1)
EOF

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
"$VPY" "$HERE/run.py" --quiet --host "$PHOST" --admin-url "$PADMIN" --name ci-payments \
  --out "$OUT/pay" --timeout 60 -- --oka-workload "$PAY/workload.yaml" --oka-api volga \
  --oka-batch 2 --oka-shape rate --oka-rate 40,80 --oka-rate-time 2 --oka-user-rps 20
rc_pay=$?
# The two negative controls and the registry run are short and light: run them together.
"$VPY" "$HERE/run.py" --quiet --host "$HOST" --admin-url "$ADMIN" --name ci-negative \
  --out "$OUT/neg" --timeout 60 -- --oka-shape rate --oka-rate 40 --oka-rate-time 2 \
  --oka-user-rps 20 --oka-keys 20000 > "$OUT/neg.out" 2>&1 &
NEG_PID=$!
PIDS+=("$NEG_PID")
"$VPY" "$HERE/run.py" --quiet --host "$PHOST" --admin-url "$PADMIN" --name ci-payments-negative \
  --out "$OUT/pay-neg" --timeout 60 -- --oka-workload "$OUT/wrong-workload.json" \
  --oka-shape rate --oka-rate 40 --oka-rate-time 2 --oka-user-rps 20 > "$OUT/pay-neg.out" 2>&1 &
PAY_NEG_PID=$!
PIDS+=("$PAY_NEG_PID")
"$VPY" "$HERE/run.py" --quiet --host "$PHOST" --admin-url "$PADMIN" --name ci-payments-registry \
  --out "$OUT/pay-reg" --timeout 60 -- --oka-workload registry \
  --oka-targets discounted,spend_last3 --oka-key 'user_id=int:1000 + i' \
  --oka-key 'merchant=m-{i % 7}' --oka-keys 400 --oka-udf-arg discounted.rate=0.5 \
  --oka-shape rate --oka-rate 40 --oka-rate-time 2 --oka-user-rps 20
rc_pay_reg=$?
wait "$NEG_PID"
rc_neg=$?
wait "$PAY_NEG_PID"
rc_pay_neg=$?
set -e

# ---- 4. plots (step and rate: 2 workers; pay: 1 worker)
"$VPY" "$HERE/plot.py" "$OUT/rate" -o "$OUT/plots-one" > "$OUT/plot-one.out" 2>&1 &
PLOT_ONE_PID=$!
PIDS+=("$PLOT_ONE_PID")
"$VPY" "$HERE/plot.py" "$OUT/step" "$OUT/rate" "$OUT/pay" -o "$OUT/plots" > "$OUT/plot.out" 2>&1 \
  || echo "ci_smoke: plot.py failed (the PNG checks below will fail)"
cat "$OUT/plot.out"
wait "$PLOT_ONE_PID" || echo "ci_smoke: plot.py over one run failed"

# ---- 5. assertions
"$VPY" - "$OUT" "$rc_step" "$rc_rate" "$rc_neg" "$rc_pay" "$rc_pay_neg" "$rc_pay_reg" <<'EOF'
import json, os, sys
out = sys.argv[1]
rc_step, rc_rate, rc_neg, rc_pay, rc_pay_neg, rc_pay_reg = map(int, sys.argv[2:8])
passed, failed = [], []

def check(name, ok, detail=""):
    (passed if ok else failed).append(name)
    print(f"  {'ok  ' if ok else 'FAIL'} {name}" + (f" ({detail})" if detail else ""))

def load(run):
    p = os.path.join(out, run, "result.json")
    return json.load(open(p)) if os.path.exists(p) else None

def clean_run(run, rc, want_workload, want_batch, want_targets):
    """The checks every run without failures must pass; returns the result or None."""
    r = load(run)
    check(f"{run}: result.json written", r is not None)
    if r is None:
        return None
    sm, ck, md = r["summary"], r["checks"], r["run_metadata"]
    w = md.get("workload") or {}
    n, nf = sm["requests"], sm["failures"]
    check(f"{run}: run.py/Locust exit 0", rc == 0 and md["locust_exit_code"] == 0, f"rc {rc}")
    check(f"{run}: workload {want_workload}, batch {want_batch}, targets {','.join(want_targets)}",
          w.get("name") == want_workload and w.get("batch") == want_batch
          and w.get("targets") == want_targets,
          f"{w.get('name')}, batch {w.get('batch')}, targets {w.get('targets')}")
    check(f"{run}: requests > 0 and no failures", n > 0 and nf == 0, f"{n} requests, {nf} failures")
    lt = sm.get("locust_totals") or {}
    check(f"{run}: Locust's own count agrees", lt.get("requests") == n and lt.get("failures") == 0,
          f"locust {lt.get('requests')}/{lt.get('failures')}")
    want_vals = n * want_batch * len(want_targets)
    # Each checked record gets each field check of its target: with `record: last` (these
    # runs) one record per key and target, so the count is exact.
    per_key = w.get("field_checks") or {}
    want_fields = n * want_batch * sum(per_key.get(t, 0) for t in want_targets)
    bad = {k: v for k, v in ck.items() if k.startswith("fail_")}
    check(f"{run}: every request's values checked",
          ck.get("requests_checked") == n and ck.get("values_checked") == want_vals and not bad
          and not w.get("record_all") and ck.get("fields_checked") == want_fields,
          f"{ck.get('requests_checked')} requests, {ck.get('values_checked')} values, "
          f"{ck.get('fields_checked')} field checks (want {n}, {want_vals}, {want_fields}), "
          f"failures {bad}")
    check(f"{run}: every target has value checks (none for presence only)",
          sorted(w.get("checked_targets") or []) == sorted(want_targets)
          and all(per_key.get(t, 0) > 0 for t in want_targets) and not ck.get("presence_only"),
          f"checked {w.get('checked_targets')}, field checks per key {per_key}, "
          f"presence only {ck.get('presence_only', 0)}")
    return r


for run, rc, want_users in (("step", rc_step, 8), ("rate", rc_rate, 4)):
    r = clean_run(run, rc, "seed", 2 if run == "step" else 1, ["simple_feature"])
    if r is None:
        continue
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

# The non-seed workload: two key fields (int and string) on Volga's route, three targets
# of three kinds, every value checked against its expectation.
r = clean_run("pay", rc_pay, "payments", 2, ["purchases", "discounted", "spend_last3"])
if r is not None:
    w = r["run_metadata"]["workload"]
    check("pay: key objects of user_id (int) and merchant (string), udf_args and query_args sent",
          w["key_fields"] == ["user_id", "merchant"] and bool(w["udf_args"].get("discounted"))
          and w["query_args"].get("purchases") == {"n": 3}, f"{w['key_fields']}")
    mu = max((s.get("users") or 0 for s in r["samples"]), default=0)
    check("pay: shape reached 4 users", mu == 4, f"max users {mu}")

r = load("pay-neg")
ck = (r or {}).get("checks", {})
fails = {k: v for k, v in ck.items() if k.startswith("fail_")}
nreq = (r or {}).get("summary", {}).get("requests", 0)
check("negative control (payments): a wrong expectation fails every request as wrong_value",
      r is not None and rc_pay_neg == 1 and nreq > 0 and list(fails) == ["fail_wrong_value"]
      and fails["fail_wrong_value"] == nreq == r["summary"]["failures"],
      f"rc {rc_pay_neg}, {nreq} requests, check failures {fails}")

r = clean_run("pay-reg", rc_pay_reg, "registry", 1, ["discounted", "spend_last3"])
if r is not None:
    w = r["run_metadata"]["workload"]
    check("pay-reg: the registry's key fields, its value columns as checks, the override sent",
          w["key_fields"] == ["user_id", "merchant"] and w["origin"].endswith("/v1/features")
          and w["field_checks"] == {"discounted": 2, "spend_last3": 5}
          and w["udf_args"] == {"discounted": {"rate": 0.5}},
          f"keys {w['key_fields']}, field checks {w['field_checks']}, udf_args {w['udf_args']}")

for png in ("step_timeline.png", "rate_timeline.png", "pay_timeline.png", "latency_vs_rps.png",
            "scaling.png"):
    p = os.path.join(out, "plots", png)
    ok = os.path.exists(p) and os.path.getsize(p) > 1000 and open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    check(f"plot {png} written", ok, f"{os.path.getsize(p) if os.path.exists(p) else 0} bytes")
one = open(os.path.join(out, "plot-one.out")).read()
check("plot over one worker count: no scaling.png, and a note that says why",
      not os.path.exists(os.path.join(out, "plots-one", "scaling.png"))
      and "scaling.png not drawn: all runs have 2 workers" in one
      and os.path.exists(os.path.join(out, "plots-one", "rate_timeline.png")), one.strip()[-300:])

print(f"locust-smoke: {len(passed)} passed, {len(failed)} failed")
sys.exit(1 if failed else 0)
EOF
echo "ci_smoke: done in $(( $(date +%s) - t_start )) s"
