"""Lambda handler of the namespaces route group (imports only that group's modules)."""

from chalicelib.apps import GROUPS, build
from chalicelib.lambda_events import make_handler

app = build(GROUPS["namespaces"], "catalog-namespaces")
handler = make_handler(app)
