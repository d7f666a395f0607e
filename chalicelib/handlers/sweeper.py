"""Lambda handler of the scheduled sweeper (no HTTP routes): see chalicelib/core/sweeper.py."""

from typing import Any


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from chalicelib import scope
    from chalicelib.core.primitives.context import get_context
    from chalicelib.core.sweeper import sweep
    from chalicelib.glue.shapes import projection

    remaining_ms = context.get_remaining_time_in_millis() if context is not None else 240_000
    with scope.entered():  # each run counts and acts on its own (chalicelib/scope.py)
        return sweep(get_context(), None, max(5.0, remaining_ms / 1000 - 20), {"glue": projection})
