# Settings shared by up.sh, deploy.sh, loadtest.sh and down.sh. Override any of them in
# the environment (e.g. `AWS_REGION=eu-west-1 ./up.sh`).
# shellcheck shell=bash

export CLUSTER_NAME=${CLUSTER_NAME:-oka-bench}
export AWS_REGION=${AWS_REGION:-us-east-1}
export ZONE_A=${ZONE_A:-${AWS_REGION}a}
export ZONE_B=${ZONE_B:-${AWS_REGION}b}
export K8S_VERSION=${K8S_VERSION:-1.33}
# Oka nodes: one Oka pod each. t3.medium (2 vCPU) gives OKA_CPU=1 exclusive vCPU per pod;
# a 4-vCPU type (c6i.xlarge) fits OKA_CPU=2 (the reserved CPU and the DaemonSets take the rest).
export OKA_INSTANCE_TYPE=${OKA_INSTANCE_TYPE:-t3.medium}
export OKA_CPU=${OKA_CPU:-1}
export OKA_NODES=${OKA_NODES:-4}
export OKA_NODES_MAX=${OKA_NODES_MAX:-80}
export REDIS_INSTANCE_TYPE=${REDIS_INSTANCE_TYPE:-t3.medium}
export LOCUST_NODES=${LOCUST_NODES:-2}
export LOCUST_NODES_MAX=${LOCUST_NODES_MAX:-40}
# Locust workers that fit on one locust node (700m CPU each on a t3.medium).
export LOCUST_WORKERS_PER_NODE=${LOCUST_WORKERS_PER_NODE:-2}

export NAMESPACE=${NAMESPACE:-oka}
export RELEASE=${RELEASE:-oka}
export LOCUST_NAMESPACE=${LOCUST_NAMESPACE:-locust}
export LOCUST_RELEASE=${LOCUST_RELEASE:-oka-locust}

export ECR_REPOSITORY=${ECR_REPOSITORY:-oka}
export IMAGE_TAG=${IMAGE_TAG:-0.1.0}
# The AWS Load Balancer Controller's chart (repository "eks", see up.sh). Check for a
# newer one with `helm search repo eks/aws-load-balancer-controller`.
export ALB_CHART_VERSION=${ALB_CHART_VERSION:-1.13.0}

EKS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$EKS_DIR/../.." && pwd)
GENERATED=$EKS_DIR/.generated
export EKS_DIR REPO_ROOT GENERATED

log() { printf '\n== %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
need() {
  local c
  for c in "$@"; do command -v "$c" >/dev/null 2>&1 || die "$c is not installed (see deploy/eks/README.md, Prerequisites)"; done
}

# render_cluster_config: cluster.yaml with the ${…} variables filled in.
render_cluster_config() {
  mkdir -p "$GENERATED"
  python3 - "$EKS_DIR/cluster.yaml" "$GENERATED/cluster.yaml" <<'PY'
import os, string, sys
text = string.Template(open(sys.argv[1]).read()).substitute(os.environ)
open(sys.argv[2], "w").write(text)
PY
  echo "$GENERATED/cluster.yaml"
}

# image_repository_uri: the ECR repository's URI (created by up.sh).
image_repository_uri() {
  aws ecr describe-repositories --region "$AWS_REGION" --repository-names "$ECR_REPOSITORY" \
    --query 'repositories[0].repositoryUri' --output text
}

# alb_hostname: the ALB's DNS name from the Ingress status (empty until provisioned).
alb_hostname() {
  kubectl -n "$NAMESPACE" get ingress -l "app.kubernetes.io/instance=$RELEASE" \
    -o jsonpath='{.items[0].status.loadBalancer.ingress[0].hostname}' 2>/dev/null || true
}
