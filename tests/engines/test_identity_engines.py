"""Real engines sign in as users do: with a provider's token or with STS temporary credentials.

A node OpenID Connect provider (tests/oidcutil.py) is registered with the catalog's IAM face; roles
trust its tokens. Each engine then works on a catalog that holds the only S3 keys (data access by
vended credentials or remote signing only):

- Spark (Iceberg Java 1.10's REST client) posts client_credentials to the provider's token endpoint
  and sends the JWT to the catalog; another catalog in the same session signs with SigV4 and the
  role session's temporary credentials (`rest.session-token`).
- DuckDB 1.5.5 attaches with an iceberg secret that gets its token from the provider
  (client_secret_basic), and with a plain TOKEN secret.
- PyIceberg with a plain `token`, and with SigV4 and the role session's credentials, each with
  vended credentials and with remote signing.

A role whose policy lacks s3tables:PutTableData reads but cannot write (403), whichever way it signs.
"""

from __future__ import annotations

import importlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore
import pyarrow as pa
import pytest
import requests
from botocore.config import Config
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError, SignError

from scripts import catalog_admin
from tests.conftest import REGION, ROOT_KEY, ROOT_SECRET, catalog_process, rest_catalog, sigv4_props
from tests.oidcutil import OidcProvider, start_provider

pytestmark = pytest.mark.full

ACCOUNT = "000000000000"
DATA_ROLE = "arn:aws:iam::000000000000:role/catalog-data-access"
SUFFIX = uuid.uuid4().hex[:8]
# Roles live in the session's system bucket, shared with other modules' catalogs: unique names.
WRITER, READER, SOLO_ROLE = f"eng-writer-{SUFFIX}", f"eng-reader-{SUFFIX}", f"eng-solo-{SUFFIX}"
ENGINE, ENGINE_SECRET = "engine-job", "engine-secret"  # trusted by WRITER and READER: names its role
SOLO, SOLO_SECRET = "solo-job", "solo-secret"  # trusted by SOLO_ROLE only: needs no role scope
VENDED = {"header.X-Iceberg-Access-Delegation": "vended-credentials"}
SIGNING = {"header.X-Iceberg-Access-Delegation": "remote-signing"}
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("who", pa.string())])
SEED = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "who": ["root", "root", "root"]}, schema=SCHEMA)
# How each engine reports the catalog's 403 for a write without s3tables:PutTableData.
JAVA_DENIED = r"ForbiddenException: Forbidden: Access denied: role/eng-reader-\w+ may not write .*PutTableData"
DUCKDB_DENIED = r"transactions/commit' returned a non-200 status code \(Forbidden_403\)"
COMMIT_DENIED = r"Access denied: role/eng-reader-\w+ may not write .*\(s3tables:PutTableData\)"
SIGN_DENIED = r"Failed to sign request 403"


def rows(table: pa.Table) -> list[tuple[int, str]]:
    return sorted(zip(table["id"].to_pylist(), table["who"].to_pylist(), strict=True))


def base(url: str) -> str:
    return url.removesuffix("/_iceberg")


# ---- the catalog, the provider, the roles --------------------------------------------------------------


