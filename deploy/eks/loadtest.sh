#!/usr/bin/env bash
# One load test for a given number of Oka workers, as the seed ran them: scale the Oka
# pods (and their nodes) to WORKERS / OKA_CPU, start Locust in the cluster (helm/oka-locust,
# headless), run a 3-minute stepwise ramp against the ALB, copy the result JSON/CSVs out,
# and plot them.
#
#   deploy/eks/loadtest.sh WORKERS [options]
#
#   --rps-per-worker R   the ramp's top is WORKERS × R × 1.25 requests/s (default 1000,
#                        the seed's figure; raise it once a first run has measured Oka)
#   --max-rps R          the ramp's top, requests/s (overrides --rps-per-worker)
#   --locust-workers N   Locust worker pods (default: enough for the top at 1,000 RPS each)
#   --steps N            ramp steps (default 9), each --step-time s (default 20): the
#                        seed's "every ~20 s over a 3-minute run"
#   --user-rps R         requests/s per paced Locust user (default 10)
#   --api volga|native   Volga's GET /on_demand_compute/{json} (the seed's; default) or
#                        POST /v1/features
#   --batch N            keys per request (default: the workload's)
#   --workload FILE      the workload file (locust/README.md, "Workload files"): keys,
#                        targets, udf_args and value checks; default locust/workloads/seed.yaml,
#                        which fits the seed spec and data of deploy.sh. Your spec
#                        (deploy.sh --spec) needs your workload, e.g.
#                        examples/workloads/payments/workload.yaml. `registry` builds it
#                        from the server's GET /v1/features (give --locust-arg
#                        --oka-targets=a,b and --locust-arg --oka-key=FIELD=PATTERN)
#   --keys N             override the workload's key range: N indices (must match the data)
#   --locust-arg ARG     one more argument for the locustfile (e.g. --oka-udf-arg=f.a=2);
#                        repeatable
#   --target alb|service through the ALB (default, as the seed) or the Oka Service
#   --no-scale           leave the node groups and the Oka replicas as they are
#   --keep-locust        leave the Locust release installed afterwards
#
# Results: deploy/eks/results/<run>/ (result.json, samples.csv, locust_*.csv, PNGs);
# all runs together: python locust/plot.py deploy/eks/results/eks-* -o deploy/eks/results/plots
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
need kubectl helm python3 eksctl

workers=${1:-}
[[ $workers =~ ^[0-9]+$ && $workers -gt 0 ]] || die "usage: loadtest.sh WORKERS [options] (e.g. loadtest.sh 4)"
shift
rps_per_worker=1000 max_rps="" locust_workers="" steps=9 step_time=20 user_rps=10
api=volga batch="" target=alb scale=1 keep_locust=0
workload=$REPO_ROOT/locust/workloads/seed.yaml keys=""
extra=()
while (($#)); do
  case $1 in
    --rps-per-worker) rps_per_worker=$2; shift ;;
    --max-rps) max_rps=$2; shift ;;
    --locust-workers) locust_workers=$2; shift ;;
    --steps) steps=$2; shift ;;
    --step-time) step_time=$2; shift ;;
    --user-rps) user_rps=$2; shift ;;
    --api) api=$2; shift ;;
    --batch) batch=$2; shift ;;
    --workload) workload=$2; shift ;;
    --keys) keys=$2; shift ;;
    --locust-arg) extra+=("$2"); shift ;;
    --target) target=$2; shift ;;
    --no-scale) scale=0 ;;
    --keep-locust) keep_locust=1 ;;
    *) die "unknown option $1" ;;
  esac
  shift
done

workload_args=()
if [[ $workload == registry ]]; then
  workload_args=(--set workload.registry=true)
else
  [[ -f $workload ]] || die "--workload $workload: no such file (a workload file, locust/README.md \"Workload files\"; or registry)"
  workload_args=(--set-file "workload.content=$workload")
  venv_py=$REPO_ROOT/locust/.venv/bin/python
  if [[ -x $venv_py ]]; then
    # Check it here, before the cluster does: the locustfile compiles it with the overrides.
    check=(--check "$workload")
    [[ -n $batch ]] && check+=(--oka-batch "$batch")
    [[ -n $keys ]] && check+=(--oka-keys "$keys")
    "$venv_py" "$REPO_ROOT/locust/locustfile.py" "${check[@]}" "${extra[@]}" \
      || die "--workload $workload: see the message above"
    # Pass it as JSON: Helm reads YAML 1.1, where a bare `n` (query_args n) is false.
    mkdir -p "$GENERATED"
    "$venv_py" -c 'import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), open(sys.argv[2], "w"), indent=1)' \
      "$workload" "$GENERATED/workload.json"
    workload_args=(--set-file "workload.content=$GENERATED/workload.json")
  fi
