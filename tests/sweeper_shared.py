"""What tests/fast/test_sweeper.py and tests/s3/test_sweeper.py both use."""

from __future__ import annotations

import uuid

from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.primitives.context import Context
from chalicelib.core.tables import create as creation
from chalicelib.routes import iceberg_io
from tests.conftest import lease_ms

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


LEASE_MS = lease_ms(1500)  # long enough for a fence and a delete under lost responses


def _setup(ctx: Context, *names: str) -> str:
    wh = f"wh-sw-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    namespaces.create(ctx, wh, ["s"], {})
    for name in names:
        creation.create(ctx, wh, ("s",), iceberg_io.parse_create({"name": name, "schema": SCHEMA}))
    return wh
