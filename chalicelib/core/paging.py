"""Opaque page tokens over S3 key order (Iceberg REST `pageToken` / `next-page-token`)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterator
from typing import TypeVar

from chalicelib.errors import BadRequest

T = TypeVar("T")
MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 100  # a list without pageSize still answers in bounded time and size


def parse_page_size(raw: str | None) -> int:
    if raw is None or raw == "":
        return DEFAULT_PAGE_SIZE
    try:
        size = int(raw)
    except ValueError:
        raise BadRequest(f"Invalid pageSize {raw[:20]!r}: expected a positive integer") from None
    if size < 1:
        raise BadRequest("Invalid pageSize: must be at least 1")
    return min(size, MAX_PAGE_SIZE)


def decode_token(token: str | None, prefix: str) -> str:
    """The S3 key to start after; tokens from another listing are refused."""
    if not token:
        return ""
    try:
        key = base64.urlsafe_b64decode(token.encode() + b"=" * (-len(token) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadRequest("Invalid pageToken") from None
    if not key.startswith(prefix):
        raise BadRequest("Invalid pageToken: it belongs to another listing")
    return key


def encode_token(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


# Keys one page may read: skipped keys (nested namespaces, hidden names) make a short page with a
# token to go on, so a page costs O(page), never O(namespace).
SCAN_LIMIT = 1000


def page(keys: Iterator[str], convert: Callable[[str], T | None], page_size: int | None) -> tuple[list[T], str | None]:
    """Collect converted items (None = skip) up to page_size; the token names the last key used.

    A full page looks ahead (within the scan limit) for an item that will follow, so a token means
    more items, not merely more keys; a page cut short by the scan limit keeps its token. Converts
    must be cheap (no S3 reads): names and policy checks."""
    items: list[T] = []
    limit = max(SCAN_LIMIT, 2 * (page_size or 0)) if page_size is not None else None
    scanned = 0
    for key in keys:
        scanned += 1
        item = convert(key)
        if item is not None:
            items.append(item)
        if page_size is not None and len(items) >= page_size:
            for ahead in keys:
                scanned += 1
                if convert(ahead) is not None or (limit is not None and scanned >= limit):
                    return items, encode_token(key)
            return items, None
        if limit is not None and scanned >= limit:
            more = next(keys, None) is not None  # a short page: the next one may still be empty
            return items, encode_token(key) if more else None
    return items, None


def parse_bool(raw: str | None, name: str, default: bool) -> bool:
    if raw is None or raw == "":
        return default
    low = raw.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise BadRequest(f"Invalid {name} {raw[:20]!r}: expected true or false")
