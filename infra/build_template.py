"""Build the deployment: `chalice package` with a merged template, then drop Chalice's REST API.

    AWS_DEFAULT_REGION=us-east-1 .venv/bin/python infra/build_template.py [out_dir] [--python 3.12] [--arch arm64]

The Python version and the architecture are the package's (its native wheels are built for them),
so they are build options, not template parameters; memory, and SnapStart (Python 3.12 and later),
are parameters.

Result (out_dir/template.json + deployment.zip): one Lambda function per route group behind one
HTTP API (payload 2.0), an optional all-in-one function with a Function URL, the system bucket,
one least-privilege role per function, log groups with retention, and parameters for stage,
memory, timeout, reserved concurrency and the root-credentials secret (never its value).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SUB = "Fn::Sub"
# What each group's function may do in S3 (ARN templates; ${BucketPrefix}* = the warehouse buckets).
SYSTEM = "arn:${AWS::Partition}:s3:::${SystemBucketName}"
WAREHOUSES = "arn:${AWS::Partition}:s3:::${BucketPrefix}*"
OBJECT_RW = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
# Identities are read by every function (authentication) and written only by the auth function.
IAM_READ = (
    ["s3:GetObject"],
    [
        SYSTEM + "/iam/users/*",
        SYSTEM + "/iam/access-keys/*",
        SYSTEM + "/iam/tokens/*",
        SYSTEM + "/iam/roles/*",
        SYSTEM + "/iam/oidc-providers/*",
        SYSTEM + "/iam/sessions/*",
    ],
)
# An identity provider's token that names no role is matched against every role (auth/federation.py).
IAM_LIST = (["s3:ListBucket"], [SYSTEM])
IDEMPOTENCY = (OBJECT_RW, [SYSTEM + "/idempotency/*"])
# The system audit trail (core/primitives/audit.py): warehouse and identity changes journal there.
SYSTEM_AUDIT = (["s3:GetObject", "s3:PutObject"], [SYSTEM + "/audit/*"])
S3_ACCESS: dict[str, list[tuple[list[str], list[str]]]] = {
    "config": [IAM_READ, IAM_LIST, (["s3:GetObject"], [SYSTEM + "/warehouses/*"])],
    # The IAM face writes identities (users, keys, roles, providers) as the admin API does.
    "iam": [(OBJECT_RW, [SYSTEM + "/iam/*"]), SYSTEM_AUDIT, (["s3:ListBucket"], [SYSTEM])],
    # STS writes a session record per set of temporary credentials, and reads roles and providers.
    "sts": [IAM_READ, IAM_LIST, (["s3:PutObject"], [SYSTEM + "/iam/sessions/*"])],
    "auth": [
        (OBJECT_RW, [SYSTEM + "/iam/*", SYSTEM + "/idempotency/*"]),
        SYSTEM_AUDIT,
        (["s3:GetObject"], [SYSTEM + "/warehouses/*"]),
        (["s3:ListBucket"], [SYSTEM]),
    ],
    "warehouses": [
        IAM_READ,
        IDEMPOTENCY,
        SYSTEM_AUDIT,
        (OBJECT_RW, [SYSTEM + "/warehouses/*", WAREHOUSES + "/*"]),
        (["s3:ListBucket"], [SYSTEM, WAREHOUSES]),
        (["s3:CreateBucket", "s3:DeleteBucket"], [WAREHOUSES, SYSTEM]),  # the only group that creates buckets
        (["s3:PutBucketPolicy"], [WAREHOUSES]),  # the control-plane protection of each new warehouse
    ],
    # The signer signs clients' table reads and writes with this role (the catalog checks each one);
    # its policy also denies the control plane, like the data access role's.
    "data": [
        IAM_READ,
        IAM_LIST,
        (
            [
                "s3:GetObject",
                "s3:PutObject",
                "s3:DeleteObject",
                "s3:AbortMultipartUpload",
                "s3:ListMultipartUploadParts",
            ],
            [WAREHOUSES + "/*"],
        ),
        (["s3:ListBucket"], [WAREHOUSES]),
    ],
    "sweeper": [
        (["s3:GetObject"], [SYSTEM + "/warehouses/*", SYSTEM + "/iam/users/*"]),
        SYSTEM_AUDIT,
        (OBJECT_RW, [WAREHOUSES + "/*"]),
        (["s3:ListBucket"], [SYSTEM, WAREHOUSES]),
    ],
    "console": [],  # a static page: no S3 at all
    "dispatcher": [
        (["s3:GetObject"], [SYSTEM + "/warehouses/*"]),
        (OBJECT_RW, [WAREHOUSES + "/*"]),
        (["s3:ListBucket"], [SYSTEM, WAREHOUSES]),
    ],
}
# What the dispatcher may do to the sinks' queues, topics and buses (which: parameter EventSinkTargets).
SINK_ACTIONS = ["sqs:SendMessage", "sns:Publish", "events:PutEvents"]
# Functions that change things nudge the dispatcher (chalicelib/nudge.py).
NUDGE = (
    ["lambda:InvokeFunction"],
    ["arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:catalog-${Stage}-dispatcher"],
)
NUDGERS = ("warehouses", "namespaces", "tables", "transactions", "glue", "s3tables", "events")
DEFAULT_ACCESS = [
    IAM_READ,
    IAM_LIST,
    IDEMPOTENCY,
    (OBJECT_RW, [WAREHOUSES + "/*"]),
    (["s3:GetObject"], [SYSTEM + "/warehouses/*"]),
    (["s3:ListBucket"], [WAREHOUSES]),
]


# Groups that vend credentials (STS AssumeRole of the data access role, named so no cycle forms).
VENDING = ("tables", "data")
DATA_ACCESS_ROLE = "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/catalog-${Stage}-data-access"
# The catalog's own roles (CloudFormation names them "<stack>-<LogicalId>-<suffix>"): the only
# principals a warehouse bucket policy lets write pointers and metadata files.
CATALOG_ROLES = "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/${AWS::StackName}-*"
NO_CONTROL_PLANE = {
    "Effect": "Deny",
    "Action": ["s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"],
    "Resource": [{SUB: WAREHOUSES + "/.catalog/*"}, {SUB: WAREHOUSES + "/*.metadata.json"}],
}


def _data_access_role() -> dict[str, Any]:
    """What vended credentials can ever reach (each session narrows it to one table's prefix)."""
    from chalicelib.core.access.data_access import role_policy

    def sub(value: Any) -> Any:
        if isinstance(value, str) and value.startswith("arn:aws:s3:::"):
            return {SUB: value.replace("arn:aws:s3:::", "arn:${AWS::Partition}:s3:::")}
        if isinstance(value, list):
            return [sub(v) for v in value]
        if isinstance(value, dict):
            return {k: sub(v) for k, v in value.items()}
        return value

    trusted = [{"Fn::GetAtt": [f"{_cap(g)}Role", "Arn"]} for g in VENDING]
    trusted.append({"Fn::If": ["WithFunctionUrl", {"Fn::GetAtt": ["AllRole", "Arn"]}, {"Ref": "AWS::NoValue"}]})
    return {
        "Type": "AWS::IAM::Role",
        "Properties": {
            "RoleName": {SUB: "catalog-${Stage}-data-access"},
            "AssumeRolePolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Principal": {"AWS": trusted}, "Action": "sts:AssumeRole"}],
            },
            "MaxSessionDuration": 43200,
            "Policies": [{"PolicyName": "table-data", "PolicyDocument": sub(role_policy("${BucketPrefix}*"))}],
        },
    }


