"""Who owns a table location, and purging it in bounded memory and time (resumed by the sweeper).

A table's location is ``s3://{bucket}/{ns levels}/{name}-{table-uuid hex}`` (keys.table_location),
so two tables share files only if they share a table uuid. A uuid record claims the uuid (and so
the location) for one table at a time: create and register write it with If-None-Match, a finished
drop marks it "dropped", and a finished purge deletes it. Purge deletes nothing but that location.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from chalicelib import keys
from chalicelib.core.access import resource_policies
from chalicelib.core.primitives import cas, damage
from chalicelib.core.primitives.context import Context, dump, now_ms
from chalicelib.core.settling import releases
from chalicelib.errors import BadRequest, Conflict, DamagedObject
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt

_LEVEL = r"[a-z0-9_]{1,250}"


class UuidInUse(Conflict):
    """Another live table holds this table uuid (and so its files)."""


def uuid_hex(table_uuid: object) -> str:
    return uuid.UUID(str(table_uuid)).hex


def check_location(bucket: str, location: str, table_uuid: object) -> None:
    """A location this catalog could have chosen for this table uuid, so it is this table's alone."""
    pattern = rf"s3://{re.escape(bucket)}/(?:{_LEVEL}/){{1,10}}{_LEVEL}-{uuid_hex(table_uuid)}"
    if not isinstance(location, str) or not re.fullmatch(pattern, location.rstrip("/")):
        raise BadRequest(
            f"Invalid table location {str(location)[:200]!r}: a table must live at "
            f"s3://{bucket}/<namespace levels>/<name>-<table-uuid without dashes>, which the catalog chooses; "
            "this keeps every table's files its own"
        )


def claim_uuid(
    ctx: Context,
    bucket: str,
    table_uuid: str,
    metadata_location: str,
    may_adopt: releases.MayAdopt | None = None,
    unheld: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Claim a table uuid for the table about to be written at metadata_location; Conflict if
    another table holds it. Each claim carries a fresh id, so no other request's claim (a renamed
    table keeps its claim, and its location) is ever mistaken for ours.

    A register passes `may_adopt` (its face's consent) to take a released uuid (core/settling/
    releases.py), and `unheld` (no table holds the uuid) to take a register's claim abandoned past
    its lease; a create passes neither and never takes a released uuid.

    Returns the claim written (so a failed create or register can take it back)."""
    record = {"state": "live", "metadata-location": metadata_location, "claim": uuid.uuid4().hex}
    written = [record]

    def change(current: dict[str, Any] | None) -> dict[str, Any] | None:
        if current is not None and current.get("claim") == record["claim"]:
            return None  # our own write, its answer lost
        if current is not None and (reason := releases.problem(current)) is not None:
            raise damage.damaged(
                bucket, keys.uuid_record(table_uuid), f"The uuid record of table uuid {table_uuid}", reason
            )
        released = releases.held(current) if current is not None else None
        if current is not None and current.get("state") == "dropped" and released is not None:
            if may_adopt is None:
                raise UuidInUse(
                    f"Table uuid {table_uuid} (and its location) belongs to a table that left the catalog with its "
                    "files kept: only a register of its metadata brings it back"
                )
            may_adopt(released)
            written[0] = releases.consuming(record, released)
        elif current is not None and current.get("state") != "dropped":
            abandoned = releases.abandoned_claim(current) if may_adopt is not None and unheld is not None else None
            if abandoned is None or may_adopt is None or unheld is None or not unheld():
                raise UuidInUse(
                    f"Table uuid {table_uuid} (and its location) belongs to another table; a table's files are its own"
                )
            may_adopt(abandoned)
            written[0] = releases.consuming(record, abandoned)
        else:
            written[0] = record  # absent, or a dropped table whose files were kept: registering it brings it back
        return written[0]

    cas.update(ctx, bucket, keys.uuid_record(table_uuid), change, f"Table uuid {table_uuid}", absent=True)
    return written[0]


def uuid_problem(doc: object) -> str | None:
    """What makes a stored uuid record unusable (None: nothing)."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    return (
        damage.required(doc, "state") or damage.fields(doc, state=str, metadata_location=str) or releases.problem(doc)
    )


def read_uuid_record(ctx: Context, bucket: str, table_uuid: str) -> tuple[dict[str, Any], str] | None:
    """A uuid record and its ETag; None if absent; DamagedObject (logged) if it cannot be read."""
    subject = f"The uuid record of table uuid {table_uuid}"
    return damage.load(ctx, bucket, keys.uuid_record(table_uuid), subject, uuid_problem)


def uuid_state(ctx: Context, bucket: str, table_uuid: str) -> str | None:
    found = read_uuid_record(ctx, bucket, table_uuid)
    return str(found[0]["state"]) if found is not None else None


def set_uuid_state(ctx: Context, bucket: str, table_uuid: str, state: str) -> None:
    """Mark a dropped table's uuid (best effort: the sweeper repeats it). A damaged record stays as
    it is (logged; fsck reports it): nothing can claim its uuid meanwhile."""
    try:
        found = read_uuid_record(ctx, bucket, table_uuid)
    except DamagedObject:
        return
    if found is None:
        return
    try:
        ctx.storage.put_if_match(bucket, keys.uuid_record(table_uuid), dump(dict(found[0], state=state)), found[1])
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        pass


def queue(ctx: Context, bucket: str, table_uuid: str, location: str) -> None:
    """Record that a location must be purged; idempotent (one job per table uuid)."""
    job = {"table-uuid": table_uuid, "location": location, "queued-ms": now_ms()}
    try:
        ctx.storage.put_if_absent(bucket, keys.purge_job(table_uuid), dump(job))
    except (PreconditionFailed, WriteInDoubt):
        pass  # already queued
    set_uuid_state(ctx, bucket, table_uuid, "purging")


def run(ctx: Context, bucket: str, table_uuid: str, budget_s: float) -> bool:
    """Delete the queued location's files, 1000 keys per batch, until done or out of time.

    A purge cut short (timeout, crash) resumes from the listing: deleted keys are gone from it.
    Returns True when the location is empty and the job is closed."""
    subject = f"The purge job of table uuid {table_uuid}"
    found = damage.load(ctx, bucket, keys.purge_job(table_uuid), subject, job_problem)
    if found is None:
        return True
    location = str(found[0]["location"])
    try:
        check_location(bucket, location, table_uuid)  # never delete outside a table's own prefix
    except BadRequest:
        ctx.storage.delete(bucket, keys.purge_job(table_uuid))
        return True
    prefix = keys.split_s3_uri(location.rstrip("/"))[1] + "/"
    deadline = time.monotonic() + budget_s
    while True:
        batch = list(_take(ctx.storage.list_keys(bucket, prefix), 1000))
        if not batch:
            break
        ctx.storage.delete_many(bucket, batch)
        if time.monotonic() >= deadline:
            return False
    ctx.storage.delete(bucket, keys.uuid_record(table_uuid))
    resource_policies.forget_table(ctx, bucket, table_uuid)
    ctx.storage.delete(bucket, keys.purge_job(table_uuid))
    return True


def job_problem(doc: object) -> str | None:
    """What makes a stored purge job unusable (None: nothing); a damaged job deletes nothing."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    return damage.required(doc, "location") or damage.fields(doc, location=str)


def _take(it: Any, n: int) -> Any:
    for i, item in enumerate(it):
        if i >= n:
            return
        yield item
