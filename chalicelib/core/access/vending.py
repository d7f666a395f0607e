"""Vended credentials: STS AssumeRole of the data access role, narrowed to one table by a session
policy. Nothing else is ever handed out, except the emulator's static keys when explicitly enabled."""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chalicelib.caches import Cache
from chalicelib.core.access.data_access import Grant, session_policy
from chalicelib.errors import BadRequest, ServiceUnavailable
from chalicelib.settings import Settings

_SESSION_NAME = re.compile(r"[^\w+=,.@-]")
STS_MIN_DURATION_S = 900  # STS refuses a shorter DurationSeconds
# Iceberg Java (VendedCredentialsProvider, 1.10) asks for new credentials from 5 minutes before the
# expiry it was given (the AWS SDK jitters the moment to between 5 and 1 minutes before): credentials
# handed out with less than that left would send it straight back for more, on every S3 request.
CLIENT_REFRESH_MARGIN_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str
    session_token: str | None
    expires_at_ms: int | None  # None: static emulator keys


@dataclass(frozen=True)
class _Cached:
    creds: Credentials
    reuse_until_ms: int


_lock = threading.Lock()
# Per (principal, grant): credentials handed out again until their reuse_until_ms (checked by vend(),
# on the wall clock as STS's expiry). Only dict operations (get, [key] =): tests hand a dict in its place.
_cache: Cache[tuple[str, Grant], _Cached] = Cache("vended credentials by (principal, grant)", 1000)
_clients: dict[str, Any] = {}


def session_name(principal: str) -> str:
    return ("iceberg-" + _SESSION_NAME.sub("-", principal))[:64]


def available(settings: Settings) -> bool:
    return bool(settings.data_access_role_arn) or settings.vend_s3_credentials


def reuse_until_ms(issued_ms: int, expires_ms: int) -> int:
    """Until when cached credentials are handed out again: while more than half their life remains,
    and, if they live longer than Iceberg Java's refresh margin, while more than that margin remains
    (a client given credentials inside its margin would be back at once, and be given the same)."""
    life = expires_ms - issued_ms
    keep = life // 2
    if life > CLIENT_REFRESH_MARGIN_MS:
        keep = max(keep, CLIENT_REFRESH_MARGIN_MS)
    return expires_ms - keep


def vend(settings: Settings, grant: Grant, principal: str) -> Credentials:
    """Credentials for the grant. Cached per principal and grant while fresh (reuse_until_ms), so a
    busy reader does not cost an STS call per load, nor a refreshing client one per request."""
    if settings.data_access_role_arn:
        key = (principal, grant)
        now_ms = int(time.time() * 1000)
        with _lock:
            hit = _cache.get(key)
        if hit is not None and now_ms < hit.reuse_until_ms:
            return hit.creds
        creds = _assume(settings, grant, principal, now_ms)
        assert creds.expires_at_ms is not None
        with _lock:
            _cache[key] = _Cached(creds, reuse_until_ms(now_ms, creds.expires_at_ms))
        return creds
    if settings.vend_s3_credentials:  # an emulator's keys: only ever set with S3_ENDPOINT_URL
        from chalicelib.core.access.signer import catalog_credentials

        c = catalog_credentials()
        return Credentials(c.access_key, c.secret_key, c.token, None)
    raise BadRequest(
        "This catalog does not vend credentials: it has no data access role (CATALOG_DATA_ACCESS_ROLE_ARN, "
        "which needs STS). Ask for remote signing instead (X-Iceberg-Access-Delegation: remote-signing)."
    )


def _sts(settings: Settings) -> Any:
    with _lock:
        sts = _clients.get("sts")
        if sts is None:
            from botocore.config import Config

            from chalicelib import aws

            cfg = Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 3, "mode": "standard"})
            sts = aws.client("sts", endpoint_url=settings.sts_endpoint_url, region_name=settings.region, config=cfg)
            _clients["sts"] = sts
        return sts


def _assume(settings: Settings, grant: Grant, principal: str, issued_ms: int) -> Credentials:
    from botocore.exceptions import BotoCoreError, ClientError

    from chalicelib.storage import note

    sts = _sts(settings)
    note("AssumeRole")  # the request's log line and metrics count STS calls
    try:
        out = sts.assume_role(
            RoleArn=settings.data_access_role_arn,
            RoleSessionName=session_name(principal),
            Policy=json.dumps(session_policy(grant), separators=(",", ":")),
            DurationSeconds=max(settings.vended_ttl_s, STS_MIN_DURATION_S),
        )["Credentials"]
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "Error")
        raise ServiceUnavailable(f"Could not vend credentials: STS AssumeRole failed ({code})") from None
    except BotoCoreError:
        raise ServiceUnavailable("Could not vend credentials: STS is unreachable") from None
    expires_ms = _epoch_ms(out["Expiration"])
    if settings.vended_ttl_s < STS_MIN_DURATION_S:
        # A life shorter than STS grants (settings.py): reported, so clients refresh that soon.
        expires_ms = min(expires_ms, issued_ms + settings.vended_ttl_s * 1000)
    return Credentials(out["AccessKeyId"], out["SecretAccessKey"], out.get("SessionToken"), expires_ms)


def _epoch_ms(stamp: Any) -> int:
    """STS's Expiration in ms. botocore parses it to a datetime; text (a client whose parser keeps
    timestamps as text) is parsed here, never replaced by "now"."""
    if not isinstance(stamp, datetime):
        from botocore.utils import parse_timestamp

        stamp = parse_timestamp(str(stamp))
    return int(stamp.timestamp() * 1000)
