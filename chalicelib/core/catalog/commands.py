"""Typed commands from Iceberg JSON, for every face that speaks it (the REST face, S3 Tables'
CreateTable with a metadata definition): a table definition, a commit's requirements and updates."""

from __future__ import annotations

from typing import Any

from chalicelib.core.iceberg.definitions import new_table as new_table
from chalicelib.core.model import Namespace, TableChange


def parse_change(ns: Namespace, name: str, requirements: Any, updates: Any) -> TableChange:
    """A commit's requirements and updates as PyIceberg's models (imported here, by the handlers
    that parse a change only: PyIceberg is a heavy import)."""
    from chalicelib.core.iceberg import light

    found = light.parse_change(ns, name, requirements, updates)  # a property commit needs no PyIceberg
    if found is not None:
        return found
    from chalicelib.core.iceberg.updates import parse_change as parse

    return parse(ns, name, requirements, updates)
