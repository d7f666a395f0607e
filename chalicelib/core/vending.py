"""Vended credentials: STS AssumeRole of the data access role, narrowed to one table by a session
policy. Nothing else is ever handed out, except the emulator's static keys when explicitly enabled."""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from chalicelib.core.data_access import Grant, session_policy
from chalicelib.errors import BadRequest, ServiceUnavailable
from chalicelib.settings import Settings

_SESSION_NAME = re.compile(r"[^\w+=,.@-]")
_lock = threading.Lock()
_cache: dict[tuple[str, Grant], Credentials] = {}
_clients: dict[str, Any] = {}


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str
    session_token: str | None
    expires_at_ms: int | None  # None: static emulator keys


def session_name(principal: str) -> str:
    return ("iceberg-" + _SESSION_NAME.sub("-", principal))[:64]


def available(settings: Settings) -> bool:
    return bool(settings.data_access_role_arn) or settings.vend_s3_credentials


def vend(settings: Settings, grant: Grant, principal: str) -> Credentials:
    """Credentials for the grant. Cached per principal and grant while more than half their life
    remains, so a busy reader does not cost an STS call per load."""
    if settings.data_access_role_arn:
        key = (principal, grant)
        now_ms = int(time.time() * 1000)
        with _lock:
            hit = _cache.get(key)
        if hit is not None and hit.expires_at_ms and hit.expires_at_ms - now_ms > settings.vended_ttl_s * 500:
            return hit
        creds = _assume(settings, grant, principal)
        with _lock:
            if len(_cache) > 1000:
                _cache.clear()
            _cache[key] = creds
        return creds
    if settings.vend_s3_credentials:  # an emulator's keys: only ever set with S3_ENDPOINT_URL
        from chalicelib.core.signer import catalog_credentials

        c = catalog_credentials()
        return Credentials(c.access_key, c.secret_key, c.token, None)
    raise BadRequest(
        "This catalog does not vend credentials: it has no data access role (CATALOG_DATA_ACCESS_ROLE_ARN, "
        "which needs STS). Ask for remote signing instead (X-Iceberg-Access-Delegation: remote-signing)."
    )


def _assume(settings: Settings, grant: Grant, principal: str) -> Credentials:
    from botocore.exceptions import BotoCoreError, ClientError

    with _lock:
        sts = _clients.get("sts")
        if sts is None:
            from botocore.config import Config

            from chalicelib import aws

            cfg = Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 3, "mode": "standard"})
            sts = aws.client("sts", endpoint_url=settings.sts_endpoint_url, region_name=settings.region, config=cfg)
            _clients["sts"] = sts
    try:
        out = sts.assume_role(
            RoleArn=settings.data_access_role_arn,
            RoleSessionName=session_name(principal),
            Policy=json.dumps(session_policy(grant), separators=(",", ":")),
            DurationSeconds=settings.vended_ttl_s,
        )["Credentials"]
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "Error")
        raise ServiceUnavailable(f"Could not vend credentials: STS AssumeRole failed ({code})") from None
    except BotoCoreError:
        raise ServiceUnavailable("Could not vend credentials: STS is unreachable") from None
    expires = out["Expiration"]
    expires_ms = int(expires.timestamp() * 1000) if hasattr(expires, "timestamp") else int(time.time() * 1000)
    return Credentials(out["AccessKeyId"], out["SecretAccessKey"], out.get("SessionToken"), expires_ms)
