"""Nudge the change-event dispatcher after a change, so events leave within seconds rather than at
its next scheduled run. At most one asynchronous invocation per process every NUDGE_EVERY_S; off
unless CATALOG_DISPATCHER_FUNCTION names the function (the template sets it)."""

from __future__ import annotations

import os
import threading
import time

NUDGE_EVERY_S = 5.0
_last = 0.0
_lock = threading.Lock()


def after_change() -> None:
    global _last
    name = os.environ.get("CATALOG_DISPATCHER_FUNCTION")
    if not name:
        return
    with _lock:
        now = time.monotonic()
        if now - _last < NUDGE_EVERY_S:
            return
        _last = now
    threading.Thread(target=_invoke, args=(name,), daemon=True).start()  # never on the request's path


def _invoke(name: str) -> None:
    try:
        from chalicelib import aws

        aws.client("lambda").invoke(FunctionName=name, InvocationType="Event", Payload=b"{}")
    except Exception:  # noqa: BLE001, S110 - the schedule delivers anyway, within a minute
        pass