def _cap(group: str) -> str:
    return "".join(p.capitalize() for p in group.split("_"))


def _scheduled(name: str, statements: list[Any], timeout: int, schedule: str) -> dict[str, Any]:
    """A function with no route that runs on a schedule (its role, log group and function)."""
    cap = name.capitalize()
    props = _function_props(name, f"chalicelib.handlers.{name}.handler")
    props["Timeout"] = timeout
    props.pop("ReservedConcurrentExecutions")
    props["Events"] = {"Schedule": {"Type": "Schedule", "Properties": {"Schedule": schedule}}}
    return {
        f"{cap}Role": _role(statements),
        f"{cap}LogGroup": {
            "Type": "AWS::Logs::LogGroup",
            "Properties": {
                "LogGroupName": {SUB: f"/aws/lambda/catalog-${{Stage}}-{name}"},
                "RetentionInDays": {"Ref": "LogRetentionDays"},
            },
        },
        f"{cap}Function": {"Type": "AWS::Serverless::Function", "Properties": props},
    }


def _role(statements: list[tuple[list[str], list[str]]], vends: bool = False) -> dict[str, Any]:
    policy: list[dict[str, Any]] = [
        {"Effect": "Allow", "Action": acts, "Resource": [{SUB: r} for r in res]} for acts, res in statements
    ]
    if vends:
        policy.append({"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": {SUB: DATA_ACCESS_ROLE}})
    policy.append(
        {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": {"Ref": "RootCredentialsSecretArn"}}
    )
    return {
        "Type": "AWS::IAM::Role",
        "Properties": {
            "AssumeRolePolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
                ],
            },
            "ManagedPolicyArns": [
                {SUB: "arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"},
                TRACING_POLICY,
            ],
            "Policies": [
                {"PolicyName": "catalog-s3", "PolicyDocument": {"Version": "2012-10-17", "Statement": policy}}
            ],
        },
    }


# X-Ray (parameter EnableTracing): active tracing of every function, and AWS's managed write policy
# (X-Ray's actions take no resource, so it stays out of the S3 policies, which never name "*").
TRACING_POLICY = {
    "Fn::If": [
        "WithTracing",
        {SUB: "arn:${AWS::Partition}:iam::aws:policy/AWSXRayDaemonWriteAccess"},
        {"Ref": "AWS::NoValue"},
    ]
}


