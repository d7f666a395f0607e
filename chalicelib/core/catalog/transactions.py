"""Multi-table transactions: commit, and the replay of one in doubt (core/transactions.py)."""

from __future__ import annotations

from chalicelib.core.transactions import commit as commit
from chalicelib.core.transactions import resolve as resolve
