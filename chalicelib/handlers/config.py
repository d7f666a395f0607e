"""Lambda handler of the config route group (imports only that group's modules)."""

from chalicelib.apps import GROUPS, build
from chalicelib.lambda_events import make_handler

app = build(GROUPS["config"], "catalog-config")
handler = make_handler(app)