fi

pods=$(((workers + OKA_CPU - 1) / OKA_CPU))
((pods * OKA_CPU == workers)) || echo "note: $workers workers with OKA_CPU=$OKA_CPU: running $pods pods = $((pods * OKA_CPU)) workers"
[[ -n $max_rps ]] || max_rps=$((workers * rps_per_worker * 5 / 4))
[[ -n $locust_workers ]] || locust_workers=$(((max_rps + 999) / 1000))
((locust_workers >= 1)) || locust_workers=1
# The master takes a worker-sized slot too.
locust_nodes=$(((locust_workers + 1 + LOCUST_WORKERS_PER_NODE - 1) / LOCUST_WORKERS_PER_NODE))
max_users=$(((max_rps + user_rps - 1) / user_rps))
step_users=$(((max_users + steps - 1) / steps))
run="eks-${workers}w-$(date -u +%Y%m%dT%H%M%SZ)"
results=$EKS_DIR/results
mkdir -p "$results"

log "$run: workload $workload; $pods Oka pod(s) × $OKA_CPU CPU; ramp to $max_rps RPS ($max_users users × $user_rps RPS, +$step_users every ${step_time}s); $locust_workers Locust worker(s) on $locust_nodes node(s)"

scale_oka_nodes() {
  eksctl scale nodegroup --region "$AWS_REGION" --cluster "$CLUSTER_NAME" --name oka \
    --nodes "$pods" --nodes-max "$((pods > OKA_NODES_MAX ? pods : OKA_NODES_MAX))"
}
scale_oka_pods() {
  helm upgrade "$RELEASE" "$REPO_ROOT/helm/oka" --namespace "$NAMESPACE" --reuse-values \
    --set replicaCount="$pods" --wait --timeout 20m
}
if ((scale)); then
  current=$(helm get values "$RELEASE" --namespace "$NAMESPACE" --all -o json \
    | python3 -c 'import json,sys; print(json.load(sys.stdin).get("replicaCount", 0))')
  log "scale: Oka $current → $pods pod(s) and node(s); locust node group → $locust_nodes"
  # Growing: nodes first, so the pods (one per node) can be scheduled. Shrinking: pods
  # first, so the Auto Scaling group never removes a node that still serves.
  if ((pods >= current)); then scale_oka_nodes; scale_oka_pods; else scale_oka_pods; scale_oka_nodes; fi
  eksctl scale nodegroup --region "$AWS_REGION" --cluster "$CLUSTER_NAME" --name locust \
    --nodes "$locust_nodes" --nodes-max "$((locust_nodes > LOCUST_NODES_MAX ? locust_nodes : LOCUST_NODES_MAX))"
fi
oka_sel="app.kubernetes.io/instance=$RELEASE,app.kubernetes.io/component=server"
deployment=$(kubectl -n "$NAMESPACE" get deploy -l "$oka_sel" -o jsonpath='{.items[0].metadata.name}')
[[ -n $deployment ]] || die "no Oka Deployment in $NAMESPACE; run deploy.sh"
kubectl -n "$NAMESPACE" rollout status "deploy/$deployment" --timeout 10m

case $target in
  alb)
    host=$(alb_hostname)
    [[ -n $host ]] || die "no ALB address; run deploy.sh (or --target service)"
    target_url="http://$host" ;;
  service)
    target_url="http://$deployment.$NAMESPACE.svc:1122" ;;
  *) die "--target alb|service" ;;
