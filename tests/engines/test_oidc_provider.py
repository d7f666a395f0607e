"""The tests' OpenID Connect provider (infra/oidc, tests/oidcutil.py) issues what the catalog will validate:
RS256 JWT access tokens with a kid from its JWKS, the configured audience and the clients' extra claims,
for client_credentials (client_secret_basic and client_secret_post, as DuckDB and PyIceberg send them)
and for the authorization code flow with PKCE. Never skipped: without `make oidc` it fails saying so."""

import time

import pytest
import requests
from joserfc import jwt
from joserfc.errors import ExpiredTokenError, InvalidKeyIdError
from joserfc.jwk import KeySet

from tests.oidcutil import OidcError, OidcProvider, check_installed, rsa_jwks, start_provider

pytestmark = pytest.mark.full

TAGS = {"principal_tags": {"team": ["data"]}}
SERVICE = {
    "client_id": "etl",
    "client_secret": "etl-secret",
    "scope": "catalog role:analyst PRINCIPAL_ROLE:ALL",
    "claims": {"https://aws.amazon.com/tags": TAGS, "groups": ["g1"]},
}
POSTER = {
    "client_id": "pyiceberg",
    "client_secret": "py-secret",
    "token_endpoint_auth_method": "client_secret_post",
    "scope": "catalog role:engineer",
}
BROWSER = {
    "client_id": "console",
    "token_endpoint_auth_method": "none",
    "grant_types": ["authorization_code", "refresh_token"],
    "redirect_uris": ["http://127.0.0.1:8765/callback"],
    "scope": "openid email profile catalog role:analyst",
}
ACCOUNTS = [
    {"sub": "alice", "email": "alice@example.com", "groups": ["analysts"], "claims": {"dept": "bi"}},
    {"sub": "bob", "email": "bob@example.com", "password": "bob-pw"},
]


@pytest.fixture(scope="module")
def op(tmp_path_factory):
    check_installed()  # fails with "run `make oidc`" when the node modules are missing
    with start_provider(tmp_path_factory.mktemp("oidc"), clients=[SERVICE, POSTER, BROWSER], accounts=ACCOUNTS) as p:
        yield p


def verify(op: OidcProvider, token: str, now: int | None = None) -> jwt.Token:
    """The token checked against the provider's JWKS (signature, alg, kid) and its iss/aud/exp."""
    keys = KeySet.import_key_set(op.jwks())
    decoded = jwt.decode(token, keys, algorithms=["RS256"])
    assert decoded.header["alg"] == "RS256"
    assert decoded.header["kid"] in {k["kid"] for k in op.jwks()["keys"]}
    claims = jwt.JWTClaimsRegistry(
        now=now,
        iss={"essential": True, "value": op.issuer},
        aud={"essential": True, "value": op.audience},
        exp={"essential": True},
    )
    claims.validate(decoded.claims)
    return decoded


def test_discovery_and_endpoints_on_plain_http(op):
    assert op.issuer == f"http://127.0.0.1:{op.port}"
    assert op.audience == "catalog" and op.resource == "urn:catalog"
    d = requests.get(op.issuer + "/.well-known/openid-configuration", timeout=10).json()
    assert d["issuer"] == op.issuer
    assert d["token_endpoint"] == op.token_endpoint == op.issuer + "/token"
    assert d["authorization_endpoint"] == op.authorization_endpoint == op.issuer + "/auth"
    assert d["jwks_uri"] == op.jwks_uri == op.issuer + "/jwks"
    assert "client_credentials" in d["grant_types_supported"]
    assert d["code_challenge_methods_supported"] == ["S256"]
    keys = op.jwks()["keys"]
    assert [k["kid"] for k in keys] == [op.signing_kid]
    assert keys[0]["kty"] == "RSA" and "d" not in keys[0]


