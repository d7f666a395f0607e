"""The caller's authorization is one object on the request (pipeline/authority.py): the authorizer
puts it there, the faces ask it; a route no authorizer checks keeps UNRESTRICTED."""

from __future__ import annotations

from typing import Any

import pytest
from chalice.app import Chalice
from chalice.test import Client

from chalicelib.auth import identities
from chalicelib.auth.authorization import Authorization, of_request
from chalicelib.core.model import EVERYTHING
from chalicelib.errors import Forbidden, Unauthorized
from chalicelib.pipeline import PIPELINE, UNRESTRICTED, AllowAnonymous, Authority, RequestContext, RouteGroup, operation
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

ALICE = identities.Principal(name="alice", access_key_id="AKIAALICE", uuid="u-1")


class _NamedOnly:
    """An authority that lets the caller see only resources named "mine"."""

    def visible(self, action: str, resource: Any, cond: dict[str, str], partial: bool = False) -> bool:
        return resource == "mine"

    def denied(self, action: str, resource: Any, cond: dict[str, str]) -> bool:
        return resource == "theirs"

    def read_rule(self, resource: Any, cond: dict[str, str]) -> tuple[Any, ...]:
        return ()

    def read_policy(self, resource: Any, cond: dict[str, str]) -> tuple[Any, ...]:
        return ()

    def may_write_data(self, resource: Any, cond: dict[str, str]) -> bool:
        return False

    def may_limit_reads(self, tables: Any) -> bool:
        return True


class _Alice:
    def authenticate(self, req: RequestContext) -> identities.Principal:
        return ALICE

    def authorize(self, req: RequestContext) -> None:
        req.authz = _NamedOnly()


def _app(action: str, seen: list[RequestContext]) -> Chalice:
    group = RouteGroup(f"tests.authority.{action}", ICEBERG_FACE)

    @operation(group, f"/_test/{action}/{{name}}", "GET", action, iceberg=False, checks=lambda req: [])
    def handler(req: RequestContext) -> tuple[int, dict[str, Any]]:
        seen.append(req)
        req.require("GetTable", req.param("name"), {})
        return 200, {"visible": req.authz.visible("GetTable", req.param("name"), {})}

    app = Chalice(app_name=f"authority-{action}")
    group.register(app)
    return app


def test_an_unchecked_route_keeps_the_unrestricted_authority() -> None:
    seen: list[RequestContext] = []
    PIPELINE.per_action["TestUnchecked"] = (AllowAnonymous(), AllowAnonymous())  # (the catalog's may be installed)
    try:
        with Client(_app("TestUnchecked", seen)) as client:
            answer = client.http.get("/_test/TestUnchecked/anything")
    finally:
        del PIPELINE.per_action["TestUnchecked"]
    assert answer.status_code == 200 and seen[0].authz is UNRESTRICTED and seen[0].identity is None
    assert seen[0].who == "anonymous"
    assert UNRESTRICTED.read_rule("t", {}) == EVERYTHING == UNRESTRICTED.read_policy("t", {})
    assert not UNRESTRICTED.denied("x", "t", {}) and UNRESTRICTED.may_write_data("t", {})
    assert not UNRESTRICTED.may_limit_reads("t")
    assert of_request(seen[0].authz) is None  # no policy authorization: acting.* refuse


def test_the_authorizer_puts_one_object_the_handler_asks() -> None:
    seen: list[RequestContext] = []
    PIPELINE.per_action["TestAsked"] = (_Alice(), _Alice())
    try:
        with Client(_app("TestAsked", seen)) as client:
            mine = client.http.get("/_test/TestAsked/mine")
            theirs = client.http.get("/_test/TestAsked/theirs")
    finally:
        del PIPELINE.per_action["TestAsked"]
    assert mine.status_code == 200 and mine.json_body == {"visible": True}
    assert theirs.status_code == 403 and "alice may not perform s3tables:GetTable on theirs" in theirs.body.decode()
    assert isinstance(seen[0].authz, _NamedOnly) and seen[0].identity is ALICE and seen[0].who == "alice"


def test_the_policy_authorization_answers_as_the_authority_protocol() -> None:
    root = identities.Principal(name="root", access_key_id="AKIAROOT", is_root=True, kind="root")
    authz: Authority = Authorization(None, root)  # type: ignore[arg-type]  # root asks no storage
    assert authz.visible("GetTable", object(), {}) and not authz.denied("GetTable", object(), {})
    assert authz.read_rule(object(), {}) == EVERYTHING and authz.may_write_data(object(), {})
    assert not authz.may_limit_reads(object())
    assert of_request(authz) is authz


def test_a_route_for_signed_callers_refuses_an_anonymous_one() -> None:
    assert identities.signed_in(ALICE) is ALICE and identities.as_principal(None) is None
    with pytest.raises(Unauthorized):
        identities.signed_in(None)
    req = RequestContext("GET", {}, {}, {}, b"", "/", "GetTable")
    req.require("GetTable", "t", {})  # UNRESTRICTED lets it: the check is the authority's
    req.authz = _NamedOnly()
    with pytest.raises(Forbidden, match="anonymous may not"):
        req.require("GetTable", "t", {})
