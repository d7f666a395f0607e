"""Identity attacked from outside: hostile provider tokens, forged and stale session credentials,
a provider that goes down, key ids that would flood it, malformed policies and roles.

Every bad token is tried on both paths (STS AssumeRoleWithWebIdentity, and the token used directly
as a bearer token on the Iceberg REST, Glue and S3 Tables faces and at the token exchange): each is
refused with a message that says what was wrong, and nothing changes (no namespace, no session
record, no role). The provider (node oidc-provider) is configured with keys the test holds, so the
test can sign tokens with the provider's own key and any claims it likes; a small provider of the
test's own (discovery + JWKS over http.server) counts its requests and can be taken down.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import botocore
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from joserfc.jwk import ECKey, RSAKey

from tests.conftest import REGION, keys_under
from tests.identityutil import ACCOUNT, base, client, everything_on, unsigned_sts
from tests.oidcutil import OidcProvider, public_jwks, rsa_jwk, start_provider

pytestmark = pytest.mark.full

SESSIONS = "iam/sessions/"  # chalicelib.keys.SESSIONS_PREFIX
SUB = "svc"
SUB_SECRET = "svc-secret"
MAIN, REFUSER, SPARE = "atk-main", "atk-refuser", "atk-spare"
TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
GLUE_TYPES = {401: "UnrecognizedClientException", 403: "AccessDeniedException"}
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


# ---- minting ---------------------------------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def part(value: Any) -> str:
    if isinstance(value, bytes):
        return b64(value)
    if isinstance(value, str):
        return b64(value.encode())
    return b64(json.dumps(value, separators=(",", ":")).encode())


def sign(header: Any, claims: Any, key: Any = None, secret: bytes | None = None) -> str:
    """A compact JWS signed by the header's alg with `key` (a cryptography private key) or `secret`
    (HMAC), or unsigned; nothing checks that the combination makes sense (that is the point)."""
    signing_input = f"{part(header)}.{part(claims)}".encode()
    alg = header.get("alg", "") if isinstance(header, dict) else ""
    if secret is not None:
        sig = hmac.new(secret, signing_input, hashlib.sha256).digest()
    elif key is None or str(alg).lower() == "none":
        sig = b""
    elif isinstance(key, ec.EllipticCurvePrivateKey):
        r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    else:
        sig = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input.decode()}.{b64(sig)}"


@dataclass
class Kit:
    """What the attacks need: the provider, the keys it signs with, the roles, a warehouse."""

    idp: OidcProvider
    jwks: dict[str, Any]
    provider_arn: str
    warehouse: str
    catalog_url: str
    keys: dict[str, Any] = field(default_factory=dict)  # kid -> cryptography private key

    def claims(self, **changes: Any) -> dict[str, Any]:
        now = int(time.time())
        found = {
            "iss": self.idp.issuer,
            "aud": self.idp.audience,
            "sub": SUB,
            "client_id": SUB,
            "iat": now,
            "exp": now + 600,
            "jti": uuid.uuid4().hex,
            "scope": f"catalog role:{MAIN}",
        }
        found.update(changes)
        return {k: v for k, v in found.items() if v is not DROP}

    def header(self, **changes: Any) -> dict[str, Any]:
        found = {"alg": "RS256", "typ": "at+jwt", "kid": "k1", **changes}
        return {k: v for k, v in found.items() if v is not DROP}

    def token(self, claims: dict[str, Any] | None = None, header: dict[str, Any] | None = None) -> str:
        """Signed with the provider's own signing key k1: valid unless the claims or header say otherwise."""
        return sign(header or self.header(), claims or self.claims(), self.keys["k1"])

    def public_pem(self) -> bytes:
        key = self.keys["k1"].public_key()
        return bytes(key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))

    def public_n(self) -> str:
        return str(next(k for k in self.jwks["keys"] if k["kid"] == "k1")["n"])


DROP = object()


def private(jwk: dict[str, Any]) -> Any:
    if jwk["kty"] == "EC":
        return ECKey.import_key(jwk).private_key
    return RSAKey.import_key(jwk).private_key


@pytest.fixture(scope="module")
def jwks() -> dict[str, Any]:
    ec_key = ECKey.generate_key("P-256", parameters={"kid": "e1", "alg": "ES256", "use": "sig"}, private=True)
    return {"keys": [rsa_jwk("k1"), rsa_jwk("k2"), dict(ec_key.as_dict(private=True))]}


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory, jwks: dict[str, Any]) -> Iterator[OidcProvider]:
    clients = [{"client_id": SUB, "client_secret": SUB_SECRET, "scope": f"catalog role:{MAIN} role:{REFUSER}"}]
    with start_provider(tmp_path_factory.mktemp("oidc-atk"), clients=clients, jwks=jwks, signing_kid="k1") as p:
        yield p


def trust_for(provider_arn: str, issuer: str, sub: str, audience: str = "catalog") -> str:
    host = issuer.split("://", 1)[1]
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": provider_arn},
                    "Action": ["sts:AssumeRoleWithWebIdentity", "sts:TagSession"],
                    "Condition": {"StringEquals": {f"{host}:sub": sub, f"{host}:aud": audience}},
                }
            ],
        }
    )


