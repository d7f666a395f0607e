"""SigV4 canonical queries as AWS specifies them (issue 26, item 1), checked against botocore's own
signer over generated requests: repeated keys, keys without `=`, empty values, spaces, `+`,
reserved and non-ASCII characters. The server side decodes the query as the catalog's routes do
(every value of every key) and must accept exactly what botocore signed."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import parse_qsl, quote

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import given, settings
from hypothesis import strategies as st

from chalicelib.auth import sigv4

KEY, SECRET = "AKIDTESTKEY0000001", "test-secret-key"
text = st.text(alphabet=st.sampled_from(list("ab-_.~ +=&/?%:é€*") + ["x"]), min_size=0, max_size=6)
pairs = st.lists(st.tuples(text.filter(bool), text), max_size=5)


def _multi(raw_query: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k, v in parse_qsl(raw_query, keep_blank_values=True):
        out.setdefault(k, []).append(v)
    return out


def _verify(method: str, url: str, headers: dict[str, str], raw_query: str) -> str:
    multi = _multi(raw_query)
    lower = {k.lower(): v for k, v in headers.items()}
    path = url.split("://", 1)[1].split("?", 1)[0]
    path = path[path.index("/") :] if "/" in path else "/"
    return sigv4.verify(
        method,
        path,
        {k: v[-1] for k, v in multi.items()},
        lower,
        b"",
        lambda akid: SECRET if akid == KEY else None,
        now=datetime.now(UTC),
        multi_query=multi,
    )


@settings(max_examples=400, deadline=None, derandomize=True)
@given(pairs, st.lists(st.sampled_from(["acl", "uploads", "delete"]), max_size=2))
def test_what_botocore_signs_verifies(params: list[tuple[str, str]], bare: list[str]) -> None:
    raw = "&".join([f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in params] + bare)
    url = "http://127.0.0.1:8181/_iceberg/v1/warehouses" + (f"?{raw}" if raw else "")
    request = AWSRequest(method="GET", url=url)
    SigV4Auth(Credentials(KEY, SECRET), "s3tables", "us-east-1").add_auth(request)
    headers = dict(request.headers)
    headers["host"] = "127.0.0.1:8181"
    assert _verify("GET", url, headers, raw) == KEY, raw


def test_a_repeated_key_is_signed_once_per_value_and_order_matters_not() -> None:
    raw = "tagKeys=b&tagKeys=a&x=1"
    url = f"http://127.0.0.1:8181/_s3tables/tag/arn?{raw}"
    request = AWSRequest(method="DELETE", url=url)
    SigV4Auth(Credentials(KEY, SECRET), "s3tables", "us-east-1").add_auth(request)
    headers = dict(request.headers)
    headers["host"] = "127.0.0.1:8181"
    assert _verify("DELETE", url, headers, raw) == KEY
    # Dropping one value (what a dict of the query did) breaks the signature.
    tampered = "tagKeys=b&x=1"
    try:
        _verify("DELETE", url.replace(raw, tampered), headers, tampered)
    except Exception as exc:  # noqa: BLE001 - Unauthorized
        assert "signature does not match" in str(exc)
    else:
        raise AssertionError("a request with a value removed verified")