@pytest.fixture(scope="module")
def url(s3_endpoint: str, system_bucket: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A catalog holding the only S3 keys: engines reach data through vended credentials or signing."""
    with catalog_process(
        s3_endpoint,
        system_bucket,
        tmp_path_factory.mktemp("identity-engines"),
        CATALOG_VEND_S3_CREDENTIALS="false",
        CATALOG_DATA_ACCESS_ROLE_ARN=DATA_ROLE,
        CATALOG_RESOURCE_POLICY_TTL_S="0",
    ) as (catalog_url, _):
        yield catalog_url


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    clients = [
        {
            "client_id": ENGINE,
            "client_secret": ENGINE_SECRET,
            "scope": f"catalog role:{WRITER} role:{READER} PRINCIPAL_ROLE:ALL",
        },
        {"client_id": SOLO, "client_secret": SOLO_SECRET, "scope": "catalog PRINCIPAL_ROLE:ALL"},
    ]
    with start_provider(tmp_path_factory.mktemp("oidc-engines"), clients=clients) as provider:
        yield provider


def iam_client(url: str) -> Any:
    return boto3.client(
        "iam",
        endpoint_url=f"{base(url)}/_iam",
        region_name=REGION,
        aws_access_key_id=ROOT_KEY,
        aws_secret_access_key=ROOT_SECRET,
        config=Config(retries={"max_attempts": 1}),
    )


def trust(provider_arn: str, idp: OidcProvider, sub: str) -> str:
    host = idp.issuer.split("://", 1)[1]
    statement = {
        "Effect": "Allow",
        "Principal": {"Federated": provider_arn},
        "Action": ["sts:AssumeRoleWithWebIdentity", "sts:TagSession"],
        "Condition": {"StringEquals": {f"{host}:sub": sub, f"{host}:aud": idp.audience}},
    }
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def allow(actions: list[str], wh: str) -> dict[str, Any]:
    resources = [f"arn:aws:s3tables:::bucket/{wh}", f"arn:aws:s3tables:::bucket/{wh}/*"]
    return {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": resources}]}


@pytest.fixture(scope="module")
def lake(url: str, idp: OidcProvider, s3_endpoint: str) -> dict[str, Any]:
    """A warehouse with eng.seed (written by root with its own S3 keys), the provider registered, and
    three roles: WRITER (everything), READER (everything but s3tables:PutTableData), SOLO_ROLE."""
    http = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
    wh = f"eng-{uuid.uuid4().hex[:10]}"
    created = http.post(f"{url}/v1/warehouses", json={"name": wh})
    assert created.status_code == 200, created.text
    root = rest_catalog(url, wh, s3_endpoint)
    root.create_namespace("eng")
    root.create_table("eng.seed", SCHEMA).append(SEED)

    iam = iam_client(url)
    provider_arn = iam.create_open_id_connect_provider(
        Url=idp.issuer, ClientIDList=[idp.audience], ThumbprintList=["a" * 40]
    )["OpenIDConnectProviderArn"]
    reads = ["s3tables:Get*", "s3tables:List*", "s3tables:CreateNamespace", "s3tables:CreateTable"]
    policies = {
        WRITER: (ENGINE, allow(["s3tables:*"], wh)),
        READER: (ENGINE, allow([*reads, "s3tables:UpdateTable"], wh)),
        SOLO_ROLE: (SOLO, allow(["s3tables:*"], wh)),
    }
    for name, (sub, policy) in policies.items():
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust(provider_arn, idp, sub))
        iam.put_role_policy(RoleName=name, PolicyName="access", PolicyDocument=json.dumps(policy))
    return {"url": url, "wh": wh, "root": root, "idp": idp}


def jwt(idp: OidcProvider, role: str | None, client: str = ENGINE, secret: str = ENGINE_SECRET) -> str:
    scope = f"catalog role:{role}" if role else "catalog"
    return str(idp.client_credentials(client, secret, scope=scope, auth="post")["access_token"])


def role_session(lake: dict[str, Any], role: str) -> dict[str, str]:
    """Temporary credentials of `role` from STS AssumeRoleWithWebIdentity (an unsigned call)."""
    sts = boto3.client(
        "sts",
        endpoint_url=f"{base(lake['url'])}/_sts",
        region_name=REGION,
        config=Config(signature_version=botocore.UNSIGNED, retries={"max_attempts": 1}),
    )
    got = sts.assume_role_with_web_identity(
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{role}",
        RoleSessionName=f"engines-{uuid.uuid4().hex[:6]}",
        WebIdentityToken=jwt(lake["idp"], None),
    )
    creds = got["Credentials"]
    assert creds["AccessKeyId"].startswith("ASIA")
    return {"key": creds["AccessKeyId"], "secret": creds["SecretAccessKey"], "token": creds["SessionToken"]}


def root_rows(lake: dict[str, Any], table: str) -> list[tuple[int, str]]:
    return rows(lake["root"].load_table(table).scan().to_arrow())


# ---- Spark (Iceberg Java 1.10) ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark(lake: dict[str, Any]) -> Iterator[Any]:
    """One SparkSession, three catalogs: `tok` (the provider's token for WRITER, fetched by Iceberg Java),
    `ro` (the same for READER) and `sts` (SigV4 with WRITER's temporary credentials). All get their
    S3 access as vended credentials: the catalog says where S3 is and gives the keys."""
    from dataclasses import replace

    from spark_jobs.session import JobSettings, build_session, spark_conf

    idp = lake["idp"]
    writer = role_session(lake, WRITER)

    def conf(name: str, auth: str, key: str = "", secret: str = "") -> tuple[Any, dict[str, str]]:
        overrides = {
            "catalog_url": lake["url"],
            "warehouse": lake["wh"],
            "catalog_name": name,
            "auth": auth,
            "access_key_id": key,
            "secret_access_key": secret,
            "access_delegation": "vended-credentials",
        }
        settings = replace(JobSettings.load(overrides=overrides), s3_endpoint="", s3_path_style="")
        return settings, spark_conf(settings)

    def oauth(name: str, role: str) -> dict[str, str]:
        cat = f"spark.sql.catalog.{name}"
        return {
            f"{cat}.credential": f"{ENGINE}:{ENGINE_SECRET}",
            f"{cat}.oauth2-server-uri": idp.token_endpoint,
            f"{cat}.scope": f"catalog role:{role}",
        }

    settings, first = conf("tok", "none")
    catalogs = {**first, **oauth("tok", WRITER)}
    catalogs.update({**conf("ro", "none")[1], **oauth("ro", READER)})
    catalogs.update(conf("sts", "sigv4", writer["key"], writer["secret"])[1])
    catalogs["spark.sql.catalog.sts.rest.session-token"] = writer["token"]
    session = build_session(settings, "identity-engines")
    for k, v in catalogs.items():
        if k.startswith("spark.sql.catalog."):
            session.conf.set(k, v)  # the session may have existed already; catalogs load on first use
    yield session
    session.stop()


def token_grants(idp: OidcProvider) -> int:
    return sum(1 for line in idp.log_path.read_text(errors="replace").splitlines() if "POST /token 200" in line)


def test_spark_with_the_providers_token_endpoint(spark: Any, lake: dict[str, Any]) -> None:
    before = token_grants(lake["idp"])
    assert sorted(tuple(r) for r in spark.sql("SELECT id, who FROM tok.eng.seed").collect()) == rows(SEED)
    assert token_grants(lake["idp"]) > before  # Iceberg Java got its token from the provider
    spark.sql("CREATE TABLE tok.eng.spark_tok (id bigint, who string) USING iceberg")
    spark.sql("INSERT INTO tok.eng.spark_tok VALUES (1, 'spark-oidc'), (2, 'spark-oidc')")
    got = sorted(tuple(r) for r in spark.sql("SELECT id, who FROM tok.eng.spark_tok").collect())
    assert got == [(1, "spark-oidc"), (2, "spark-oidc")]
    assert root_rows(lake, "eng.spark_tok") == got  # what the catalog committed, read back by root


def test_spark_with_sts_temporary_credentials(spark: Any, lake: dict[str, Any]) -> None:
    spark.sql("CREATE TABLE sts.eng.spark_sts (id bigint, who string) USING iceberg")
    spark.sql("INSERT INTO sts.eng.spark_sts VALUES (10, 'spark-sts'), (11, 'spark-sts')")
    got = sorted(tuple(r) for r in spark.sql("SELECT id, who FROM sts.eng.spark_sts").collect())
    assert got == [(10, "spark-sts"), (11, "spark-sts")]
    assert root_rows(lake, "eng.spark_sts") == got
    assert sorted(tuple(r) for r in spark.sql("SELECT id, who FROM sts.eng.seed").collect()) == rows(SEED)


def test_spark_as_a_role_without_put_table_data_reads_but_cannot_write(spark: Any, lake: dict[str, Any]) -> None:
    assert sorted(tuple(r) for r in spark.sql("SELECT id, who FROM ro.eng.seed").collect()) == rows(SEED)
    with pytest.raises(Exception, match=JAVA_DENIED):
        spark.sql("INSERT INTO ro.eng.seed VALUES (99, 'reader')")
    assert root_rows(lake, "eng.seed") == rows(SEED)


# ---- DuckDB 1.5.5 --------------------------------------------------------------------------------------


def duckdb_connection() -> Any:
    """DuckDB with its httpfs, avro and iceberg extensions, loaded from their pinned wheels (offline)."""
    import duckdb

    con = duckdb.connect()
    for name in ("httpfs", "avro", "iceberg"):
        pkg = Path(importlib.import_module(f"duckdb_extension_{name}").__file__).parent  # type: ignore[arg-type]
        (ext,) = list(pkg.rglob(f"{name}.duckdb_extension"))
        con.execute(f"LOAD '{ext}'")
    return con


def test_duckdb_with_the_providers_token_endpoint(lake: dict[str, Any]) -> None:
    idp = lake["idp"]
    con = duckdb_connection()
    con.execute(
        f"CREATE SECRET idp_writer (TYPE iceberg, CLIENT_ID '{ENGINE}', CLIENT_SECRET '{ENGINE_SECRET}', "
        f"OAUTH2_SERVER_URI '{idp.token_endpoint}', OAUTH2_SCOPE 'catalog role:{WRITER}')"
    )
    con.execute(f"ATTACH '{lake['wh']}' AS lake (TYPE iceberg, ENDPOINT '{lake['url']}', SECRET idp_writer)")
    assert sorted(con.execute("SELECT id, who FROM lake.eng.seed").fetchall()) == rows(SEED)

    lake["root"].create_table("eng.duck_w", SCHEMA)
    con.execute("INSERT INTO lake.eng.duck_w VALUES (1, 'duckdb'), (2, 'duckdb')")
    assert sorted(con.execute("SELECT id, who FROM lake.eng.duck_w").fetchall()) == [(1, "duckdb"), (2, "duckdb")]
    assert root_rows(lake, "eng.duck_w") == [(1, "duckdb"), (2, "duckdb")]


def test_duckdb_as_a_role_without_put_table_data_reads_but_cannot_write(lake: dict[str, Any]) -> None:
    idp = lake["idp"]
    con = duckdb_connection()
    con.execute(
        f"CREATE SECRET idp_reader (TYPE iceberg, CLIENT_ID '{ENGINE}', CLIENT_SECRET '{ENGINE_SECRET}', "
        f"OAUTH2_SERVER_URI '{idp.token_endpoint}', OAUTH2_SCOPE 'catalog role:{READER}')"
    )
    con.execute(f"ATTACH '{lake['wh']}' AS lake (TYPE iceberg, ENDPOINT '{lake['url']}', SECRET idp_reader)")
    assert sorted(con.execute("SELECT id, who FROM lake.eng.seed").fetchall()) == rows(SEED)
    with pytest.raises(Exception, match=DUCKDB_DENIED):
        con.execute("INSERT INTO lake.eng.seed VALUES (99, 'reader')")
    assert root_rows(lake, "eng.seed") == rows(SEED)


def test_duckdb_with_a_plain_token(lake: dict[str, Any]) -> None:
    """A token the provider gave SOLO without a role scope: the only role that trusts SOLO is used."""
    con = duckdb_connection()
    con.execute(f"CREATE SECRET solo_token (TYPE iceberg, TOKEN '{jwt(lake['idp'], None, SOLO, SOLO_SECRET)}')")
    con.execute(f"ATTACH '{lake['wh']}' AS lake (TYPE iceberg, ENDPOINT '{lake['url']}', SECRET solo_token)")
    assert sorted(con.execute("SELECT id, who FROM lake.eng.seed").fetchall()) == rows(SEED)


# ---- PyIceberg ---------------------------------------------------------------------------------------------


def pyiceberg(lake: dict[str, Any], sign_in: str, role: str, delegation: dict[str, str]) -> RestCatalog:
    """PyIceberg with no S3 keys or endpoint of its own, signed in with a provider JWT or a role session."""
    if sign_in == "jwt":
        auth = {"token": jwt(lake["idp"], role)}
    else:
        creds = role_session(lake, role)
        auth = {**sigv4_props(creds["key"], creds["secret"]), "client.session-token": creds["token"]}
    return RestCatalog(f"e-{uuid.uuid4().hex[:6]}", uri=lake["url"], warehouse=lake["wh"], **auth, **delegation)


def test_pyiceberg_with_a_plain_token_and_no_role_scope(lake: dict[str, Any]) -> None:
    token = jwt(lake["idp"], None, SOLO, SOLO_SECRET)
    cat = RestCatalog("solo", uri=lake["url"], warehouse=lake["wh"], token=token, **VENDED)
    assert rows(cat.load_table("eng.seed").scan().to_arrow()) == rows(SEED)
    # ENGINE's token without a role scope: two roles trust it, so none is picked.
    ambiguous = jwt(lake["idp"], None)
    resp = requests.get(
        f"{lake['url']}/v1/{lake['wh']}/namespaces", headers={"Authorization": f"Bearer {ambiguous}"}, timeout=30
    )
    assert resp.status_code == 403, resp.text


@pytest.mark.parametrize("delegation", ["vended", "signing"])
@pytest.mark.parametrize("sign_in", ["jwt", "sts"])
def test_pyiceberg_round_trip_and_refused_write(lake: dict[str, Any], sign_in: str, delegation: str) -> None:
    props = VENDED if delegation == "vended" else SIGNING
    name = f"eng.py_{sign_in}_{delegation}"
    writer = pyiceberg(lake, sign_in, WRITER, props)
    table = writer.create_table(name, SCHEMA)
    written = pa.table({"id": pa.array([7, 8], pa.int64()), "who": [sign_in, delegation]}, schema=SCHEMA)
    table.append(written)
    loaded = writer.load_table(name)
    if delegation == "vended":
        assert loaded.io.properties["s3.access-key-id"] and loaded.io.properties.get("s3.session-token")
    else:
        assert loaded.io.properties["s3.remote-signing-enabled"] == "true"
        assert loaded.io.properties.get("s3.access-key-id") is None
    assert rows(loaded.scan().to_arrow()) == rows(written)
    assert root_rows(lake, name) == rows(written)

    reader = pyiceberg(lake, sign_in, READER, props)
    denied = COMMIT_DENIED if delegation == "vended" else SIGN_DENIED
    assert rows(reader.load_table(name).scan().to_arrow()) == rows(written)
    # Vended: the files go up, the commit that would add them is refused; signing: the PUT is refused.
    with pytest.raises(ForbiddenError if delegation == "vended" else SignError, match=denied):
        reader.load_table(name).append(pa.table({"id": pa.array([99], pa.int64()), "who": ["reader"]}, schema=SCHEMA))
    assert root_rows(lake, name) == rows(written)
