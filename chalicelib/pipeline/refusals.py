"""A change that did not happen is no audit entry (core/primitives/audit.py records changes); its
attempt goes to the function's log, on the catalog.audit logger."""

from __future__ import annotations

import logging

from chalicelib.errors import CatalogError
from chalicelib.pipeline.request import RequestContext

AUDIT_LOG = logging.getLogger("catalog.audit")
AUDIT_LOG.setLevel(logging.INFO)  # shown under Lambda's default WARNING root level too


def log_refused(ctx: RequestContext, err: CatalogError, status: int) -> None:
    line = {
        "outcome": "refused",
        "principal": ctx.who,
        "action": ctx.action,
        "status": status,
        "type": type(err).__name__,
    }
    AUDIT_LOG.info("refused", extra={**line, "path": ctx.raw_path[:300]})
