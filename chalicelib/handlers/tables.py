"""Lambda handler of the tables route group (imports only that group's modules)."""

from chalicelib.apps import GROUPS, build
from chalicelib.lambda_events import make_handler

app = build(GROUPS["tables"], "catalog-tables")
handler = make_handler(app)
