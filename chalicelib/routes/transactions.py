"""POST /v1/{prefix}/transactions/commit: every table changes, or none does."""

from __future__ import annotations

from chalicelib.auth import resources
from chalicelib.core.catalog import transactions
from chalicelib.pipeline import RequestContext, RouteGroup, operation
from chalicelib.routes import PREFIX, delegation, iceberg_io, warehouse_of
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

bp = RouteGroup(__name__, ICEBERG_FACE)


@operation(bp, PREFIX + "/transactions/commit", "POST", "CommitTransaction", checks=resources.transaction)
def commit_transaction(req: RequestContext) -> tuple[int, None]:
    ctx, wh = warehouse_of(req)
    changes = iceberg_io.parse_transaction(req.json())
    delegation.refuse_forgetting(req, wh, changes)
    delegation.refuse_unwritten_files(req, wh, changes)
    transactions.commit(ctx, wh, changes)
    return 204, None
