#!/usr/bin/env bash
# Install (or upgrade) Oka on the cluster from up.sh: the helm/oka chart with
# deploy/eks/oka-values.yaml, then `helm test` and a request through the ALB.
#
#   deploy/eks/deploy.sh [--build] [--nodes N]
#
#   --build     build the image from the repository's Dockerfile (linux/amd64) and push
#               it to ECR as $IMAGE_TAG first (needs Docker with buildx)
#   --nodes N   Oka pods (= nodes of the oka node group; default $OKA_NODES)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
need aws kubectl helm curl

build=0
nodes=$OKA_NODES
while (($#)); do
  case $1 in
    --build) build=1 ;;
    --nodes) nodes=$2; shift ;;
    *) die "unknown option $1 (deploy.sh [--build] [--nodes N])" ;;
  esac
  shift
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
  --set replicaCount="$nodes" --set cpu="$OKA_CPU" \
  --wait --timeout 20m
kubectl -n "$NAMESPACE" get pods -o wide

log "helm test"
helm test "$RELEASE" --namespace "$NAMESPACE" --logs --timeout 5m

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
for _ in $(seq 1 60); do   # DNS and target registration take a few minutes
  if out=$(curl -fsS --max-time 5 "http://$host/v1/features" -d "$body" 2>/dev/null); then
    echo "$out"
    log "next: deploy/eks/loadtest.sh 4"
    exit 0
  fi
  sleep 10
done
die "no answer through http://$host after 10 minutes (target health: aws elbv2 describe-target-health)"