def _function_props(group: str, handler: str) -> dict[str, Any]:
    return {
        "FunctionName": {SUB: f"catalog-${{Stage}}-{group}"},
        "CodeUri": "./deployment.zip",
        "Handler": handler,
        "Runtime": "python3.11",
        "MemorySize": {"Ref": "MemorySize"},
        "Timeout": {"Ref": "Timeout"},
        "ReservedConcurrentExecutions": {"Ref": "ReservedConcurrency"},
        "Role": {"Fn::GetAtt": [f"{_cap(group)}Role", "Arn"]},
        "LoggingConfig": {"LogGroup": {"Ref": f"{_cap(group)}LogGroup"}},
        "Tracing": {"Fn::If": ["WithTracing", "Active", "PassThrough"]},
        "Environment": {
            "Variables": {
                "CATALOG_SYSTEM_BUCKET": {"Ref": "SystemBucketName"},
                "CATALOG_BUCKET_PREFIX": {"Ref": "BucketPrefix"},
                "CATALOG_ROOT_CREDENTIALS_SECRET": {"Ref": "RootCredentialsSecretArn"},
                "CATALOG_ALLOW_EXISTING_BUCKETS": {"Ref": "AllowExistingBuckets"},
                "CATALOG_DATA_ACCESS_ROLE_ARN": {SUB: DATA_ACCESS_ROLE},
                "CATALOG_CONTROL_PLANE_PRINCIPALS": {SUB: CATALOG_ROLES},
                "CATALOG_DISPATCHER_FUNCTION": {SUB: "catalog-${Stage}-dispatcher"},
                "CATALOG_ACCOUNT_ID": {"Ref": "AWS::AccountId"},
                # AWS_IAM: AWS checks callers' signatures and names them in the event (auth/front_door.py).
                "CATALOG_FRONT_DOOR": {"Fn::If": ["WithIamFrontDoor", "aws_iam", ""]},
                # The browser's sign-in through an OpenID Connect provider (docs/identity.md).
                "CATALOG_CONSOLE_OIDC_ISSUER": {"Ref": "ConsoleOidcIssuer"},
                "CATALOG_CONSOLE_OIDC_CLIENT_ID": {"Ref": "ConsoleOidcClientId"},
            }
        },
    }


