"""Lambda handler of the transactions route group (imports only that group's modules)."""

from chalicelib.apps import GROUPS, build
from chalicelib.lambda_events import make_handler

app = build(GROUPS["transactions"], "catalog-transactions")
handler = make_handler(app)
