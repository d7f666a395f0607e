"""Remote signing and credential refresh (Iceberg REST signRequest and loadCredentials).

Every S3 request a signing client makes comes here, so this group is its own small function: it
reads the table's pointer (cached a few seconds) and signs, importing no PyIceberg."""

from __future__ import annotations

import re
import time
from typing import Any

from chalicelib.auth import resources
from chalicelib.auth.identities import signed_in
from chalicelib.caches import Cache
from chalicelib.core.catalog import data, planning, tables
from chalicelib.errors import BadRequest, Forbidden, NotFound, Unauthorized
from chalicelib.names import check_table
from chalicelib.pipeline import RequestContext, RouteGroup, operation
from chalicelib.routes import PREFIX, delegation, namespace_of, warehouse_of
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

bp = RouteGroup(__name__, ICEBERG_FACE)
TABLE = PREFIX + "/namespaces/{namespace}/tables/{table}"
# How long a signer trusts a table's location (a drop or rename stops signing within this).
LOCATION_TTL_S = 5.0
# (warehouse, namespace, table) -> (location, whether a read-only replica), trusted for LOCATION_TTL_S.
_pointers: Cache[tuple[str, tuple[str, ...], str], tuple[str, bool]] = Cache(
    "signer's table locations", 10_000, ttl=LOCATION_TTL_S
)


def _location(
    req: RequestContext, grant: str | None = None, staged_max_age_s: float = 0.0
) -> tuple[str, tuple[str, ...], str, str, bool, bool]:
    """The table's warehouse, namespace, name and location, whether it is still being created
    (a staged table: no pointer yet, signed for by its creator's grant: in the signer endpoint's
    query, or as the sign request's `staged` property from remote-signing-config), and whether it
    is a read-only replica. `staged_max_age_s`: how old an answer to "is the grant still good" may be."""
    ctx, wh = warehouse_of(req)
    ns, name = namespace_of(req), check_table(req.param("table"))
    staged = req.query.get("staged") or grant
    if staged:  # a table being created: its creator's grant names the location the catalog chose
        location = _staged_location(req, ctx, wh, ns, name, staged)
        table_uuid = data.staged_uuid(ctx.bucket_for(wh), ns, name, location)
        if table_uuid is None:
            raise Forbidden("Invalid staged-table grant: it names no location the catalog chose for this table")
        if not data.staged_location_held(ctx, ctx.bucket_for(wh), table_uuid, staged_max_age_s):
            return wh, ns, name, location, True, False
        return _spent(req, ctx, wh, ns, name, location)
    wh, ns, name, location, replica = _live_location(ctx, wh, ns, name)
    return wh, ns, name, location, False, replica


def _staged_location(req: RequestContext, ctx: Any, wh: str, ns: tuple[str, ...], name: str, grant: str) -> str:
    """The location a staged-create grant vouches for: the caller's own, for this table (its
    warehouse, namespace and name), unexpired; 403 for anything else."""
    from chalicelib.auth import sign_tokens

    principal = signed_in(req.identity)
    if not grant.startswith(sign_tokens.PREFIX) or not principal.token_key:
        raise Forbidden("Invalid staged-table grant")
    try:
        return sign_tokens.staged_location(grant, principal.token_key, principal.name, (wh, *ns, name))
    except Unauthorized:
        raise Forbidden("Invalid staged-table grant: it is another caller's, another table's or expired") from None


def _spent(
    req: RequestContext, ctx: Any, wh: str, ns: tuple[str, ...], name: str, location: str
) -> tuple[str, tuple[str, ...], str, str, bool, bool]:
    """A grant whose location a table holds or held (its create committed, or the table was since
    renamed, dropped or unregistered) vouches for nothing. Only the table it created, still under
    this name, is served, under its own rules (a client finishing its create with the endpoint it
    was given): GetTable, and the data actions the handler asks, as without a grant."""
    refused = Forbidden(
        f"Invalid staged-table grant: the table it was issued for has been created, so the grant is spent; "
        f"load {'.'.join(ns)}.{name} (or the table wherever it is now) for access under its own rules"
    )
    try:
        wh, ns, name, live, replica = _live_location(ctx, wh, ns, name)
    except NotFound:
        raise refused from None
    if live.rstrip("/") != location.rstrip("/"):
        raise refused  # another table of that name: not the grant's
    req.require("GetTable", resources.table_arn(wh, ns, name), resources.ns_context(ns, name))
    return wh, ns, name, live, False, replica


def _live_location(ctx: Any, wh: str, ns: tuple[str, ...], name: str) -> tuple[str, tuple[str, ...], str, str, bool]:
    key = (wh, ns, name)
    started = time.monotonic()
    hit = _pointers.get(key)
    if hit is None:
        metadata, replica = tables.located(ctx, wh, ns, name)
        location = data.table_location(ctx, metadata)
        trusted_s = LOCATION_TTL_S - (time.monotonic() - started)  # counted from before the read
        _pointers.put(key, (location, replica), ttl=trusted_s)
    else:
        location, replica = hit
    return wh, ns, name, location, replica


def _sign_request(body: dict[str, Any]) -> tuple[str, str, dict[str, list[str]], str | None]:
    method, uri, headers, payload = body.get("method"), body.get("uri"), body.get("headers", {}), body.get("body")
    if not isinstance(method, str) or not isinstance(uri, str) or not uri:
        raise BadRequest('Invalid sign request: "method" and "uri" are required strings')
    if not isinstance(headers, dict) or not all(
        isinstance(v, list) and all(isinstance(x, str) for x in v) for v in headers.values()
    ):
        raise BadRequest('Invalid sign request: "headers" must map names to lists of strings')
    if payload is not None and not isinstance(payload, str):
        raise BadRequest('Invalid sign request: "body" must be a string')
    provider = body.get("provider", "s3")  # the spec's: absent means s3
    if provider != "s3":
        raise BadRequest(f"Invalid sign request: provider {str(provider)[:40]!r}; this catalog signs s3 requests only")
    return method, uri, headers, payload


