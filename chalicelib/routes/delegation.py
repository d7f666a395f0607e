"""X-Iceberg-Access-Delegation on load and create: remote signing or vended credentials, formatted
as the Iceberg REST `config` and `storage-credentials` that Java, PyIceberg and DuckDB read."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from chalicelib.auth.identities import as_principal
from chalicelib.auth.resources import ns_context, table_arn
from chalicelib.core.catalog import data
from chalicelib.core.primitives.context import Context
from chalicelib.pipeline import RequestContext

if TYPE_CHECKING:
    from chalicelib.core.catalog.tables import MayAdopt, Release

log = logging.getLogger("catalog.delegation")
SIGN_TOKEN_TTL_S = 12 * 3600


def requested(req: RequestContext) -> set[str]:
    raw = req.headers.get("x-iceberg-access-delegation") or ""
    return {part.strip().lower() for part in raw.split(",") if part.strip()}


def read_rule(req: RequestContext, wh: str, ns: tuple[str, ...], name: str) -> tuple[Any, ...]:
    """The caller's s3tables:GetTableData statements on the table (core.model.ReadRule)."""
    return req.authz.read_rule(table_arn(wh, ns, name), ns_context(ns, name))


def read_policy(req: RequestContext, wh: str, ns: tuple[str, ...], name: str) -> tuple[Any, ...]:
    """The GetTableData statements as the policies say them (a trusted engine's included)."""
    return req.authz.read_policy(table_arn(wh, ns, name), ns_context(ns, name))


def trusted_engine(req: RequestContext) -> bool:
    return req.identity is not None and req.identity.trusted_engine


def read_restrictions(req: RequestContext, policy: tuple[Any, ...], raw_metadata: bytes) -> dict[str, Any] | None:
    """The loadTable answer's `read-restrictions` for this caller (None: it reads everything raw)."""
    from chalicelib.core.catalog.planning import read_restrictions as of

    return of(raw_metadata, policy, trusted_engine(req))


def restrictions_tag(req: RequestContext, policy: tuple[Any, ...]) -> str:
    from chalicelib.core.catalog.planning import restrictions_tag as tag

    return tag(policy, trusted_engine(req))


def limited(req: RequestContext, wh: str, ns: tuple[str, ...], name: str) -> bool:
    """The caller's read policy limits the rows or columns it may read: it reads through plans only."""
    from chalicelib.core.catalog.planning import restricted

    return restricted(read_rule(req, wh, ns, name))


def may_read(req: RequestContext, wh: str, ns: tuple[str, ...], name: str) -> bool:
    """Some of the table's data may be read (s3tables:GetTableData; GetTable on a legacy warehouse)."""
    from chalicelib.core.catalog.planning import reads_any

    return reads_any(read_rule(req, wh, ns, name))


def read_action(req: RequestContext, wh: str) -> str:
    """The action that reads the warehouse's table data, to name in a refusal."""
    return "s3tables:GetTable" if _legacy(wh) else "s3tables:GetTableData"


def write_action(req: RequestContext, wh: str) -> str:
    """The action that writes the warehouse's table data, to name in a refusal."""
    return "s3tables:UpdateTable" if _legacy(wh) else "s3tables:PutTableData"


def _legacy(wh: str) -> bool:
    from chalicelib.core.catalog import data
    from chalicelib.core.primitives.context import get_context

    return data.legacy_data_actions(get_context(), wh)


def refuse_unreadable(req: RequestContext, wh: str, ns: tuple[str, ...], name: str) -> None:
    if not may_read(req, wh, ns, name):
        from chalicelib.errors import Forbidden

        raise Forbidden(
            f"Access denied: {req.who} may not read the data of {'.'.join(ns)}.{name} ({read_action(req, wh)})"
        )


def refuse_vending_if_limited(req: RequestContext, wh: str, ns: tuple[str, ...], name: str) -> None:
    if limited(req, wh, ns, name):
        from chalicelib.errors import Forbidden

        raise Forbidden(
            f"Access denied: {req.who}'s policy limits which rows of {'.'.join(ns)}.{name} it may read "
            "(s3tables:GetTableData) and credentials cannot be scoped to them: read through remote signing "
            "with server-side scan planning (X-Iceberg-Access-Delegation: remote-signing)"
        )


# Updates that forget names columns had: read policies name columns by every name they have had in the
# table's schemas (core/planning/read_rules.py), so a caller whose reads are limited may not erase that.
FORGETTING = frozenset({"remove-schemas"})


def refuse_forgetting(req: RequestContext, wh: str, changes: list[Any]) -> None:
    """403 for a change that removes schemas from a table whose reads are limited for the caller."""
    from chalicelib.core.catalog.planning import restricted

    for change in changes:
        actions = {getattr(u, "action", None) for u in change.updates}
        if actions & FORGETTING and restricted(read_policy(req, wh, change.namespace, change.name)):
            from chalicelib.errors import Forbidden

            raise Forbidden(
                f"Access denied: {req.who}'s reads of {'.'.join(change.namespace)}.{change.name} are "
                "limited by policy (s3tables:GetTableData), whose column names cover every name a column has had "
                "in the table's schemas: it may not remove schemas"
            )


