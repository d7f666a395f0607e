"""Lambda handler of the S3 Tables face (imports only that face's modules)."""

from chalicelib.apps import GROUPS, build
from chalicelib.lambda_events import make_handler

app = build(GROUPS["s3tables"], "catalog-s3tables")
handler = make_handler(app)