@operation(bp, TABLE + "/sign", "POST", "SignRequest", checks=resources.sign)
def sign_request(req: RequestContext) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Sign one S3 request if it stays inside the table: reads need GetTableData, writes PutTableData
    (GetTable and UpdateTable on a warehouse of the earlier meaning, core/access/data_actions.py)."""
    ctx, _ = warehouse_of(req)
    if not ctx.settings.remote_signing:
        raise Forbidden("Remote signing is turned off in this catalog (CATALOG_REMOTE_SIGNING)")
    body = req.json_object()
    method, uri, headers, payload = _sign_request(body)
    grant = resources.staged_grant(req.query.get("staged"), body.get("properties"))
    # creating: the route checked CreateTable. A grant's check is kept as long as a table's location
    # (one GET per 5 s), so a create's commit ends its grant within 5 s, as a drop or rename ends signing.
    wh, ns, name, location, creating, replica = _location(req, grant, LOCATION_TTL_S)
    table_grant = data.Grant.of(location, write=True)
    s3 = data.check(table_grant, method, uri, headers, payload, ctx.settings.client_endpoint_for(wh))
    if s3.writes and replica:
        raise Forbidden(
            f"Table {'.'.join(ns)}.{name} is a read-only replica: its data changes only by replication, "
            "until the replication is deleted"
        )
    if creating and not data.legacy_data_actions(ctx, wh) and not delegation.may_write(req, wh, ns, name):
        # A table being created is written by its creator: its data is the creator's to write.
        raise Forbidden(f"Access denied: {req.who} may create this table, not write its data (s3tables:PutTableData)")
    if s3.writes and not (creating or delegation.may_write(req, wh, ns, name)):
        raise Forbidden(
            f"Access denied: {req.who} may not write the data of {'.'.join(ns)}.{name} "
            f"({delegation.write_action(req, wh)})"
        )
    also: tuple[str, ...] = ()
    if not s3.writes and not creating:
        delegation.refuse_unreadable(req, wh, ns, name)
        also = _check_planned(req, ctx, wh, ns, name, location, s3, headers)
    signed = data.sign(method, uri, headers, ctx.settings.region_for(wh), also)
    return 200, {"uri": uri, "headers": signed}, {"Cache-Control": "no-cache"}


def _check_planned(
    req: RequestContext,
    ctx: Any,
    wh: str,
    ns: tuple[str, ...],
    name: str,
    location: str,
    s3: Any,
    headers: dict[str, list[str]],
) -> tuple[str, ...]:
    """A caller whose read policy limits rows or columns reads only what its own scan plans gave it:
    whole files, or (a deletion vector in a Puffin file shared across partitions) a byte range, whose
    Range header is then signed too (S3 checks it). Returns the headers to sign besides."""
    rule = delegation.read_rule(req, wh, ns, name)
    if not planning.restricted(rule):
        return ()
    who = req.who
    if s3.key:
        whole, ranges = planning.granted(ctx, wh, location, who, rule, f"{s3.bucket}/{s3.key}")
        if whole:
            return ()
        plain = not ({"partNumber", "versionId"} & set(s3.query))
        if ranges and plain and s3.method == "HEAD":
            return ()
        if ranges and plain and _within(headers, ranges):
            return ("range",)
    raise Forbidden(
        f"Access denied: {who}'s policy limits which rows of {'.'.join(ns)}.{name} it may read "
        "(s3tables:GetTableData), so it reads only the data and delete files its own scan plans gave it: plan "
        "the scan on the server (scan-planning-mode=server; POST .../plan). This file is in none of them, or it "
        "holds rows or columns the caller may not read (files are read whole)"
    )


def _within(headers: dict[str, list[str]], ranges: list[tuple[int, int]]) -> bool:
    """The request reads one byte range (`Range: bytes=a-b`) inside one of the granted ranges."""
    found = [v for k, vs in headers.items() if k.lower() == "range" for v in vs]
    if len(found) != 1:
        return False
    match = re.fullmatch(r"bytes=([0-9]{1,19})-([0-9]{1,19})", found[0].strip(" "), re.ASCII)
    if match is None:
        return False
    first, last = int(match[1]), int(match[2])
    return first <= last and any(start <= first and last <= end for start, end in ranges)


@operation(bp, TABLE + "/credentials", "GET", "GetTableCredentials", checks=resources.table_read)
def load_credentials(req: RequestContext) -> tuple[int, dict[str, Any]]:
    """Fresh vended credentials for the table (clients call it before theirs expire)."""
    ctx, _ = warehouse_of(req)
    # Checked afresh: credentials outlive the request, so none are vended once the location is a table's.
    wh, ns, name, location, creating, replica = _location(req)
    if not delegation.may_read(req, wh, ns, name):
        raise Forbidden(
            f"Access denied: {req.who} may not read the data of {'.'.join(ns)}.{name} "
            f"({delegation.read_action(req, wh)}): credentials are vended to readers (a writer that may not "
            "read signs its writes: X-Iceberg-Access-Delegation: remote-signing)"
        )
    delegation.refuse_vending_if_limited(req, wh, ns, name)
    # A table being created is vended what its creator would be vended once it exists (they outlive
    # the create), and refreshes with its grant; a spent grant's table refreshes without one.
    grant = req.query.get("staged") if creating else None
    creds = delegation.credentials(req, ctx, wh, ns, name, location, replica, staged=grant)
    return 200, {"storage-credentials": creds}
