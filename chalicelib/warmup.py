"""Init-phase work for functions whose every request needs it.

Lambda runs a function's init before its first request (with a full vCPU, and ahead of time under
provisioned concurrency or SnapStart). A transaction always parses table changes with PyIceberg's
models and always talks to S3, so the transactions function imports and builds both at init
instead of in its first request.
"""

from __future__ import annotations

_SAMPLE = {
    "table-changes": [
        {
            "identifier": {"namespace": ["warmup"], "name": "t"},
            "requirements": [{"type": "assert-table-uuid", "uuid": "00000000-0000-4000-8000-000000000000"}],
            "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
        }
    ]
}


def transactions() -> None:
    from chalicelib.core import metadata, transactions  # noqa: F401 - imported for their import cost
    from chalicelib.core.context import get_context
    from chalicelib.routes import iceberg_io

    iceberg_io.parse_transaction(_SAMPLE)  # PyIceberg's update models, and their pydantic validators
    get_context()  # the process's S3 client (botocore's S3 model is loaded once)
