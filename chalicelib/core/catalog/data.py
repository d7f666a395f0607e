"""Data access without S3 keys: the grant a table's readers and writers get, remote signing and
vended credentials (core/data_access.py, core/signer.py, core/vending.py)."""

from __future__ import annotations

from chalicelib.core.data_access import Grant as Grant
from chalicelib.core.data_access import check as check
from chalicelib.core.data_access import table_location as table_location
from chalicelib.core.signer import sign as sign
from chalicelib.core.vending import vend as vend
