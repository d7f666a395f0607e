"""The credentials the catalog signs its own AWS requests with."""

from __future__ import annotations

import os

from chalicelib.awswire.errors import NotSent

Credentials = tuple[str, str, str | None]  # access key id, secret access key, session token


def process_credentials() -> Credentials:
    """The process's credentials: the environment's (Lambda sets them), else botocore's provider
    chain (profiles, container and instance roles), which refreshes temporary ones."""
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        return key, secret, os.environ.get("AWS_SESSION_TOKEN") or None
    from chalicelib import aws

    found = aws.credentials()
    if found is None:
        raise NotSent("no AWS credentials found for the catalog's own requests")
    frozen = found.get_frozen_credentials()
    return frozen.access_key, frozen.secret_key, frozen.token
