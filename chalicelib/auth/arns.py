"""The one name of every resource a policy can talk about, in every form a policy may write it.

A table bucket (warehouse) is `arn:aws:s3tables:::bucket/{w}` (the seeds' short form) and
`arn:aws:s3tables:{region}:{account}:bucket/{w}` (what the S3 Tables API returns). A table or view
is `{bucket ARN}/table/{namespace}/{name}` (levels joined by ".") and `{bucket ARN}/table/{table id}`
(the API's form: the id is the uuid that owns the table's location, so it follows renames and dies
with the table), in both bucket forms. A policy naming any of these names the same resource.

Lists ask about sets: every bucket, or every table of a bucket or of a namespace.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache

SHORT = "arn:aws:s3tables:::"
_ACCOUNT = re.compile(r"\d{12}")


@cache  # deployment settings, read once
def region() -> str:
    return os.environ.get("CATALOG_S3TABLES_REGION", os.environ.get("AWS_REGION", "us-east-1"))


@cache
def account() -> str:
    value = os.environ.get("CATALOG_ACCOUNT_ID", "000000000000")
    return value if _ACCOUNT.fullmatch(value) else "000000000000"


@cache
def long_base() -> str:
    return f"arn:aws:s3tables:{region()}:{account()}:"


def bucket_api_arn(warehouse: str) -> str:
    """The ARN the S3 Tables API returns for a table bucket."""
    return f"{long_base()}bucket/{warehouse}"


def table_api_arn(warehouse: str, table_id: str) -> str:
    return f"{bucket_api_arn(warehouse)}/table/{table_id}"


def bases() -> tuple[str, str]:
    return SHORT, long_base()


@dataclass(frozen=True)
class Resource:
    """A bucket (`table=False`) or a table/view; `warehouse="*"` is every bucket and `name=None`
    every table of the bucket (or of `namespace`): the sets that list routes ask about."""

    warehouse: str
    namespace: tuple[str, ...] | None = None
    name: str | None = None
    table: bool = False
    table_id: str | None = None  # known id; else the authorizer looks it up when a policy needs it

    @property
    def is_set(self) -> bool:
        return self.warehouse == "*" or (self.table and self.name is None)

    @property
    def named_table(self) -> bool:
        return self.table and self.warehouse != "*" and self.namespace is not None and self.name is not None

    def __str__(self) -> str:
        """The short form, as messages name it."""
        if self.warehouse == "*":
            return f"{SHORT}bucket/*"
        if not self.table:
            return f"{SHORT}bucket/{self.warehouse}"
        if self.name is None:
            ns = f"{'.'.join(self.namespace)}/" if self.namespace else ""
            return f"{SHORT}bucket/{self.warehouse}/table/{ns}*"
        return f"{SHORT}bucket/{self.warehouse}/table/{'.'.join(self.namespace or ())}/{self.name}"

    def names(self) -> list[str]:
        """Every name of a single resource but its id forms."""
        if not self.table:
            return [f"{b}bucket/{self.warehouse}" for b in bases()]
        return [f"{b}bucket/{self.warehouse}/table/{'.'.join(self.namespace or ())}/{self.name}" for b in bases()]

    def id_names(self, table_id: str) -> list[str]:
        return [f"{b}bucket/{self.warehouse}/table/{table_id}" for b in bases()]

    def prefixes(self) -> tuple[list[str], list[str]]:
        """A set's members: the names that start with one of the first, and (a namespace's tables)
        the id forms, which start with one of the second and carry no namespace."""
        if self.warehouse == "*":
            return [f"{b}bucket/" for b in bases()], []
        tables = [f"{b}bucket/{self.warehouse}/table/" for b in bases()]
        if not self.namespace:
            return tables, []
        return [f"{t}{'.'.join(self.namespace)}/" for t in tables], tables


def bucket(warehouse: str) -> Resource:
    return Resource(warehouse)


def table(
    warehouse: str, ns: tuple[str, ...] | None = None, name: str | None = None, table_id: str | None = None
) -> Resource:
    """A table or view, or (name None) every table of the bucket or of the namespace."""
    return Resource(warehouse, ns, name, True, table_id)


_ID_CHARS = frozenset("0123456789abcdef-?")
ID_LENGTH = 36


def may_name_id(pattern: str, warehouse: str) -> bool:
    """Whether the pattern may match a table's id form in this bucket (`.../table/` and 36 characters
    of a uuid). It says no only when sure, from the text before its first star and after its last,
    so that the authorizer reads a table's id only for policies that can mean one."""
    first, star, _ = pattern.partition("*")
    last = pattern.rpartition("*")[2] if star else first
    for base in bases():
        prefix = f"{base}bucket/{warehouse}/table/"
        n = len(prefix)
        if not all(p in ("?", c) for p, c in zip(first, prefix, strict=False)):
            continue  # the text before the first star leaves this form
        if len(first) > n + ID_LENGTH or not set(first[n:]) <= _ID_CHARS:
            continue
        if not star and len(first) != n + ID_LENGTH:
            continue
        tail = last[-ID_LENGTH:]
        if not set(tail) <= _ID_CHARS:
            continue  # an id form ends with the id
        head = last[: max(len(last) - ID_LENGTH, 0)]
        if head and not all(p in ("?", c) for p, c in zip(reversed(head), reversed(prefix), strict=False)):
            continue
        if len(head) > n:
            continue
        return True
    return False
