"""Naming rules (seeds 000/001). Every name is checked here before it becomes part of an S3 key."""

from __future__ import annotations

import re

from chalicelib.errors import BadRequest

MAX_NAMESPACE_LEVELS = 10
MAX_PROPERTY_BYTES = 2048
# Warehouse names double as bucket names and route segments; these would shadow routes.
RESERVED_WAREHOUSES = frozenset({"warehouses", "buckets", "config", "oauth", "admin"})

# fullmatch everywhere: "$" would also accept a trailing newline.
_WAREHOUSE = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
_IDENT = re.compile(r"[a-z0-9_]{1,250}")
# S3 keys are at most 1024 bytes; a table pointer key and its location must fit.
MAX_IDENTIFIER_BYTES = 900


def check_warehouse(name: object) -> str:
    if not isinstance(name, str) or not _WAREHOUSE.fullmatch(name) or "--" in name:
        raise BadRequest(
            f"Invalid warehouse name {str(name)[:80]!r}: 3-63 characters, lowercase letters, "
            "numbers and hyphens, starting and ending with a letter or number"
        )
    if name in RESERVED_WAREHOUSES:
        raise BadRequest(f"Invalid warehouse name {name!r}: the name is reserved")
    return name


# What S3 and S3 Tables keep for themselves in bucket names: a new warehouse (a table bucket) may not
# take them (existing ones stay reachable).
RESERVED_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-", "aws")
RESERVED_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", "--x-s3", "--table-s3")


def check_new_warehouse(name: object) -> str:
    warehouse = check_warehouse(name)
    if warehouse.startswith(RESERVED_BUCKET_PREFIXES) or warehouse.endswith(RESERVED_BUCKET_SUFFIXES):
        raise BadRequest(
            f"Invalid warehouse name {warehouse!r}: names starting with {', '.join(RESERVED_BUCKET_PREFIXES)} "
            f"or ending with {', '.join(RESERVED_BUCKET_SUFFIXES)} are reserved by S3"
        )
    return warehouse


def check_namespace(levels: object) -> tuple[str, ...]:
    if not isinstance(levels, (list, tuple)) or not levels:
        raise BadRequest("Invalid namespace: expected a non-empty array of names")
    if len(levels) > MAX_NAMESPACE_LEVELS:
        raise BadRequest(f"Invalid namespace: at most {MAX_NAMESPACE_LEVELS} levels, got {len(levels)}")
    for level in levels:
        if not isinstance(level, str) or not _IDENT.fullmatch(level):
            raise BadRequest(
                f"Invalid namespace name {str(level)[:80]!r}: 1-250 characters, "
                "lowercase letters, numbers and underscores"
            )
    if sum(len(level) + 1 for level in levels) > MAX_IDENTIFIER_BYTES:
        raise BadRequest(f"Invalid namespace: the levels together are limited to {MAX_IDENTIFIER_BYTES} characters")
    return tuple(levels)


def check_table(name: object) -> str:
    if not isinstance(name, str) or not _IDENT.fullmatch(name):
        raise BadRequest(
            f"Invalid table name {str(name)[:80]!r}: 1-250 characters, lowercase letters, numbers and underscores"
        )
    return name


def check_properties(props: object, what: str = "property") -> dict[str, str]:
    if props is None:
        return {}
    if not isinstance(props, dict):
        raise BadRequest(f"Invalid {what} map: expected a JSON object")
    out: dict[str, str] = {}
    for key, value in props.items():
        if value is None or isinstance(value, (dict, list)):
            raise BadRequest(f"Invalid {what} {key[:80]!r}: value must be a string")
        value = value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
        if len(key.encode()) > MAX_PROPERTY_BYTES or len(value.encode()) > MAX_PROPERTY_BYTES:
            raise BadRequest(f"Invalid {what} {key[:80]!r}: keys and values are limited to 2 KB each")
        if not key:
            raise BadRequest(f"Invalid {what}: empty key")
        out[key] = value
    return out


# Separators a deployment may advertise (CATALOG_NAMESPACE_SEPARATOR): none can occur in a name,
# none is a URL delimiter. Url-encoded form (what /v1/config advertises) -> the character.
NAMESPACE_SEPARATORS = {"%1F": "\x1f", ".": ".", "%2E": ".", ":": ":", "%3A": ":", "|": "|", "%7C": "|"}


def namespace_separator(raw: str | None = None) -> tuple[str, str]:
    """(advertised form, character) of the deployment's separator; 0x1F (%1F) by default, as the spec."""
    import os

    value = os.environ.get("CATALOG_NAMESPACE_SEPARATOR", "%1F") if raw is None else raw
    char = NAMESPACE_SEPARATORS.get(value) or NAMESPACE_SEPARATORS.get(value.upper())
    if char is None:
        raise ValueError(
            f"CATALOG_NAMESPACE_SEPARATOR={value!r}: expected one of {', '.join(sorted(NAMESPACE_SEPARATORS))}"
        )
    return value, char


def parse_namespace_path(raw: str) -> tuple[str, ...]:
    """Decode a namespace path segment or parent: levels joined by the advertised separator or, as
    the spec asks of servers for older clients, by 0x1F (%1F)."""
    from urllib.parse import unquote

    text = unquote(raw)
    sep = _separator_char()
    if sep != "\x1f":
        text = text.replace(sep, "\x1f")
    return check_namespace(text.split("\x1f"))


_SEPARATOR: list[str] = []


def _separator_char() -> str:
    if not _SEPARATOR:
        _SEPARATOR.append(namespace_separator()[1])
    return _SEPARATOR[0]
