"""OpenID Connect providers the catalog trusts (IAM's CreateOpenIDConnectProvider).

A provider is its issuer URL (tokens' `iss`), the client ids (audiences) its tokens may carry, the
thumbprints IAM keeps (stored and returned; TLS here is verified by the system's roots instead), and
tags. Typed records in the system bucket, changed through `cas` with an audit entry.
"""

from __future__ import annotations

import ipaddress
import os
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from chalicelib import keys
from chalicelib.caches import MISSING, Cache
from chalicelib.core.primitives import audit, cas, damage
from chalicelib.core.primitives.context import Context, dump
from chalicelib.errors import AlreadyExists, BadRequest, NotFound

MAX_CLIENT_IDS = 100
MAX_THUMBPRINTS = 5
_THUMBPRINT = re.compile(r"[0-9a-fA-F]{40}")
_TRAIL = (audit.TAIL, audit.SEQ)


@dataclass(frozen=True)
class Provider:
    url: str  # the issuer, exactly as tokens carry it in `iss`
    uuid: str
    client_ids: tuple[str, ...] = ()
    thumbprints: tuple[str, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    created_at: str = ""
    trail: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def host_path(self) -> str:
        """IAM's name of the provider: its URL without the scheme (condition keys start with it)."""
        return host_path(self.url)

    @property
    def arn(self) -> str:
        from chalicelib.auth import arns

        return f"arn:aws:iam::{arns.account()}:oidc-provider/{self.host_path}"

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "uuid": self.uuid,
            "client-ids": list(self.client_ids),
            "thumbprints": list(self.thumbprints),
            "tags": self.tags,
            "created-at": self.created_at,
            **self.trail,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Provider:
        return cls(
            url=doc["url"],
            uuid=doc["uuid"],
            client_ids=tuple(doc.get("client-ids") or ()),
            thumbprints=tuple(doc.get("thumbprints") or ()),
            tags=dict(doc.get("tags") or {}),
            created_at=str(doc.get("created-at") or ""),
            trail={k: doc[k] for k in _TRAIL if k in doc},
        )


def _problem(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return "not a provider record"
    problem = damage.required(doc, "url", "uuid") or damage.fields(doc, url=str, uuid=str)
    if problem:
        return problem
    for name in ("client-ids", "thumbprints"):
        value = doc.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return f"{name!r} is not a list of strings"
    return None


def host_path(url: str) -> str:
    return url.split("://", 1)[-1].rstrip("/")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: object) -> str:
    """https (IAM's rule); plain http only for a provider on this machine (tests, `make run`) or
    where the operator allows it (CATALOG_OIDC_ALLOW_HTTP=true, a private network's provider)."""
    if not isinstance(url, str) or not 1 <= len(url) <= 255:
        raise BadRequest("Url must be 1-255 characters: the provider's issuer URL")
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.query or parts.fragment:
        raise BadRequest(f"Url {url[:120]!r}: expected https://<host>[/path], the issuer exactly as tokens name it")
    if parts.username or parts.password:
        raise BadRequest("Url must not carry credentials")
    allow_http = os.environ.get("CATALOG_OIDC_ALLOW_HTTP", "").lower() in ("1", "true", "yes")
    if parts.scheme == "http" and not (_loopback(parts.hostname) or allow_http):
        raise BadRequest(f"Url {url[:120]!r}: an identity provider is reached over https")
    return url.rstrip("/") if parts.path in ("", "/") else url


def check_client_ids(values: object) -> tuple[str, ...]:
    if values is None:
        return ()
    if not isinstance(values, list) or not all(isinstance(v, str) and 1 <= len(v) <= 255 for v in values):
        raise BadRequest("ClientIDList takes client ids of 1-255 characters")
    if len(values) > MAX_CLIENT_IDS:
        raise BadRequest(f"A provider has at most {MAX_CLIENT_IDS} client ids")
    return tuple(dict.fromkeys(values))


def check_thumbprints(values: object) -> tuple[str, ...]:
    if values is None:
        return ()
    if not isinstance(values, list) or not all(isinstance(v, str) and _THUMBPRINT.fullmatch(v) for v in values):
        raise BadRequest("ThumbprintList takes 40 hex characters per thumbprint")
    if len(values) > MAX_THUMBPRINTS:
        raise BadRequest(f"A provider has at most {MAX_THUMBPRINTS} thumbprints")
    return tuple(dict.fromkeys(v.lower() for v in values))


def name_of(arn: str) -> str:
    """The provider's host/path from its ARN (what records are keyed by)."""
    from chalicelib.auth import arns

    prefix = f"arn:aws:iam::{arns.account()}:oidc-provider/"
    if not isinstance(arn, str) or not arn.startswith(prefix) or len(arn) > 2048:
        raise BadRequest(f"Invalid OpenIDConnectProviderArn {str(arn)[:120]!r}: expected {prefix}<host/path>")
    return arn[len(prefix) :]


# ---- reads --------------------------------------------------------------------------------------


def load(ctx: Context, name: str) -> tuple[Provider, str] | None:
    key = keys.oidc_provider_record(name)
    found = damage.load(ctx, ctx.settings.system_bucket, key, f"OpenID Connect provider {name!r}", _problem)
    return None if found is None else (Provider.from_json(found[0]), found[1])


def get(ctx: Context, arn: str) -> Provider:
    found = load(ctx, name_of(arn))
    if found is None:
        raise NotFound(f"OpenIDConnect Provider not found for arn {arn}")
    return found[0]


def names(ctx: Context) -> list[str]:
    bucket, prefix = ctx.settings.system_bucket, keys.OIDC_PROVIDERS_PREFIX
    return [keys.oidc_provider_from_record(k) for k in ctx.storage.list_keys(bucket, prefix)]


_TTL_S = 5.0
_cache: Cache[str, Provider | None] = Cache("identity providers by issuer", 1000, ttl=_TTL_S)


def for_issuer(ctx: Context, issuer: str) -> Provider | None:
    """The provider whose URL is this token issuer (cached, known and unknown alike, as identities)."""
    from chalicelib.errors import DamagedObject

    hit = _cache.lookup(issuer)
    if hit is not MISSING:
        return hit
    provider = None
    if isinstance(issuer, str) and issuer.startswith(("https://", "http://")) and len(issuer) <= 255:
        try:
            found = load(ctx, host_path(issuer))
        except DamagedObject:
            found = None
        if found is not None and found[0].url.rstrip("/") == issuer.rstrip("/"):
            provider = found[0]
    _cache.put(issuer, provider)
    return provider


def forget() -> None:
    _cache.clear()


# ---- changes ------------------------------------------------------------------------------------


def _journal(ctx: Context, record: dict[str, Any], *older: Any) -> None:
    audit.flush_record(
        ctx, ctx.settings.system_bucket, keys.SYSTEM_AUDIT_PREFIX, audit.source_of(record), record, *older
    )


def _target(name: str) -> dict[str, Any]:
    return {"kind": "oidc-provider", "provider": name}


def create(
    ctx: Context, url: object, client_ids: object, thumbprints: object, tags: dict[str, str] | None = None
) -> Provider:
    provider = Provider(
        url=check_url(url),
        uuid=str(uuid.uuid4()),
        client_ids=check_client_ids(client_ids),
        thumbprints=check_thumbprints(thumbprints),
        tags=dict(tags or {}),
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    name = provider.host_path
    record, _ = audit.stamped(provider.to_json(), audit.entry("create-oidc-provider", _target(name)))
    bucket = ctx.settings.system_bucket
    cas.create(
        ctx,
        bucket,
        keys.oidc_provider_record(name),
        dump(record),
        lambda: AlreadyExists(f"Provider with url {provider.url} already exists."),
        f"OpenID Connect provider {name!r}",
        make_bucket=True,
    )
    _journal(ctx, record)
    forget()
    return Provider.from_json(record)


def update(ctx: Context, arn: str, change: Callable[[Provider], Provider], op: str, **detail: Any) -> Provider:
    name = name_of(arn)
    older: dict[str, Any] = {}

    def apply(doc: dict[str, Any] | None) -> dict[str, Any] | None:
        if doc is None:
            raise NotFound(f"OpenIDConnect Provider not found for arn {arn}")
        current = Provider.from_json(doc)
        new = change(current)
        if new == current:
            return None
        stamped, older["entries"] = audit.stamped(new.to_json(), audit.entry(op, _target(name), **detail))
        return stamped

    key = keys.oidc_provider_record(name)
    what = f"OpenID Connect provider {name!r}"
    if load(ctx, name) is None:  # a damaged record answers 422 naming its key
        raise NotFound(f"OpenIDConnect Provider not found for arn {arn}")
    record = cas.update(ctx, ctx.settings.system_bucket, key, apply, what)
    forget()
    if "entries" in older and record is not None:
        _journal(ctx, record, older["entries"])
    return Provider.from_json(record or {})


def delete(ctx: Context, arn: str) -> None:
    provider = get(ctx, arn)
    ctx.storage.delete(ctx.settings.system_bucket, keys.oidc_provider_record(provider.host_path))
    _journal(ctx, *audit.stamped(provider.to_json(), audit.entry("delete-oidc-provider", _target(provider.host_path))))
    forget()


def add_client_id(ctx: Context, arn: str, client_id: str) -> None:
    (new,) = check_client_ids([client_id])
    update(ctx, arn, lambda p: replace(p, client_ids=tuple(dict.fromkeys((*p.client_ids, new)))), "add-client-id")


def remove_client_id(ctx: Context, arn: str, client_id: str) -> None:
    update(
        ctx, arn, lambda p: replace(p, client_ids=tuple(c for c in p.client_ids if c != client_id)), "remove-client-id"
    )


def set_thumbprints(ctx: Context, arn: str, thumbprints: object) -> None:
    new = check_thumbprints(thumbprints)
    update(ctx, arn, lambda p: replace(p, thumbprints=new), "update-oidc-thumbprints")


def tag(ctx: Context, arn: str, new: dict[str, str]) -> None:
    update(ctx, arn, lambda p: replace(p, tags={**p.tags, **new}), "tag-oidc-provider", keys=sorted(new))


def untag(ctx: Context, arn: str, tag_keys: list[str]) -> None:
    update(
        ctx,
        arn,
        lambda p: replace(p, tags={k: v for k, v in p.tags.items() if k not in tag_keys}),
        "untag-oidc-provider",
    )
