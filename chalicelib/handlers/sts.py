"""Lambda handler of the STS face (imports only that face's modules)."""

from chalicelib.apps import GROUPS, build
from chalicelib.lambda_events import make_handler

app = build(GROUPS["sts"], "catalog-sts")
handler = make_handler(app)
