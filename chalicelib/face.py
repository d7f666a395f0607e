"""A wire protocol's identity, shared by the pipeline and the faces without either importing the other."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chalice.app import Response

from chalicelib.errors import CatalogError


@dataclass(frozen=True)
class Face:
    """A wire protocol: its SigV4 service names and how it renders errors (each face has its own)."""

    name: str
    services: tuple[str, ...]
    render_error: Callable[[CatalogError, bool], Response]
    # An Idempotency-Key replay of a change in doubt: its answer if it landed, None to run it again.
    resolve_in_doubt: Callable[[dict[str, Any]], Any] | None = None
