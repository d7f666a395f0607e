"""Reading and writing table data take their own actions, as in AWS S3 Tables (issue 42).

`s3tables:GetTable` lets a caller see a table; reading its data takes `s3tables:GetTableData` and
writing it `s3tables:PutTableData`, on every path that reaches data: remote signing, vended
credentials, scan planning, and commits that bring files in. Adding an Allow never takes access
away. A warehouse made by an earlier release keeps the earlier meaning (GetTable reads data,
UpdateTable writes it) until root sets `legacy-data-actions` to false; `catalog_admin.py
policy-check` shows who would lose what first. Real clients (PyIceberg, raw signed HTTP, boto3's
s3tables, the CLI as a subprocess) against a catalog process holding the only S3 keys.
"""

from __future__ import annotations

# ---- found by attacking it from outside -------------------------------------------------------------


def test_a_bad_value_of_the_property_takes_the_meaning_that_grants_least():
    from chalicelib.core.access import data_actions

    assert data_actions.of_properties({})  # an earlier release's record
    assert data_actions.of_properties({"legacy-data-actions": "true"})
    for value in ("false", "maybe", "FALSE", " false", 5, None, "", "True"):
        assert not data_actions.of_properties({"legacy-data-actions": value}), value
    for props in ("str", None, ["legacy-data-actions"]):
        assert not data_actions.of_properties(props), props
