"""Views: create, load, replace (commit), register, drop, rename (core/tables/views.py)."""

from __future__ import annotations

from chalicelib.core.tables.views import commit as commit
from chalicelib.core.tables.views import create as create
from chalicelib.core.tables.views import drop as drop
from chalicelib.core.tables.views import load as load
from chalicelib.core.tables.views import register as register
from chalicelib.core.tables.views import rename as rename