def may_write(req: RequestContext, wh: str, ns: tuple[str, ...], name: str) -> bool:
    """The table's data may be written (s3tables:PutTableData; UpdateTable on a legacy warehouse)."""
    from chalicelib.errors import DamagedObject

    try:
        return req.authz.may_write_data(table_arn(wh, ns, name), ns_context(ns, name))
    except DamagedObject:
        return False


def refuse_registering_unwritten(req: RequestContext, wh: str, ns: tuple[str, ...], name: str) -> None:
    """Registering a metadata file brings its files into the table: writing the table's data."""
    if not may_write(req, wh, ns, name) and not _legacy(wh):
        from chalicelib.errors import Forbidden

        raise Forbidden(
            f"Access denied: {req.who} may not write the data of {'.'.join(ns)}.{name} "
            "(s3tables:PutTableData), so it may not register a metadata file as it"
        )


def may_take_back(req: RequestContext, wh: str) -> MayAdopt:
    """The consent a register of a table's files asks when that table left the catalog with its files
    kept (core.catalog.tables.Release): auth/acting.py `take_back_refusal`. Files stay bound to their
    table (issue 58)."""
    from chalicelib.auth import acting
    from chalicelib.auth.authorization import of_request

    def check(release: Release) -> None:
        why = acting.take_back_refusal(of_request(req.authz), wh, release)
        if why is not None:
            from chalicelib.errors import Forbidden

            raise Forbidden(f"Access denied: {why}")

    return check


# Updates that bring files into a table: writing them is writing the table's data.
BRINGING_FILES = frozenset({"add-snapshot", "append"})


def refuse_unwritten_files(req: RequestContext, wh: str, changes: list[Any]) -> None:
    """403 for a commit that adds a snapshot to a table whose data the caller may not write: its
    files are data the caller could not have written through the catalog. (On a warehouse of the
    earlier meaning, UpdateTable or CreateTable, which the route asked for, is all it takes.)"""
    for change in changes:
        actions = {getattr(u, "action", None) for u in change.updates}
        if not actions & BRINGING_FILES or may_write(req, wh, change.namespace, change.name):
            continue
        if _legacy(wh):
            return
        from chalicelib.errors import Forbidden

        raise Forbidden(
            f"Access denied: {req.who} may not write the data of {'.'.join(change.namespace)}."
            f"{change.name} ({write_action(req, wh)}), so it may not add a snapshot to it"
        )


def base_url(req: RequestContext, ctx: Context) -> str:
    """The catalog's URL as this client reached it (its Function URL, API stage or local server)."""
    if ctx.settings.public_url:
        return ctx.settings.public_url
    scheme = (req.headers.get("x-forwarded-proto") or "http").split(",")[0].strip()
    host = req.headers.get("host") or "localhost"
    path = req.raw_path
    return f"{scheme}://{host}{path[: path.index('/v1/')] if '/v1/' in path else '/_iceberg'}"


def for_table(
    req: RequestContext,
    ctx: Context,
    wh: str,
    ns: tuple[str, ...],
    name: str,
    location: str | None,
    staged: bool = False,
    read_only: bool = False,
    policy: tuple[Any, ...] | None = None,
) -> tuple[dict[str, str], list[dict[str, Any]] | None]:
    """(config, storage-credentials) for a loaded or created table, as the client asked. A staged
    table (stage-create: no pointer yet) is signed for, and its credentials refreshed, with a grant
    carried in its endpoints; a read-only replica's credentials never write. `policy`: the caller's
    statements when the route has them already (the policy walk is per request)."""
    from chalicelib.core.catalog.planning import enforced, reads_any, restricted

    config = dict(ctx.settings.client_config_for(wh))
    wanted = requested(req)
    rule = enforced(policy, trusted_engine(req)) if policy is not None else read_rule(req, wh, ns, name)
    reads = reads_any(rule)
    if staged:
        # Credentials outlive the create: they go only to a creator that may read all of the table
        # once it exists, as its load would vend them; any other creator writes through the signer.
        reads = reads and not restricted(rule)
        if not reads and "vended-credentials" in wanted and ctx.settings.remote_signing:
            wanted = {"remote-signing"}
    elif reads and restricted(rule):
        # Plans only (the spec's scan-planning-mode): its client must not plan by reading manifests,
        # which hold every file's partition and bounds, and vended keys could not be scoped to rows.
        config["scan-planning-mode"] = "server"
        if "vended-credentials" in wanted and "remote-signing" not in wanted and ctx.settings.remote_signing:
            wanted = {"remote-signing"}
        elif "remote-signing" not in wanted:
            return config, None
    if not location or not wanted:
        return config, None
    if "remote-signing" in wanted and ctx.settings.remote_signing:
        # Also for a caller without data actions: its signer answers each request with why not.
        config.update(signing_config(req, ctx, wh, ns, name, location if staged else None))
        return config, None
    if not reads:
        return config, None  # the table is seen, not its data: no credentials (a writer signs)
    if "vended-credentials" in wanted and data.vending_available(ctx.settings):
        grant = staged_grant(req, wh, ns, name, location) if staged else None
        creds = credentials(req, ctx, wh, ns, name, location, read_only, grant)
        config.update(creds[0]["config"])
        return config, creds
    return config, None


