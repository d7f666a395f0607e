"""Init-phase work: what a function (or the local server) would otherwise do in its first request.

Lambda runs a function's init before its first request (with a full vCPU, and ahead of time under
provisioned concurrency or SnapStart). Every function builds its S3 client and reads the root
secret there, in a thread beside the handler's imports. Nothing heavier is done at init: a client
waiting for a cold start pays for the init too, so the functions import PyIceberg only for a
change that needs it (core/iceberg/light.py applies property commits without it); the local server
(chalicelib/devserver.py) builds PyIceberg's models at start instead of in its first create.
"""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("catalog.warmup")

_SAMPLE = {
    "table-changes": [
        {
            "identifier": {"namespace": ["warmup"], "name": "t"},
            "requirements": [{"type": "assert-table-uuid", "uuid": "00000000-0000-4000-8000-000000000000"}],
            "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
        }
    ]
}


def every_function() -> None:
    """In a Lambda init: the S3 client and the root credentials (every request needs both; the
    secret's read waits on the network) built in a thread while the handler's modules import.
    Under SnapStart they are built before the snapshot; botocore refreshes the function's own
    credentials after a restore, and a pooled connection found dead is opened again.
    Elsewhere (in-process tests, the local server) they are built on first use."""
    if os.environ.get("AWS_LAMBDA_INITIALIZATION_TYPE") == "snap-start":
        _shared()  # before the snapshot, whole: a thread caught mid-request would be restored so
        _after_restore()
    elif os.environ.get("AWS_LAMBDA_RUNTIME_API"):
        threading.Thread(target=_shared, name="warmup", daemon=True).start()


def _after_restore() -> None:
    """Every instance restored from one snapshot starts with the same random state: reseed it, or
    their back-off jitter would move in step (the runtime's hook module exists only there)."""
    try:
        import random

        from snapshot_restore_py import register_after_restore  # type: ignore[import-not-found]
    except ImportError:
        return
    register_after_restore(random.seed)


def _shared() -> None:
    try:
        from chalicelib.auth.identities import root_credentials
        from chalicelib.core.primitives.context import get_context

        get_context()
        root_credentials()
    except Exception:  # noqa: BLE001 - the first request meets the same failure and answers it
        log.warning("init warm-up failed; the first request will retry", exc_info=True)


def transactions() -> None:
    from chalicelib.core.iceberg import metadata  # noqa: F401 - imported for their import cost
    from chalicelib.core.primitives.context import get_context
    from chalicelib.routes import iceberg_io

    iceberg_io.parse_transaction(_SAMPLE)
    from chalicelib.core.iceberg import updates  # noqa: F401 - PyIceberg's update models, for the changes that need them

    get_context()


def tables() -> None:
    """PyIceberg's metadata models and update dispatch, exercised once on an in-memory table."""
    from chalicelib.core.iceberg import metadata

    schema = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
    from chalicelib.core.iceberg.definitions import pyiceberg_new_table

    new = pyiceberg_new_table({"name": "warmup", "schema": schema})  # PyIceberg's models, not core/iceberg/light.py
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    base = new_table_metadata(new.schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, "s3://warmup/t", {})
    from chalicelib.core.iceberg.updates import parse_change

    change = parse_change(("w",), "t", [], [{"action": "set-properties", "updates": {"k": "v"}}])
    metadata.dump_metadata(metadata.apply(None, change, base, None, base.location))  # type: ignore[arg-type]