@pytest.fixture(scope="module")
def kit(catalog_url: str, idp: OidcProvider, jwks: dict[str, Any], http: requests.Session) -> Kit:
    iam = client("iam", catalog_url)
    arn = iam.create_open_id_connect_provider(Url=idp.issuer, ClientIDList=[idp.audience], ThumbprintList=["b" * 40])[
        "OpenIDConnectProviderArn"
    ]
    warehouse = f"wh-{uuid.uuid4().hex[:12]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": warehouse}).status_code == 200
    for name, sub in ((MAIN, SUB), (REFUSER, "somebody-else"), (SPARE, SUB)):
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust_for(arn, idp.issuer, sub))
        iam.put_role_policy(RoleName=name, PolicyName="access", PolicyDocument=json.dumps(everything_on(warehouse)))
    found = Kit(idp, jwks, arn, warehouse, catalog_url)
    found.keys = {k["kid"]: private(k) for k in jwks["keys"]}
    return found


def role_arn(name: str) -> str:
    return f"arn:aws:iam::{ACCOUNT}:role/{name}"


# ---- what a refusal looks like, and that nothing changed ------------------------------------------


def message_of(resp: requests.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            return str(err.get("message", ""))
        for name in ("message", "Message", "error_description"):
            if name in body:
                return str(body[name])
    return resp.text


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass(frozen=True)
class State:
    namespaces: tuple[tuple[str, ...], ...]
    sessions: tuple[str, ...]
    roles: tuple[str, ...]


def state(kit: Kit, http: requests.Session, s3: Any, system_bucket: str) -> State:
    resp = http.get(f"{kit.catalog_url}/v1/{kit.warehouse}/namespaces")
    assert resp.status_code == 200, resp.text
    namespaces = tuple(sorted(tuple(n) for n in resp.json()["namespaces"]))
    roles = client("iam", kit.catalog_url).list_roles()["Roles"]
    return State(
        namespaces,
        tuple(sorted(keys_under(s3, system_bucket, SESSIONS))),
        tuple(sorted(json.dumps(r, default=str, sort_keys=True) for r in roles)),
    )


def assume(kit: Kit, token: str, role: str = MAIN, **kw: Any) -> dict[str, Any]:
    return dict(
        unsigned_sts(kit.catalog_url).assume_role_with_web_identity(
            RoleArn=role_arn(role), RoleSessionName="attacker", WebIdentityToken=token, **kw
        )
    )


def refused_everywhere(kit: Kit, token: str, status: int, says: str, sts: str | None, name: str = "x") -> None:
    """The token is refused on every face with `status` and a message containing `says`."""
    url, wh = kit.catalog_url, kit.warehouse
    says = says.lower()
    if sts is not None:
        with pytest.raises(ClientError) as err:
            assume(kit, token)
        error = err.value.response["Error"]
        assert error["Code"] == sts, error
        assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == (403 if sts == "AccessDenied" else 400)
        if sts not in ("AccessDenied", "ValidationError"):
            assert says in error["Message"].lower(), error
    answers = {
        "iceberg-list": requests.get(f"{url}/v1/{wh}/namespaces", headers=bearer(token), timeout=30),
        "iceberg-write": requests.post(
            f"{url}/v1/{wh}/namespaces",
            headers=bearer(token),
            json={"namespace": [f"atk_{name}"], "properties": {}},
            timeout=30,
        ),
        "glue": requests.post(
            f"{base(url)}/_glue/{wh}",
            headers={
                **bearer(token),
                "X-Amz-Target": "AWSGlue.GetDatabases",
                "Content-Type": "application/x-amz-json-1.1",
            },
            data=b"{}",
            timeout=30,
        ),
        "s3tables": requests.get(f"{base(url)}/_s3tables/buckets", headers=bearer(token), timeout=30),
        "exchange": requests.post(
            f"{url}/v1/oauth/tokens",
            data={"grant_type": EXCHANGE, "subject_token": token, "subject_token_type": TOKEN_TYPE},
            timeout=30,
        ),
    }
    for face, resp in answers.items():
        # Glue speaks AWS's JSON protocol (UnrecognizedClientException and AccessDeniedException are
        # 400s); S3 Tables answers credentials it does not accept with 403, as AWS's REST faces do.
        wanted = (400, GLUE_TYPES[status]) if face == "glue" else (403 if face == "s3tables" else status, None)
        got = (resp.status_code, resp.json().get("__type") if face == "glue" else None)
        assert got == wanted, (face, resp.status_code, resp.text[:500])
        assert says in message_of(resp).lower(), (face, resp.text[:500])


# ---- the bad tokens ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attack:
    name: str
    make: Callable[[Kit], str]
    says: str  # what the 401's message names
    sts: str | None = "InvalidIdentityToken"
    status: int = 401


def _nested(depth: int) -> str:
    return part("[" * depth + "]" * depth)


def _raw_claims(kit: Kit, text: str) -> str:
    """Claims as raw JSON text (NaN, Infinity, duplicates: what json.dumps would not write)."""
    header = part(kit.header())
    signing_input = f"{header}.{b64(text.encode())}".encode()
    sig = kit.keys["k1"].sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input.decode()}.{b64(sig)}"


def _exp_claims(kit: Kit, exp: str) -> str:
    c = kit.claims()
    c.pop("exp")
    return json.dumps(c)[:-1] + f', "exp": {exp}}}'


