"""Lambda handler of the change-event dispatcher (no HTTP routes): see chalicelib/core/changes/dispatcher.py."""

from typing import Any


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from chalicelib import keys
    from chalicelib.core.changes.dispatcher import dispatch
    from chalicelib.core.primitives.context import get_context

    ctx = get_context()
    remaining_ms = context.get_remaining_time_in_millis() if context is not None else 60_000
    budget = max(5.0, remaining_ms / 1000 - 10)
    names = [
        keys.warehouse_from_record(k) for k in ctx.storage.list_keys(ctx.settings.system_bucket, keys.WAREHOUSES_PREFIX)
    ]
    return {name: dispatch(ctx, name, budget) for name in names}