def signing_config(
    req: RequestContext, ctx: Context, wh: str, ns: tuple[str, ...], name: str, staged_location: str | None = None
) -> dict[str, str]:
    from chalicelib.auth import sign_tokens

    endpoint = f"v1/{quote(wh)}/namespaces/{quote(chr(0x1F).join(ns), safe='')}/tables/{quote(name)}/sign"
    principal = as_principal(req.identity)
    grant = staged_grant(req, wh, ns, name, staged_location) if staged_location is not None else None
    if grant is not None:
        endpoint += "?staged=" + quote(grant, safe="")
    config = {
        "s3.remote-signing-enabled": "true",
        "s3.signer.uri": base_url(req, ctx),
        "s3.signer.endpoint": endpoint,
        # The spec's (deprecated) provider-neutral names, read by Iceberg Java after 1.11, which
        # also reads the response's remote-signing-config (routes/iceberg_io.py).
        "signer.uri": base_url(req, ctx),
        "signer.endpoint": endpoint,
        # PyIceberg: its fsspec FileIO is the one with a remote signer (PyArrow's S3 has none).
        "s3.signer": "S3V4RestSigner",
        "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
    }
    if principal is not None and principal.via == "sigv4" and principal.token_key:
        # A SigV4 client's PyIceberg signer has no bearer token of its own: this one signs for this
        # table only, sent as a header property (PyIceberg's signer adds those; Java signs with SigV4
        # and moves it aside). Bearer clients' signers send their own token.
        scope = (wh, *ns, name)
        token = sign_tokens.mint(principal.token_key, principal.name, principal.access_key_id, scope, SIGN_TOKEN_TTL_S)
        config["header.Authorization"] = "Bearer " + token
    return config


def staged_grant(req: RequestContext, wh: str, ns: tuple[str, ...], name: str, location: str) -> str | None:
    """Spark's CTAS and DuckDB's CREATE TABLE write data before the table exists: this grant, under
    the creator's own key, vouches for the location the catalog chose for it (`{ns}/{name}-{uuid}`,
    so for that table uuid too), to its signer and to its credential refreshes, on this table's
    endpoints only, and only while no table holds or held that location (core/access/staged.py):
    its create's commit spends it (None for a caller without a key to mint it under)."""
    from chalicelib.auth import sign_tokens

    principal = as_principal(req.identity)
    if principal is None or not principal.token_key:
        return None
    return sign_tokens.mint(
        principal.token_key,
        principal.name,
        principal.access_key_id,
        (wh, *ns, name),
        SIGN_TOKEN_TTL_S,
        location=location,
    )


def credentials(
    req: RequestContext,
    ctx: Context,
    wh: str,
    ns: tuple[str, ...],
    name: str,
    location: str,
    read_only: bool = False,
    staged: str | None = None,
) -> list[dict[str, Any]]:
    """Spec `storage-credentials`: one prefix (the table's location), for a caller that may read its
    data (GetTableData), read-write if it may also write it (PutTableData; core/access/data_actions.py).
    Iceberg writers read metadata and manifests, so a caller that may only write signs instead."""
    grant = data.Grant.of(location, not read_only and may_write(req, wh, ns, name))  # a replica: reads only
    creds = data.vend(ctx.settings, grant, req.identity.name if req.identity else "anonymous")
    config = {
        "s3.access-key-id": creds.access_key_id,
        "s3.secret-access-key": creds.secret_access_key,
    }
    if creds.session_token:
        config["s3.session-token"] = creds.session_token
    if creds.expires_at_ms:
        config["s3.session-token-expires-at-ms"] = str(creds.expires_at_ms)
    # A table being created refreshes with its grant (it has no pointer to be found by until its first
    # commit), so a create job whose credentials expire mid-job still refreshes them.
    refresh = f"v1/{quote(wh)}/namespaces/{quote(chr(0x1F).join(ns), safe='')}/tables/{quote(name)}/credentials"
    config["client.refresh-credentials-endpoint"] = refresh + ("?staged=" + quote(staged, safe="") if staged else "")
    return [{"prefix": f"s3://{grant.bucket}/{grant.prefix}", "config": config}]
