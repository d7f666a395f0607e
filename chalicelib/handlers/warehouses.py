"""Lambda handler of the warehouses route group (imports only that group's modules)."""

from chalicelib.apps import GROUPS, build
from chalicelib.lambda_events import make_handler

app = build(GROUPS["warehouses"], "catalog-warehouses")
handler = make_handler(app)
