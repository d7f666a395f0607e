"""The query protocol of the IAM and STS faces (chalicelib/awsquery.py) against botocore itself:
requests serialized by botocore's query serializer parse back to the parameters given, answers
rendered parse with botocore's query parser to what was rendered, and a real boto3 client (its
requests answered in-process by a before-send hook) round-trips calls and errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import quote

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError
from botocore.parsers import create_parser
from botocore.serialize import create_serializer
from botocore.utils import percent_encode_sequence

from chalicelib import awsquery
from chalicelib.awsquery import QueryError, parse, render, render_error

WHEN = datetime(2026, 12, 7, 19, 0, tzinfo=UTC)
TRUST = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole"}]})
ROLE_ARN = "arn:aws:iam::123456789012:role/app/reader"


def wire(service: str, operation: str, params: dict) -> str:
    """The body botocore sends for the call (the serializer's dict, form-encoded as AWSRequest does)."""
    op = awsquery.service(service).operation_model(operation)
    return percent_encode_sequence(create_serializer("query").serialize_to_request(params, op)["body"])


def form(**params: str) -> str:
    return percent_encode_sequence(params)


def answer(service: str, operation: str, body: bytes, status: int = 200) -> dict:
    op = awsquery.service(service).operation_model(operation)
    return create_parser("query").parse({"status_code": status, "headers": {}, "body": body}, op.output_shape)


# ---- requests ------------------------------------------------------------------------------------

REQUESTS = [
    (
        "iam",
        "CreateRole",
        {
            "Path": "/app/",
            "RoleName": "reader",
            "AssumeRolePolicyDocument": TRUST,
            "Description": "reads & writes <tables>",
            "MaxSessionDuration": 7200,
            "Tags": [{"Key": "team", "Value": "data"}, {"Key": "cost center", "Value": "4 2+1=é"}],
        },
    ),
    ("iam", "PutRolePolicy", {"RoleName": "reader", "PolicyName": "p", "PolicyDocument": TRUST}),
    (
        "iam",
        "CreateOpenIDConnectProvider",
        {
            "Url": "https://token.actions.githubusercontent.com",
            "ClientIDList": ["sts.amazonaws.com", "catalog"],
            "ThumbprintList": ["a" * 40, "b" * 40],
            "Tags": [{"Key": "k", "Value": "v"}],
        },
    ),
    ("iam", "TagRole", {"RoleName": "reader", "Tags": [{"Key": "a", "Value": ""}, {"Key": "b", "Value": "2"}]}),
    ("iam", "UntagRole", {"RoleName": "reader", "TagKeys": ["a", "b"]}),
    ("iam", "UntagRole", {"RoleName": "reader", "TagKeys": []}),  # botocore sends `TagKeys=`
    ("iam", "UpdateAssumeRolePolicy", {"RoleName": "reader", "PolicyDocument": TRUST}),
    ("iam", "ListRoles", {"PathPrefix": "/app/", "Marker": "m=1&2", "MaxItems": 10}),
    ("iam", "ListRoles", {}),
    ("iam", "CreateUser", {"UserName": "ann", "Path": "/", "Tags": [{"Key": "k", "Value": "v"}]}),
    ("iam", "TagUser", {"UserName": "ann", "Tags": [{"Key": "k", "Value": "v"}]}),
    ("iam", "CreateAccessKey", {"UserName": "ann"}),
    ("iam", "CreateAccessKey", {}),
    (
        "sts",
        "AssumeRoleWithWebIdentity",
        {
            "RoleArn": ROLE_ARN,
            "RoleSessionName": "ci-run",
            "WebIdentityToken": "eyJ.a.b",
            "DurationSeconds": 3600,
            "Policy": TRUST,
        },
    ),
    (
        "sts",
        "AssumeRole",
        {
            "RoleArn": ROLE_ARN,
            "RoleSessionName": "s1",
            "Tags": [{"Key": "project", "Value": "x"}, {"Key": "env", "Value": "dev"}],
            "TransitiveTagKeys": ["project"],
            "DurationSeconds": 900,
            "ExternalId": "ext",
        },
    ),
    ("sts", "GetCallerIdentity", {}),
]


@pytest.mark.parametrize(("service", "operation", "params"), REQUESTS, ids=[f"{s}.{o}" for s, o, _ in REQUESTS])
def test_botocore_requests_parse_to_their_parameters(service, operation, params):
    body = wire(service, operation, params)
    assert parse(service, body) == (operation, params)
    assert parse(service, body.encode()) == (operation, params)


def test_query_string_parameters_count_and_the_body_wins():
    assert parse("sts", "", {"Action": "GetCallerIdentity", "Version": "2011-06-15"}) == ("GetCallerIdentity", {})
    body = "Action=UntagRole&RoleName=body&TagKeys.member.2=b&TagKeys.member.1=a&Unknown=1&TagKeys.member.x=z"
    assert parse("iam", body, {"RoleName": "query"}) == ("UntagRole", {"RoleName": "body", "TagKeys": ["a", "b"]})


def test_timestamps_and_maps_convert_by_shape():
    # No IAM or STS input has a timestamp or a map: the shapes of IAM's answers stand in for them.
    model, errors = awsquery.service("iam"), []
    roles: list[str] = []  # the answer's required members (Path, RoleId...) are missing here: not the point
    params = {
        "Role.RoleName": "r",
        "Role.CreateDate": "2026-12-07T19:00:01.25Z",
        "Role.RoleLastUsed.LastUsedDate": str(int(WHEN.timestamp())),  # epoch seconds are accepted too
    }
    got = awsquery._read(awsquery._tree(params), model.operation_model("GetRole").output_shape, "", roles)
    assert got == {
        "Role": {
            "RoleName": "r",
            "CreateDate": WHEN.replace(second=1, microsecond=250000),
            "RoleLastUsed": {"LastUsedDate": WHEN},
        }
    }
    summary = {
        "SummaryMap.entry.1.key": "Users",
        "SummaryMap.entry.1.value": "3",
        "SummaryMap.entry.2.key": "Roles",
        "SummaryMap.entry.2.value": "0",
    }
    got = awsquery._read(awsquery._tree(summary), model.operation_model("GetAccountSummary").output_shape, "", errors)
    assert got == {"SummaryMap": {"Users": 3, "Roles": 0}} and errors == []
    bad = {"Role.RoleName": "r", "Role.CreateDate": "yesterday"}
    awsquery._read(awsquery._tree(bad), model.operation_model("GetRole").output_shape, "", errors)
    assert (
        "Value 'yesterday' at 'role.createDate' failed to satisfy constraint: Member must be an ISO 8601 timestamp"
        in errors
    )


# ---- bad requests --------------------------------------------------------------------------------


def refused(service: str, body: str) -> QueryError:
    with pytest.raises(QueryError) as caught:
        parse(service, body)
    assert caught.value.status == 400
    return caught.value


def test_an_unknown_or_missing_action_is_refused():
    assert refused("iam", "Action=DeleteEverything&Version=2010-05-08").code == "InvalidAction"
    assert "DeleteEverything" in refused("iam", "Action=DeleteEverything").message
    assert refused("iam", "Version=2010-05-08&RoleName=r").code == "MissingAction"
    assert refused("sts", "").code == "MissingAction"


def test_a_value_that_does_not_convert_names_its_parameter():
    # What botocore would refuse to send is written by hand (the form a CLI or a script may send).
    error = refused("sts", form(Action="AssumeRole", RoleArn=ROLE_ARN, RoleSessionName="s1", DurationSeconds="abc"))
    assert error.code == "ValidationError"
    assert error.message == (
        "1 validation error detected: Value 'abc' at 'durationSeconds' failed to satisfy constraint: "
        "Member must be an integer"
    )


def test_lengths_ranges_patterns_and_required_members_are_enforced_as_aws_words_them():
    body = wire("iam", "CreateRole", {"RoleName": "r" * 65, "AssumeRolePolicyDocument": TRUST})
    assert refused("iam", body).message == (
        f"1 validation error detected: Value '{'r' * 65}' at 'roleName' failed to satisfy constraint: "
        "Member must have length less than or equal to 64"
    )
    body = wire("iam", "CreateRole", {"RoleName": "r" * 64, "AssumeRolePolicyDocument": TRUST})
    assert parse("iam", body)[1]["RoleName"] == "r" * 64

    error = refused("iam", "Action=CreateRole&AssumeRolePolicyDocument=%7B%7D")
    assert error.code == "ValidationError"
    assert error.message == (
        "1 validation error detected: Value null at 'roleName' failed to satisfy constraint: Member must not be null"
    )

    body = form(
        Action="CreateRole",
        RoleName="a/b",
        AssumeRolePolicyDocument=TRUST,
        MaxSessionDuration="60",
        **{"Tags.member.1.Key": "k"},
    )
    assert refused("iam", body).message == (
        "3 validation errors detected: "
        "Value 'a/b' at 'roleName' failed to satisfy constraint: Member must satisfy regular expression pattern: "
        "[\\w+=,.@-]+; "
        "Value '60' at 'maxSessionDuration' failed to satisfy constraint: "
        "Member must have value greater than or equal to 3600; "
        "Value null at 'tags.1.member.value' failed to satisfy constraint: Member must not be null"
    )
    # Tags admit Unicode letters, numbers and separators (Java's \p{L}\p{Z}\p{N}), not '!'.
    ok = wire("iam", "TagRole", {"RoleName": "r", "Tags": [{"Key": "équipe 数据 ２", "Value": "x"}]})
    assert parse("iam", ok)[1]["Tags"][0]["Key"] == "équipe 数据 ２"
    bad = wire("iam", "TagRole", {"RoleName": "r", "Tags": [{"Key": "a!", "Value": "x"}]})
    assert (
        "at 'tags.1.member.key' failed to satisfy constraint: Member must satisfy regular"
        in refused("iam", bad).message
    )
    assert "enum value set: [All, AWS, Local]" in refused("iam", "Action=ListPolicies&Scope=Mine").message
    assert refused("iam", "Action=ListRoles&MaxItems=0").message.endswith("greater than or equal to 1")


def test_a_sensitive_value_is_not_echoed():
    body = form(Action="CreateLoginProfile", UserName="ann", Password="")
    assert "Value at 'password' failed to satisfy constraint" in refused("iam", body).message


# ---- answers -------------------------------------------------------------------------------------

ROLE = {
    "Path": "/app/",
    "RoleName": "reader",
    "RoleId": "AROAEXAMPLEID0000001",
    "Arn": ROLE_ARN,
    "CreateDate": WHEN,
    "Description": "reads & <writes>",
    "MaxSessionDuration": 3600,
    "Tags": [{"Key": "team", "Value": "data"}, {"Key": "empty", "Value": ""}],
    "RoleLastUsed": {"LastUsedDate": datetime(2026, 12, 8, 1, 2, 3, 456000, tzinfo=UTC), "Region": "us-east-1"},
}
CREDENTIALS = {
    "AccessKeyId": "ASIAEXAMPLE000000001",
    "SecretAccessKey": "secret/+=",
    "SessionToken": "token",
    "Expiration": WHEN,
}
PROVIDER = "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com"
ACCESS_KEY = {"UserName": "ann", "AccessKeyId": "AKIAEXAMPLE000000001", "Status": "Active", "CreateDate": WHEN}
ANSWERS = [
    ("iam", "CreateRole", {"Role": ROLE}),
    ("iam", "GetRole", {"Role": {k: v for k, v in ROLE.items() if k != "Tags"}}),
    ("iam", "ListRoles", {"Roles": [ROLE, {**ROLE, "RoleName": "b", "Tags": []}], "IsTruncated": True, "Marker": "m2"}),
    ("iam", "ListRoles", {"Roles": [], "IsTruncated": False}),
    (
        "sts",
        "AssumeRoleWithWebIdentity",
        {
            "Credentials": CREDENTIALS,
            "SubjectFromWebIdentityToken": "repo:o/r:ref:refs/heads/main",
            "AssumedRoleUser": {"AssumedRoleId": "AROAEXAMPLEID0000001:ci-run", "Arn": ROLE_ARN + "/ci-run"},
            "PackedPolicySize": 6,
            "Provider": "token.actions.githubusercontent.com",
            "Audience": "sts.amazonaws.com",
            "SourceIdentity": "ci",
        },
    ),
    (
        "sts",
        "GetCallerIdentity",
        {"UserId": "AIDA1", "Account": "123456789012", "Arn": "arn:aws:iam::123456789012:user/ann"},
    ),
    (
        "iam",
        "GetOpenIDConnectProvider",
        {
            "Url": "token.actions.githubusercontent.com",
            "ClientIDList": ["sts.amazonaws.com"],
            "ThumbprintList": ["a" * 40, "b" * 40],
            "CreateDate": WHEN,
            "Tags": [{"Key": "k", "Value": "v"}],
        },
    ),
    ("iam", "ListOpenIDConnectProviders", {"OpenIDConnectProviderList": [{"Arn": PROVIDER}, {"Arn": PROVIDER + "2"}]}),
    ("iam", "CreateAccessKey", {"AccessKey": {**ACCESS_KEY, "SecretAccessKey": "s3cr3t"}}),
    ("iam", "ListAccessKeys", {"AccessKeyMetadata": [ACCESS_KEY], "IsTruncated": False}),
    (
        "iam",
        "GetUser",
        {
            "User": {
                "Path": "/",
                "UserName": "ann",
                "UserId": "AIDA1",
                "Arn": "arn:aws:iam::1:user/ann",
                "CreateDate": WHEN,
            }
        },
    ),
    ("iam", "ListRolePolicies", {"PolicyNames": ["p1", "p2"], "IsTruncated": True, "Marker": "x"}),
    ("iam", "GetAccountSummary", {"SummaryMap": {"Users": 3, "Roles": 0}}),
]


@pytest.mark.parametrize(("service", "operation", "result"), ANSWERS, ids=[f"{s}.{o}" for s, o, _ in ANSWERS])
def test_rendered_answers_parse_with_botocore_to_what_was_rendered(service, operation, result):
    parsed = answer(service, operation, render(service, operation, result, "rid-1"))
    assert parsed.pop("ResponseMetadata")["RequestId"] == "rid-1"
    assert parsed == result


def test_an_answer_carries_the_services_namespace_and_the_models_member_order():
    body = render("iam", "CreateRole", {"Role": {"Arn": ROLE_ARN, "RoleName": "r", "Junk": 1, "Path": None}}, "rid")
    assert body == (
        b'<CreateRoleResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/"><CreateRoleResult><Role>'
        b"<RoleName>r</RoleName><Arn>arn:aws:iam::123456789012:role/app/reader</Arn></Role></CreateRoleResult>"
        b"<ResponseMetadata><RequestId>rid</RequestId></ResponseMetadata></CreateRoleResponse>"
    )
    sts = render("sts", "GetCallerIdentity", {"Account": "1"}, "r")
    assert sts.startswith(b'<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">')
    assert b"<CreateDate>2026-12-07T19:00:00Z</CreateDate>" in render("iam", "GetUser", {"User": ACCESS_KEY}, "r")


def test_an_operation_without_output_answers_its_request_id_only():
    body = render("iam", "TagRole", {}, "rid-2")
    assert body == (
        b'<TagRoleResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/">'
        b"<ResponseMetadata><RequestId>rid-2</RequestId></ResponseMetadata></TagRoleResponse>"
    )
    assert answer("iam", "TagRole", body)["ResponseMetadata"]["RequestId"] == "rid-2"


def test_timestamps_render_from_naive_and_other_zones_and_strings():
    def created(value) -> str:
        return render("iam", "GetUser", {"User": {"CreateDate": value}}, "r").split(b"CreateDate>")[1][:-2].decode()

    assert created(datetime(2026, 12, 7, 19)) == "2026-12-07T19:00:00Z"
    assert created(datetime.fromisoformat("2026-12-07T20:00:00+01:00")) == "2026-12-07T19:00:00Z"
    assert created("2026-12-07T19:00:00Z") == "2026-12-07T19:00:00Z"
    assert created(datetime(2026, 12, 7, 19, 0, 0, 5000)) == "2026-12-07T19:00:00.005000Z"


def test_a_policy_document_is_answered_url_encoded():
    # IAM answers policy documents URL-encoded (shape policyDocumentType): botocore's parser gives the
    # encoded string; a botocore client's after-call handler (json_decode_policies) then decodes it
    # into a dict (see test_a_boto3_client_round_trips_iam below).
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "a b+c%"}]}
    for given in (json.dumps(policy), policy):
        result = {"RoleName": "r", "PolicyName": "p", "PolicyDocument": given}
        parsed = answer("iam", "GetRolePolicy", render("iam", "GetRolePolicy", result, "r"))
        assert parsed["PolicyDocument"] == quote(json.dumps(policy), safe="")
        assert "+" not in parsed["PolicyDocument"]  # botocore unquotes without unquote_plus