@pytest.mark.parametrize("auth", ["basic", "post"])
def test_client_credentials_is_a_jwt_with_audience_kid_and_extra_claims(op, auth):
    before = int(time.time())
    body = op.client_credentials("etl", "etl-secret", scope="catalog role:analyst", auth=auth)
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600
    assert body["scope"] == "catalog role:analyst"
    token = verify(op, body["access_token"])
    assert token.header["kid"] == op.signing_kid and token.header["typ"] == "at+jwt"
    c = token.claims
    assert c["iss"] == op.issuer and c["aud"] == "catalog"
    assert c["sub"] == "etl" and c["client_id"] == "etl"
    assert before - 5 <= c["iat"] and c["exp"] == c["iat"] + 3600
    assert c["https://aws.amazon.com/tags"] == TAGS and c["groups"] == ["g1"]
    assert "role:analyst" in c["scope"].split()


def test_pyiceberg_and_duckdb_token_requests(op):
    """PyIceberg 0.12's REST catalog (credential=id:secret) posts the secret in the form with scope=catalog;
    its OAuth2 manager and DuckDB send client_secret_basic; DuckDB asks scope=PRINCIPAL_ROLE:ALL."""
    from pyiceberg.catalog.rest.auth import LegacyOAuth2AuthManager, OAuth2TokenProvider

    legacy = LegacyOAuth2AuthManager(
        requests.Session(), op.token_endpoint, "pyiceberg:py-secret", optional_oauth_params={"scope": "catalog"}
    )
    token = verify(op, legacy.auth_header().removeprefix("Bearer "))
    assert token.claims["sub"] == "pyiceberg" and token.claims["scope"] == "catalog"

    basic = OAuth2TokenProvider("pyiceberg", "py-secret", op.token_endpoint, scope="catalog role:engineer")
    assert verify(op, basic.get_token()).claims["scope"] == "catalog role:engineer"

    duck = op.client_credentials("etl", "etl-secret", scope="PRINCIPAL_ROLE:ALL", auth="basic")
    assert verify(op, duck["access_token"]).claims["scope"] == "PRINCIPAL_ROLE:ALL"


def test_scopes_not_allowed_or_unknown_are_dropped_not_refused(op):
    body = op.client_credentials("etl", "etl-secret", scope="catalog role:admin no-such-scope role:analyst")
    assert body["scope"] == "catalog role:analyst"
    assert verify(op, body["access_token"]).claims["scope"] == "catalog role:analyst"
    bare = op.client_credentials("etl", "etl-secret")  # no scope: still a JWT for the catalog, no scope claim
    assert "scope" not in verify(op, bare["access_token"]).claims
    with_resource = op.client_credentials("etl", "etl-secret", scope="catalog", resource=op.resource)
    assert verify(op, with_resource["access_token"]).claims["aud"] == "catalog"


def test_refusals(op):
    with pytest.raises(OidcError) as err:
        op.client_credentials("etl", "wrong")
    assert err.value.status == 401 and err.value.body["error"] == "invalid_client"
    with pytest.raises(OidcError) as err:
        op.client_credentials("nobody", "x", auth="post")
    assert err.value.status == 401
    with pytest.raises(OidcError) as err:
        op.client_credentials("etl", "etl-secret", resource="urn:elsewhere")
    assert err.value.body["error"] == "invalid_target"
    status, body = op.token_request({"grant_type": "client_credentials", "client_id": "console"})
    assert status == 400 and body["error"] == "invalid_request", body