ATTACKS = [
    Attack("expired", lambda k: k.token(k.claims(exp=int(time.time()) - 3600)), "expired", "ExpiredTokenException"),
    Attack("not-yet-valid", lambda k: k.token(k.claims(nbf=int(time.time()) + 3600)), "not valid yet"),
    Attack("issued-in-future", lambda k: k.token(k.claims(iat=int(time.time()) + 3600)), "future"),
    Attack("wrong-audience", lambda k: k.token(k.claims(aud="someone-else")), "audience"),
    Attack("audience-list-wrong", lambda k: k.token(k.claims(aud=["a", "b"])), "audience"),
    Attack("audience-not-strings", lambda k: k.token(k.claims(aud=[1, {"x": 1}])), "audience"),
    Attack("no-audience", lambda k: k.token(k.claims(aud=DROP)), "audience"),
    Attack("no-subject", lambda k: k.token(k.claims(sub=DROP)), "subject"),
    Attack("empty-subject", lambda k: k.token(k.claims(sub="")), "subject"),
    Attack("no-expiry", lambda k: k.token(k.claims(exp=DROP)), "expiry"),
    Attack("expiry-a-string", lambda k: k.token(k.claims(exp=str(int(time.time()) + 600))), "exp"),
    Attack("expiry-a-boolean", lambda k: k.token(k.claims(exp=True)), "exp"),
    Attack("expiry-infinite", lambda k: _raw_claims(k, _exp_claims(k, "Infinity")), "json"),  # not JSON
    Attack("expiry-nan", lambda k: _raw_claims(k, _exp_claims(k, "NaN")), "json"),
    Attack("expiry-huge", lambda k: _raw_claims(k, _exp_claims(k, "1" + "0" * 400)), "exp"),
    Attack("expiry-year-10000", lambda k: k.token(k.claims(exp=253_402_300_800)), "exp"),
    Attack("expiry-negative", lambda k: k.token(k.claims(exp=-1)), "exp"),
    # RFC 7519 section 4: the lexically last of duplicate claims counts, for the signature check and the claims alike.
    Attack(
        "duplicate-exp-last-expired",
        lambda k: _raw_claims(k, _exp_claims(k, str(int(time.time()) + 600))[:-1] + ', "exp": 1000}'),
        "expired",
        "ExpiredTokenException",
    ),
    Attack("wrong-issuer-same-key", lambda k: k.token(k.claims(iss="http://127.0.0.1:1/elsewhere")), "issuer"),
    Attack("no-issuer", lambda k: k.token(k.claims(iss=DROP)), "issuer"),
    Attack("issuer-not-a-string", lambda k: k.token(k.claims(iss=["x"])), "issuer"),
    Attack(
        "unknown-issuer-own-key",
        lambda k: sign(
            k.header(),
            k.claims(iss="https://idp.example.invalid"),
            RSAKey.generate_key(2048, private=True).private_key,
        ),
        "unknown issuer",
    ),
    Attack("alg-none", lambda k: sign({"alg": "none"}, k.claims()), "none"),
    Attack("alg-none-with-kid", lambda k: sign(k.header(alg="none"), k.claims()), "none"),
    Attack("alg-None-mixed-case", lambda k: sign(k.header(alg="nOnE"), k.claims()), "none"),
    Attack("alg-missing", lambda k: k.token(header=k.header(alg=DROP)), "algorithm"),
    Attack("hs256-public-pem", lambda k: sign(k.header(alg="HS256"), k.claims(), secret=k.public_pem()), "hs256"),
    Attack("hs256-jwk-n", lambda k: sign(k.header(alg="HS256"), k.claims(), secret=k.public_n().encode()), "hs256"),
    Attack(
        "hs256-jwk-n-bytes",
        lambda k: sign(k.header(alg="HS256"), k.claims(), secret=base64.urlsafe_b64decode(k.public_n() + "==")),
        "hs256",
    ),
    Attack(
        "own-key-providers-kid",
        lambda k: sign(k.header(), k.claims(), RSAKey.generate_key(2048, private=True).private_key),
        "signature",
    ),
    Attack("tampered-claims", lambda k: _swap_claims(k), "signature"),
    Attack("signature-stripped", lambda k: k.token().rsplit(".", 1)[0] + ".", "signature"),
    Attack("unknown-kid", lambda k: k.token(header=k.header(kid="no-such-kid")), "no-such-kid"),
    Attack("kid-not-a-string", lambda k: k.token(header=k.header(kid=7)), "kid"),
    Attack("ec-kid-with-rs256", lambda k: k.token(header=k.header(kid="e1")), "does not belong"),
    Attack("es256-against-rsa-key", lambda k: sign(k.header(alg="ES256"), k.claims(), k.keys["e1"]), "does not belong"),
    Attack("ps256-against-rs256-key", lambda k: k.token(header=k.header(alg="PS256")), "does not belong"),
    Attack("crit-header", lambda k: k.token(header=k.header(crit=["exp"], exp=1)), "extensions"),
    Attack("jku-header", lambda k: k.token(header=k.header(jku="http://127.0.0.1:1/jwks")), "names keys"),
    Attack("x5u-header", lambda k: k.token(header=k.header(x5u="http://127.0.0.1:1/cert")), "names keys"),
    Attack("jwk-header", lambda k: _embedded_jwk(k), "names keys"),
    # STS's model caps WebIdentityToken at 20,000 characters (botocore validates it as AWS does).
    Attack("huge-token", lambda k: k.token(k.claims(pad="x" * 20_000)), "too large", "ValidationError"),
    Attack("large-token", lambda k: k.token(k.claims(pad="x" * 13_000)), "too large"),
    Attack("non-json-header", lambda k: "eyJ" + part("not json")[3:] + "." + part(k.claims()) + ".c2ln", "json"),
    Attack("non-json-claims", lambda k: part(k.header()) + "." + part("{nope") + ".c2ln", "json"),
    Attack("bad-base64", lambda k: part(k.header()) + ".%%%%." + "c2ln", "json"),
    Attack("header-an-array", lambda k: "eyJ" + part(["alg", "RS256"])[3:] + "." + part(k.claims()) + ".c2ln", "json"),
    Attack("claims-an-array", lambda k: sign(k.header(), ["sub", SUB], k.keys["k1"]), "json"),
    Attack("deeply-nested-claims", lambda k: part(k.header()) + "." + _nested(5000) + ".c2ln", "json"),
    Attack(
        "session-tags-not-an-object",
        lambda k: k.token(k.claims(**{"https://aws.amazon.com/tags": {"principal_tags": ["team"]}})),
        "principal_tags",
    ),
    Attack(
        "session-tag-reserved-key",
        lambda k: k.token(k.claims(**{"https://aws.amazon.com/tags": {"principal_tags": {"aws:x": ["y"]}}})),
        "aws:",
    ),
]


