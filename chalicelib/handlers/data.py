"""Lambda handler of the data route group (imports only that group's modules)."""

from chalicelib.apps import GROUPS, build
from chalicelib.lambda_events import make_handler

app = build(GROUPS["data"], "catalog-data")
handler = make_handler(app)
