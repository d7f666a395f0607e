#!/usr/bin/env bash
# Deploy to AWS: build the template, upload the package, create/update the stack.
# Needs the AWS CLI and credentials. The root credentials live in Secrets Manager, e.g.:
#   aws secretsmanager create-secret --name catalog/root \
#     --secret-string '{"access_key_id":"...","secret_access_key":"..."}'
# Usage: infra/deploy_aws.sh <stack> <artifact-bucket> <system-bucket> <root-secret-arn> <bucket-prefix> [stage]
# The bucket prefix is required: the functions may touch only buckets named with it.
set -euo pipefail
cd "$(dirname "$0")/.."
STACK=${1:?stack name}; ARTIFACTS=${2:?artifact bucket}; SYSTEM=${3:?system bucket}; SECRET=${4:?secret arn}
PREFIX=${5:?bucket prefix (3-20 chars), e.g. acme-lake-}; STAGE=${6:-prod}
make venv >/dev/null
.venv/bin/python infra/build_template.py infra/build
aws cloudformation package --template-file infra/build/template.json --s3-bucket "$ARTIFACTS" \
  --output-template-file infra/build/packaged.json --use-json
aws cloudformation deploy --template-file infra/build/packaged.json --stack-name "$STACK" \
  --capabilities CAPABILITY_IAM CAPABILITY_NAMED_IAM CAPABILITY_AUTO_EXPAND \
  --parameter-overrides Stage="$STAGE" SystemBucketName="$SYSTEM" BucketPrefix="$PREFIX" RootCredentialsSecretArn="$SECRET"
aws cloudformation describe-stacks --stack-name "$STACK" --query 'Stacks[0].Outputs' --output table