def _swap_claims(kit: Kit) -> str:
    header, _, sig = kit.token().split(".")
    return f"{header}.{part(kit.claims(sub='admin'))}.{sig}"


def _embedded_jwk(kit: Kit) -> str:
    mine = RSAKey.generate_key(2048, private=True)
    return sign(kit.header(jwk=dict(mine.as_dict(private=False))), kit.claims(), mine.private_key)


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_bad_tokens_are_refused_everywhere_and_change_nothing(
    kit: Kit, attack: Attack, http: requests.Session, s3: Any, system_bucket: str
) -> None:
    before = state(kit, http, s3, system_bucket)
    token = attack.make(kit)
    refused_everywhere(kit, token, attack.status, attack.says, attack.sts, attack.name.replace("-", "_"))
    assert state(kit, http, s3, system_bucket) == before


ROLE_ATTACKS = [
    ("trust-refuses", lambda k: k.token(k.claims(scope=f"role:{REFUSER}")), [REFUSER, "sts:AssumeRoleWithWebIdentity"]),
    ("two-roles", lambda k: k.token(k.claims(scope=f"role:{MAIN} role:{SPARE}")), ["several roles", MAIN, SPARE]),
    ("two-roles-scp", lambda k: k.token(k.claims(scope=DROP, scp=[f"role:{MAIN}", "role:x"])), ["several roles"]),
    ("no-such-role", lambda k: k.token(k.claims(scope="role:atk-nobody")), ["atk-nobody", "does not exist"]),
    ("role-name-invalid", lambda k: k.token(k.claims(scope="role:../../etc")), ["does not exist"]),
    ("empty-role-scope", lambda k: k.token(k.claims(scope="role:")), ["does not exist"]),
    # No role named: MAIN and SPARE both admit the subject, so which one is not guessed.
    ("ambiguous", lambda k: k.token(k.claims(scope="catalog")), ["several roles", MAIN, SPARE]),
    ("nobody-trusts", lambda k: k.token(k.claims(sub="stranger", scope="catalog")), ["no role", "stranger"]),
]


@pytest.mark.parametrize("case", ROLE_ATTACKS, ids=[c[0] for c in ROLE_ATTACKS])
def test_valid_tokens_for_roles_that_refuse_them(
    kit: Kit, case: Any, http: requests.Session, s3: Any, system_bucket: str
) -> None:
    name, make, words = case
    before = state(kit, http, s3, system_bucket)
    token = make(kit)
    for word in words:
        refused_everywhere(kit, token, 403, word, None, name.replace("-", "_"))
    assert state(kit, http, s3, system_bucket) == before


def test_sts_refuses_roles_whose_trust_refuses(kit: Kit, http: requests.Session, s3: Any, system_bucket: str) -> None:
    before = state(kit, http, s3, system_bucket)
    token = kit.token()
    for role, words in (
        (REFUSER, [REFUSER, "sts:AssumeRoleWithWebIdentity"]),
        ("atk-nobody", ["atk-nobody"]),
    ):
        with pytest.raises(ClientError) as err:
            assume(kit, token, role)
        assert err.value.response["Error"]["Code"] == "AccessDenied"
        assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        for word in words:
            assert word in err.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as err:  # another account's role
        unsigned_sts(kit.catalog_url).assume_role_with_web_identity(
            RoleArn=f"arn:aws:iam::123456789012:role/{MAIN}", RoleSessionName="attacker", WebIdentityToken=token
        )
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] in (400, 403)
    loose = boto3.client(
        "sts",
        endpoint_url=f"{base(kit.catalog_url)}/_sts",
        region_name=REGION,
        config=Config(signature_version=botocore.UNSIGNED, parameter_validation=False),
    )
    for session_name in ("a", "x" * 65, "bad name!"):
        with pytest.raises(ClientError) as err:
            loose.assume_role_with_web_identity(
                RoleArn=role_arn(MAIN), RoleSessionName=session_name, WebIdentityToken=token
            )
        assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError) as err:
        assume(kit, token, DurationSeconds=7200)  # the role's MaxSessionDuration is 3600
    assert err.value.response["Error"]["Code"] == "ValidationError"
    assert "MaxSessionDuration" in err.value.response["Error"]["Message"]
    assert state(kit, http, s3, system_bucket) == before


# ---- tokens that must pass --------------------------------------------------------------------------


GOOD = [
    ("audience-list-with-one-right", lambda k: k.token(k.claims(aud=["other", k.idp.audience]))),
    ("typ-at-jwt", lambda k: k.token(header=k.header(typ="at+jwt"))),
    ("typ-jwt", lambda k: k.token(header=k.header(typ="JWT"))),
    ("nbf-in-the-past", lambda k: k.token(k.claims(nbf=int(time.time()) - 10))),
    ("within-clock-skew", lambda k: k.token(k.claims(exp=int(time.time()) - 5))),
    (
        "from-the-provider",
        lambda k: k.idp.client_credentials(SUB, SUB_SECRET, scope=f"catalog role:{MAIN}")["access_token"],
    ),
]


