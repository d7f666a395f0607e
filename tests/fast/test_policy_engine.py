"""The policy engine on its own (no server): wildcard matching, resource names in every form, list
gates, aliases, validation and sealed page tokens. The cross-face behaviour is tests/s3/test_policy_matrix.py."""

from __future__ import annotations

import itertools
import random
import re
import time

import pytest

from chalicelib import sealed
from chalicelib.auth import policy, wildcard
from chalicelib.auth.resources import bucket_arn, ns_context, table_arn
from chalicelib.errors import BadRequest

B, ID, OTHER_ID = "wh1", "11111111-2222-3333-4444-555555555555", "99999999-8888-7777-6666-555555555555"
SHORT, LONG = "arn:aws:s3tables:::", "arn:aws:s3tables:us-east-1:000000000000:"
ALLOW_ALL = {"Statement": [{"Effect": "Allow", "Action": ["s3tables:*", "glue:*"], "Resource": "*"}]}
SECRET, ORDERS = table_arn(B, ("sales",), "secret"), table_arn(B, ("sales",), "orders")


def _id_of(resource: object) -> str:
    return ID if getattr(resource, "name", None) == "secret" else OTHER_ID


def _deny(resource: str | list[str], action: object = "s3tables:GetTable", cond: dict | None = None) -> dict:
    st = {"Effect": "Deny", "Action": action, "Resource": resource}
    if cond:
        st["Condition"] = cond
    return {"Statement": [st]}


def _regex(pattern: str, text: str) -> bool:
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(body, text, re.DOTALL) is not None


def test_wildcard_agrees_with_a_regex_and_answers_sets_safely():
    rnd = random.Random(7)
    suffixes = ["", *("".join(p) for n in range(1, 6) for p in itertools.product("abc", repeat=n))]
    for _ in range(3000):
        pattern = "".join(rnd.choice("ab*?") for _ in range(rnd.randint(0, 5)))  # suffixes cover it
        text = "".join(rnd.choice("ab") for _ in range(rnd.randint(0, 7)))
        assert wildcard.match(pattern, text) == _regex(pattern, text), (pattern, text)
        prefix = text[: rnd.randint(0, 4)]
        some = any(_regex(pattern, prefix + s) for s in suffixes)
        every = all(_regex(pattern, prefix + s) for s in suffixes)
        assert wildcard.viable(pattern, prefix) == some, (pattern, prefix)
        assert not wildcard.covers(pattern, prefix) or every, (pattern, prefix)  # never claims too much
    assert wildcard.covers("arn:*:bucket/*", "arn:x:bucket/b/table/")
    assert wildcard.match("S3TABLES:GET*", "s3tables:GetTable", ignore_case=True)


def test_wildcard_work_does_not_grow_with_stars():
    started = time.perf_counter()
    resource = f"{SHORT}bucket/{B}/table/sales/" + "a" * 250
    for _ in range(2000):
        assert not wildcard.match(SHORT + "bucket/*****q", resource)
        assert not wildcard.match("*a*a*a*a*a*a*a*a*a*a*b", "a" * 2000)
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    "form",
    [
        f"{SHORT}bucket/{B}/table/sales/secret",
        f"{LONG}bucket/{B}/table/{ID}",
        f"{LONG}bucket/{B}/table/sales/secret",
        f"arn:aws:s3tables:*:*:bucket/{B}/table/{ID}",
        f"{SHORT}bucket/{B}/table/{ID}",
    ],
)
@pytest.mark.parametrize("denied", ["s3tables:GetTable", "s3tables:GetTableMetadataLocation", "glue:GetTable"])
def test_every_form_and_alias_names_one_resource(form, denied):
    policies = (ALLOW_ALL, _deny(form, denied))
    for action in ("GetTable", "GetTableMetadataLocation"):
        assert not policy.allowed(policies, action, SECRET, ns_context(("sales",), "secret"), id_of=_id_of)
        assert policy.allowed(policies, action, ORDERS, ns_context(("sales",), "orders"), id_of=_id_of)
    # A table addressed by id (its id known) is the same table.
    by_id = table_arn(B, ("sales",), "secret", ID)
    assert not policy.allowed(policies, "GetTable", by_id, ns_context(("sales",), "secret"))
    # Lists filter: the gate stays open, the one table is hidden.
    everything = (ALLOW_ALL, _deny(form, ["s3tables:*", "glue:*"]))
    assert policy.allowed(everything, "ListTables", table_arn(B, ("sales",)), ns_context(("sales",)), True, _id_of)
    assert policy.allowed(everything, "ListTables", table_arn(B), {}, True, _id_of)
    assert not policy.allowed(everything, "ListTables", SECRET, ns_context(("sales",), "secret"), id_of=_id_of)


