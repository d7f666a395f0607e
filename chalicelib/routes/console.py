"""The catalog browser: one page and its script, served by the catalog itself (no other server).

The page holds no secrets and no data: it signs in through /v1/oauth/tokens and then calls the same
API as any client, under the caller's own policies. Served without authentication, like any
static asset; a strict Content-Security-Policy keeps it to this origin."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from chalicelib.pipeline import RequestContext, RouteGroup, operation
from chalicelib.routes import V1
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

bp = RouteGroup(__name__, ICEBERG_FACE)
ROOT = V1.rsplit("/", 1)[0]  # /_iceberg
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@cache
def _asset(name: str) -> str:
    return (Path(__file__).resolve().parent.parent / "console" / name).read_text(encoding="utf-8")


def _no_checks(req: RequestContext) -> list[tuple[str, str, dict[str, str], bool]]:
    return []


@operation(bp, ROOT + "/ui", "GET", "GetConsole", iceberg=False, checks=_no_checks)
def page(req: RequestContext) -> tuple[int, str, dict[str, str]]:
    return 200, _asset("index.html"), {"Content-Type": "text/html; charset=utf-8", **HEADERS}


@operation(bp, ROOT + "/ui/app.js", "GET", "GetConsole", iceberg=False, checks=_no_checks)
def script(req: RequestContext) -> tuple[int, str, dict[str, str]]:
    return 200, _asset("app.js"), {"Content-Type": "text/javascript; charset=utf-8", **HEADERS}
