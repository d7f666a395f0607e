"""Policy questions about principals the catalog acts for outside their requests: who put a
replication rule (the catalog copies the source with its own credentials for them) and who owns an
event sink (the dispatcher sends it events). Asked again each time the catalog acts, so a principal
that loses a permission, or is deleted, stops being served at the next pass.

One `ActingFor` per pass: it reads each principal and each warehouse's resource policies once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalicelib.auth.authorization import Authorization, for_stored
from chalicelib.auth.resources import bucket_arn, ns_context, table_arn
from chalicelib.core.model import Owner
from chalicelib.core.primitives.context import Context
from chalicelib.errors import CatalogError


class ActingFor:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._authz: dict[tuple[str, str], Authorization | None] = {}

    def authorization(self, owner: Owner) -> Authorization | None:
        key = (owner.name, owner.id)
        if key not in self._authz:
            self._authz[key] = for_stored(self.ctx, owner.name, owner.id)
        return self._authz[key]

    def replication(self, owner: Owner, warehouse: str, ns: tuple[str, ...], name: str, dst: str) -> str | None:
        """core/replication/replicate.py's Gate: why the table may not be copied to `dst` for the
        rule's owner (None: it may). The same questions as at put, on the real ARNs."""
        table = ".".join((*ns, name))
        why = self._owner_gone(owner, "its rule")
        if why is not None:
            return f"Replication of {table} stopped: {why}"
        authz = self.authorization(owner)
        assert authz is not None  # _owner_gone said so
        why = source_refusal(authz, warehouse, ns, name)
        if why is None:
            why = destination_refusal(authz, dst, ns, name, not namespace_exists(self.ctx, dst, ns))
        return None if why is None else f"Replication of {table} to {dst!r} stopped: {why}"

    def event_reader(self, owner: Owner, warehouse: str) -> Callable[[dict[str, Any]], bool]:
        """Which events an event sink's owner may be sent: those it could read in the pull feed now
        (GetAuditLog, as `trail_reader`); none when the owner is gone."""
        try:
            authz = self.authorization(owner)
        except CatalogError:
            authz = None
        if authz is None:
            return lambda event: False
        return trail_reader(authz.visible, authz.denied, "GetAuditLog", warehouse)

    def record_expiration(
        self, owner: Owner, warehouse: str, ns: tuple[str, ...], name: str, table_id: str | None = None
    ) -> str | None:
        """The record expiration job's gate (s3tables/face.py): why it may not delete the table's
        expired rows for the configuration's owner now (None: it may). The same questions as at put."""
        table = ".".join((*ns, name))
        why = self._owner_gone(owner, "its configuration")
        if why is None:
            authz = self.authorization(owner)
            assert authz is not None  # _owner_gone said so
            why = expiration_refusal(authz, warehouse, ns, name, table_id)
        return None if why is None else f"Record expiration of {table} stopped: {why}"

    def file_removal(
        self, owner: Owner, kind: str, warehouse: str, ns: tuple[str, ...], name: str, table_id: str | None = None
    ) -> str | None:
        """The maintenance job's gate for a type that deletes files (snapshot management, unreferenced
        file removal): why it may not do that to this table for the configuration's owner now."""
        table = ".".join((*ns, name))
        why = self._owner_gone(owner, "its configuration")
        if why is None:
            authz = self.authorization(owner)
            assert authz is not None
            why = file_removal_refusal(authz, warehouse, ns, name, table_id)
        return None if why is None else f"{kind} of {table} stopped: {why}"

    def _owner_gone(self, owner: Owner, what: str) -> str | None:
        """Why the owner cannot be asked (a damaged or missing user record: fail closed)."""
        try:
            authz = self.authorization(owner)
        except CatalogError as exc:
            return f"{owner.name}'s user record cannot be read ({exc})"
        return f"{owner.name}, who put {what}, no longer exists" if authz is None else None


