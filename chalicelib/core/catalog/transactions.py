"""Multi-table transactions: commit, and the replay of one in doubt (core/tables/transactions.py)."""

from __future__ import annotations

from chalicelib.core.tables.projection import settles
from chalicelib.core.tables.transactions import commit as _commit
from chalicelib.core.tables.transactions import resolve as resolve

commit = settles(_commit)  # the tables it creates go into their listing projections at once
