"""Red team (issue 58): record expiration and maintenance are jobs that read, delete and rewrite a
table's data with the operator's credentials on the word of whoever put their configuration. Each
case is run as the attacker runs it: a user made by root through /admin/users, boto3's s3tables
client with the user's keys, PyIceberg for the tables, and the job as the schedule runs it
(`python -m spark_jobs.expire_records`, a subprocess; the maintain job's catalog side with a
stand-in for Spark). The filter building and the column checks have fast tests of their own."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from chalicelib.errors import BadRequest
from chalicelib.s3tables import backend
from spark_jobs.common import quote_identifier, quote_name
from spark_jobs.expire_records import delete_statement
from tests.redteam_maintenance_shared import EVIL, ODD, FakeSpark, _maintain_args

# ---- fast: the filter the job builds, the column the catalog resolves ---------------------------------


def _unquote(text: str) -> tuple[str, str]:
    """A backtick-quoted identifier at the start of `text` as Spark's lexer reads it, and the rest."""
    assert text[0] == "`", text
    out, i = [], 1
    while True:
        if text[i] == "`":
            if text[i + 1 : i + 2] == "`":
                out.append("`")
                i += 2
                continue
            return "".join(out), text[i + 1 :]
        out.append(text[i])
        i += 1


def test_the_delete_quotes_every_identifier_and_holds_one_comparison():
    now = datetime(2030, 1, 10, tzinfo=UTC)
    sql = delete_statement("lake", "att.e", EVIL, "timestamp", 1, now)
    assert sql.startswith("DELETE FROM `lake`.`att`.`e` WHERE `")
    column, rest = _unquote(sql.split(" WHERE ", 1)[1])
    assert column == EVIL  # one identifier, whatever it holds
    assert rest == " < TIMESTAMP_NTZ '2030-01-09 00:00:00.000000'"  # and nothing after the cutoff
    column, rest = _unquote(delete_statement("lake", "att.q", ODD, "date", 3, now).split(" WHERE ", 1)[1])
    assert (column, rest) == (ODD, " < DATE '2030-01-07'")
    assert quote_identifier("a``b") == "`a````b`" and quote_name("lake", "ns", "t", "snapshots").count("`") == 8
    for bad in (0, -1, True, "5", 1.5):
        with pytest.raises(ValueError):
            delete_statement("lake", "att.e", "ts", "timestamp", bad)  # type: ignore[arg-type]


def _metadata(fields: list[dict[str, Any]], props: dict[str, str] | None = None, spec: list | None = None) -> dict:
    return {
        "current-schema-id": 1,
        "schemas": [{"schema-id": 0, "fields": []}, {"schema-id": 1, "fields": fields}],
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": spec or []}],
        "properties": props or {},
    }


def test_the_column_is_checked_and_followed_by_field_id():
    ts = {"id": 2, "name": "ts", "type": "timestamp"}
    meta = _metadata([{"id": 1, "name": "id", "type": "long"}, ts])
    assert backend.expiration_column(meta) == backend.ExpirationColumn(2, "ts", "timestamp")
    renamed = _metadata([{"id": 1, "name": "id", "type": "long"}, {**ts, "name": "event time"}])
    assert backend.expiration_column(renamed, 2).name == "event time"  # a rename keeps the configuration
    with pytest.raises(BadRequest, match="field id 2.*no longer"):
        backend.expiration_column(_metadata([{"id": 1, "name": "id", "type": "long"}]), 2)  # dropped
    evil = _metadata([ts, {"id": 3, "name": EVIL, "type": "timestamp"}], {backend.EXPIRATION_COLUMN_PROPERTY: EVIL})
    with pytest.raises(BadRequest, match="backtick") as exc:
        backend.expiration_column(evil)
    assert EVIL[:40] in exc.value.message  # named
    with pytest.raises(BadRequest, match="backtick"):  # renamed to it after the put
        backend.expiration_column(_metadata([{**ts, "name": EVIL}]), 2)
    with pytest.raises(BadRequest, match="backtick"):  # the source of a time partition
        backend.expiration_column(
            _metadata([{**ts, "name": "a`b"}, {"id": 4, "name": "d", "type": "date"}], None, [
                {"source-id": 2, "field-id": 1000, "name": "p", "transform": "day"}
            ])
        )  # fmt: skip
    texty = _metadata([ts, {"id": 5, "name": "note", "type": "string"}], {backend.EXPIRATION_COLUMN_PROPERTY: "note"})
    with pytest.raises(BadRequest, match="'note'.*string"):
        backend.expiration_column(texty)
    nanos = _metadata(
        [{"id": 6, "name": "ns_ts", "type": "timestamp_ns"}], {backend.EXPIRATION_COLUMN_PROPERTY: "ns_ts"}
    )
    with pytest.raises(BadRequest, match="timestamp_ns"):  # the job's Spark cannot read it
        backend.expiration_column(nanos)
    nested = _metadata([{"id": 7, "name": "s", "type": {"type": "struct", "fields": [ts]}}])
    with pytest.raises(BadRequest, match="0 columns of a time type"):  # only top-level columns count
        backend.expiration_column(nested)


def test_maintain_skips_a_refused_type_and_checks_names():
    from spark_jobs import maintain
    from spark_jobs.maintenance_config import Plan

    spark = FakeSpark({})
    plan = Plan({"target_mb": 64, "strategy": "binpack"}, {"retain_last": 1, "older_than_hours": 1.0}, None)
    plan.refused = {"icebergSnapshotManagement": "icebergSnapshotManagement of ns.t stopped: u may not ..."}
    result = maintain.maintain_table(spark, "lake", "ns.t", _maintain_args(), logging.getLogger("t"), plan)
    assert result["refused"] == ["icebergSnapshotManagement"]
    assert not any("expire_snapshots" in c for c in spark.calls)
    assert any(c.startswith("CALL `lake`.`system`.`rewrite_data_files`(table => 'ns.t'") for c in spark.calls)
    assert plan.outcome["icebergSnapshotManagement"]["status"] == "Failed"
    assert "u may not" in plan.outcome["icebergSnapshotManagement"]["failureMessage"]
    with pytest.raises(ValueError, match="invalid table"):  # a name from an event queue is never SQL
        maintain.maintain_table(spark, "lake", "ns.t', where => 'x", _maintain_args(), logging.getLogger("t"))