def test_authorization_code_with_pkce(op):
    body = op.authorization_code(
        "console",
        "http://127.0.0.1:8765/callback",
        "alice",
        scope="openid email catalog role:analyst role:engineer",
    )
    assert body["scope"] == "catalog role:analyst"
    access = verify(op, body["access_token"]).claims
    assert access["sub"] == "alice" and access["client_id"] == "console"
    assert access["email"] == "alice@example.com" and access["groups"] == ["analysts"] and access["dept"] == "bi"
    assert access["scope"] == "catalog role:analyst"
    idt = jwt.decode(body["id_token"], KeySet.import_key_set(op.jwks()), algorithms=["RS256"])
    assert idt.header["kid"] == op.signing_kid
    assert idt.claims["iss"] == op.issuer and idt.claims["aud"] == "console" and idt.claims["sub"] == "alice"
    assert idt.claims["email"] == "alice@example.com" and idt.claims["groups"] == ["analysts"]
    assert "nonce" in idt.claims

    refreshed = op.token_request(
        {"grant_type": "refresh_token", "client_id": "console", "refresh_token": body["refresh_token"]}
    )
    assert refreshed[0] == 200 and verify(op, refreshed[1]["access_token"]).claims["sub"] == "alice"

    with pytest.raises(OidcError, match="unknown login or wrong password"):
        op.authorization_code("console", "http://127.0.0.1:8765/callback", "bob", password="nope")


def test_public_client_must_use_pkce(op):
    r = requests.get(
        op.authorization_endpoint,
        params={
            "client_id": "console",
            "response_type": "code",
            "redirect_uri": "http://127.0.0.1:8765/callback",
            "scope": "openid",
        },
        allow_redirects=False,
        timeout=10,
    )
    assert r.status_code in (302, 303)
    assert "error=invalid_request" in r.headers["Location"] and "PKCE" in r.headers["Location"]


def test_token_lifetime_and_key_rotation(tmp_path):
    jwks = rsa_jwks("old", "new")
    with start_provider(
        tmp_path, clients=[SERVICE], jwks=jwks, signing_kid="new", ttl={"ClientCredentials": 2}
    ) as short:
        assert {k["kid"] for k in short.jwks()["keys"]} == {"old", "new"}
        body = short.client_credentials("etl", "etl-secret", scope="catalog", auth="post")
        assert body["expires_in"] == 2
        token = verify(short, body["access_token"])
        assert token.header["kid"] == "new" and token.claims["exp"] - token.claims["iat"] == 2
        with pytest.raises(ExpiredTokenError):
            verify(short, body["access_token"], now=token.claims["exp"] + 1)

        # The same issuer again, having dropped the key that signed that token.
        issuer = short.issuer
        short.restart(jwks={"keys": [k for k in jwks["keys"] if k["kid"] == "old"]}, signing_kid="old")
        assert short.issuer == issuer
        assert [k["kid"] for k in short.jwks()["keys"]] == ["old"]
        fresh = short.client_credentials("etl", "etl-secret", scope="catalog")
        assert verify(short, fresh["access_token"]).header["kid"] == "old"
        with pytest.raises(InvalidKeyIdError):
            verify(short, body["access_token"])
    assert short.proc is None
    assert "POST /token 200" in short.log_path.read_text()


def test_auto_login_and_lifetimes_of_user_tokens(tmp_path):
    """`auto_login` signs the browser in as an account without a form (`login_hint` picks one when it is
    true); ttl.AccessToken and ttl.IdToken set the user tokens' lifetimes."""
    with start_provider(
        tmp_path, clients=[BROWSER], accounts=ACCOUNTS, auto_login=True, ttl={"AccessToken": 5, "IdToken": 7}
    ) as p:
        cb = "http://127.0.0.1:8765/callback"
        first = p.authorization_code("console", cb, "ignored", scope="openid catalog")
        access = verify(p, first["access_token"]).claims
        assert access["sub"] == "alice" and access["exp"] - access["iat"] == 5 and first["expires_in"] == 5
        idt = jwt.decode(first["id_token"], KeySet.import_key_set(p.jwks()), algorithms=["RS256"]).claims
        assert idt["exp"] - idt["iat"] == 7
        hinted = p.authorization_code("console", cb, "ignored", scope="openid", extra={"login_hint": "bob"})
        assert (
            jwt.decode(hinted["id_token"], KeySet.import_key_set(p.jwks()), algorithms=["RS256"]).claims["sub"] == "bob"
        )
    assert "GET /interaction/" in p.log_path.read_text()
