"""The deployment template: built by `chalice package` + merge, valid for cfn-lint, shaped as intended."""

from __future__ import annotations

import json
import re
import subprocess
import zipfile

import pytest

from tests.conftest import ROOT

# `chalice package` and cfn-lint as subprocesses: a minute of builds, left to `make test`.
pytestmark = pytest.mark.full


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from infra import build_template

    out = tmp_path_factory.mktemp("infra")
    path = build_template.build(out)
    return json.loads(path.read_text()), path, out / "deployment.zip"


def test_cfn_lint_passes(built):
    _, path, _ = built
    lint = subprocess.run([str(ROOT / ".venv" / "bin" / "cfn-lint"), str(path)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_one_function_per_group_and_every_route_routed(built):
    from chalicelib.apps import ALL, GROUPS, build
    from chalicelib.pipeline import ROUTES

    build(ALL)
    tpl, _, _ = built
    res = tpl["Resources"]
    routed: dict[tuple[str, str], str] = {}
    for group in GROUPS:
        fn = res[f"{group.capitalize()}Function"]["Properties"]
        assert fn["Handler"] == f"chalicelib.handlers.{group}.handler"
        assert fn["ReservedConcurrentExecutions"] == {"Ref": "ReservedConcurrency"}
        assert res[f"{group.capitalize()}LogGroup"]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}
        for event in fn["Events"].values():
            assert event["Type"] == "HttpApi" and event["Properties"]["ApiId"] == {"Ref": "CatalogHttpApi"}
            key = (event["Properties"]["Method"], event["Properties"]["Path"])
            assert key not in routed
            routed[key] = group
    assert routed.pop(("ANY", "$default")) == "config"  # what no route matches: the catalog's own 404
    assert set(routed) == {(r.method, r.path) for r in ROUTES}  # every route, each in exactly one function
    assert res["APIHandler"]["Properties"]["Handler"] == "chalicelib.handlers.all.handler"
    assert res["AllFunctionUrl"]["Properties"]["TargetFunctionArn"] == {"Fn::GetAtt": ["APIHandler", "Arn"]}
    assert "RestAPI" not in res and "DefaultRole" not in res


def test_roles_are_least_privilege_and_no_secret_in_text(built):
    tpl, path, _ = built
    res = tpl["Resources"]
    for name, resource in res.items():
        if resource["Type"] != "AWS::IAM::Role":
            continue
        statements = resource["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        actions = {a for st in statements for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])}
        assert "s3:*" not in actions and "*" not in actions
        assert ("s3:CreateBucket" in actions) == (name in ("WarehousesRole", "AllRole")), name
        for st in statements:
            for r in st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]:
                assert r != "*" and "arn:${AWS::Partition}:s3:::*" not in json.dumps(r), (name, r)
    # Change events: only the dispatcher sends, to the targets the deployer names; writers may
    # only nudge it; every function knows its name.
    sends = {
        name
        for name, r in res.items()
        if r["Type"] == "AWS::IAM::Role"
        and "sqs:SendMessage" in json.dumps(r["Properties"]["Policies"][0]["PolicyDocument"]["Statement"])
    }
    assert sends == {"DispatcherRole"}
    dispatcher = res["DispatcherRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    assert {"Ref": "EventSinkTargets"} in [st["Resource"] for st in dispatcher]
    nudge = json.dumps(res["TablesRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"])
    assert "lambda:InvokeFunction" in nudge and "function:catalog-${Stage}-dispatcher" in nudge
    env = res["TablesFunction"]["Properties"]["Environment"]["Variables"]
    assert env["CATALOG_DISPATCHER_FUNCTION"] == {"Fn::Sub": "catalog-${Stage}-dispatcher"}
    text = path.read_text()
    assert "CATALOG_ROOT_SECRET_KEY" not in text and "CATALOG_ROOT_ACCESS_KEY" not in text
    assert tpl["Parameters"]["RootCredentialsSecretArn"]["AllowedPattern"].startswith("^arn:aws")


def test_data_access_is_scoped_and_never_reaches_the_control_plane(built):
    tpl, _, _ = built
    res = tpl["Resources"]

    def statements(name: str) -> list[dict]:
        return res[name]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]

    def control_plane_denied(name: str) -> bool:
        text = json.dumps([st for st in statements(name) if st["Effect"] == "Deny"])
        return "/.catalog/*" in text and "/*.metadata.json" in text and "s3:PutObject" in text

    assert control_plane_denied("DataAccessRole") and control_plane_denied("DataRole")
    trusted = res["DataAccessRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]["AWS"]
    assert {"TablesRole", "DataRole"} <= {p["Fn::GetAtt"][0] for p in trusted if "Fn::GetAtt" in p}
    for name, resource in res.items():
        if resource["Type"] == "AWS::IAM::Role" and name != "DataAccessRole":
            assumes = any(st.get("Action") == "sts:AssumeRole" for st in statements(name))
            assert assumes == (name in ("TablesRole", "DataRole", "AllRole")), name
            puts_policy = "s3:PutBucketPolicy" in json.dumps(statements(name))
            assert puts_policy == (name in ("WarehousesRole", "AllRole")), name
    env = res["TablesFunction"]["Properties"]["Environment"]["Variables"]
    assert "data-access" in json.dumps(env["CATALOG_DATA_ACCESS_ROLE_ARN"])
    assert "CATALOG_CONTROL_PLANE_PRINCIPALS" in res["WarehousesFunction"]["Properties"]["Environment"]["Variables"]


def test_package_is_small_and_has_no_dev_dependencies(built):
    _, _, zip_path = built
    assert zip_path.stat().st_size < 50 * 1024 * 1024
    names = zipfile.ZipFile(zip_path).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    for dev in ("pytest", "_pytest", "pyspark", "pyarrow", "moto", "localstack", "ruff", "tests", "cfnlint"):
        assert dev not in tops, dev
    assert "chalicelib/handlers/tables.py" in names and "pyiceberg" in tops


def test_deployment_cannot_be_turned_against_the_account():
    from infra.build_template import SUB, merge_template

    tpl = merge_template()
    params, res = tpl["Parameters"], tpl["Resources"]
    prefix = params["BucketPrefix"]
    assert "Default" not in prefix  # required: without it the roles would reach every bucket
    pattern = re.compile(prefix["AllowedPattern"])
    assert not pattern.fullmatch("") and not pattern.fullmatch("a") and pattern.fullmatch("acme-lake-")
    assert params["AllowExistingBuckets"]["Default"] == "false"
    for name, resource in res.items():
        if resource.get("Type") != "AWS::IAM::Role":
            continue
        for st in resource["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]:
            actions = [st["Action"]] if isinstance(st["Action"], str) else st["Action"]
            targets = [r[SUB] for r in st["Resource"] if isinstance(r, dict) and SUB in r]
            for target in targets:
                assert not target.endswith(":::*") and not target.endswith(":::*/*"), (name, target)
                if "/iam/" not in target:
                    continue
                if name in ("AuthRole", "AllRole", "IamRole"):
                    continue  # the auth function and the IAM face own identities
                if name == "StsRole" and actions == ["s3:PutObject"]:
                    assert target.rsplit("/iam/", 1)[1] == "sessions/*", (name, target)
                    continue  # STS writes session records, and nothing else there
                # Everyone else only reads identity records: no writes to iam/, and nothing else
                # there (no signing key to steal).
                assert actions == ["s3:GetObject"], (name, target, actions)
                readable = ("users/*", "access-keys/*", "tokens/*", "roles/*", "oidc-providers/*", "sessions/*")
                assert target.rsplit("/iam/", 1)[1] in readable, (name, target)
    for fn in ("TablesFunction", "NamespacesFunction", "TransactionsFunction", "ConfigFunction"):
        env = res[fn]["Properties"]["Environment"]["Variables"]
        assert env["CATALOG_ALLOW_EXISTING_BUCKETS"] == {"Ref": "AllowExistingBuckets"}
    sweeper = res["SweeperFunction"]["Properties"]
    assert sweeper["Handler"] == "chalicelib.handlers.sweeper.handler"
    assert [e["Type"] for e in sweeper["Events"].values()] == ["Schedule"]


def test_alarms_dashboard_and_tracing(built):
    """Issue 28: alarms on the catalog's own metrics and each function's errors and throttles,
    notifying an optional SNS topic; a dashboard of every metric docs/operations.md lists; X-Ray
    tracing behind a parameter, with its permission only then."""
    tpl, _, _ = built
    res, params = tpl["Resources"], tpl["Parameters"]
    assert params["AlarmTopicArn"]["Default"] == "" and params["EnableTracing"]["Default"] == "false"
    alarms = {k: v["Properties"] for k, v in res.items() if v["Type"] == "AWS::CloudWatch::Alarm"}
    catalog_metrics = {a.get("MetricName") for a in alarms.values() if a.get("Namespace") == "IcebergCatalog"}
    assert {"CommitStateUnknown", "S3Throttled", "S3Unavailable", "SweeperErrors"} <= catalog_metrics
    rate = alarms["Alarm5xxRate"]["Metrics"]
    assert {m["MetricStat"]["Metric"]["MetricName"] for m in rate if "MetricStat" in m} == {"Errors5xx", "Requests"}
    assert alarms["Alarm5xxRate"]["Threshold"] == {"Ref": "Alarm5xxPercent"}
    functions = [k for k, v in res.items() if v["Type"] == "AWS::Serverless::Function"] + ["APIHandler"]
    lambda_alarms = {
        (a["MetricName"], str(a["Dimensions"][0]["Value"]))
        for a in alarms.values()
        if a.get("Namespace") == "AWS/Lambda"
    }
    for fn in functions:
        name = str((res[fn]["Properties"]).get("FunctionName") or {"Fn::Sub": "catalog-${Stage}-all"})
        assert ("Errors", name) in lambda_alarms and ("Throttles", name) in lambda_alarms, fn
        assert (
            res[fn]["Properties"].get("Tracing") == {"Fn::If": ["WithTracing", "Active", "PassThrough"]}
            or fn == "APIHandler"
        )
    for props in alarms.values():
        assert props["AlarmActions"] == {
            "Fn::If": ["WithAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]
        }
    body = res["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    section = (ROOT / "docs" / "operations.md").read_text().split("## Metrics", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    documented = [name for cell in rows for name in re.findall(r"`(\w+)`", cell)]
    assert len(documented) >= 19
    for metric in documented:
        assert f'"{metric}"' in body, metric
    for name, role in res.items():
        if role["Type"] == "AWS::IAM::Role" and name != "DataAccessRole":  # the functions' roles
            managed = role["Properties"]["ManagedPolicyArns"]
            assert any(isinstance(m, dict) and m.get("Fn::If", [None])[0] == "WithTracing" for m in managed), name


def test_a_build_for_python_3_12_on_arm64_offers_snapstart(tmp_path):
    """A build names its runtime and architecture in the template and carries wheels for them; from
    Python 3.12 on, SnapStart is a parameter, and every function is invoked through the alias that
    SnapStart's published versions sit behind (the HTTP API by SAM, the Function URL by Qualifier)."""
    from infra import build_template

    path = build_template.build(tmp_path, "3.12", "arm64")
    tpl = json.loads(path.read_text())
    lint = subprocess.run([str(ROOT / ".venv" / "bin" / "cfn-lint"), str(path)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    functions = {k: v["Properties"] for k, v in tpl["Resources"].items() if v["Type"] == "AWS::Serverless::Function"}
    assert len(functions) >= 12
    for props in functions.values():
        assert props["Runtime"] == "python3.12" and props["Architectures"] == ["arm64"]
        assert props["AutoPublishAlias"] == "live"
        assert props["SnapStart"] == {"ApplyOn": {"Fn::If": ["WithSnapStart", "PublishedVersions", "None"]}}
    assert tpl["Parameters"]["EnableSnapStart"]["Default"] == "false"
    assert tpl["Resources"]["AllFunctionUrl"]["Properties"]["Qualifier"] == "live"
    with zipfile.ZipFile(tmp_path / "deployment.zip") as z:
        native = [n for n in z.namelist() if n.endswith(".so")]
        compiled = [n for n in z.namelist() if n.endswith(".cpython-312.pyc")]
    assert native and all("cpython-312-aarch64-linux-gnu" in n or "abi3" in n for n in native), native
    assert any(n.startswith("pydantic_core/") for n in native)
    if build_template._interpreter("3.12"):  # bytecode needs that Python's compiler
        assert any(n.startswith("chalicelib/__pycache__/") for n in compiled)


def test_a_build_of_the_same_inputs_is_reused_and_any_change_rebuilds(built, tmp_path, monkeypatch):
    """The `built` fixture's build is kept by the hash of its inputs: the same inputs give its bytes
    without building; a changed source, target or tool gives another key (so it builds)."""
    from infra import build_template

    _, path, zip_path = built
    monkeypatch.setattr(build_template, "_build", lambda *a: pytest.fail("built again"))
    again = build_template.build(tmp_path / "again")
    assert again.read_bytes() == path.read_bytes()
    assert (tmp_path / "again" / "deployment.zip").read_bytes() == zip_path.read_bytes()

    key = build_template.build_key("3.11", "x86_64")
    assert build_template.build_key("3.12", "x86_64") != key != build_template.build_key("3.11", "arm64")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    assert build_template.build_key("3.11", "x86_64") != key
    monkeypatch.undo()
    tree = tmp_path / "tree"
    for name in ("app.py", "chalicelib/core/x.py", "requirements.txt"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text("a = 1\n")
    monkeypatch.setattr(build_template, "ROOT", tree)
    first = build_template.build_key("3.11", "x86_64")
    (tree / "chalicelib" / "__pycache__").mkdir()
    (tree / "chalicelib" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"compiled")
    assert build_template.build_key("3.11", "x86_64") == first  # bytecode is not an input
    (tree / "chalicelib" / "core" / "x.py").write_text("a = 2\n")
    assert build_template.build_key("3.11", "x86_64") != first
    (tree / "chalicelib" / "core" / "x.py").write_text("a = 1\n")
    assert build_template.build_key("3.11", "x86_64") == first
    (tree / "chalicelib" / "core" / "y.py").write_text("")
    assert build_template.build_key("3.11", "x86_64") != first  # a new module too


def test_the_default_build_is_python_3_11_on_x86_64_without_snapstart(built):
    tpl, _, _ = built
    functions = [v["Properties"] for v in tpl["Resources"].values() if v["Type"] == "AWS::Serverless::Function"]
    assert all(p["Runtime"] == "python3.11" and p["Architectures"] == ["x86_64"] for p in functions)
    assert "EnableSnapStart" not in tpl["Parameters"] and all("SnapStart" not in p for p in functions)
