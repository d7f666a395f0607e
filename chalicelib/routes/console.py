"""The catalog browser: one page and its script, served by the catalog itself (no other server).

The page holds no secrets and no data: it signs in through /v1/oauth/tokens (an access key), or
through an OpenID Connect provider (the authorization code flow with PKCE, as a public client: the
provider's access token is then the bearer token, acting as the role it maps to, auth/federation.py),
and then calls the same API as any client, under the caller's own policies. Served without
authentication, like any static asset; a strict Content-Security-Policy keeps it to this origin and,
when a provider is configured, to the provider's origin.

The provider comes from the environment: CATALOG_CONSOLE_OIDC_ISSUER and
CATALOG_CONSOLE_OIDC_CLIENT_ID (both, or no provider sign-in), CATALOG_CONSOLE_OIDC_SCOPE
(default "openid catalog"). GET <root>/ui/config tells the page (anonymous; no secrets: a public
client has none)."""

from __future__ import annotations

import json
import os
import urllib.parse
from functools import cache
from pathlib import Path

from chalicelib.pipeline import RequestContext, RouteGroup, operation
from chalicelib.routes import V1
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

bp = RouteGroup(__name__, ICEBERG_FACE)
ROOT = V1.rsplit("/", 1)[0]  # /_iceberg
ISSUER, CLIENT_ID, SCOPE = "CATALOG_CONSOLE_OIDC_ISSUER", "CATALOG_CONSOLE_OIDC_CLIENT_ID", "CATALOG_CONSOLE_OIDC_SCOPE"
DEFAULT_SCOPE = "openid catalog"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'{provider}; "
    "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@cache
def _asset(name: str) -> str:
    return (Path(__file__).resolve().parent.parent / "console" / name).read_text(encoding="utf-8")


def _no_checks(req: RequestContext) -> list[tuple[str, str, dict[str, str], bool]]:
    return []


def oidc_config() -> dict[str, str] | None:
    """The provider the page signs in through, or None. Only an http(s) issuer without query or
    fragment is used (it becomes part of the page's Content-Security-Policy)."""
    issuer = (os.environ.get(ISSUER) or "").strip().rstrip("/")
    client_id = (os.environ.get(CLIENT_ID) or "").strip()
    if not issuer or not client_id:
        return None
    parts = urllib.parse.urlsplit(issuer)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        return None
    if any(c in issuer for c in " ;,'\"\\"):
        return None
    scope = " ".join((os.environ.get(SCOPE) or DEFAULT_SCOPE).split()) or DEFAULT_SCOPE
    return {"issuer": issuer, "client_id": client_id, "scope": scope}


def _headers(content_type: str) -> dict[str, str]:
    found = oidc_config()
    provider = ""
    if found is not None:
        parts = urllib.parse.urlsplit(found["issuer"])
        provider = f" {parts.scheme}://{parts.netloc}"
    return {"Content-Type": content_type, "Content-Security-Policy": CSP.format(provider=provider), **HEADERS}


@operation(bp, ROOT + "/ui", "GET", "GetConsole", iceberg=False, checks=_no_checks)
def page(req: RequestContext) -> tuple[int, str, dict[str, str]]:
    return 200, _asset("index.html"), _headers("text/html; charset=utf-8")


@operation(bp, ROOT + "/ui/app.js", "GET", "GetConsole", iceberg=False, checks=_no_checks)
def script(req: RequestContext) -> tuple[int, str, dict[str, str]]:
    return 200, _asset("app.js"), _headers("text/javascript; charset=utf-8")


@operation(bp, ROOT + "/ui/config", "GET", "GetConsole", iceberg=False, checks=_no_checks)
def config(req: RequestContext) -> tuple[int, str, dict[str, str]]:
    """What the page needs to know before signing in: the provider (issuer, public client id, scope)."""
    return 200, json.dumps({"oidc": oidc_config()}), _headers("application/json")
