#!/usr/bin/env bash
# CI's short run of the cluster bench (issue 45): 2 nodes behind HAProxy on a Redis
# Cluster, a two-step ramp, then one rolling restart under load; asserts that every
# request of the ramp and of the restart was answered (0 failed) and that both
# nodes were replaced and taken back by the balancer.
#
#   bash benches/cluster/ci.sh PATH/TO/oka        (.ci/run passes target/debug/oka)
#
# A debug build: QUOTA 0.5 CPU a node and 100 RPS a step a node. About 2 minutes.
# Writes target/ci/cluster/results.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=$(realpath "${1:?usage: benches/cluster/ci.sh PATH/TO/oka}")
OUT=$PWD/target/ci/cluster
rm -rf "$OUT"
OUT=$OUT OKA_BIN=$BIN NODES=2 FAULT_NODES=2 QUOTA=0.5 STEPS=2 ROUNDS=1 STEP_S=5 STEP_RPS=100 \
  FAULTS=rolling_restart DURATION=600 bash benches/cluster/run.sh
python3 - "$OUT/results.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
problems = []
if "stopped" in doc:
    problems.append(f"the run stopped: {doc['stopped']}")
for run in doc.get("runs", []):
    for s in run["steps"]:
        if s["failed"]:
            problems.append(f"{run['nodes']} nodes, step {s['offered_rps']:g} RPS: {s['failed']} failed")
rr = doc.get("faults", {}).get("rolling_restart")
if not rr:
    problems.append("no rolling restart result")
else:
    if rr["failed"] != 0:
        problems.append(f"rolling restart: {rr['failed']} of {rr['requests']} requests failed (want 0)")
    if rr["requests"] < 100:
        problems.append(f"rolling restart: only {rr['requests']} requests were sent")
    nodes = [e["node"] for e in rr["events"]]
    if nodes != ["node1", "node2"]:
        problems.append(f"rolling restart: replaced {nodes}, want node1 and node2")
    if any(e["exit_status"] != 0 for e in rr["events"]):
        problems.append(f"rolling restart: a node's drain did not exit 0: {rr['events']}")
if problems:
    print("cluster ci: FAILED\n  " + "\n  ".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"cluster ci: ok: ramp {[round(s['rps']) for r in doc['runs'] for s in r['steps']]} RPS, "
      f"rolling restart {rr['requests']} requests, 0 failed ({doc['elapsed_s']} s)")
PY