@pytest.mark.parametrize(("status", "sender"), [(404, True), (400, True), (503, False)])
def test_an_error_parses_with_botocore_to_its_code_and_message(status, sender):
    body = render_error("iam", "NoSuchEntity", "The role with name x cannot be found & <so>.", "rid-3", sender)
    parsed = answer("iam", "GetRole", body, status)
    assert parsed["Error"] == {
        "Type": "Sender" if sender else "Receiver",
        "Code": "NoSuchEntity",
        "Message": "The role with name x cannot be found & <so>.",
    }
    assert parsed["ResponseMetadata"]["RequestId"] == "rid-3"
    error = ClientError(parsed, "GetRole")
    assert error.response["Error"]["Code"] == "NoSuchEntity"
    assert "(NoSuchEntity) when calling the GetRole operation: The role with name x" in str(error)
    assert render_error("sts", "X", "m", "r").startswith(
        b'<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
    )


# ---- a real boto3 client, answered in-process ----------------------------------------------------


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_):
        yield self.body


class FakeIam:
    """A few IAM and STS operations over a dict, behind a before-send hook: what a face does."""

    def __init__(self) -> None:
        self.roles: dict[str, dict] = {}
        self.seen: list[tuple[str, dict]] = []

    def __call__(self, request, **_) -> AWSResponse:
        service = "sts" if "/_sts" in request.url else "iam"
        try:
            operation, params = parse(service, request.body or b"")
            self.seen.append((operation, params))
            status, body = 200, render(service, operation, getattr(self, operation)(params), "rid")
        except QueryError as e:
            status, body = e.status, render_error(service, e.code, e.message, "rid")
        return AWSResponse(request.url, status, {"Content-Type": "text/xml"}, _Raw(body))

    def CreateRole(self, p):
        role = {**p, "Arn": f"arn:aws:iam::123456789012:role{p.get('Path', '/')}{p['RoleName']}"}
        self.roles[p["RoleName"]] = role = {**role, "RoleId": "AROA" + "0" * 16, "CreateDate": WHEN}
        return {"Role": role}

    def GetRole(self, p):
        if p["RoleName"] not in self.roles:
            raise QueryError("NoSuchEntity", f"The role with name {p['RoleName']} cannot be found.", 404)
        return {"Role": self.roles[p["RoleName"]]}

    def ListRoles(self, p):
        names = sorted(self.roles)[: p.get("MaxItems", 100)]
        return {"Roles": [self.roles[n] for n in names], "IsTruncated": len(names) < len(self.roles), "Marker": "n"}

    def AssumeRoleWithWebIdentity(self, p):
        return {
            "Credentials": CREDENTIALS,
            "AssumedRoleUser": {"AssumedRoleId": "AROA:" + p["RoleSessionName"], "Arn": p["RoleArn"]},
            "Audience": "sts.amazonaws.com",
        }

    def GetCallerIdentity(self, p):
        return {"UserId": "AIDA1", "Account": "123456789012", "Arn": "arn:aws:iam::123456789012:user/ann"}


