"""What tests/fast/test_client_isolation.py and tests/s3/test_client_isolation.py both use."""

from __future__ import annotations

# Every module that builds a client through chalicelib.aws; a new one must be built below as well.
CALL_SITES = {
    "chalicelib/storage.py": "s3",  # boto3's managed copy of an object over 5 GB only
    "chalicelib/core/access/vending.py": "sts",
    "chalicelib/core/changes/event_senders.py": "sqs sns events",
    "chalicelib/nudge.py": "lambda",
}
