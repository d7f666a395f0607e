"""Functions (the spec's UDFs): list, load, and create and drop behind CATALOG_FUNCTIONS_WRITABLE."""

from __future__ import annotations

from chalicelib.core.tables.functions import create as create
from chalicelib.core.tables.functions import drop as drop
from chalicelib.core.tables.functions import list_names as list_names
from chalicelib.core.tables.functions import load as load
from chalicelib.core.tables.functions import writable as writable