@pytest.mark.parametrize("case", GOOD, ids=[c[0] for c in GOOD])
def test_valid_tokens_pass(kit: Kit, case: Any) -> None:
    _, make = case
    token = make(kit)
    resp = requests.get(f"{kit.catalog_url}/v1/{kit.warehouse}/namespaces", headers=bearer(token), timeout=30)
    assert resp.status_code == 200, resp.text
    got = assume(kit, token, DurationSeconds=900)
    assert got["Credentials"]["AccessKeyId"].startswith("ASIA")
    assert got["SubjectFromWebIdentityToken"] == SUB


# ---- session credentials ----------------------------------------------------------------------------


def s3tables_client(url: str, key: str, secret: str, token: str | None) -> Any:
    extra = {"aws_session_token": token} if token is not None else {}
    return boto3.client(
        "s3tables",
        endpoint_url=f"{base(url)}/_s3tables",
        region_name=REGION,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(retries={"max_attempts": 1}),
        **extra,
    )


def bucket_arn(warehouse: str) -> str:
    return f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/{warehouse}"


def _refused(call: Callable[[], Any], *words: str) -> dict[str, Any]:
    with pytest.raises(ClientError) as err:
        call()
    response = err.value.response
    assert response["ResponseMetadata"]["HTTPStatusCode"] in (400, 401, 403), response
    message = str(response["Error"].get("Message", ""))
    for word in words:
        assert word.lower() in message.lower(), response
    return dict(response)


def test_forged_session_credentials(kit: Kit, http: requests.Session, s3: Any, system_bucket: str) -> None:
    one = assume(kit, kit.token(), DurationSeconds=900)["Credentials"]
    two = assume(kit, kit.token(), DurationSeconds=900)["Credentials"]
    good = s3tables_client(kit.catalog_url, one["AccessKeyId"], one["SecretAccessKey"], one["SessionToken"])
    good.list_namespaces(tableBucketARN=bucket_arn(kit.warehouse))
    before = state(kit, http, s3, system_bucket)

    def write(key: str, secret: str, token: str | None) -> Callable[[], Any]:
        s3t = s3tables_client(kit.catalog_url, key, secret, token)
        return lambda: s3t.create_namespace(tableBucketARN=bucket_arn(kit.warehouse), namespace=["forged"])

    tampered = one["SessionToken"][:-4] + ("AAAA" if not one["SessionToken"].endswith("AAAA") else "BBBB")
    _refused(write(one["AccessKeyId"], one["SecretAccessKey"], tampered), "invalid")
    _refused(write(one["AccessKeyId"], one["SecretAccessKey"], two["SessionToken"]), "invalid")  # another's token
    _refused(write(one["AccessKeyId"], one["SecretAccessKey"], None), "X-Amz-Security-Token")
    _refused(write(one["AccessKeyId"], two["SecretAccessKey"], one["SessionToken"]))  # another's secret
    unknown = "ASIA" + "".join(secrets.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))
    _refused(write(unknown, one["SecretAccessKey"], one["SessionToken"]))
    # The session token as a bearer token is not a credential.
    resp = requests.get(
        f"{kit.catalog_url}/v1/{kit.warehouse}/namespaces", headers=bearer(one["SessionToken"]), timeout=30
    )
    assert resp.status_code == 401, resp.text
    # STS with a tampered token.
    sts = boto3.client(
        "sts",
        endpoint_url=f"{base(kit.catalog_url)}/_sts",
        region_name=REGION,
        aws_access_key_id=one["AccessKeyId"],
        aws_secret_access_key=one["SecretAccessKey"],
        aws_session_token=tampered,
    )
    _refused(sts.get_caller_identity)
    assert state(kit, http, s3, system_bucket) == before


def test_a_deleted_roles_sessions_and_tokens_are_refused(kit: Kit, http: requests.Session) -> None:
    iam = client("iam", kit.catalog_url)
    name = f"atk-gone-{uuid.uuid4().hex[:6]}"
    iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust_for(kit.provider_arn, kit.idp.issuer, "gone-sub"))
    iam.put_role_policy(RoleName=name, PolicyName="access", PolicyDocument=json.dumps(everything_on(kit.warehouse)))
    token = kit.token(kit.claims(sub="gone-sub", scope=f"role:{name}"))
    creds = assume(kit, token, name, DurationSeconds=900)["Credentials"]
    s3t = s3tables_client(kit.catalog_url, creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"])
    s3t.list_namespaces(tableBucketARN=bucket_arn(kit.warehouse))
    url = f"{kit.catalog_url}/v1/{kit.warehouse}/namespaces"
    assert requests.get(url, headers=bearer(token), timeout=30).status_code == 200
    iam.delete_role_policy(RoleName=name, PolicyName="access")
    iam.delete_role(RoleName=name)
    # Made again under the same name: another role, the old sessions stay dead.
    iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust_for(kit.provider_arn, kit.idp.issuer, "gone-sub"))
    iam.put_role_policy(RoleName=name, PolicyName="access", PolicyDocument=json.dumps(everything_on(kit.warehouse)))
    deadline = time.monotonic() + 15  # caches keep a role for seconds in the served process
    while True:
        try:
            s3t.list_namespaces(tableBucketARN=bucket_arn(kit.warehouse))
        except ClientError as err:
            assert err.response["ResponseMetadata"]["HTTPStatusCode"] in (401, 403)
            break
        assert time.monotonic() < deadline, "the old role's session still works"
        time.sleep(0.5)
    iam.delete_role_policy(RoleName=name, PolicyName="access")
    iam.delete_role(RoleName=name)
    deadline = time.monotonic() + 15
    while requests.get(url, headers=bearer(token), timeout=30).status_code != 403:
        assert time.monotonic() < deadline, "a deleted role's token still works"
        time.sleep(0.5)
    resp = requests.get(url, headers=bearer(token), timeout=30)
    assert name in message_of(resp)


