"""Lambda handler of the IAM face (imports only that face's modules)."""

from chalicelib.apps import GROUPS, build
from chalicelib.lambda_events import make_handler

app = build(GROUPS["iam"], "catalog-iam")
handler = make_handler(app)