def client(service: str, fake: FakeIam):
    made = boto3.client(
        service,
        endpoint_url=f"http://x/_{service}",
        region_name="us-east-1",
        aws_access_key_id="a",
        aws_secret_access_key="b",
    )
    made.meta.events.register(f"before-send.{service}", fake)
    return made


def test_a_boto3_client_round_trips_iam():
    fake, policy = FakeIam(), json.loads(TRUST)
    iam = client("iam", fake)
    made = iam.create_role(
        RoleName="reader", AssumeRolePolicyDocument=TRUST, Tags=[{"Key": "t", "Value": "v"}], MaxSessionDuration=7200
    )
    assert fake.seen[-1] == (
        "CreateRole",
        {
            "RoleName": "reader",
            "AssumeRolePolicyDocument": TRUST,
            "Tags": [{"Key": "t", "Value": "v"}],
            "MaxSessionDuration": 7200,
        },
    )
    assert made["Role"]["Arn"] == "arn:aws:iam::123456789012:role/reader"
    assert made["Role"]["CreateDate"] == WHEN and made["Role"]["Tags"] == [{"Key": "t", "Value": "v"}]
    assert made["Role"]["AssumeRolePolicyDocument"] == policy  # decoded by botocore's json_decode_policies
    assert made["ResponseMetadata"]["RequestId"] == "rid" and made["ResponseMetadata"]["HTTPStatusCode"] == 200

    assert iam.get_role(RoleName="reader")["Role"]["MaxSessionDuration"] == 7200
    iam.create_role(RoleName="writer", Path="/app/", AssumeRolePolicyDocument=TRUST)
    listed = iam.list_roles(MaxItems=1)
    assert [r["RoleName"] for r in listed["Roles"]] == ["reader"] and listed["IsTruncated"] and listed["Marker"] == "n"

    with pytest.raises(ClientError) as caught:
        iam.get_role(RoleName="nobody")
    assert caught.value.response["Error"]["Code"] == "NoSuchEntity"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert iam.exceptions.NoSuchEntityException is type(caught.value)  # the modeled error class

    with pytest.raises(ClientError) as caught:  # the client does not check lengths: the face does
        iam.get_role(RoleName="r" * 65)
    assert caught.value.response["Error"]["Code"] == "ValidationError"
    assert "Member must have length less than or equal to 64" in caught.value.response["Error"]["Message"]


def test_a_boto3_client_round_trips_sts():
    fake = FakeIam()
    sts = client("sts", fake)
    got = sts.assume_role_with_web_identity(
        RoleArn=ROLE_ARN, RoleSessionName="ci", WebIdentityToken="eyJ.a.b", DurationSeconds=3600
    )
    assert fake.seen[-1][1]["DurationSeconds"] == 3600
    assert got["Credentials"] == CREDENTIALS and got["Credentials"]["Expiration"] == WHEN
    assert got["AssumedRoleUser"] == {"AssumedRoleId": "AROA:ci", "Arn": ROLE_ARN}
    assert sts.get_caller_identity()["Account"] == "123456789012"
    with pytest.raises(ClientError) as caught:  # botocore checks no maximum: the face does
        sts.assume_role_with_web_identity(
            RoleArn=ROLE_ARN, RoleSessionName="ci", WebIdentityToken="eyJ.t", DurationSeconds=43201
        )
    assert caught.value.response["Error"]["Code"] == "ValidationError"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert (
        "at 'durationSeconds' failed to satisfy constraint: Member must have value less than or equal to 43200"
        in str(caught.value)
    )
