"""What tests/fast/test_redteam_maintenance.py and tests/s3/test_redteam_maintenance.py both use."""

from __future__ import annotations

import argparse
from collections import defaultdict
from typing import Any

# The column name of the review's attack: it closes the job's backticks and reads another table.
EVIL = "ts` < TIMESTAMP_NTZ '1970-01-01 00:00:00' OR id IN (SELECT id FROM secret.t WHERE ssn LIKE '1%') OR `ts"


ODD = 'when it\'s (old); -- "x"'  # legal, and only harmless quoted


class FakeSpark:
    """Spark's answers to maintain: one namespace of tables; every procedure answers zeros."""

    def __init__(self, tables: dict[str, list[str]]) -> None:
        self.tables, self.calls = tables, []

    def sql(self, text: str) -> Any:
        self.calls.append(text)
        if text.startswith("SHOW NAMESPACES"):
            rows: list[Any] = []
        elif text.startswith("SHOW TABLES IN "):
            rows = [{"tableName": t} for t in self.tables.get(text[len("SHOW TABLES IN ") :], [])]
        else:
            rows = [defaultdict(int)]
        return type("DF", (), {"collect": lambda _self: rows})()


def _maintain_args(**over: Any) -> argparse.Namespace:
    base = dict(table=None, namespace=None, all=False, skip="", maintenance_config="catalog", stats=False)
    base.update(expire_older_than_hours=168, retain_last=5, target_file_size_mb=128, min_input_files=2)
    base.update(orphan_older_than_hours=72)
    return argparse.Namespace(**{**base, **over})
