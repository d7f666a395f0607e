"""Lambda handler of the Glue face (imports only that face's modules)."""

from chalicelib.apps import GROUPS, build
from chalicelib.lambda_events import make_handler

app = build(GROUPS["glue"], "catalog-glue")
handler = make_handler(app)
