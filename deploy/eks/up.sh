#!/usr/bin/env bash
# Create the EKS cluster for the Oka benchmark, the AWS Load Balancer Controller and the
# ECR repository. Idempotent: steps already done are skipped. About 20-25 minutes.
#
#   deploy/eks/up.sh            # then deploy.sh, loadtest.sh, down.sh
#
# Settings: deploy/eks/common.sh (CLUSTER_NAME, AWS_REGION, node counts, …).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
need aws eksctl kubectl helm python3

aws sts get-caller-identity --query Arn --output text >/dev/null \
  || die "no AWS credentials (aws configure, or AWS_PROFILE)"

log "cluster $CLUSTER_NAME in $AWS_REGION ($ZONE_A), Kubernetes $K8S_VERSION"
config=$(render_cluster_config)
if eksctl get cluster --region "$AWS_REGION" --name "$CLUSTER_NAME" >/dev/null 2>&1; then
  echo "exists; creating only missing node groups"
  eksctl create nodegroup -f "$config"
else
  eksctl create cluster -f "$config"
fi
aws eks update-kubeconfig --region "$AWS_REGION" --name "$CLUSTER_NAME"
kubectl get nodes -L workload-type

log "AWS Load Balancer Controller (chart $ALB_CHART_VERSION)"
# eksctl created its IAM service account (cluster.yaml, iam.serviceAccounts).
vpc_id=$(aws eks describe-cluster --region "$AWS_REGION" --name "$CLUSTER_NAME" \
  --query cluster.resourcesVpcConfig.vpcId --output text)
helm repo add eks https://aws.github.io/eks-charts >/dev/null 2>&1 || true
helm repo update eks >/dev/null
helm upgrade --install aws-load-balancer-controller eks/aws-load-balancer-controller \
  --namespace kube-system --version "$ALB_CHART_VERSION" \
  --set clusterName="$CLUSTER_NAME" --set region="$AWS_REGION" --set vpcId="$vpc_id" \
  --set serviceAccount.create=false --set serviceAccount.name=aws-load-balancer-controller \
  --set nodeSelector.workload-type=system \
  --wait --timeout 10m
kubectl -n kube-system rollout status deploy/aws-load-balancer-controller --timeout 5m

log "ECR repository $ECR_REPOSITORY"
if ! aws ecr describe-repositories --region "$AWS_REGION" --repository-names "$ECR_REPOSITORY" >/dev/null 2>&1; then
  aws ecr create-repository --region "$AWS_REGION" --repository-name "$ECR_REPOSITORY" \
    --image-scanning-configuration scanOnPush=true --image-tag-mutability IMMUTABLE >/dev/null
fi
image_repository_uri

log "next: deploy/eks/deploy.sh --build   (builds and pushes the image, installs Oka)"
