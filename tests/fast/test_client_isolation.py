"""Issue 40: every AWS client of a catalog process keeps its customisations to itself.

The S3 storage client left timestamps as text; botocore's session gave one response parser factory
to every client, so STS, Secrets Manager and the event senders read text too, and vended
credentials expired the moment they were issued. The storage port and the root secret's read now
speak HTTP themselves (chalicelib/awswire/); the botocore clients that remain are built here
through the catalog's own call sites, on one fresh session, after the storage client has worked,
and each must parse the timestamps of its own answers.
"""

from __future__ import annotations

import re

from tests.client_isolation_shared import CALL_SITES
from tests.conftest import ROOT


def test_the_call_sites_below_are_all_there_are():
    found = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "chalicelib").rglob("*.py")
        if re.search(r"\baws\.client\(", path.read_text())
    }
    assert found == set(CALL_SITES)
