"""Lambda handler with every route group: the all-in-one function behind the Function URL."""

from chalicelib.apps import ALL, build
from chalicelib.lambda_events import make_handler

app = build(ALL)
handler = make_handler(app)
