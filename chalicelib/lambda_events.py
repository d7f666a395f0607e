"""Lambda entry points for Function URLs and HTTP APIs (payload 2.0) as well as REST APIs (1.0).

Chalice dispatches only REST (1.0) events, on `requestContext.resourcePath`. A 2.0 event is turned
into that shape: its raw path is matched against the app's routes (path parameters stay
percent-encoded, as API Gateway REST passes them), and `requestContext.path` keeps the raw path the
client signed, for SigV4. Responses go back without `multiValueHeaders`, which 2.0 does not allow.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from chalice.app import Chalice


class RouteTable:
    def __init__(self, routes: list[str]) -> None:
        # Literal segments sort before "{...}" captures, so concrete routes win (as in chalice local).
        self.routes = sorted((r, r.split("/")) for r in routes)

    def match(self, path: str) -> tuple[str, dict[str, str]] | None:
        parts = (path.rstrip("/") or "/").split("/")
        for route, segs in self.routes:
            if len(segs) != len(parts):
                continue
            captured: dict[str, str] = {}
            for seg, part in zip(segs, parts, strict=True):
                if seg.startswith("{") and seg.endswith("}"):
                    if not part:
                        break
                    captured[seg[1:-1]] = part
                elif seg != part:
                    break
            else:
                return route, captured
        return None


def to_rest_event(event: dict[str, Any], table: RouteTable) -> dict[str, Any] | None:
    http = event["requestContext"]["http"]
    method, raw_path = http["method"], event.get("rawPath") or http.get("path", "/")
    stage = event["requestContext"].get("stage", "$default")
    found = table.match(raw_path)
    if found is None and stage != "$default" and raw_path.startswith(f"/{stage}/"):
        found = table.match(raw_path[len(stage) + 1 :])
    if found is None:
        return None
    route, params = found
    multi: dict[str, list[str]] = {}
    for key, value in parse_qsl(event.get("rawQueryString") or "", keep_blank_values=True):
        multi.setdefault(key, []).append(value)
    headers = dict(event.get("headers") or {})
    return {
        "resource": route,
        "path": raw_path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": {k: v[-1] for k, v in multi.items()} or None,
        "multiValueQueryStringParameters": multi or None,
        "pathParameters": params or None,
        "stageVariables": event.get("stageVariables"),
        "requestContext": {
            "resourcePath": route,
            "httpMethod": method,
            "path": raw_path,
            "stage": stage,
            "requestId": event["requestContext"].get("requestId", ""),
            "domainName": event["requestContext"].get("domainName", ""),
            "identity": _identity(event["requestContext"], http),
        },
        "body": event.get("body"),
        "isBase64Encoded": bool(event.get("isBase64Encoded")),
    }


def _identity(context: dict[str, Any], http: dict[str, Any]) -> dict[str, Any]:
    """REST's requestContext.identity: the source IP, and the caller a Function URL with AuthType
    AWS_IAM verified (2.0's `authorizer.iam`), in REST's IAM-authorization field names."""
    out: dict[str, Any] = {"sourceIp": http.get("sourceIp", "")}
    iam = (context.get("authorizer") or {}).get("iam")
    if isinstance(iam, dict) and iam.get("userArn"):
        out.update(
            userArn=iam["userArn"],
            accountId=iam.get("accountId", ""),
            accessKey=iam.get("accessKey", ""),
            caller=iam.get("callerId", ""),
            user=iam.get("userId", ""),
        )
    return out


def to_v2_response(resp: dict[str, Any]) -> dict[str, Any]:
    headers = dict(resp.get("headers") or {})
    for key, values in (resp.get("multiValueHeaders") or {}).items():
        headers[key] = ", ".join(str(v) for v in values)
    return {
        "statusCode": resp["statusCode"],
        "headers": headers,
        "body": resp.get("body") or "",
        "isBase64Encoded": bool(resp.get("isBase64Encoded")),
    }


def _not_found(path: str) -> dict[str, Any]:
    body = {"error": {"message": f"No route for {path[:200]}", "type": "NotFound", "code": 404}}
    return {
        "statusCode": 404,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }


def make_handler(app: Chalice) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    table = RouteTable(list(app.routes))

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if event.get("version") == "2.0":
            rest = to_rest_event(event, table)
            if rest is None:
                return _not_found(event.get("rawPath", ""))
            return to_v2_response(app(rest, context))
        return app(event, context)

    return handler