def test_the_id_is_looked_up_only_for_a_policy_that_names_ids():
    asked: list[object] = []

    def id_of(resource: object) -> str:
        asked.append(resource)
        return ID

    by_name = (ALLOW_ALL, _deny(f"{SHORT}bucket/{B}/table/sales/secret"))
    assert policy.allowed(by_name, "GetTable", ORDERS, {}, id_of=id_of) and asked == []
    by_id = (ALLOW_ALL, _deny(f"{LONG}bucket/{B}/table/{ID}"))
    assert not policy.allowed(by_id, "GetTable", SECRET, {}, id_of=id_of) and len(asked) == 1


def test_list_gates():
    tables = f"{SHORT}bucket/{B}/table/*"
    reader = {
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "s3tables:ListTables",
                "Resource": tables,
                "Condition": {"StringEquals": {"s3tables:namespace": "a"}},
            }
        ]
    }
    assert policy.allowed((reader,), "ListTables", table_arn(B, ("a",)), ns_context(("a",)), True)
    assert not policy.allowed((reader,), "ListTables", table_arn(B, ("b",)), ns_context(("b",)), True)
    # A Deny that covers every table of a namespace refuses its list; a narrower one does not.
    whole = (ALLOW_ALL, _deny(f"{SHORT}bucket/{B}/table/sales/*", "s3tables:ListTables"))
    assert not policy.allowed(whole, "ListTables", table_arn(B, ("sales",)), ns_context(("sales",)), True)
    assert policy.allowed(whole, "ListTables", table_arn(B, ("hr",)), ns_context(("hr",)), True)
    conditional = (ALLOW_ALL, _deny(tables, "s3tables:*", {"StringEquals": {"s3tables:tableName": "secret"}}))
    assert policy.allowed(conditional, "ListTables", table_arn(B, ("sales",)), ns_context(("sales",)), True)
    assert not policy.allowed(conditional, "ListTables", SECRET, ns_context(("sales",), "secret"))
    # An Allow on one table by name opens its namespace's list, not another's.
    one = {
        "Statement": [{"Effect": "Allow", "Action": "s3tables:ListTables", "Resource": f"{SHORT}bucket/{B}/table/a/t"}]
    }
    assert policy.allowed((one,), "ListTables", table_arn(B, ("a",)), ns_context(("a",)), True)
    assert not policy.allowed((one,), "ListTables", table_arn(B, ("b",)), ns_context(("b",)), True)
    # Every bucket: a Deny on bucket/* in either form refuses ListTableBuckets and ListWarehouses.
    for form in (f"{SHORT}bucket/*", f"{LONG}bucket/*"):
        for named in ("s3tables:ListWarehouses", "s3tables:ListTableBuckets"):
            denied = (ALLOW_ALL, _deny(form, named))
            for action in ("ListWarehouses", "ListTableBuckets"):
                assert not policy.allowed(denied, action, bucket_arn("*"), {}, True)


@pytest.mark.parametrize(
    "group", [g for g in policy.SAME] + [("ListTables", "glue:GetTables"), ("GetTable", "glue:GetTableVersions")]
)
def test_aliases_hold_both_ways(group):
    names = [n if ":" in n else f"s3tables:{n}" for n in group]
    for named, asked in itertools.permutations(names, 2):
        if asked.startswith("glue:"):
            continue  # faces ask for catalog actions; a Glue name in a policy means one
        denied = (ALLOW_ALL, _deny("*", named))
        assert not policy.allowed(denied, asked.split(":", 1)[1], bucket_arn(B), {}), (named, asked)


@pytest.mark.parametrize(
    ("statement", "words"),
    [
        ({"Action": "s3tables:GetTabel", "Resource": "*"}, "names no action"),
        ({"Action": "s3:GetObject", "Resource": "*"}, "names no action"),
        ({"Action": "s3tables:GetTable", "Resource": "arn:aws:s3:::b/*"}, "can never match"),
        ({"Action": "s3tables:GetTable", "Resource": f"arn:aws:s3tables:eu-west-1:000000000000:bucket/{B}"}, "never"),
        ({"Action": "s3tables:GetTable", "Resource": f"arn:aws:s3tables:us-east-1:111122223333:bucket/{B}"}, "never"),
        ({"Action": "s3tables:GetTable", "Resource": f"{SHORT}bucket/{B}/tables/x/y"}, "can never match"),
        ({"Action": "s3tables:GetTable", "Resource": f"{SHORT}bucket/{B}/table/Sales/x"}, "can never match"),
        ({"Action": "s3tables:GetTable", "Resource": "*" * 3000}, "2048"),
        (
            {
                "Action": "s3tables:GetTable",
                "Resource": "*",
                "Condition": {"StringEquals": {"s3tables:namespace": "sales*"}},
            },
            "can never hold",
        ),
    ],
)
def test_statements_that_can_never_match_are_refused_by_name(statement, words):
    doc = {"Statement": [{"Sid": "Named", "Effect": "Allow", **statement}]}
    with pytest.raises(BadRequest, match=words) as exc:
        policy.validate(doc)
    assert "Sid 'Named'" in exc.value.message


