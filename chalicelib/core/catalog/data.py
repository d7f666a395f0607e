"""Data access without S3 keys: the grant a table's readers and writers get, remote signing and
vended credentials (core/data_access.py, core/signer.py, core/vending.py)."""

from __future__ import annotations

from chalicelib.core.data_access import Grant, check, table_location
from chalicelib.core.data_actions import legacy as legacy_data_actions
from chalicelib.core.signer import sign
from chalicelib.core.vending import available as vending_available
from chalicelib.core.vending import vend

__all__ = ["Grant", "check", "legacy_data_actions", "sign", "table_location", "vend", "vending_available"]