def test_an_expired_session_is_refused(
    kit: Kit, core: Any, http: requests.Session, s3: Any, system_bucket: str
) -> None:
    """A session record whose expiry has passed (written directly: the shortest session is 900 s)."""
    from chalicelib import keys
    from chalicelib.auth import roles, sessions
    from chalicelib.core.primitives.context import dump

    role = roles.get(core, MAIN)
    akid = "ASIA" + "".join(secrets.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))
    token, secret = "CT" + secrets.token_urlsafe(64), secrets.token_urlsafe(30)
    session = sessions.Session(
        access_key_id=akid,
        secret=secret,
        token_digest=sessions.digest(token),
        role=role.name,
        role_uuid=role.uuid,
        name="expired",
        expires=time.time() - 60,
    )
    core.storage.put_if_absent(system_bucket, keys.session_record(akid), dump(session.to_json()))
    with pytest.raises(sessions.ExpiredToken):
        sessions.lookup(core, akid)
    before = state(kit, http, s3, system_bucket)
    s3t = s3tables_client(kit.catalog_url, akid, secret, token)
    _refused(lambda: s3t.create_namespace(tableBucketARN=bucket_arn(kit.warehouse), namespace=["late"]), "expired")
    sts = boto3.client(
        "sts",
        endpoint_url=f"{base(kit.catalog_url)}/_sts",
        region_name=REGION,
        aws_access_key_id=akid,
        aws_secret_access_key=secret,
        aws_session_token=token,
    )
    got = _refused(sts.get_caller_identity, "expired")
    assert got["Error"]["Code"] == "ExpiredTokenException"
    assert state(kit, http, s3, system_bucket) == before


# ---- a provider that goes down, and forged key ids ------------------------------------------------------


class TinyProvider:
    """Discovery and JWKS over http.server, counting requests; stop() takes it down."""

    def __init__(self, jwks: dict[str, Any]) -> None:
        self.jwks = jwks
        self.hits: dict[str, int] = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                with outer.lock:
                    outer.hits[self.path] = outer.hits.get(self.path, 0) + 1
                if self.path == "/.well-known/openid-configuration":
                    body: Any = {"issuer": outer.issuer, "jwks_uri": outer.issuer + "/jwks"}
                elif self.path == "/jwks":
                    body = outer.jwks
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def jwks_hits(self) -> int:
        with self.lock:
            return self.hits.get("/jwks", 0)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Tiny:
    provider: TinyProvider
    role: str
    key: Any
    kid: str

    def token(self, kid: str | None = None, key: Any = None, sub: str = SUB) -> str:
        now = int(time.time())
        claims = {"iss": self.provider.issuer, "aud": "catalog", "sub": sub, "iat": now, "exp": now + 600}
        claims["scope"] = f"role:{self.role}"
        claims["jti"] = uuid.uuid4().hex
        return sign({"alg": "RS256", "kid": kid or self.kid}, claims, key or self.key)


@pytest.fixture()
def tiny(catalog_url: str, kit: Kit) -> Iterator[Tiny]:
    jwk = rsa_jwk("t1")
    provider = TinyProvider(public_jwks({"keys": [jwk]}))
    iam = client("iam", catalog_url)
    arn = iam.create_open_id_connect_provider(Url=provider.issuer, ClientIDList=["catalog"], ThumbprintList=[])[
        "OpenIDConnectProviderArn"
    ]
    name = f"atk-tiny-{uuid.uuid4().hex[:6]}"
    iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust_for(arn, provider.issuer, SUB))
    iam.put_role_policy(RoleName=name, PolicyName="access", PolicyDocument=json.dumps(everything_on(kit.warehouse)))
    try:
        yield Tiny(provider, name, private(jwk), "t1")
    finally:
        provider.stop()


def test_a_provider_that_is_down_cached_keys_serve_unknown_keys_are_refused(
    kit: Kit, tiny: Tiny, http: requests.Session, s3: Any, system_bucket: str
) -> None:
    url = f"{kit.catalog_url}/v1/{kit.warehouse}/namespaces"
    assert requests.get(url, headers=bearer(tiny.token()), timeout=30).status_code == 200
    assert tiny.provider.jwks_hits() == 1
    tiny.provider.stop()
    # Down: the cached key still verifies (bearer and STS), fresh tokens included.
    assert requests.get(url, headers=bearer(tiny.token()), timeout=30).status_code == 200
    creds = unsigned_sts(kit.catalog_url).assume_role_with_web_identity(
        RoleArn=role_arn(tiny.role), RoleSessionName="down", WebIdentityToken=tiny.token(), DurationSeconds=900
    )["Credentials"]
    assert creds["AccessKeyId"].startswith("ASIA")
    before = state(kit, http, s3, system_bucket)
    # A key the provider would publish next is not known: refused, naming it.
    rotated = RSAKey.generate_key(2048, private=True).private_key
    token = tiny.token(kid="t2", key=rotated)
    resp = requests.get(url, headers=bearer(token), timeout=30)
    assert resp.status_code == 401 and "t2" in message_of(resp), resp.text
    with pytest.raises(ClientError) as err:
        unsigned_sts(kit.catalog_url).assume_role_with_web_identity(
            RoleArn=role_arn(tiny.role), RoleSessionName="down", WebIdentityToken=token
        )
    assert err.value.response["Error"]["Code"] == "InvalidIdentityToken"
    assert "t2" in err.value.response["Error"]["Message"]
    assert state(kit, http, s3, system_bucket) == before


