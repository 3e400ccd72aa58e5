#!/usr/bin/env bash
# The cluster bench (issue 45): N Oka nodes, each its own process tree in its own
# cgroup with a CPU quota (a t2.medium's share) on its own loopback address, behind
# HAProxy (the ALB: round robin, health checks on /readyz with the ALB's interval and
# thresholds), on a Redis Cluster of three primaries with a replica each, driven by the
# project's locustfile in distributed mode (a master and workers) with a stepwise
# ramp; then faults under load: a node killed, a rolling restart, a Redis primary
# killed. Results: benches/cluster/out/results.json; charts with
# `python3 benches/cluster/charts.py` (docs/scaling.md).
#
#   bash benches/cluster/run.sh                       # NODES="1 2 4", the three faults
#   NODES="2" FAULTS=rolling_restart STEPS=2 bash benches/cluster/run.sh   # CI's short run
#
# Parameters (environment variables):
#   NODES            node counts to measure, space-separated (default "1 2 4")
#   QUOTA            CPUs per node (default 0.1: half a t2.medium vCPU's 20% baseline,
#                    so that two shared cores can drive four nodes); PERIOD_US its CFS
#                    period (default the shortest the kernel's least quota of 1 ms allows,
#                    at least 5000: a throttled node waits at most that, not the default 100 ms)
#   NODE_WORKERS     serving workers per node (default 1)
#   STEP_S           seconds per ramp step (default 10); STEPS steps (default 10)
#   ROUNDS           ramps per node count (default 3); the median round's figures stand
#   STEP_RPS         RPS each step adds per node (default 2500 × QUOTA)
#   USER_RPS         each Locust user's pace (default 10, the seed's)
#   GEN_WORKERS      Locust worker processes (default 2)
#   SLO_P95_MS       a step is sustainable when it keeps up, without failures, with
#                    p95 within this (default 50, the seed's Volga figure)
#   FAULTS           which faults (default "node_kill rolling_restart redis_failover")
#   FAULT_NODES      nodes during the faults (default: 3, or fewer when NODES tops lower; at least 2)
#   FAULT_LOAD       the faults' offered rate as a share of what the surviving nodes
#                    sustained (default 0.5); FAULT_S seconds of load (default 40)
#   CHECK_INTERVAL_S, CHECK_TIMEOUT_S, HEALTHY, UNHEALTHY   the health checks (default
#                    5, 3, 2, 2: the Helm chart's ALB settings)
#   REDIS_NODE_TIMEOUT_MS   the Redis Cluster's node timeout (default 2000)
#   DURATION         seconds after which no further fault starts (default: none)
#   OUT              where results.json and the work files go (default benches/cluster/out)
#   OKA_BIN          a built oka (default: cargo build --release, target/release/oka)
#
# Needs root (cgroups; apt-get), Debian's haproxy and redis-server (installed when
# missing), python3, and locust/.venv (made from locust/requirements.txt when missing).
# Binds loopback only (the nodes 127.0.1.N); stops what it starts by PID, and kills
# what is left in its cgroups. Time: setup ~15 s, then per node count ROUNDS × (STEPS × STEP_S + ~10 s),
# then the faults (~50 s each; the rolling restart ~30 s a node).
set -euo pipefail
cd "$(dirname "$0")/../.."
missing=()
command -v haproxy >/dev/null || missing+=(haproxy)
command -v redis-server >/dev/null || missing+=(redis-server)
if ((${#missing[@]})); then
  echo "cluster: installing ${missing[*]} from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
bash locust/venv.sh
if [[ -z "${OKA_BIN:-}" ]]; then
  cargo build --release -q -p oka-cli
  OKA_BIN=target/release/oka
fi
cd benches/cluster
exec python3 cluster.py "$(cd ../.. && realpath "$OKA_BIN")" "$(cd ../../locust/.venv/bin && pwd)/python"
