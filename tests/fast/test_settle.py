"""Settling a pointer (core/settling/settle.py): its transitions are the ones docs/design.md shows, every
state has its rules, and the sweeper's rule finishes what a rename's writer left."""

from __future__ import annotations

import importlib
import uuid

import pytest

from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.primitives import pointer_record
from chalicelib.core.primitives.context import Context
from chalicelib.core.settling import pointers, settle
from chalicelib.core.tables import create as creation
from chalicelib.core.tables import lifecycle, lookup
from chalicelib.routes import iceberg_io
from tests.conftest import ROOT
from tests.crashutil import Crash, CrashAfter

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
RENAME = {"source": {"namespace": ["a"], "name": "t"}, "destination": {"namespace": ["b"], "name": "u"}}


def test_the_design_note_shows_the_transitions_as_written() -> None:
    design = (ROOT / "docs" / "design.md").read_text()
    assert settle.table() in design


def test_every_state_has_its_rules_and_every_rule_exists() -> None:
    states = {t.state for t in settle.TRANSITIONS}
    assert states == {*pointer_record.STATES, "claim"}
    for t in settle.TRANSITIONS:
        module, function = t.rule.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(f"chalicelib.core.{module}"), function)), t.rule
    # A stale pointer of each state a writer leaves is the sweeper's to finish.
    assert {t.state for t in settle.TRANSITIONS if "sweeper" in t.by} >= {"pending", "moved", "dropped", "claim"}


def _rename_interrupted(ctx: Context, after: int) -> str:
    wh = f"wh-settle-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    namespaces.create(ctx, wh, ["a"], {})
    namespaces.create(ctx, wh, ["b"], {})
    creation.create(ctx, wh, ("a",), iceberg_io.parse_create({"name": "t", "schema": SCHEMA}))
    with pytest.raises(Crash):
        lifecycle.rename(Context(ctx.settings, CrashAfter(ctx.storage, after)), wh, *iceberg_io.parse_rename(RENAME))
    return wh


def test_the_sweeper_removes_a_reservation_whose_rename_never_committed(core: Context) -> None:
    wh = _rename_interrupted(core, 1)  # the destination reserved, the source untouched
    reservation = pointers.read(core, wh, ("b",), "u")
    assert reservation is not None and reservation.state == "pending"
    assert settle.live(core, wh, ("b",), "u", read_only=True) is None  # to every request: absent
    assert settle.stale(core, wh, ("b",), "u", reservation) == "reservations-removed"
    assert pointers.read(core, wh, ("b",), "u") is None
    assert lookup.load(core, wh, ("a",), "t").metadata_location  # the table never left its name


def test_the_sweeper_finishes_a_rename_past_its_commit_point(core: Context) -> None:
    wh = _rename_interrupted(core, 2)  # the destination reserved, the source moved: committed
    source = pointers.read(core, wh, ("a",), "t")
    assert source is not None and source.state == "moved"
    assert settle.stale(core, wh, ("a",), "t", source) == "renames-finished"
    destination = pointers.read(core, wh, ("b",), "u")
    assert destination is not None and destination.state == "active"
    assert pointers.read(core, wh, ("a",), "t") is None
