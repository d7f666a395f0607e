"""Lambda handler of the console route group: the catalog browser's page and script."""

from chalicelib.apps import GROUPS, build
from chalicelib.lambda_events import make_handler

app = build(GROUPS["console"], "catalog-console")
handler = make_handler(app)
