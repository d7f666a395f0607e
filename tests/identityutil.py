"""Clients of the IAM and STS faces and a policy granting a warehouse, for the identity tests."""

from __future__ import annotations

from typing import Any

import boto3
import botocore
from botocore.config import Config

from tests.conftest import REGION, ROOT_KEY, ROOT_SECRET

ACCOUNT = "000000000000"


def base(catalog_url: str) -> str:
    return catalog_url.removesuffix("/_iceberg")


def client(service: str, url: str, **keys: str) -> Any:
    creds = keys or {"aws_access_key_id": ROOT_KEY, "aws_secret_access_key": ROOT_SECRET}
    return boto3.client(
        service,
        endpoint_url=f"{base(url)}/_{service}",
        region_name=REGION,
        **creds,
        config=Config(retries={"max_attempts": 1}),
    )


def unsigned_sts(url: str) -> Any:
    return boto3.client(
        "sts", endpoint_url=f"{base(url)}/_sts", region_name=REGION, config=Config(signature_version=botocore.UNSIGNED)
    )


def everything_on(warehouse: str) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["s3tables:*"],
                "Resource": [f"arn:aws:s3tables:::bucket/{warehouse}", f"arn:aws:s3tables:::bucket/{warehouse}/*"],
            }
        ],
    }
