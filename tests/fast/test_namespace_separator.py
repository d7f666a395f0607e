"""The advertised namespace separator (CATALOG_NAMESPACE_SEPARATOR) and 0x1F, both decoded (spec)."""

from __future__ import annotations

import pytest

from chalicelib.names import namespace_separator


@pytest.mark.parametrize("value", ["/", "%2F", "a", "_", "", "%", "..", "%00", "?", "#"])
def test_separators_no_client_could_use_are_refused_at_start(value):
    with pytest.raises(ValueError, match="CATALOG_NAMESPACE_SEPARATOR"):
        namespace_separator(value)


@pytest.mark.parametrize(("value", "char"), [("%1F", "\x1f"), ("%1f", "\x1f"), (".", "."), ("%2E", "."), (":", ":")])
def test_separators_a_deployment_may_choose(value, char):
    assert namespace_separator(value) == (value, char)