def test_forged_key_ids_do_not_flood_the_provider(kit: Kit, tiny: Tiny) -> None:
    """50 tokens with random key ids, sent at once to a catalog that has not read this provider's keys
    yet: at most one or two JWKS fetches (one per CATALOG_JWKS_REFRESH_S, default 30 s)."""
    url = f"{kit.catalog_url}/v1/{kit.warehouse}/namespaces"
    forger = RSAKey.generate_key(2048, private=True).private_key
    tokens = [tiny.token(kid=secrets.token_hex(8), key=forger) for _ in range(50)]
    honest = [tiny.token() for _ in range(8)]  # among them, tokens with the real key: they wait for the fetch

    def send(token: str) -> requests.Response:
        return requests.get(url, headers=bearer(token), timeout=30)

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(send, tokens[:25] + honest + tokens[25:]))
    forged = answers[:25] + answers[25 + len(honest) :]
    assert all(r.status_code == 401 for r in forged), [r.text for r in forged if r.status_code != 401][:3]
    assert all("no signing key" in message_of(r) for r in forged), forged[0].text
    assert all(r.status_code == 200 for r in answers[25 : 25 + len(honest)]), [r.text for r in answers[25:33]]
    assert 1 <= tiny.provider.jwks_hits() <= 2, tiny.provider.hits
    # The real key still works, without another fetch (it came with the first).
    assert send(tiny.token()).status_code == 200
    more = [tiny.token(kid=secrets.token_hex(8), key=forger) for _ in range(20)]
    with ThreadPoolExecutor(8) as pool:
        assert all(r.status_code == 401 for r in pool.map(send, more))
    assert tiny.provider.jwks_hits() <= 2, tiny.provider.hits


# ---- malformed policies and roles (400 at put, as IAM) ---------------------------------------------


def _strict_iam(url: str) -> Any:
    """boto3's iam without client-side checks, so the catalog's own validation answers."""
    from tests.conftest import ROOT_KEY, ROOT_SECRET

    return boto3.client(
        "iam",
        endpoint_url=f"{base(url)}/_iam",
        region_name=REGION,
        aws_access_key_id=ROOT_KEY,
        aws_secret_access_key=ROOT_SECRET,
        config=Config(retries={"max_attempts": 1}, parameter_validation=False),
    )


def _statement(**st: Any) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Resource": "*", **st}]})


BAD_POLICIES = [
    ("not-json", "{not json"),
    ("unknown-action", _statement(Action="s3tables:Frobnicate")),
    ("unknown-service", _statement(Action="ec2:RunInstances")),
    ("bad-operator", _statement(Action="s3tables:GetTable", Condition={"StringEqualsPlease": {"aws:username": "a"}})),
    (
        "resource-tag-numeric",
        _statement(Action="s3tables:GetTable", Condition={"NumericEquals": {"aws:ResourceTag/team": "1"}}),
    ),
    ("bad-effect", json.dumps({"Statement": [{"Effect": "Perhaps", "Action": "s3tables:GetTable", "Resource": "*"}]})),
    ("no-statement", json.dumps({"Version": "2012-10-17"})),
    ("principal-in-identity-policy", _statement(Action="s3tables:GetTable", Principal="*")),
    ("a-list", json.dumps([{"Effect": "Allow"}])),
]


@pytest.mark.parametrize("case", BAD_POLICIES, ids=[c[0] for c in BAD_POLICIES])
def test_malformed_permission_policies_are_refused(kit: Kit, case: tuple[str, str]) -> None:
    iam = _strict_iam(kit.catalog_url)
    before = iam.get_role_policy(RoleName=MAIN, PolicyName="access")["PolicyDocument"]
    with pytest.raises(ClientError) as err:
        iam.put_role_policy(RoleName=MAIN, PolicyName="access", PolicyDocument=case[1])
    assert err.value.response["Error"]["Code"] == "MalformedPolicyDocument", err.value.response
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert iam.get_role_policy(RoleName=MAIN, PolicyName="access")["PolicyDocument"] == before
    with pytest.raises(ClientError) as err:
        iam.put_role_policy(RoleName=MAIN, PolicyName="other", PolicyDocument=case[1])
    assert iam.list_role_policies(RoleName=MAIN)["PolicyNames"] == ["access"]


BAD_TRUST = [
    ("not-json", "[[["),
    (
        "resource",
        json.dumps({"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": "*", "Resource": "*"}]}),
    ),
    ("permission-action", json.dumps({"Statement": [{"Effect": "Allow", "Action": "s3tables:*", "Principal": "*"}]})),
    (
        "federated-not-an-arn",
        json.dumps(
            {
                "Statement": [
                    {"Effect": "Allow", "Action": "sts:AssumeRoleWithWebIdentity", "Principal": {"Federated": "x"}}
                ]
            }
        ),
    ),
    (
        "bad-operator",
        json.dumps(
            {
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": "sts:AssumeRole",
                        "Principal": "*",
                        "Condition": {"Nope": {"a:b": "c"}},
                    }
                ]
            }
        ),
    ),
    ("no-principal", json.dumps({"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole"}]})),
]