def source_refusal(authz: Authorization, warehouse: str, ns: tuple[str, ...] | None, name: str | None) -> str | None:
    """Why the principal may not have the source copied: it must read it whole (GetTable, and
    GetTableData with no row, column or mask condition). Without a name: every table of the bucket
    (or namespace), as a bucket rule covers tables made later."""
    resource = table_arn(warehouse, ns, name)
    cond = ns_context(ns, name) if ns is not None else {}
    what = f"{'.'.join((*ns, name))}" if ns is not None and name is not None else f"every table of {warehouse!r}"
    who = authz.principal.name
    if not authz.allowed("GetTable", resource, cond) or not authz.reads_any(resource, cond):
        return f"{who} may not read {what} (s3tables:GetTable and s3tables:GetTableData)"
    if not authz.reads_whole(resource, cond):
        return (
            f"{who} may read only part of {what} (s3tables:GetTableData with row, column or mask conditions): "
            "a replica would hold all of it"
        )
    return None


def move_refusal(authz: Authorization, resource: Any, cond: dict[str, str], what: str) -> str | None:
    """Why the principal may not move a table's data to another name (rename, an undrop to another
    name): policies that name tables by namespace and name stop applying to it there, so only who
    may already read all of it and write it may move it. None: it may."""
    if authz.reads_whole(resource, cond) and authz.may_write_data(resource, cond):
        return None
    return (
        f"{authz.principal.name} may not move {what} to another name: that takes reading all of its data "
        "(s3tables:GetTableData without row, column or mask conditions) and writing it (s3tables:PutTableData)"
    )


def refuse_move(
    authz: Authorization | None, warehouse: str, ns: tuple[str, ...], name: str, table_id: str | None = None
) -> None:
    """403 unless the caller may move the table `ns.name` (by its id too, when known) elsewhere."""
    from chalicelib.errors import Forbidden

    if authz is None:
        raise Forbidden("Access denied: moving a table needs an authenticated caller")
    why = move_refusal(authz, table_arn(warehouse, ns, name, table_id), ns_context(ns, name), ".".join((*ns, name)))
    if why is not None:
        raise Forbidden(f"Access denied: {why}")


def expiration_refusal(
    authz: Authorization, warehouse: str, ns: tuple[str, ...], name: str, table_id: str | None = None
) -> str | None:
    """Why the principal may not have the table's expired rows deleted for it: the job reads every
    row it compares and deletes some, so it must read the table whole (GetTableData with no row,
    column or mask condition) and write its data (PutTableData)."""
    resource, cond = table_arn(warehouse, ns, name, table_id), ns_context(ns, name)
    table, who = ".".join((*ns, name)), authz.principal.name
    if not authz.reads_any(resource, cond):
        return f"{who} may not read {table} (s3tables:GetTableData)"
    if not authz.reads_whole(resource, cond):
        return (
            f"{who} may read only part of {table} (s3tables:GetTableData with row, column or mask conditions): "
            "record expiration reads and deletes rows of all of it"
        )
    if not authz.may_write_data(resource, cond):
        return f"{who} may not write the data of {table} (s3tables:PutTableData): record expiration deletes rows"
    return None


def file_removal_refusal(
    authz: Authorization,
    warehouse: str,
    ns: tuple[str, ...] | None,
    name: str | None,
    table_id: str | None = None,
) -> str | None:
    """Why the principal may not have maintenance delete the table's files (expired snapshots',
    unreferenced ones): it must write its data (PutTableData). Without a name: every table of the
    bucket, as a bucket's configuration covers tables made later."""
    resource = table_arn(warehouse, ns, name, table_id)
    cond = ns_context(ns, name) if ns is not None else {}
    what = ".".join((*ns, name)) if ns is not None and name is not None else f"every table of {warehouse!r}"
    if not authz.may_write_data(resource, cond):
        return (
            f"{authz.principal.name} may not write the data of {what} (s3tables:PutTableData): "
            "this maintenance deletes its files"
        )
    return None


