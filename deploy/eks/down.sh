#!/usr/bin/env bash
# Delete everything up.sh and deploy.sh created. The Ingress goes first, so that the AWS
# Load Balancer Controller deletes the ALB and its target groups (left behind, they would
# keep costing money and block the VPC's deletion).
#
#   deploy/eks/down.sh [--delete-images]    # --delete-images also deletes the ECR repository
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
need aws eksctl kubectl helm python3

delete_images=0
[[ ${1:-} == --delete-images ]] && delete_images=1

if aws eks describe-cluster --region "$AWS_REGION" --name "$CLUSTER_NAME" >/dev/null 2>&1; then
  aws eks update-kubeconfig --region "$AWS_REGION" --name "$CLUSTER_NAME" >/dev/null
  log "Locust and Oka releases"
  helm uninstall "$LOCUST_RELEASE" --namespace "$LOCUST_NAMESPACE" --wait 2>/dev/null || true
  helm uninstall "$RELEASE" --namespace "$NAMESPACE" --wait 2>/dev/null || true
  log "waiting for the ALB to be deleted"
  for _ in $(seq 1 60); do
    n=$(kubectl get ingress -A -o name 2>/dev/null | wc -l)
    ((n == 0)) && break
    sleep 5
  done
  kubectl get ingress -A 2>/dev/null | grep -q . \
    && echo "warning: Ingresses remain; check the EC2 console for leftover load balancers"
  sleep 20   # the controller finishes deleting target groups and security group rules
  helm uninstall aws-load-balancer-controller --namespace kube-system 2>/dev/null || true
  log "cluster $CLUSTER_NAME (about 15 minutes)"
  eksctl delete cluster -f "$(render_cluster_config)" --wait
else
  echo "no cluster $CLUSTER_NAME in $AWS_REGION"
fi

if ((delete_images)); then
  log "ECR repository $ECR_REPOSITORY"
  aws ecr delete-repository --region "$AWS_REGION" --repository-name "$ECR_REPOSITORY" --force >/dev/null 2>&1 || true
fi
log "left over? aws elbv2 describe-load-balancers --region $AWS_REGION; aws ec2 describe-volumes --region $AWS_REGION --filters Name=status,Values=available"
