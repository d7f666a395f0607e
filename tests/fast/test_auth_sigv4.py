"""SigV4: the seeds' raw examples signed by botocore, and a negative matrix that must not touch S3."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "stamp",
    [
        "20261127T101500",
        "2026-11-27T10:15:00Z",
        "20261327T101500Z",
        "20261127T246000Z",
        "2026112７T101500Z",
        "",
        "x" * 16,
    ],
)
def test_a_malformed_amz_date_is_refused(stamp):
    from chalicelib.auth import sigv4
    from chalicelib.errors import Unauthorized

    with pytest.raises(Unauthorized, match="Malformed X-Amz-Date"):
        sigv4._amz_date(stamp)
    assert sigv4._amz_date("20261127T101500Z").isoformat() == "2026-11-27T10:15:00+00:00"