def take_back_refusal(authz: Authorization | None, warehouse: str, release: Any) -> str | None:
    """Why the caller may not register the files of a table that left the catalog with them kept
    (core.catalog.tables.Release: an unregister, a drop without purge): it must be who released
    them, or read all of that table's data and write it, on the table as it was named and by its
    id (a policy naming it either way applies to its files). None: it may."""
    if authz is None:
        return "registering a released table's files needs an authenticated caller"
    who = authz.principal
    if who.is_root or release.released_by(who.name, who.uuid):
        return None
    arn = table_arn(warehouse, release.namespace, release.name, release.table_uuid)
    cond = ns_context(release.namespace, release.name)
    if authz.reads_whole(arn, cond) and authz.may_write_data(arn, cond):
        return None
    table = ".".join((*release.namespace, release.name))
    done = "unregistered" if release.op == "unregister" else "dropped"
    legacy = authz.legacy_data_actions(warehouse)  # the actions that read and write data there
    read, write = ("GetTable", "UpdateTable") if legacy else ("GetTableData", "PutTableData")
    return (
        f"{who.name} may not register the files of table {table}, which was {done} with its files kept: that "
        f"takes being who {done} it, or reading all of {table}'s data and writing it (s3tables:{read} without "
        f"row, column or mask limits, and s3tables:{write})"
    )


def destination_refusal(
    authz: Authorization, dst: str, ns: tuple[str, ...] | None, name: str | None, new_namespace: bool
) -> str | None:
    """Why the principal may not have the replica made in `dst`: creating the namespace (when it is
    new), the table and writing its data, asked on the real ARNs with their condition keys."""
    who = authz.principal.name
    checks = [("CreateNamespace", bucket_arn(dst), ns_context(ns) if ns is not None else {})] if new_namespace else []
    cond = ns_context(ns, name) if ns is not None else {}
    checks.append(("CreateTable", table_arn(dst, ns, name), cond))
    for action, resource, context in checks:
        if not authz.allowed(action, resource, context):
            return f"{who} may not perform s3tables:{action} on {resource} (the replica's destination)"
    if not authz.may_write_data(table_arn(dst, ns, name), cond):
        return f"{who} may not write the data of {table_arn(dst, ns, name)} (s3tables:PutTableData; the replica's)"
    return None


def trail_reader(
    visible: Callable[..., bool], denied: Callable[..., bool], action: str, warehouse: str
) -> Callable[[dict[str, Any]], bool]:
    """An audit entry or change event is shown when the principal may read the trail of what it is
    about: a table's or view's (the action on it, or on the warehouse with no Deny on the table), a
    namespace's, the warehouse's. A move names both ends: both must be readable."""

    def keep(e: dict[str, Any]) -> bool:
        detail = e.get("detail") or {}
        was = detail.get("renamed-from") or detail.get("dropped-as") if isinstance(detail, dict) else None
        if isinstance(was, dict) and was.get("name"):
            target = dict(e.get("target") or {}, namespace=was.get("namespace") or [], name=was["name"])
            if not keep({"target": target}):
                return False
        target = e.get("target") or {}
        ns = tuple(target.get("namespace") or ())
        if target.get("kind") in ("table", "view") and ns and target.get("name"):
            name = str(target["name"])
            table = table_arn(warehouse, ns, name, str(target.get("uuid") or "") or None)
            cond = ns_context(ns, name)
            if denied(action, table, cond):
                return False
            return visible(action, table, cond) or visible(action, bucket_arn(warehouse), cond)
        return visible(action, bucket_arn(warehouse), ns_context(ns) if ns else {})

    return keep


def namespace_exists(ctx: Context, warehouse: str, ns: tuple[str, ...]) -> bool:
    from chalicelib.core.catalog import namespaces

    try:
        namespaces.describe(ctx, warehouse, ns)
    except CatalogError:
        return False
    return True
