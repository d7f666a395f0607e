"""Lambda handler of the change-event dispatcher (no HTTP routes): after each change (nudged) and on
its schedule, each warehouse's events go to its sinks (core/changes/dispatcher.py) and its
replicated tables to their destinations (core/replication/replicate.py)."""

from __future__ import annotations

import time
from typing import Any


def pass_over(ctx: Any, names: list[str], budget_s: float) -> dict[str, Any]:
    """One pass over the warehouses: events, then replication. A warehouse's report holds its sinks'
    and, when it replicates, `replication`: tables looked at and destinations failing."""
    from chalicelib import scope

    with scope.entered():  # each pass counts and acts on its own (chalicelib/scope.py)
        return _pass_over(ctx, names, budget_s)


def _pass_over(ctx: Any, names: list[str], budget_s: float) -> dict[str, Any]:
    import logging

    from chalicelib.auth.acting import ActingFor
    from chalicelib.core.changes.dispatcher import dispatch
    from chalicelib.core.replication import replicate

    out: dict[str, Any] = {}
    for name in names:
        acting = ActingFor(ctx)  # who put each rule and owns each sink, read afresh per warehouse
        report = dispatch(ctx, name, budget_s, readers=acting.event_reader)
        try:
            done = replicate.run(ctx, name, time.monotonic() + budget_s, gate=acting.replication)
        except replicate.FAILURES as exc:  # a warehouse being deleted, or S3 trouble: the next pass
            logging.getLogger("catalog.dispatcher").warning("replication: %s: %s", name, exc)
            done, report = {}, {**report, "replication": {"error": str(exc)[:200]}}
        if done:
            failing = sum(s.get("replicationStatus") == "failed" for states in done.values() for s in states.values())
            report = {**report, "replication": {"tables": len(done), "failed": failing}}
        out[name] = report
    return out


def _warehouses(ctx: Any) -> list[str]:
    from chalicelib import keys

    return [
        keys.warehouse_from_record(k) for k in ctx.storage.list_keys(ctx.settings.system_bucket, keys.WAREHOUSES_PREFIX)
    ]


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from chalicelib.core.primitives.context import get_context

    ctx = get_context()
    remaining_ms = context.get_remaining_time_in_millis() if context is not None else 60_000
    budget = max(5.0, remaining_ms / 1000 - 10)
    return pass_over(ctx, _warehouses(ctx), budget)


def main(argv: list[str] | None = None) -> int:
    """The scheduled function's passes, run here (`make run`'s helper): `--loop SECONDS` repeats."""
    from chalicelib.core.changes import dispatcher

    return dispatcher.main(argv, passes=pass_over)


if __name__ == "__main__":
    raise SystemExit(main())
