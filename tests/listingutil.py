"""A table created through the core, for the listing tests."""

from __future__ import annotations

from chalicelib.core.primitives.context import Context
from chalicelib.core.tables import create as creation
from chalicelib.routes import iceberg_io

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def _create(ctx: Context, wh: str, ns: tuple[str, ...], name: str) -> None:
    creation.create(ctx, wh, ns, iceberg_io.parse_create({"name": name, "schema": SCHEMA}))
