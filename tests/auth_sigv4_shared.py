"""What tests/fast/test_auth_sigv4.py and tests/s3/test_auth_sigv4.py both use."""

from __future__ import annotations

import json
from unittest import mock

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.conftest import REGION, ROOT_KEY, ROOT_SECRET

CREDS = Credentials(ROOT_KEY, ROOT_SECRET)


def signed(method, url, body=None, service="s3tables", creds=CREDS, when=None, headers=None):
    data = json.dumps(body) if isinstance(body, dict) else (body or b"")
    req = AWSRequest(method=method, url=url, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    if when is None:
        SigV4Auth(creds, service, REGION).add_auth(req)
    else:
        with mock.patch("botocore.auth.get_current_datetime", return_value=when):
            SigV4Auth(creds, service, REGION).add_auth(req)
    return req