def merge_template() -> dict[str, Any]:
    from chalicelib.apps import ALL, GROUPS, build
    from chalicelib.pipeline import ROUTES

    build(ALL)
    res: dict[str, Any] = {
        "SystemBucket": {
            "Type": "AWS::S3::Bucket",
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
            "Properties": {
                "BucketName": {"Ref": "SystemBucketName"},
                "PublicAccessBlockConfiguration": {
                    k: True
                    for k in ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets")
                },
                "BucketEncryption": {
                    "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
                },
                "LifecycleConfiguration": {  # expired bearer tokens and idempotency records
                    "Rules": [
                        {"Id": "tokens", "Status": "Enabled", "Prefix": "iam/tokens/", "ExpirationInDays": 2},
                        {"Id": "sessions", "Status": "Enabled", "Prefix": "iam/sessions/", "ExpirationInDays": 2},
                        {"Id": "idempotency", "Status": "Enabled", "Prefix": "idempotency/", "ExpirationInDays": 2},
                    ]
                },
            },
        },
        "CatalogHttpApi": {"Type": "AWS::Serverless::HttpApi", "Properties": {}},
    }
    for group in GROUPS:
        cap = _cap(group)
        statements = [*S3_ACCESS.get(group, DEFAULT_ACCESS), *([NUDGE] if group in NUDGERS else [])]
        res[f"{cap}Role"] = _role(statements, vends=group in VENDING)
        if group == "data":
            res[f"{cap}Role"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"].append(NO_CONTROL_PLANE)
        res[f"{cap}LogGroup"] = {
            "Type": "AWS::Logs::LogGroup",
            "Properties": {
                "LogGroupName": {SUB: f"/aws/lambda/catalog-${{Stage}}-{group}"},
                "RetentionInDays": {"Ref": "LogRetentionDays"},
            },
        }
        props = _function_props(group, f"chalicelib.handlers.{group}.handler")
        props["Events"] = {
            f"R{i}": {
                "Type": "HttpApi",
                "Properties": {"ApiId": {"Ref": "CatalogHttpApi"}, "Method": r.method, "Path": r.path},
            }
            for i, r in enumerate(r for r in ROUTES if r.group == group or r.group in GROUPS[group])
        }
        if group == "config":  # the lightest function answers what no route matches, in the face's shape
            props["Events"]["Fallback"] = {
                "Type": "HttpApi",
                "Properties": {"ApiId": {"Ref": "CatalogHttpApi"}, "Method": "ANY", "Path": "$default"},
            }
        res[f"{cap}Function"] = {"Type": "AWS::Serverless::Function", "Properties": props}
    # The sweeper: finishes abandoned drops, renames, claims and purges on a schedule.
    res.update(_scheduled("sweeper", S3_ACCESS["sweeper"], 300, "rate(5 minutes)"))
    # The change-event dispatcher: every minute, sends each sink what it has not been sent yet.
    res.update(_scheduled("dispatcher", S3_ACCESS["dispatcher"], 60, "rate(1 minute)"))
    statements = res["DispatcherRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    statements.append({"Effect": "Allow", "Action": SINK_ACTIONS, "Resource": {"Ref": "EventSinkTargets"}})
    # The all-in-one function (Chalice's own APIHandler, repointed) behind a Function URL.
    everything = [*(st for g in GROUPS for st in S3_ACCESS.get(g, DEFAULT_ACCESS)), NUDGE]
    res["AllRole"] = dict(_role(everything, vends=True), Condition="WithFunctionUrl")
    res["DataAccessRole"] = _data_access_role()
    res["AllLogGroup"] = {
        "Type": "AWS::Logs::LogGroup",
        "Condition": "WithFunctionUrl",
        "Properties": {
            "LogGroupName": {SUB: "/aws/lambda/catalog-${Stage}-all"},
            "RetentionInDays": {"Ref": "LogRetentionDays"},
        },
    }
    res["APIHandler"] = {
        "Condition": "WithFunctionUrl",
        "Properties": _function_props("all", "chalicelib.handlers.all.handler"),
    }
    res["AllFunctionUrl"] = {
        "Type": "AWS::Lambda::Url",
        "Condition": "WithFunctionUrl",
        "Properties": {
            "TargetFunctionArn": {"Fn::GetAtt": ["APIHandler", "Arn"]},
            "AuthType": {"Ref": "FunctionUrlAuthType"},
        },
    }  # NONE: every request is SigV4- or token-checked by the catalog; AWS_IAM: by AWS, in front
    res["AllFunctionUrlPermission"] = {
        "Type": "AWS::Lambda::Permission",
        "Condition": "WithFunctionUrl",
        "Properties": {
            "Action": "lambda:InvokeFunctionUrl",
            "FunctionName": {"Ref": "APIHandler"},
            # AWS_IAM: only this account's principals (allowed by their own IAM policies) get through.
            "Principal": {"Fn::If": ["WithIamFrontDoor", {"Ref": "AWS::AccountId"}, "*"]},
            "FunctionUrlAuthType": {"Ref": "FunctionUrlAuthType"},
        },
    }
    res.update(observability(["sweeper", "dispatcher", *GROUPS]))
    return {
        "Parameters": {
            "Stage": {"Type": "String", "Default": "prod", "AllowedPattern": "^[a-z0-9-]{1,20}$"},
            "SystemBucketName": {"Type": "String", "AllowedPattern": "^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$"},
            "BucketPrefix": {
                "Type": "String",
                "AllowedPattern": "^[a-z0-9][a-z0-9-]{2,19}$",
                "Description": "prefix of warehouse bucket names, required: the roles reach only buckets "
                "named with it, never every bucket of the account",
            },
            "EventSinkTargets": {
                "Type": "CommaDelimitedList",
                "Default": "*",
                "Description": "the SQS queues, SNS topics and EventBridge buses (ARNs, wildcards allowed) "
                "the change-event dispatcher may send to; '*' lets any sink a warehouse admin creates work",
            },
            "AllowExistingBuckets": {
                "Type": "String",
                "Default": "false",
                "AllowedValues": ["true", "false"],
                "Description": "let CreateWarehouse adopt a bucket the catalog did not create",
            },
            "RootCredentialsSecretArn": {
                "Type": "String",
                "AllowedPattern": "^arn:aws[a-z-]*:secretsmanager:.+$",
                "Description": "Secrets Manager secret with access_key_id/secret_access_key",
            },
            "MemorySize": {"Type": "Number", "Default": 1024, "MinValue": 128, "MaxValue": 10240},
            "Timeout": {"Type": "Number", "Default": 30, "MinValue": 3, "MaxValue": 900},
            "ReservedConcurrency": {"Type": "Number", "Default": 50, "MinValue": 1},
            "LogRetentionDays": {
                "Type": "Number",
                "Default": 30,
                "AllowedValues": [1, 3, 5, 7, 14, 30, 60, 90, 180, 365],
            },
            "EnableFunctionUrl": {"Type": "String", "Default": "true", "AllowedValues": ["true", "false"]},
            "ConsoleOidcIssuer": {
                "Type": "String",
                "Default": "",
                "AllowedPattern": "^(https://[\\x21-\\x7e]{1,250})?$",
                "Description": "the browser signs in through this OpenID Connect provider (its issuer URL)",
            },
            "ConsoleOidcClientId": {
                "Type": "String",
                "Default": "",
                "Description": "the browser's public client id at that provider (authorization code with PKCE)",
            },
            "FunctionUrlAuthType": {
                "Type": "String",
                "Default": "NONE",
                "AllowedValues": ["NONE", "AWS_IAM"],
                "Description": "AWS_IAM: AWS verifies each caller (lambda:InvokeFunctionUrl) and the caller acts as "
                "the catalog role whose trust policy names its IAM role or user",
            },
            "AlarmTopicArn": {
                "Type": "String",
                "Default": "",
                "AllowedPattern": "^(arn:aws[a-z-]*:sns:.+)?$",
                "Description": "SNS topic the alarms notify (empty: alarms without notification)",
            },
            "EnableTracing": {
                "Type": "String",
                "Default": "false",
                "AllowedValues": ["true", "false"],
                "Description": "X-Ray active tracing of every function",
            },
            "Alarm5xxPercent": {
                "Type": "Number",
                "Default": 1,
                "MinValue": 0,
                "Description": "alarm when more than this share of requests answer 5xx over 5 minutes",
            },
        },
        "Conditions": {
            "WithFunctionUrl": {"Fn::Equals": [{"Ref": "EnableFunctionUrl"}, "true"]},
            "WithIamFrontDoor": {"Fn::Equals": [{"Ref": "FunctionUrlAuthType"}, "AWS_IAM"]},
            "WithAlarmTopic": {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}]},
            "WithTracing": {"Fn::Equals": [{"Ref": "EnableTracing"}, "true"]},
        },
        "Resources": res,
        "Outputs": {
            "HttpApiCatalogUrl": {
                "Value": {SUB: "https://${CatalogHttpApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}/_iceberg"}
            },
            "FunctionUrl": {"Condition": "WithFunctionUrl", "Value": {"Fn::GetAtt": ["AllFunctionUrl", "FunctionUrl"]}},
        },
    }


