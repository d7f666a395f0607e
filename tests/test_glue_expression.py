"""Glue GetTables `Expression`: the same answers as a regex, in time linear in the name, whatever the
pattern (issue 24, item 8: `.*.*.*.*.*x` over a 170-character name took 11-14 s)."""

from __future__ import annotations

import random
import re
import time
import uuid

import pytest

from chalicelib.errors import BadRequest
from chalicelib.glue.expression import compile_expression, glue_to_regex
from tests.test_glue import glue_client, hive_input


def _python(pattern: str, name: str) -> bool:
    return re.fullmatch(glue_to_regex(pattern), name, re.IGNORECASE | re.DOTALL) is not None


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("sales*", "sales_2024", True),
        ("*orders", "eu_orders", True),
        ("*orders", "orders_eu", False),
        ("a|b*", "bcd", True),
        ("a|b*", "a", True),
        ("a|b*", "ab", False),
        ("ORDERS", "orders", True),
        ("t[0-9]{2}", "t42", True),
        ("t[0-9]{2}", "t4", False),
        ("t[^0-9]+", "tabc", True),
        ("(ab)+c?", "ababc", True),
        ("(?:x|y){2,3}z", "xyxz", True),
        ("^exact$", "exact", True),
        ("a\\.b", "a.b", True),
        ("a\\.b", "axb", False),
        ("\\w+_\\d+", "t_12", True),
        ("", "", True),
    ],
)
def test_cases(pattern, name, expected):
    assert compile_expression(pattern).fullmatch(name) is expected
    assert _python(pattern, name) is expected


def test_same_answers_as_python_regex():
    rnd = random.Random(11)
    atoms = ["a", "b", "_", ".", "[ab]", "[^a]", "(a|b)", "(ab)", "\\d", "1"]
    quants = ["", "", "*", "+", "?", "{2}", "{1,2}"]
    for _ in range(3000):
        pattern = "".join(rnd.choice(atoms) + rnd.choice(quants) for _ in range(rnd.randint(1, 4)))
        if rnd.random() < 0.2:
            pattern += "|" + rnd.choice(atoms)
        compiled = compile_expression(pattern)
        for _ in range(8):
            name = "".join(rnd.choice("abAB_1") for _ in range(rnd.randint(0, 7)))
            assert compiled.fullmatch(name) == _python(pattern, name), (pattern, name)


@pytest.mark.parametrize(
    "pattern",
    ["(a)\\1", "(?=a)a", "(?<=a)b", "(?P<x>a)", "a{1,2", "(ab", "[ab", "a\\", "x{999}", "(a{200}){200}", "+a"],
)
def test_refused(pattern):
    with pytest.raises(BadRequest, match="Invalid Expression"):
        compile_expression(pattern)


@pytest.mark.parametrize("pattern", [".*.*.*.*.*x", "(a|a)*b", "(a*)*b", "a*a*a*a*a*a*b", "(.*a){12}x"])
def test_pathological_patterns_take_linear_time(pattern):
    name = "a" * 250
    started = time.perf_counter()
    assert compile_expression(pattern).fullmatch(name) is False
    assert time.perf_counter() - started < 1.0


def test_ten_thousand_names_against_one_pattern():
    compiled = compile_expression("*_orders_*|t[0-9]+x")
    names = [f"table_{i:05d}_orders_{'x' * (i % 40)}" for i in range(10_000)]
    started = time.perf_counter()
    assert sum(compiled.fullmatch(n) for n in names) == 10_000
    assert time.perf_counter() - started < 1.0


def test_get_tables_with_a_pathological_expression_answers_at_once(catalog_url, warehouse, http):
    glue = glue_client(catalog_url, warehouse)
    glue.create_database(DatabaseInput={"Name": "slow"})
    name = "a" * 170
    glue.create_table(DatabaseName="slow", TableInput=hive_input(name, f"s3://{warehouse}/ext/{uuid.uuid4().hex}"))
    started = time.perf_counter()
    found = glue.get_tables(DatabaseName="slow", Expression=".*.*.*.*.*x")["TableList"]
    elapsed = time.perf_counter() - started
    assert found == [] and elapsed < 1.0, elapsed
    assert [t["Name"] for t in glue.get_tables(DatabaseName="slow", Expression="a+")["TableList"]] == [name]
