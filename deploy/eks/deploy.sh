#!/usr/bin/env bash
# Install (or upgrade) Oka on the cluster from up.sh: the helm/oka chart with
# deploy/eks/oka-values.yaml, then `helm test` and a request through the ALB.
#
#   deploy/eks/deploy.sh [--build] [--nodes N] [--spec FILE [--data FEATURE=FILE …]]
#
#   --build     build the image from the repository's Dockerfile (linux/amd64) and push
#               it to ECR as $IMAGE_TAG first (needs Docker with buildx)
#   --nodes N   Oka pods (= nodes of the oka node group; default $OKA_NODES)
#   --spec FILE your feature spec (docs/feature-spec.md) instead of the seed's: passed as
#               the chart's spec.content; the seed data Job and the seed's `helm test`
#               request are turned off (they need the seed's test_feature). Give it on
#               every deploy.sh run: a run without it goes back to the seed spec.
#   --data FEATURE=FILE   after the install, load FILE (JSON Lines, one record of
#               FEATURE's entity per line) through the ALB's POST /v1/ingest
#               (locust/ingest.py); repeatable. E.g. with --spec
#               examples/workloads/payments/spec.yaml:
#               --data purchases=examples/workloads/payments/data.jsonl
# Then: deploy/eks/loadtest.sh 4 --workload YOUR/workload.yaml
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
need aws kubectl helm curl

build=0
nodes=$OKA_NODES
spec=""
data=()
while (($#)); do
  case $1 in
    --build) build=1 ;;
    --nodes) nodes=$2; shift ;;
    --spec) spec=$2; shift ;;
    --data) data+=("$2"); shift ;;
    *) die "unknown option $1 (deploy.sh [--build] [--nodes N] [--spec FILE [--data FEATURE=FILE …]])" ;;
  esac
  shift
done
spec_args=()
if [[ -n $spec ]]; then
  [[ -f $spec ]] || die "--spec $spec: no such file (a feature spec, docs/feature-spec.md)"
  oka_bin=""   # the newest local build, so an old one does not refuse newer spec features
  for b in "$REPO_ROOT/target/release/oka" "$REPO_ROOT/target/debug/oka"; do
    [[ -x $b ]] && { [[ -z $oka_bin || $b -nt $oka_bin ]] && oka_bin=$b; }
  done
  if [[ -n $oka_bin ]]; then
    "$oka_bin" validate --spec "$spec" \
      || die "--spec $spec does not validate with $oka_bin (the messages above say where); fix it, or rebuild if that binary is older than the image"
  else
    echo "note: no target/{release,debug}/oka here to validate $spec first; the pods will refuse a bad spec (kubectl -n $NAMESPACE logs)"
  fi
  spec_args=(--set-file "spec.content=$spec" --set spec.demo=false
             --set seedData.enabled=false --set tests.enabled=false)
fi
for d in "${data[@]}"; do
  [[ $d == *=* && -f ${d#*=} ]] || die "--data $d: expected FEATURE=FILE with an existing JSON Lines file"
done

repo=$(image_repository_uri) || die "no ECR repository $ECR_REPOSITORY; run up.sh first"
image="$repo:$IMAGE_TAG"

if ((build)); then
  need docker
  log "build and push $image"
  aws ecr get-login-password --region "$AWS_REGION" \
    | docker login --username AWS --password-stdin "${repo%%/*}"
  docker buildx build --platform linux/amd64 -t "$image" --push "$REPO_ROOT"
fi
aws ecr describe-images --region "$AWS_REGION" --repository-name "$ECR_REPOSITORY" \
  --image-ids imageTag="$IMAGE_TAG" >/dev/null 2>&1 \
  || die "$image is not in ECR; run deploy.sh --build (or push it, docs/deploy.md)"

log "namespace $NAMESPACE"
kubectl create namespace "$NAMESPACE" --dry-run=client -o yaml | kubectl apply -f -
# Rollouts wait until the ALB sees a new pod healthy (the controller's readiness gate).
kubectl label namespace "$NAMESPACE" elbv2.k8s.aws/pod-readiness-gate-inject=enabled --overwrite

log "oka node group: $nodes node(s)"
eksctl scale nodegroup --region "$AWS_REGION" --cluster "$CLUSTER_NAME" --name oka \
  --nodes "$nodes" --nodes-max "$OKA_NODES_MAX"

log "helm upgrade --install $RELEASE ($image, $nodes pod(s) × $OKA_CPU CPU)"
helm upgrade --install "$RELEASE" "$REPO_ROOT/helm/oka" --namespace "$NAMESPACE" \
  -f "$EKS_DIR/oka-values.yaml" \
  --set image.repository="$repo" --set image.tag="$IMAGE_TAG" \
  --set replicaCount="$nodes" --set cpu="$OKA_CPU" "${spec_args[@]}" \
  --wait --timeout 20m
kubectl -n "$NAMESPACE" get pods -o wide

if [[ -z $spec ]]; then
  log "helm test"
  helm test "$RELEASE" --namespace "$NAMESPACE" --logs --timeout 5m
fi

log "ALB"
host=""
for _ in $(seq 1 60); do
  host=$(alb_hostname)
  [[ -n $host ]] && break
  sleep 10
done
[[ -n $host ]] || die "the Ingress has no address after 10 minutes: kubectl -n $NAMESPACE describe ingress"
echo "http://$host"
body='{"target_features":["simple_feature"],"keys":[{"id":"test-id-21"}],"udf_args":{"simple_feature":{"multiplier":2.0}}}'
answered=0
for _ in $(seq 1 60); do   # DNS and target registration take a few minutes
  if [[ -n $spec ]]; then
    # Your spec: the registry lists its features (a feature request needs your keys).
    out=$(curl -fsS --max-time 5 "http://$host/v1/features" 2>/dev/null) || out=""
  else
    out=$(curl -fsS --max-time 5 "http://$host/v1/features" -d "$body" 2>/dev/null) || out=""
  fi
  if [[ -n $out ]]; then
    if [[ -n $spec ]]; then
      printf '%s' "$out" | python3 -c 'import json,sys; print("features:", ", ".join(f["name"] + " (" + f["kind"] + ")" for f in json.load(sys.stdin)["features"]))'
    else
      echo "$out"
    fi
    answered=1
    break
  fi
  sleep 10
done
((answered)) || die "no answer through http://$host after 10 minutes (target health: aws elbv2 describe-target-health)"
for d in "${data[@]}"; do
  log "load ${d#*=} into ${d%%=*} (POST /v1/ingest through the ALB)"
  python3 "$REPO_ROOT/locust/ingest.py" --url "http://$host" "$d" \
    || die "loading $d failed (the lines above say which records and why)"
done
if [[ -n $spec ]]; then
  log "next: deploy/eks/loadtest.sh 4 --workload PATH/TO/workload.yaml (locust/README.md, \"Workload files\")"
else
  log "next: deploy/eks/loadtest.sh 4"
fi
