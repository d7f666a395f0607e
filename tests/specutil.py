"""Records the spec defines, as a client sends them: a view version and a function."""

from __future__ import annotations

from typing import Any


def version(sql: str, dialect: str = "spark", schema_id: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "version-id": 1,
        "schema-id": schema_id,
        "timestamp-ms": 1700000000000,
        "summary": {"engine-name": "test"},
        "representations": [{"type": "sql", "sql": sql, "dialect": dialect}],
        "default-namespace": ["vw"],
        **extra,
    }


FUNCTION = {
    "format-version": 1,
    "definitions": [
        {
            "definition-id": "int,int",
            "parameters": [{"name": "a", "type": "int"}, {"name": "b", "type": "int"}],
            "return-type": "int",
            "function-type": "udf",
            "versions": [
                {
                    "version-id": 1,
                    "representations": [{"type": "sql", "dialect": "spark", "sql": "a + b"}],
                    "timestamp-ms": 1_790_000_000_000,
                }
            ],
            "current-version-id": 1,
        }
    ],
    "definition-log": [],
    "properties": {"owner": "lake"},
}
