"""The S3 Tables face's client (boto3's s3tables), its error codes, a table schema and the AWS CLI's environment."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from tests.conftest import REGION, ROOT_KEY, ROOT_SECRET


def s3tables_client(catalog_url: str, validate: bool = True, key: str = ROOT_KEY, secret: str = ROOT_SECRET) -> Any:
    base = catalog_url.rsplit("/_iceberg", 1)[0]
    return boto3.client(
        "s3tables",
        endpoint_url=f"{base}/_s3tables",
        region_name=REGION,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(retries={"mode": "standard", "max_attempts": 3}, parameter_validation=validate),
    )


def code(exc: Any) -> str:
    return str(exc.value.response["Error"]["Code"])


SCHEMA = {"fields": [{"name": "id", "type": "long", "required": True}, {"name": "city", "type": "string"}]}


def aws_cli_env(tmp_path: Any) -> dict[str, str]:
    """The AWS CLI's environment: root's keys, no config or credentials file of the machine's."""
    import os

    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        "AWS_ACCESS_KEY_ID": ROOT_KEY,
        "AWS_SECRET_ACCESS_KEY": ROOT_SECRET,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
    }