@pytest.mark.parametrize("case", BAD_TRUST, ids=[c[0] for c in BAD_TRUST])
def test_malformed_trust_documents_are_refused_at_update(kit: Kit, case: tuple[str, str]) -> None:
    iam = _strict_iam(kit.catalog_url)
    before = iam.get_role(RoleName=MAIN)["Role"]
    with pytest.raises(ClientError) as err:
        iam.update_assume_role_policy(RoleName=MAIN, PolicyDocument=case[1])
    assert err.value.response["Error"]["Code"] == "MalformedPolicyDocument", err.value.response
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert iam.get_role(RoleName=MAIN)["Role"] == before


def test_invalid_roles_are_refused(kit: Kit) -> None:
    iam = _strict_iam(kit.catalog_url)
    trust = trust_for(kit.provider_arn, kit.idp.issuer, SUB)
    names_before = sorted(r["RoleName"] for r in iam.list_roles()["Roles"])
    for kw in (
        {"RoleName": "r" * 65},
        {"RoleName": "bad/name"},
        {"RoleName": ""},
        {"RoleName": "atk-path", "Path": "noslash"},
        {"RoleName": "atk-path2", "Path": "/no-trailing"},
        {"RoleName": "atk-max", "MaxSessionDuration": 100},
        {"RoleName": "atk-max2", "MaxSessionDuration": 43201},
        {"RoleName": "atk-tag", "Tags": [{"Key": "aws:reserved", "Value": "x"}]},
    ):
        with pytest.raises(ClientError) as err:
            iam.create_role(AssumeRolePolicyDocument=trust, **kw)
        assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400, kw
        assert err.value.response["Error"]["Code"] in ("ValidationError", "InvalidInput"), (kw, err.value.response)
    with pytest.raises(ClientError) as err:
        iam.update_role(RoleName=MAIN, MaxSessionDuration=100)
    assert err.value.response["Error"]["Code"] in ("ValidationError", "InvalidInput")
    assert iam.get_role(RoleName=MAIN)["Role"]["MaxSessionDuration"] == 3600
    assert sorted(r["RoleName"] for r in iam.list_roles()["Roles"]) == names_before


# ---- 403s name the action and the role --------------------------------------------------------------


def test_a_role_refused_an_action_is_told_which(kit: Kit, http: requests.Session, s3: Any, system_bucket: str) -> None:
    iam = client("iam", kit.catalog_url)
    name = f"atk-reader-{uuid.uuid4().hex[:6]}"
    iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust_for(kit.provider_arn, kit.idp.issuer, "reader"))
    reads = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["s3tables:ListNamespaces", "s3tables:GetNamespace", "s3tables:GetTableBucket"],
                "Resource": [
                    f"arn:aws:s3tables:::bucket/{kit.warehouse}",
                    f"arn:aws:s3tables:::bucket/{kit.warehouse}/*",
                ],
            }
        ],
    }
    iam.put_role_policy(RoleName=name, PolicyName="reads", PolicyDocument=json.dumps(reads))
    token = kit.token(kit.claims(sub="reader", scope=f"role:{name}"))
    url = f"{kit.catalog_url}/v1/{kit.warehouse}/namespaces"
    assert requests.get(url, headers=bearer(token), timeout=30).status_code == 200
    before = state(kit, http, s3, system_bucket)
    resp = requests.post(url, headers=bearer(token), json={"namespace": ["nope"], "properties": {}}, timeout=30)
    assert resp.status_code == 403 and "CreateNamespace" in message_of(resp) and name in message_of(resp), resp.text
    creds = assume(kit, token, name, DurationSeconds=900)["Credentials"]
    s3t = s3tables_client(kit.catalog_url, creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"])
    got = _refused(
        lambda: s3t.create_namespace(tableBucketARN=bucket_arn(kit.warehouse), namespace=["nope"]),
        "CreateNamespace",
        name,
    )
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 403
    after = state(kit, http, s3, system_bucket)
    assert after.namespaces == before.namespaces and after.roles == before.roles
    assert len(after.sessions) == len(before.sessions) + 1  # the one STS issued above, nothing else


def test_a_provider_removed_or_an_audience_dropped_stops_its_tokens(kit: Kit, tiny: Tiny) -> None:
    iam = client("iam", kit.catalog_url)
    url = f"{kit.catalog_url}/v1/{kit.warehouse}/namespaces"
    arn = f"arn:aws:iam::{ACCOUNT}:oidc-provider/{tiny.provider.issuer.split('://', 1)[1]}"
    assert requests.get(url, headers=bearer(tiny.token()), timeout=30).status_code == 200

    def until(status: int, word: str) -> None:
        deadline = time.monotonic() + 15  # the served process caches providers for seconds
        while True:
            resp = requests.get(url, headers=bearer(tiny.token()), timeout=30)
            if resp.status_code == status:
                assert word in message_of(resp), resp.text
                return
            assert time.monotonic() < deadline, resp.text
            time.sleep(0.5)

    iam.remove_client_id_from_open_id_connect_provider(OpenIDConnectProviderArn=arn, ClientID="catalog")
    until(401, "audience")
    iam.add_client_id_to_open_id_connect_provider(OpenIDConnectProviderArn=arn, ClientID="catalog")
    until(200, "")
    iam.delete_open_id_connect_provider(OpenIDConnectProviderArn=arn)
    until(401, "Unknown issuer")
