"""Data access without S3 keys: the grant a table's readers and writers get, remote signing and
vended credentials (core/access/data_access.py, core/access/signer.py, core/access/vending.py), and
while a staged create's grant is good (core/access/staged.py)."""

from __future__ import annotations

from chalicelib.core.access.data_access import Grant, check, table_location
from chalicelib.core.access.data_actions import legacy as legacy_data_actions
from chalicelib.core.access.signer import sign
from chalicelib.core.access.staged import held as staged_location_held
from chalicelib.core.access.staged import staged_uuid
from chalicelib.core.access.vending import available as vending_available
from chalicelib.core.access.vending import vend

__all__ = [
    "Grant",
    "check",
    "legacy_data_actions",
    "sign",
    "staged_location_held",
    "staged_uuid",
    "table_location",
    "vend",
    "vending_available",
]