def test_valid_policies_pass_validation():
    policy.validate(
        {
            "Statement": [
                {"Effect": "Allow", "Action": ["s3tables:*", "glue:GetPartitions"], "Resource": "*"},
                {"Effect": "Deny", "Action": "s3tables:Get*", "Resource": f"arn:aws:s3tables:*:*:bucket/{B}/table/*"},
                {"Effect": "Deny", "Action": "s3tables:PutTableData", "Resource": f"{LONG}bucket/{B}/table/{ID}"},
                {"Effect": "Allow", "Action": "s3tables:GetTable", "NotResource": f"{SHORT}bucket/{B}/table/a/b"},
            ]
        }
    )


def test_resource_policy_principals_and_scope():
    governs = bucket_arn(B)

    def put(principal: object, resource: str = f"{SHORT}bucket/{B}/*") -> None:
        st = {
            "Sid": "S",
            "Effect": "Allow",
            "Principal": principal,
            "Action": "s3tables:GetTable",
            "Resource": resource,
        }
        policy.validate_resource_policy({"Statement": [st]}, governs, lambda user: user == "alice")

    for ok in ("*", {"AWS": "*"}, {"AWS": "000000000000"}, {"AWS": "arn:aws:iam::000000000000:root"}):
        put(ok)
    put({"AWS": ["arn:aws:iam::000000000000:user/alice"]}, f"{LONG}bucket/{B}/table/*")
    for bad in (
        {"AWS": "111122223333"},
        {"AWS": "arn:aws:iam::000000000000:user/*"},
        {"AWS": "arn:aws:iam::111122223333:user/alice"},
        {"AWS": "arn:aws:iam::000000000000:user/bob"},
        {"Service": "glue.amazonaws.com"},
    ):
        with pytest.raises(BadRequest, match="Sid 'S'"):
            put(bad)
    with pytest.raises(BadRequest, match="outside the table bucket"):
        put("*", f"{SHORT}bucket/other-bucket/*")
    # The bare account stands for every user of the catalog.
    granted = policy.for_principal(
        [
            {
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"AWS": "000000000000"},
                        "Action": "s3tables:GetTable",
                        "Resource": "*",
                    }
                ]
            }
        ],
        "anyone",
    )
    assert policy.allowed(granted, "GetTable", ORDERS, {})


def test_sealed_tokens_are_opaque_and_the_callers_own():
    key, other = b"k" * 32, b"o" * 32
    token = sealed.seal(key, ".catalog/tables/hidden_payroll.t.json")
    assert token is not None and "payroll" not in token
    assert sealed.unseal(key, token) == ".catalog/tables/hidden_payroll.t.json"
    for bad in (token[:-2] + ("AA" if not token.endswith("AA") else "BB"), "garbage", "pt1.AAAA"):
        with pytest.raises(BadRequest):
            sealed.unseal(key, bad)
    with pytest.raises(BadRequest, match="caller's own"):
        sealed.unseal(other, token)


def test_an_id_lookup_is_skipped_only_when_no_id_form_can_match():
    """The authorizer reads a table's id only for patterns that may name one: never wrongly skipped."""
    from chalicelib.auth import arns

    rnd = random.Random(3)
    ids = [ID, OTHER_ID, "0a1b2c3d-0000-4fff-8aaa-abcdefabcdef"]
    names = [f"{base}bucket/{B}/table/{i}" for base in arns.bases() for i in ids]
    pieces = [SHORT, LONG, "bucket/", B, "/table/", "sales/", "secret", "1111", "-2222-", "5555", "*", "?", "a", "/"]
    for _ in range(20000):
        pattern = "".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 7)))
        if any(wildcard.match(pattern, n) for n in names):
            assert arns.may_name_id(pattern, B), pattern
    assert not arns.may_name_id(f"{SHORT}bucket/{B}/table/sales/*", B)  # common patterns cost no read
    assert not arns.may_name_id(f"{SHORT}bucket/{B}/table/sales/secret", B)
    odd = (ALLOW_ALL, _deny(f"{SHORT}bucket/{B}/*{ID}"))  # an id form in an odd spelling still holds
    assert not policy.allowed(odd, "GetTable", SECRET, {}, id_of=_id_of)
    assert policy.allowed(odd, "GetTable", ORDERS, {}, id_of=_id_of)
