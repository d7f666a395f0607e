"""S3 Tables create-time tags: CreateTableBucket and CreateTable with `tags`
store them (ListTagsForResource by bucket and table ARN lists them), check them as TagResource
does, need s3tables:TagResource as AWS documents, and a create refused for its tags creates nothing."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.authutil import allow, make_user
from tests.conftest import s3_state
from tests.s3tablesutil import SCHEMA, code, s3tables_client

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

BAD_TAGS = {
    "51 tags": {f"k{i}": "v" for i in range(51)},
    "key of 129": {"k" * 129: "v"},
    "value of 257": {"k": "v" * 257},
    "empty key": {"": "v"},
    "aws: key": {"aws:x": "1"},  # AWS's own prefix (was accepted)
    "control character in key": {"k\x00x": "v"},
    "control character in value": {"k": "v\x07"},
}


@pytest.fixture()
def st(catalog_url: str) -> Any:
    return s3tables_client(catalog_url)


def _bucket(st: Any, **extra: Any) -> tuple[str, str]:
    name = f"tb-{uuid.uuid4().hex[:10]}"
    return name, st.create_table_bucket(name=name, **extra)["arn"]


def _error(exc: Any) -> tuple[str, str]:
    return code(exc), str(exc.value.response["Error"]["Message"])


def test_create_time_tags_are_stored_and_listed(st):
    name, arn = _bucket(st, tags={"team": "data", "cost-center": "42"})
    assert st.list_tags_for_resource(resourceArn=arn)["tags"] == {"team": "data", "cost-center": "42"}
    st.create_namespace(tableBucketARN=arn, namespace=["ns"])
    full = st.create_table(
        tableBucketARN=arn,
        namespace="ns",
        name="t",
        format="ICEBERG",
        metadata={"iceberg": {"schema": SCHEMA}},
        tags={"owner": "ana", "a b": "c+d"},
    )
    staged = st.create_table(tableBucketARN=arn, namespace="ns", name="staged", format="ICEBERG", tags={"x": ""})
    plain = st.create_table(tableBucketARN=arn, namespace="ns", name="plain", format="ICEBERG", tags={})
    assert st.list_tags_for_resource(resourceArn=full["tableARN"])["tags"] == {"owner": "ana", "a b": "c+d"}
    assert st.list_tags_for_resource(resourceArn=staged["tableARN"])["tags"] == {"x": ""}
    assert st.list_tags_for_resource(resourceArn=plain["tableARN"])["tags"] == {}
    # The bucket's tags are its own, and TagResource adds to what the create put.
    assert st.list_tags_for_resource(resourceArn=arn)["tags"] == {"team": "data", "cost-center": "42"}
    st.tag_resource(resourceArn=full["tableARN"], tags={"env": "prod"})
    assert st.list_tags_for_resource(resourceArn=full["tableARN"])["tags"] == {
        "owner": "ana",
        "a b": "c+d",
        "env": "prod",
    }
    # A table created again under a dropped one's name starts with its own tags only.
    st.delete_table(tableBucketARN=arn, namespace="ns", name="t")
    again = st.create_table(tableBucketARN=arn, namespace="ns", name="t", format="ICEBERG", tags={"v": "2"})
    assert st.list_tags_for_resource(resourceArn=again["tableARN"])["tags"] == {"v": "2"}


@pytest.mark.parametrize("bad", list(BAD_TAGS), ids=list(BAD_TAGS))
def test_a_create_refused_for_its_tags_creates_nothing(bad, catalog_url, st, s3, system_bucket):
    raw = s3tables_client(catalog_url, validate=False)  # botocore itself refuses an empty key
    tags = BAD_TAGS[bad]
    _, existing = _bucket(st)
    st.create_namespace(tableBucketARN=existing, namespace=["ns"])
    with pytest.raises(ClientError) as by_tag_resource:
        raw.tag_resource(resourceArn=existing, tags=tags)
    expected = _error(by_tag_resource)
    assert expected[0] == "BadRequestException"
    # A table bucket: no bucket, no warehouse record.
    name = f"tb-{uuid.uuid4().hex[:10]}"
    before = s3_state(s3, only=[system_bucket])
    with pytest.raises(ClientError) as exc:
        raw.create_table_bucket(name=name, tags=tags)
    assert _error(exc) == expected  # as TagResource answers
    assert s3_state(s3, only=[system_bucket]) == before
    assert name not in [b["name"] for b in st.list_table_buckets(prefix="tb-")["tableBuckets"]]
    # A table, with or without metadata: nothing in the bucket changes.
    existing_bucket = existing.rsplit("/", 1)[1]
    before = s3_state(s3, only=[existing_bucket])
    for metadata in ({"metadata": {"iceberg": {"schema": SCHEMA}}}, {}):
        with pytest.raises(ClientError) as exc:
            raw.create_table(tableBucketARN=existing, namespace="ns", name="t", format="ICEBERG", tags=tags, **metadata)
        assert _error(exc) == expected
    assert s3_state(s3, only=[existing_bucket]) == before
    assert st.list_tables(tableBucketARN=existing)["tables"] == []
    with pytest.raises(ClientError) as exc:
        st.get_table(tableBucketARN=existing, namespace="ns", name="t")
    assert code(exc) == "NotFoundException"


def test_create_with_tags_needs_tag_resource(catalog_url, http, st, s3, system_bucket):
    """As AWS documents: tags at create need s3tables:TagResource besides the create permission."""
    creates = ["s3tables:CreateTableBucket", "s3tables:CreateNamespace", "s3tables:CreateTable"]
    reads = ["s3tables:ListTagsForResource", "s3tables:GetTable"]
    _, key, secret = make_user(http, catalog_url, {"p": allow([*creates, *reads], "*")})
    user = s3tables_client(catalog_url, key=key, secret=secret)
    name = f"tb-{uuid.uuid4().hex[:10]}"
    before = s3_state(s3, only=[system_bucket])
    with pytest.raises(ClientError) as exc:
        user.create_table_bucket(name=name, tags={"team": "data"})
    assert code(exc) == "AccessDeniedException" and "TagResource" in _error(exc)[1]
    assert s3_state(s3, only=[system_bucket]) == before
    arn = user.create_table_bucket(name=name)["arn"]  # without tags: the create permission is enough
    user.create_namespace(tableBucketARN=arn, namespace=["ns"])
    before = s3_state(s3, only=[name])
    with pytest.raises(ClientError) as exc:
        user.create_table(tableBucketARN=arn, namespace="ns", name="t", format="ICEBERG", tags={"owner": "ana"})
    assert code(exc) == "AccessDeniedException" and "TagResource" in _error(exc)[1]
    assert s3_state(s3, only=[name]) == before
    made = user.create_table(tableBucketARN=arn, namespace="ns", name="t", format="ICEBERG")
    assert user.list_tags_for_resource(resourceArn=made["tableARN"])["tags"] == {}
    # With TagResource too, both creates keep their tags.
    _, key, secret = make_user(http, catalog_url, {"p": allow([*creates, *reads, "s3tables:TagResource"], "*")})
    tagger = s3tables_client(catalog_url, key=key, secret=secret)
    _, tagged = _bucket(tagger, tags={"team": "data"})
    assert tagger.list_tags_for_resource(resourceArn=tagged)["tags"] == {"team": "data"}
    t2 = tagger.create_table(tableBucketARN=arn, namespace="ns", name="t2", format="ICEBERG", tags={"o": "a"})
    assert tagger.list_tags_for_resource(resourceArn=t2["tableARN"])["tags"] == {"o": "a"}


def test_aws_cli_creates_with_tags(catalog_url, tmp_path):
    """`aws s3tables create-table-bucket/create-table --tags` (AWS CLI v1's shorthand) keep the tags."""
    import subprocess

    from tests.conftest import ROOT
    from tests.s3tablesutil import aws_cli_env

    aws = ROOT / ".venv-awscli" / "bin" / "aws"
    assert aws.exists(), "run `make awscli` (part of `make test`)"
    env = aws_cli_env(tmp_path)
    endpoint = catalog_url.rsplit("/_iceberg", 1)[0] + "/_s3tables"

    def cli(*args: str) -> Any:
        cmd = [str(aws), "s3tables", "--endpoint-url", endpoint, "--output", "json", *args]
        ran = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, (args[0], ran.stderr)
        return json.loads(ran.stdout) if ran.stdout.strip() else None

    name = f"cli-{uuid.uuid4().hex[:8]}"
    arn = cli("create-table-bucket", "--name", name, "--tags", "team=data,env=test")["arn"]
    assert cli("list-tags-for-resource", "--resource-arn", arn)["tags"] == {"team": "data", "env": "test"}
    cli("create-namespace", "--table-bucket-arn", arn, "--namespace", "ns")
    table = cli(
        "create-table", "--table-bucket-arn", arn, "--namespace", "ns", "--name", "t", "--format", "ICEBERG",
        "--tags", "owner=ana",
    )  # fmt: skip
    assert cli("list-tags-for-resource", "--resource-arn", table["tableARN"])["tags"] == {"owner": "ana"}


def test_untag_refuses_awss_own_keys(st):
    _, arn = _bucket(st, tags={"team": "data"})
    with pytest.raises(ClientError) as exc:
        st.untag_resource(resourceArn=arn, tagKeys=["aws:cloudformation:stack-name"])
    assert code(exc) == "BadRequestException"
    assert st.list_tags_for_resource(resourceArn=arn)["tags"] == {"team": "data"}