# ---- alarms and the dashboard (docs/operations.md names every metric) ------------------------------

NAMESPACE = "IcebergCatalog"
SERVICE_DIMS = [{"Name": "service", "Value": "catalog"}]
ACTIONS = {"Fn::If": ["WithAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]}


def _alarm(description: str, **props: Any) -> dict[str, Any]:
    return {
        "Type": "AWS::CloudWatch::Alarm",
        "Properties": {
            "AlarmName": {SUB: f"catalog-${{Stage}}-{props.pop('name')}"},
            "AlarmDescription": description,
            "AlarmActions": ACTIONS,
            "OKActions": ACTIONS,
            "TreatMissingData": "notBreaching",
            "EvaluationPeriods": 1,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            **props,
        },
    }


def _catalog_metric(metric: str, stat: str = "Sum", period: int = 300) -> dict[str, Any]:
    return {
        "Namespace": NAMESPACE,
        "MetricName": metric,
        "Dimensions": SERVICE_DIMS,
        "Statistic": stat,
        "Period": period,
    }


def _query(metric_id: str, metric: str) -> dict[str, Any]:
    return {
        "Id": metric_id,
        "ReturnData": False,
        "MetricStat": {
            "Metric": {"Namespace": NAMESPACE, "MetricName": metric, "Dimensions": SERVICE_DIMS},
            "Period": 300,
            "Stat": "Sum",
        },
    }


def observability(functions: list[str]) -> dict[str, Any]:
    """Alarms (5xx rate, commit state unknown, S3 throttling, sweeper errors, each function's errors
    and throttles), notifying AlarmTopicArn when set, and one dashboard of the catalog's metrics."""
    out: dict[str, Any] = {
        "Alarm5xxRate": _alarm(
            "More than Alarm5xxPercent% of requests answered 5xx over 5 minutes",
            name="5xx-rate",
            Threshold={"Ref": "Alarm5xxPercent"},
            ComparisonOperator="GreaterThanThreshold",
            Metrics=[
                _query("errors", "Errors5xx"),
                _query("requests", "Requests"),
                {"Id": "rate", "Expression": "IF(requests > 0, 100 * errors / requests, 0)", "Label": "5xx %"},
            ],
        ),
        "AlarmCommitStateUnknown": _alarm(
            "A commit's outcome was unknown (500 CommitStateUnknown): clients must reload before retrying",
            name="commit-state-unknown",
            Threshold=1,
            **_catalog_metric("CommitStateUnknown"),
        ),
        "AlarmS3Throttling": _alarm(
            "S3 throttled the catalog (SlowDown) 50 times in 5 minutes",
            name="s3-throttling",
            Threshold=50,
            **_catalog_metric("S3Throttled"),
        ),
        "AlarmS3Unavailable": _alarm(
            "Requests answered 503 because S3 was unavailable",
            name="s3-unavailable",
            Threshold=5,
            **_catalog_metric("S3Unavailable"),
        ),
        "AlarmSweeperWorkErrors": _alarm(
            "The sweeper met errors in its last 15 minutes of runs",
            name="sweeper-work-errors",
            Threshold=1,
            **_catalog_metric("SweeperErrors", period=900),
        ),
    }
    for group in [*functions, "all"]:
        for metric in ("Errors", "Throttles"):
            out[f"Alarm{_cap(group)}{metric}"] = _alarm(
                f"The {group} function: Lambda {metric.lower()}",
                name=f"{group}-{metric.lower()}",
                Threshold=1,
                Namespace="AWS/Lambda",
                MetricName=metric,
                Dimensions=[{"Name": "FunctionName", "Value": {SUB: f"catalog-${{Stage}}-{group}"}}],
                Statistic="Sum",
                Period=300,
            )
            if group == "all":  # the all-in-one function exists with the Function URL only
                out[f"Alarm{_cap(group)}{metric}"]["Condition"] = "WithFunctionUrl"
    out["Dashboard"] = {
        "Type": "AWS::CloudWatch::Dashboard",
        "Properties": {"DashboardName": {SUB: "catalog-${Stage}"}, "DashboardBody": {SUB: json.dumps(_dashboard())}},
    }
    return out


def _dashboard() -> dict[str, Any]:
    def widget(title: str, metrics: list[list[Any]], stat: str = "Sum", x: int = 0, y: int = 0) -> dict[str, Any]:
        return {
            "type": "metric",
            "x": x,
            "y": y,
            "width": 12,
            "height": 6,
            "properties": {
                "title": title,
                "region": "${AWS::Region}",
                "stat": stat,
                "period": 60,
                "metrics": metrics,
            },
        }

    def catalog(*names: str) -> list[list[Any]]:
        return [[NAMESPACE, name, "service", "catalog"] for name in names]

    def functions(metric: str) -> dict[str, str]:
        query = f'{{AWS/Lambda,FunctionName}} MetricName="{metric}" FunctionName="catalog-${{Stage}}-"'
        return {"expression": f"SEARCH('{query}', 'Sum', 60)", "id": metric.lower(), "label": metric}

    return {
        "widgets": [
            widget("Requests and errors", catalog("Requests", "Errors4xx", "Errors5xx", "Conflicts")),
            widget("Latency (ms)", [[*m, {"stat": s}] for m in catalog("Latency") for s in ("p50", "p99")], x=12),
            widget("Commits", catalog("Commits", "CommitStateUnknown", "Conflicts"), y=6),
            widget("Group commit batch size", catalog("GroupCommitBatchSize"), stat="Average", x=12, y=6),
            widget(
                "S3",
                catalog(
                    "S3Requests",
                    "S3ClassA",
                    "S3Retries",
                    "S3Throttled",
                    "S3Unavailable",
                    "LostResponseResolved",
                    "WriteInDoubt",
                ),
                y=12,
            ),
            widget("Sweeper", catalog("SweeperRuns", "SweeperWork", "SweeperErrors", "SweeperUnfinished"), x=12, y=12),
            widget("Cold starts and STS calls for vended credentials", catalog("ColdStarts", "AssumeRole"), y=18),
            widget("Functions: errors and throttles", [[functions("Errors")], [functions("Throttles")]], x=12, y=18),
        ]
    }


def tidy(template: dict[str, Any]) -> dict[str, Any]:
    """Drop what `chalice package` adds that this deployment replaces: its REST API and default role."""
    for name in ("RestAPI", "APIHandlerInvokePermission", "DefaultRole"):
        template["Resources"].pop(name, None)
    props = template["Resources"]["APIHandler"]["Properties"]
    props["Role"] = {"Fn::GetAtt": ["AllRole", "Arn"]}
    props.pop("Tags", None)
    for name in ("RestAPIId", "APIHandlerName", "APIHandlerArn", "EndpointURL"):
        template.get("Outputs", {}).pop(name, None)
    return template


# Finished builds, by the hash of everything that goes into one (BUILD_INPUTS, the target, the tools).
# A build is 40-50 CPU-seconds (Chalice's packaging, bytecode for every module, the zip); `make run-lambda`,
# `make release` and the tests build the same sources again and again. CATALOG_BUILD_CACHE=0 skips it.
BUILD_CACHE = ROOT / ".cache" / "builds"
BUILD_INPUTS = ("app.py", "chalicelib", ".chalice", "infra", "requirements.txt", "requirements-lock.txt", "vendor")
BUILD_CACHE_KEEP = 4  # newest builds kept (a package is ~25 MB)
BUILT = ("template.json", "deployment.zip")


def build_key(python: str, arch: str) -> str:
    """The hash of a build's inputs: the files it packages or is made by, the target, the tools."""
    import hashlib
    from importlib.metadata import version

    digest = hashlib.sha256()
    region = os.environ.get("AWS_DEFAULT_REGION", "")
    tools = [python, arch, sys.version, version("chalice"), version("pip"), _interpreter(python) or "", region]
    digest.update("\0".join(tools).encode())
    for top in BUILD_INPUTS:
        base = ROOT / top
        found = [base] if base.is_file() else sorted(base.rglob("*")) if base.is_dir() else []
        for path in found:
            rel = path.relative_to(ROOT).as_posix()
            skip = ("__pycache__/", ".chalice/deployments/", ".chalice/venv/", "infra/build/")
            if path.is_file() and not path.name.endswith(".pyc") and not any(s in rel + "/" for s in skip):
                digest.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:32]


def build(out_dir: Path, python: str = "3.11", arch: str = "x86_64") -> Path:
    """out_dir/template.json and out_dir/deployment.zip; a build of the same inputs is reused."""
    if python not in PYTHONS or arch not in ARCHES:
        raise ValueError(f"a build targets Python {'/'.join(PYTHONS)} on {' or '.join(ARCHES)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    if os.environ.get("CATALOG_BUILD_CACHE", "1") == "0":
        return _build(out_dir, python, arch)
    key = build_key(python, arch)
    cached = BUILD_CACHE / key
    BUILD_CACHE.mkdir(parents=True, exist_ok=True)
    with open(BUILD_CACHE / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second builder of the same inputs waits, then reuses
        if not all((cached / name).exists() for name in BUILT):
            scratch = BUILD_CACHE / f"{key}.partial"
            shutil.rmtree(scratch, ignore_errors=True)
            _build(scratch, python, arch)
            for name in BUILT:
                shutil.copyfile(scratch / name, out_dir / name)
            cached.mkdir(exist_ok=True)
            for name in BUILT:
                os.replace(scratch / name, cached / name)
            shutil.rmtree(scratch, ignore_errors=True)
            _prune(key)
        else:
            for name in BUILT:
                shutil.copyfile(cached / name, out_dir / name)
            os.utime(cached)  # recently used: kept by the pruning
    return out_dir / "template.json"


def _prune(keep: str) -> None:
    done = [p for p in BUILD_CACHE.iterdir() if p.is_dir() and "." not in p.name and p.name != keep]
    for old in sorted(done, key=lambda p: p.stat().st_mtime)[: max(0, len(done) - (BUILD_CACHE_KEEP - 1))]:
        shutil.rmtree(old, ignore_errors=True)
        (BUILD_CACHE / f"{old.name}.lock").unlink(missing_ok=True)


def _build(out_dir: Path, python: str, arch: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    merge = out_dir / "merge.json"
    merge.write_text(json.dumps(merge_template(), indent=1))
    pkg = out_dir / "package"
    shutil.rmtree(pkg, ignore_errors=True)
    env = dict(os.environ, AWS_DEFAULT_REGION=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    chalice = Path(sys.executable).parent / "chalice"
    # `chalice package` keeps its dependency zip in the project's .chalice/deployments, written in
    # place: two builds of one checkout at once (make run-lambda beside make release, or two test
    # workers) would read each other's half-written zip. One at a time, then.
    lock_path = ROOT / ".chalice" / "deployments" / ".package.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(
            [
                str(chalice),
                "--project-dir",
                str(ROOT),
                "package",
                "--stage",
                "dev",
                "--merge-template",
                str(merge),
                str(pkg),
            ],
            check=True,
            env=env,
            cwd=ROOT,
        )
    template = target(tidy(json.loads((pkg / "sam.json").read_text())), python, arch)
    (out_dir / "template.json").write_text(json.dumps(template, indent=1))
    optimize_package(pkg / "deployment.zip", out_dir / "deployment.zip", python, arch)
    return out_dir / "template.json"


PYTHONS = ("3.11", "3.12", "3.13")
ARCHES = ("x86_64", "arm64")
SNAPSTART_PYTHONS = ("3.12", "3.13")  # Lambda SnapStart for Python starts at 3.12
ALIAS = "live"


def target(template: dict[str, Any], python: str, arch: str) -> dict[str, Any]:
    """Every function on the build's runtime and architecture. From Python 3.12 on, the template
    also offers SnapStart (`EnableSnapStart`): each function publishes a version behind the alias
    `live`, which the HTTP API and the Function URL invoke, as SnapStart restores only versions."""
    res = template["Resources"]
    functions = [k for k, v in res.items() if v.get("Type") == "AWS::Serverless::Function"]
    for name in functions:
        props = res[name]["Properties"]
        props["Runtime"] = f"python{python}"
        props["Architectures"] = [arch]
    if python not in SNAPSTART_PYTHONS:
        return template
    template["Parameters"]["EnableSnapStart"] = {
        "Type": "String",
        "Default": "false",
        "AllowedValues": ["true", "false"],
        "Description": "restore functions from a snapshot taken after init (published versions, alias live)",
    }
    template["Conditions"]["WithSnapStart"] = {"Fn::Equals": [{"Ref": "EnableSnapStart"}, "true"]}
    for name in functions:
        props = res[name]["Properties"]
        props["AutoPublishAlias"] = ALIAS
        props["SnapStart"] = {"ApplyOn": {"Fn::If": ["WithSnapStart", "PublishedVersions", "None"]}}
    url, permission = res["AllFunctionUrl"]["Properties"], res["AllFunctionUrlPermission"]["Properties"]
    url["Qualifier"] = ALIAS
    res["AllFunctionUrl"]["DependsOn"] = f"APIHandlerAlias{ALIAS}"
    permission["FunctionName"] = {"Ref": f"APIHandlerAlias{ALIAS}"}
    return template


# The AWS APIs the functions call: S3 (storage), STS (vended credentials), Secrets Manager (the root
# credentials), and for change events SQS, SNS, EventBridge and Lambda (the dispatcher's nudge); and
# the models the IAM and STS faces parse their query-protocol requests with (chalicelib/awsquery.py). A
# model loads only when its client is made; the other 400-odd only slow a cold start down.
BOTOCORE_SERVICES = ("s3", "sts", "iam", "secretsmanager", "sqs", "sns", "events", "lambda")
APP = ("app.py", "chalicelib", "chalice")  # the package's own code (and Chalice's runtime, pure Python)


def _interpreter(python: str) -> str | None:
    """A Python of that version on this machine (on PATH, or one pyenv installed)."""
    import glob

    found = [
        shutil.which(f"python{python}") or "",
        *sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{python}.*/bin/python{python}"))),
    ]
    for candidate in found:
        if candidate and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return candidate
    return None


def _reinstall_libraries(root: Path, python: str, arch: str) -> None:
    for entry in root.iterdir():
        if entry.name not in APP:
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    machine = "aarch64" if arch == "arm64" else "x86_64"
    # Python 3.11 runs on Amazon Linux 2 (glibc 2.26), 3.12 and later on Amazon Linux 2023 (2.34).
    glibcs = ["2014"] if python == "3.11" else ["2014", "_2_28", "_2_34"]
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(root)]
    for glibc in glibcs:
        pip += ["--platform", f"manylinux{glibc}_{machine}"]
    pip += ["--implementation", "cp", "--python-version", python, "--only-binary=:all:"]
    pip += ["-r", str(ROOT / "requirements.txt"), "-c", str(ROOT / "requirements-lock.txt")]
    if subprocess.run(pip).returncode != 0:
        raise SystemExit(f"build: pip found no wheels of the pinned libraries for Python {python} on {arch} (above)")


def optimize_package(src: Path, dest: Path, python: str = "3.11", arch: str = "x86_64") -> dict[str, int]:
    """The package, cut for cold starts. Without botocore's unused models (and their endpoints) a
    client's first creation stops scanning and parsing them (about 40 ms), and the zip shrinks by
    18 MB. With every module's bytecode
    compiled in, Python no longer compiles each module it imports on every cold start (/var/task
    is read-only, so it cannot keep what it compiled); `unchecked-hash` because the zip's
    timestamps are not the sources' own. Bytecode only when this Python is the runtime's. For
    another Python or arm64 the libraries are installed again from wheels for that platform
    (`chalice package` builds for the Python it runs on, on x86_64)."""
    import compileall
    import py_compile
    import tempfile
    import zipfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with zipfile.ZipFile(src) as z:
            modes = {i.filename: i.external_attr for i in z.infolist()}
            z.extractall(root)
        if (python, arch) != (f"{sys.version_info[0]}.{sys.version_info[1]}", "x86_64"):
            _reinstall_libraries(root, python, arch)
        data = root / "botocore" / "data"
        for service in data.iterdir() if data.exists() else []:
            if service.is_dir() and service.name not in BOTOCORE_SERVICES:
                shutil.rmtree(service)
        endpoints = data / "endpoints.json"  # 1.2 MB parsed by every session: about 20-40 ms
        if endpoints.exists():
            doc = json.loads(endpoints.read_text())
            for partition in doc.get("partitions", []):
                services = partition.get("services", {})
                partition["services"] = {k: v for k, v in services.items() if k in BOTOCORE_SERVICES}
            endpoints.write_text(json.dumps(doc, separators=(",", ":")))
        if f"{sys.version_info[0]}.{sys.version_info[1]}" == python:
            mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
            compileall.compile_dir(root, quiet=2, workers=0, invalidation_mode=mode)
        elif interpreter := _interpreter(python):  # bytecode is per Python version: its own compiler
            compile_cmd = [interpreter, "-m", "compileall", "-q", "-q", "-j", "0", "--invalidation-mode"]
            subprocess.run([*compile_cmd, "unchecked-hash", str(root)], check=False)
        else:
            print(f"build: no Python {python} here to compile bytecode with; the package ships sources only")
        files = sorted(p for p in root.rglob("*") if p.is_file())
        with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as out:
            for path in files:
                name = path.relative_to(root).as_posix()
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # reproducible
                info.external_attr = modes.get(name, 0o644 << 16)
                info.compress_type = zipfile.ZIP_DEFLATED
                out.writestr(info, path.read_bytes())
    return {"files": len(files), "bytes": dest.stat().st_size}


if __name__ == "__main__":
    import argparse

    cli = argparse.ArgumentParser(description="build the template and the package")
    cli.add_argument("out_dir", nargs="?", default=str(ROOT / "infra" / "build"))
    cli.add_argument("--python", default="3.11", choices=PYTHONS)
    cli.add_argument("--arch", default="x86_64", choices=ARCHES)
    args = cli.parse_args()
    print(build(Path(args.out_dir), args.python, args.arch))
