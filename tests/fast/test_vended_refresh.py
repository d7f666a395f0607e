"""Issue 40: vended credentials carry STS's expiry, are reused while fresh, and clients read across
their refreshes: PyIceberg by loading the table again, Spark (Iceberg Java) through
`GET .../tables/{table}/credentials`, one refresh and one AssumeRole per window, not per request.

AssumeRole calls are counted from the catalog's request log (its `AssumeRole` event, per request,
with the request's principal); STS here is LocalStack's, which like AWS's lasts at least 900 s.
"""

from __future__ import annotations

# ---- the rules, without a server --------------------------------------------------------------


def test_ttl_setting_allows_short_lives_for_tests(monkeypatch):
    from chalicelib.settings import Settings

    for raw, expected in (("20", 20), ("0", 1), ("3600", 3600), ("99999", 43200)):
        monkeypatch.setenv("CATALOG_VENDED_CREDENTIALS_TTL_S", raw)
        assert Settings.from_env().vended_ttl_s == expected


def test_cached_credentials_are_reused_while_fresh_for_their_clients():
    """Half the life, and never inside the 5 minutes before expiry in which Iceberg Java refreshes
    (a cached answer that close to expiry would send it straight back), unless the life is shorter."""
    from chalicelib.core.access.vending import reuse_until_ms

    s = 1000
    assert reuse_until_ms(0, 3600 * s) == 1800 * s  # an hour: reused for 30 minutes
    assert reuse_until_ms(0, 900 * s) == 450 * s  # STS's shortest: 7.5 minutes
    assert reuse_until_ms(0, 315 * s) == 15 * s  # Java refreshes at 15 s; the catalog must not answer the same
    assert reuse_until_ms(0, 20 * s) == 10 * s  # shorter than Java's margin: half the life
    assert reuse_until_ms(5 * s, 25 * s) == 15 * s
