#!/usr/bin/env bash
# "Deploy" against LocalStack: this machine has no Docker, so LocalStack cannot run the Lambda
# functions. The script creates the system bucket in LocalStack S3, then serves the same app
# locally against it and prints the endpoint.
# Usage: S3_ENDPOINT_URL=http://127.0.0.1:4566 infra/deploy_localstack.sh [system-bucket]
set -euo pipefail
cd "$(dirname "$0")/.."
: "${S3_ENDPOINT_URL:?point S3_ENDPOINT_URL at a running LocalStack (e.g. python scripts/local_s3.py 4566)}"
SYSTEM=${1:-iceberg-catalog-system}
make venv localstack >/dev/null
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-test} AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-test}
export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-us-east-1} CATALOG_SYSTEM_BUCKET="$SYSTEM"
.venv/bin/python - <<PY
import boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url="$S3_ENDPOINT_URL", config=Config(s3={"addressing_style": "path"}))
if "$SYSTEM" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
    s3.create_bucket(Bucket="$SYSTEM")
print("system bucket $SYSTEM ready in $S3_ENDPOINT_URL")
PY
.venv/bin/python infra/build_template.py infra/build >/dev/null && echo "template: infra/build/template.json (for AWS)"
exec .venv/bin/python scripts/run_local.py
