"""Lambda handler of the events route group: the events feed and event sinks."""

from chalicelib.apps import GROUPS, build
from chalicelib.lambda_events import make_handler

app = build(GROUPS["events"], "catalog-events")
handler = make_handler(app)
