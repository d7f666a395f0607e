"""Lambda handler of the auth route group (imports only that group's modules)."""

from chalicelib.apps import GROUPS, build
from chalicelib.lambda_events import make_handler

app = build(GROUPS["auth"], "catalog-auth")
handler = make_handler(app)
