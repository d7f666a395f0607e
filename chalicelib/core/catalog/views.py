"""Views: create, load, replace (commit), register, drop, rename (core/views.py)."""

from __future__ import annotations

from chalicelib.core.views import commit as commit
from chalicelib.core.views import create as create
from chalicelib.core.views import drop as drop
from chalicelib.core.views import load as load
from chalicelib.core.views import register as register
from chalicelib.core.views import rename as rename