esac
# One pod's admin port for run.py's /stats sampler (that pod's view of the load).
pod_ip=$(kubectl -n "$NAMESPACE" get pods -l "$oka_sel" --field-selector=status.phase=Running -o jsonpath='{.items[0].status.podIP}')
admin_url=${pod_ip:+http://$pod_ip:9122}

log "Locust → $target_url"
kubectl create namespace "$LOCUST_NAMESPACE" --dry-run=client -o yaml | kubectl apply -f -
helm uninstall "$LOCUST_RELEASE" --namespace "$LOCUST_NAMESPACE" --wait >/dev/null 2>&1 || true
mkdir -p "$GENERATED"
python3 - "$GENERATED/locust-run.yaml" "${extra[@]}" <<PY
import json, sys
args = ["--oka-api", "$api"]
if "$batch":
    args += ["--oka-batch", "$batch"]
if "$keys":
    args += ["--oka-keys", "$keys"]
args += ["--oka-shape", "step", "--oka-step-users", "$step_users", "--oka-step-time", "$step_time",
         "--oka-max-users", "$max_users", "--oka-user-rps", "$user_rps"] + sys.argv[2:]
values = {"mode": "headless",
          "target": {"host": "$target_url", "adminUrl": "$admin_url"},
          "workers": {"replicas": int("$locust_workers")},
          "run": {"name": "$run", "args": args, "workersLabel": "$workers"}}
json.dump(values, open(sys.argv[1], "w"), indent=2)
PY
helm install "$LOCUST_RELEASE" "$REPO_ROOT/helm/oka-locust" --namespace "$LOCUST_NAMESPACE" \
  -f "$EKS_DIR/locust-values.yaml" -f "$GENERATED/locust-run.yaml" "${workload_args[@]}" \
  --set-file locustFiles.locustfile="$REPO_ROOT/locust/locustfile.py" \
  --set-file locustFiles.runPy="$REPO_ROOT/locust/run.py" \
  --set-file locustFiles.okaResult="$REPO_ROOT/locust/oka_result.py"

sel="app.kubernetes.io/instance=$LOCUST_RELEASE,app.kubernetes.io/component=master"
kubectl -n "$LOCUST_NAMESPACE" wait --for=condition=Ready pod -l "$sel" --timeout 15m
master=$(kubectl -n "$LOCUST_NAMESPACE" get pod -l "$sel" -o jsonpath='{.items[0].metadata.name}')
log "running ($master); progress every second"
# The log ends with "results in …" once run.py is done; the pod then waits for kubectl cp.
kubectl -n "$LOCUST_NAMESPACE" logs -f "$master" &
logs_pid=$!
until kubectl -n "$LOCUST_NAMESPACE" exec "$master" -- test -e /results/DONE 2>/dev/null; do
  phase=$(kubectl -n "$LOCUST_NAMESPACE" get pod "$master" -o jsonpath='{.status.phase}')
  [[ $phase == Running ]] || { kill "$logs_pid" 2>/dev/null; die "the Locust master is $phase before finishing; kubectl -n $LOCUST_NAMESPACE logs $master"; }
  sleep 5
done
kill "$logs_pid" 2>/dev/null || true

log "copy results to $results/$run"
kubectl -n "$LOCUST_NAMESPACE" cp "$master:/results/$run" "$results/$run" >/dev/null
rc=$(cat "$results/$run/exit_code" 2>/dev/null || echo "?")
kubectl get nodes -L workload-type -o wide > "$results/$run/nodes.txt"
kubectl -n "$NAMESPACE" get pods -o wide > "$results/$run/oka-pods.txt"
((keep_locust)) || helm uninstall "$LOCUST_RELEASE" --namespace "$LOCUST_NAMESPACE" >/dev/null

log "plots"
py=python3
[[ -x $REPO_ROOT/locust/.venv/bin/python ]] && py=$REPO_ROOT/locust/.venv/bin/python
if "$py" -c 'import matplotlib' 2>/dev/null; then
  "$py" "$REPO_ROOT/locust/plot.py" "$results/$run" -o "$results/$run"
  "$py" "$REPO_ROOT/locust/plot.py" "$results"/eks-* -o "$results/plots" || true
else
  echo "matplotlib missing: python3 -m venv locust/.venv && locust/.venv/bin/pip install -r locust/requirements.txt"
fi
python3 - "$results/$run/result.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])).get("summary", {})
print(json.dumps({k: s.get(k) for k in ("peak_sustainable", "locust_totals") if k in s}, indent=2))
PY
echo "run.py exit status: $rc (1 = some requests failed; see $results/$run/result.json)"
