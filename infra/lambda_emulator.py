"""Run the built deployment package the way Lambda runs it, locally (test and development tooling).

    .venv/bin/python infra/lambda_emulator.py infra/build --port 9001 [--function-url] [--param K=V]...
        [--function-url-auth AWS_IAM [--api-port P] [--iam-port P]]

Each function of `template.json` runs from `deployment.zip` alone: unzipped into a directory of its
own (read-only; the only code on the path besides the runtime interface client), under the real
`awslambdaric` in the runtime venv (`.venv-lambda`, Python 3.11 like the template's runtime),
talking the Lambda Runtime API served here. The front door turns HTTP requests into payload 2.0
events as a Function URL or the template's HTTP API sends them (raw path and query kept, headers
lower-cased, non-text bodies base64) and routes them as that HTTP API would. Each instance serves
one request at a time; up to `--max-instances` per function start on demand (cold starts, with
their init duration measured). A request whose event exceeds Lambda's 6 MB payload limit is refused
with 413 before any function sees it, and a function that runs past its timeout is killed (502).

With the template's `FunctionUrlAuthType=AWS_IAM` (`--function-url-auth AWS_IAM`, or `--param
FunctionUrlAuthType=AWS_IAM`), the front door plays AWS's part in front of a Function URL whose
AuthType is AWS_IAM, with an IAM of its own:

- `url` is the Function URL (everything to the all-in-one function). Every request must carry a
  SigV4 signature for service `lambda` in us-east-1 (Authorization header, or presigned query
  with X-Amz-Expires), by an active access key of the local IAM: an IAM user's long-term key, or
  a temporary key from sts AssumeRole together with its session token. The signature is
  recomputed with botocore over what arrived (method, raw path, query, the signed headers, the
  body's SHA-256) and compared in constant time; the date must be within 15 minutes (or the
  presigned window), and the caller's account must be the template's (the URL's resource policy
  allows `AWS::AccountId`). IAM policies of the caller are not evaluated: every principal of the
  account may invoke. Anything else is 403 `{"Message":"Forbidden"}`, as a Function URL answers;
  why is appended to `Emulator.denials`.
- A request that passes reaches the function with the caller in
  `requestContext.authorizer.iam` (accessKey, accountId, callerId, userArn, userId), as AWS sends
  it: `userArn` is the user's ARN, or `arn:aws:sts::<account>:assumed-role/<role>/<session>`.
  The template's `WithIamFrontDoor` condition sets CATALOG_FRONT_DOOR=aws_iam in the functions.
- The IAM is moto's IAM and STS (`moto[server]`), served in this process on `iam_endpoint` as
  account 000000000000; make users, keys and roles there with any AWS client (it checks no
  signatures). The front door reads a key's secret and session token from moto's backends.
- The HTTP API routes are served beside it on `api_url`: there the catalog checks SigV4 and tokens
  itself (the deployed stack has both), so root administers the catalog there.

Writes outside /tmp are refused with EROFS, as on Lambda's read-only file system, and recorded:
`violations()` lists them, and the tests fail on any.

The catalog's code has no branch for any of this: environment and secrets come from the template
(the root credentials from a Secrets Manager secret); the only additions are the endpoint overrides
a local run needs (`S3_ENDPOINT_URL` and the AWS SDK's `AWS_ENDPOINT_URL_*`), as `sam local
--env-vars` would pass them.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import itertools
import json
import queue
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials

ROOT = Path(__file__).resolve().parent.parent
PAYLOAD_LIMIT = 6 * 1024 * 1024  # 6,291,456 bytes: Lambda's synchronous invocation payload limit
ACCOUNT = "000000000000"
REGION = "us-east-1"  # the template's AWS::Region, and the region a Function URL's callers sign for
TEXT_TYPES = (
    "text/",
    "application/json",
    "application/xml",
    "application/x-www-form-urlencoded",
    "application/javascript",
)
GUARD = """
import errno, os, sys

_fd = os.open(os.environ["LAMBDA_EMULATOR_VIOLATIONS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
_OK = ("/tmp/", "/dev/", "/proc/self/")
_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_EVENTS = ("os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir", "os.symlink", "os.link",
           "os.truncate", "os.chmod", "os.chown", "os.utime")


_CODE = tuple(os.environ[k].rstrip("/") + "/" for k in ("LAMBDA_TASK_ROOT", "LAMBDA_RUNTIME_DIR") if os.environ.get(k))


def _outside(path):
    if not isinstance(path, (str, bytes, os.PathLike)):
        return None
    full = os.path.abspath(os.fsdecode(path))
    if full.startswith(_CODE) or (full + "/") in _CODE:  # the package stays read-only wherever it lies
        return full
    return None if full == "/tmp" or full.startswith(_OK) else full


def _deny(event, full):
    if "/__pycache__" not in full:  # Python tries to cache bytecode and ignores the failure, as on Lambda
        os.write(_fd, f"{event} {full}\\n".encode())
    raise PermissionError(errno.EROFS, "Read-only file system", full)


def _hook(event, args):
    if event == "open":
        path, mode, flags = args
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & _WRITE)
        full = _outside(path) if writes else None
        if full:
            _deny(event, full)
    elif event in _EVENTS:
        for arg in args[:2]:
            full = _outside(arg)
            if full:
                _deny(event, full)


sys.addaudithook(_hook)
"""


# ---- the template --------------------------------------------------------------------------------


@dataclass
class FunctionSpec:
    logical_id: str
    name: str
    handler: str
    timeout_s: float
    memory_mb: int
    env: dict[str, str]
    routes: list[tuple[str, str]] = field(default_factory=list)  # (method, HTTP API path)
    runtime_version: str = "3.11"  # of the template's Runtime (python3.x)


NO_VALUE = object()  # {"Ref": "AWS::NoValue"}: the key or list item is left out


def _resolver(template: dict[str, Any], params: dict[str, str]) -> Any:
    values = {k: str(v.get("Default", "")) for k, v in template.get("Parameters", {}).items()}
    values.update(params)
    values.update(
        {"AWS::AccountId": ACCOUNT, "AWS::Region": REGION, "AWS::Partition": "aws", "AWS::StackName": "catalog"}
    )
    conditions = template.get("Conditions", {})

    def holds(name: str) -> bool:
        return bool(resolve(conditions[name]))

    def resolve(value: Any) -> Any:
        if isinstance(value, dict) and len(value) == 1:
            ((kind, arg),) = value.items()
            if kind == "Ref":
                return NO_VALUE if arg == "AWS::NoValue" else values.get(arg, arg)
            if kind == "Fn::Sub":
                text = arg if isinstance(arg, str) else arg[0]
                for name, val in values.items():
                    text = text.replace("${" + name + "}", str(val))
                return text
            if kind == "Fn::GetAtt":
                return f"arn:aws:iam::{ACCOUNT}:role/catalog-{arg[0]}"
            if kind == "Fn::If":  # the template's conditions, e.g. WithIamFrontDoor -> CATALOG_FRONT_DOOR
                return resolve(arg[1] if holds(arg[0]) else arg[2])
            if kind == "Fn::Equals":
                return str(resolve(arg[0])) == str(resolve(arg[1]))
            if kind == "Fn::Not":
                return not resolve(arg[0])
            if kind in ("Fn::And", "Fn::Or"):
                return (all if kind == "Fn::And" else any)(resolve(a) for a in arg)
            if kind == "Condition":
                return holds(arg)
        if isinstance(value, dict):
            return {k: r for k, r in ((k, resolve(v)) for k, v in value.items()) if r is not NO_VALUE}
        if isinstance(value, list):
            return [r for r in (resolve(v) for v in value) if r is not NO_VALUE]
        return value

    return resolve


def load_functions(template: dict[str, Any], params: dict[str, str]) -> dict[str, FunctionSpec]:
    resolve = _resolver(template, params)
    out: dict[str, FunctionSpec] = {}
    for logical_id, res in template["Resources"].items():
        if res.get("Type") != "AWS::Serverless::Function":
            continue
        props = resolve(res["Properties"])
        routes = [
            (str(ev["Properties"]["Method"]).upper(), str(ev["Properties"]["Path"]))
            for ev in (props.get("Events") or {}).values()
            if ev.get("Type") == "HttpApi"
        ]
        env = {k: str(v) for k, v in ((props.get("Environment") or {}).get("Variables") or {}).items()}
        out[logical_id] = FunctionSpec(
            logical_id,
            str(props.get("FunctionName") or logical_id),
            str(props["Handler"]),
            float(props.get("Timeout") or 3),
            int(props.get("MemorySize") or 128),
            env,
            routes,
            str(props.get("Runtime") or "python3.11").removeprefix("python"),
        )
    return out


class HttpApiRoutes:
    """The HTTP API's route selection: the most specific route wins (literal segments over {params},
    {params} over {greedy+}); a route for the method beats ANY."""

    def __init__(self, functions: dict[str, FunctionSpec]) -> None:
        every = [(m, p, fn) for fn, f in functions.items() for m, p in f.routes]
        self.routes = [(m, p, p.strip("/").split("/"), fn) for m, p, fn in every if p != "$default"]
        # The $default route takes what no other route matches (the catalog answers its own 404s).
        self.fallback = next((fn for _, p, fn in every if p == "$default"), None)

    def match(self, method: str, raw_path: str) -> tuple[str, str, dict[str, str]] | None:
        parts = raw_path.strip("/").split("/")
        best: tuple[tuple[int, ...], str, str, dict[str, str]] | None = None
        for route_method, path, segs, fn in self.routes:
            if route_method not in (method, "ANY"):
                continue
            params: dict[str, str] = {}
            score: list[int] = []
            ok = len(segs) == len(parts) or (segs and segs[-1].endswith("+}") and len(parts) >= len(segs))
            for i, seg in enumerate(segs if ok else []):
                if seg.endswith("+}"):
                    params[seg[1:-2]] = "/".join(parts[i:])
                    score.append(0)
                    break
                if seg.startswith("{"):
                    if not parts[i]:
                        ok = False
                        break
                    params[seg[1:-1]] = parts[i]
                    score.append(1)
                elif seg == parts[i]:
                    score.append(2)
                else:
                    ok = False
                    break
            if not ok:
                continue
            key = (*score, 1 if route_method == method else 0)
            if best is None or key > best[0]:
                best = (key, fn, f"{route_method} {path}", params)
        if best is None:
            return None if self.fallback is None else (self.fallback, "$default", {})
        return best[1], best[2], best[3]


# ---- instances and the Runtime API ---------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    """A Function URL accepts every connection; the default listen backlog (5) reset some under load."""

    request_queue_size = 1024
    daemon_threads = True


class Instance:
    """One execution environment: a runtime process, its Runtime API endpoint, one request at a time."""

    def __init__(self, pool: Pool, index: int) -> None:
        self.pool, self.index = pool, index
        self.events: queue.Queue[tuple[str, bytes, float]] = queue.Queue()
        self.results: queue.Queue[tuple[str, bytes]] = queue.Queue()
        self.ready = threading.Event()
        self.init_ms = 0.0
        self.busy = False
        self.current = ""
        self.server = _Server(("127.0.0.1", 0), _runtime_handler(self))
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.tmp = pool.emulator.work / "tmp" / f"{pool.spec.logical_id}-{index}"
        self.tmp.mkdir(parents=True, exist_ok=True)
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "en_US.UTF-8",
            "TZ": ":UTC",
            "LAMBDA_TASK_ROOT": str(pool.task_root),
            "LAMBDA_RUNTIME_DIR": str(pool.emulator.runtime_dir),
            "_HANDLER": pool.spec.handler,
            "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{self.server.server_address[1]}",
            "AWS_LAMBDA_FUNCTION_NAME": pool.spec.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(pool.spec.memory_mb),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{pool.spec.name}",
            "AWS_LAMBDA_LOG_STREAM_NAME": f"local/{index}",
            "AWS_EXECUTION_ENV": f"AWS_Lambda_python{pool.spec.runtime_version}",
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "PYTHONPATH": f"{pool.task_root}:{pool.emulator.runtime_dir}",
            "TMPDIR": str(self.tmp),
            "HOME": str(self.tmp),
            "LAMBDA_EMULATOR_VIOLATIONS": str(pool.emulator.violations_file),
            **pool.spec.env,
            **pool.emulator.overrides,
        }
        self.started = time.perf_counter()
        log = open(pool.emulator.work / f"{pool.spec.logical_id}-{index}.log", "ab")  # noqa: SIM115 - the process keeps it
        self.proc = subprocess.Popen(
            [str(pool.emulator.runtime_python), "-m", "awslambdaric", pool.spec.handler],
            cwd=str(pool.task_root),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.server.shutdown()


class _KeepAlive(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive without Nagle: small writes must not wait for delayed ACKs."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *_: Any) -> None:
        pass

    def _reply(self, status: int, body: bytes = b"", headers: list[tuple[str, str]] | None = None) -> None:
        self.send_response(status)
        for k, v in headers or []:
            if k.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def _runtime_handler(instance: Instance) -> type[BaseHTTPRequestHandler]:
    class Handler(_KeepAlive):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if not self.path.endswith("/runtime/invocation/next"):
                return self._reply(404)
            if not instance.ready.is_set():
                instance.init_ms = (time.perf_counter() - instance.started) * 1000
                instance.ready.set()
            request_id, payload, deadline = instance.events.get()
            instance.current = request_id
            headers = {
                "Content-Type": "application/json",
                "Lambda-Runtime-Aws-Request-Id": request_id,
                "Lambda-Runtime-Deadline-Ms": str(int(deadline * 1000)),
                "Lambda-Runtime-Invoked-Function-Arn": instance.pool.arn,
                "Lambda-Runtime-Trace-Id": f"Root=1-{uuid.uuid4().hex[:8]}-{uuid.uuid4().hex[:24]};Sampled=0",
            }
            self._reply(200, payload, list(headers.items()))

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            parts = self.path.strip("/").split("/")
            if parts[-2:] == ["init", "error"]:
                instance.results.put(("init-error", body))
            elif parts[-1] in ("response", "error") and parts[-2] == instance.current:
                instance.results.put(("ok" if parts[-1] == "response" else "error", body))
            else:
                return self._reply(400, b'{"errorMessage":"unknown request id"}')
            self._reply(202, b'{"status":"OK"}')

    return Handler


class Pool:
    def __init__(self, emulator: Emulator, spec: FunctionSpec, task_root: Path, max_instances: int) -> None:
        self.emulator, self.spec, self.task_root, self.max = emulator, spec, task_root, max_instances
        self.arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{spec.name}"
        self.instances: list[Instance] = []
        self.cond = threading.Condition()
        self.counter = itertools.count()
        self.stats: dict[str, Any] = {"invocations": 0, "cold-starts": 0, "init-ms": [], "timeouts": 0}

    def _acquire(self) -> tuple[Instance, bool]:
        with self.cond:
            while True:
                idle = next((i for i in self.instances if not i.busy), None)
                if idle is not None:
                    idle.busy = True
                    return idle, False
                if len(self.instances) < self.max:
                    fresh = Instance(self, next(self.counter))
                    fresh.busy = True
                    self.instances.append(fresh)
                    self.stats["cold-starts"] += 1
                    return fresh, True
                self.cond.wait()

    def _release(self, instance: Instance, keep: bool) -> None:
        with self.cond:
            instance.busy = False
            if not keep:
                self.instances.remove(instance)
            self.cond.notify()
        if not keep:
            instance.stop()

    def invoke(self, payload: bytes) -> tuple[str, bytes, float]:
        """Run one event: ("ok" | "error" | "timeout", body, milliseconds of this invocation)."""
        instance, cold = self._acquire()
        started = time.perf_counter()
        self.stats["invocations"] += 1
        try:
            if cold and not instance.ready.wait(60):
                self._release(instance, keep=False)
                return "error", b'{"errorMessage":"the runtime did not start"}', 0.0
            if cold:
                self.stats["init-ms"].append(round(instance.init_ms, 1))
            request_id = uuid.uuid4().hex
            instance.events.put((request_id, payload, time.time() + self.spec.timeout_s))
            try:
                kind, body = instance.results.get(timeout=self.spec.timeout_s)
            except queue.Empty:
                self.stats["timeouts"] += 1
                self._release(instance, keep=False)  # Lambda ends the environment of a timed-out call
                message = f"Task timed out after {self.spec.timeout_s:.2f} seconds"
                return "timeout", json.dumps({"errorMessage": message}).encode(), self.spec.timeout_s * 1000
        except BaseException:
            self._release(instance, keep=False)
            raise
        self._release(instance, keep=kind != "init-error")
        return kind, body, (time.perf_counter() - started) * 1000


# ---- the IAM in front (FunctionUrlAuthType=AWS_IAM) ---------------------------------------------

FORBIDDEN = b'{"Message":"Forbidden"}'  # what a Function URL answers a caller it refuses, whatever the reason
SKEW_S = 15 * 60  # how far a signature's X-Amz-Date may be from now (AWS's limit)
_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 +Credential=([^,\s]+), *SignedHeaders=([^,\s]+), *Signature=([0-9a-f]{64})"
)


class Denied(Exception):
    """A request the IAM front door refuses; the reason goes to `Emulator.denials`, not to the caller."""


@dataclass
class Credential:
    secret: str
    token: str | None  # the session token a temporary (ASIA) key must come with
    caller: dict[str, Any]  # what the event's requestContext.authorizer.iam says


class LocalIam:
    """The IAM and STS whose principals may call the Function URL: moto's, served in this process on
    `endpoint` as account ACCOUNT (the template's AWS::AccountId). Users, access keys and roles are
    made there with any AWS client (CreateUser, CreateAccessKey, CreateRole, sts AssumeRole); it
    checks no signature itself. `credential()` reads a key's secret, and an assumed role's session
    token, from moto's backends, which live in this process."""

    def __init__(self, port: int = 0) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        app = DomainDispatcherApplication(create_backend_app)

        def in_account(environ: dict[str, Any], start_response: Any) -> Any:
            environ.setdefault("HTTP_X_MOTO_ACCOUNT_ID", ACCOUNT)  # moto's default account is 123456789012
            return app(environ, start_response)

        class Quiet(MotoRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

        self.server = make_server("127.0.0.1", port, in_account, threaded=True, request_handler=Quiet)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def credential(access_key_id: str) -> Credential | None:
        from moto.core.utils import utcnow
        from moto.iam.models import iam_backends
        from moto.sts.models import sts_backends

        for account, partitions in list(iam_backends.items()):
            iam = partitions["aws"]
            key = iam.access_keys.get(access_key_id)
            if key is None:
                continue
            if key.status != "Active":
                return None
            if key.user_name is not None:  # an IAM user's long-term key (AKIA)
                user = iam.users.get(key.user_name)
                if user is None or key not in user.access_keys:
                    return None
                caller = {"userArn": user.arn, "userId": user.id, "callerId": user.id}
                return Credential(key.secret_access_key, None, _caller(access_key_id, account, caller))
            session = sts_backends[account]["aws"].get_assumed_role_from_access_key(access_key_id)
            if session is None or session.expiration <= utcnow():
                return None
            caller = {"userArn": session.arn, "userId": session.user_id, "callerId": session.user_id}
            return Credential(session.secret_access_key, session.session_token, _caller(access_key_id, account, caller))
        return None

    def stop(self) -> None:
        self.server.shutdown()


def _caller(access_key_id: str, account: str, who: dict[str, str]) -> dict[str, Any]:
    return {"accessKey": access_key_id, "accountId": account, "cognitoIdentity": None, "principalOrgId": None, **who}


class _Recompute(SigV4Auth):
    """botocore's SigV4 over exactly the headers the caller signed (no headers added or left out)."""

    def __init__(self, credentials: Credentials, service: str, region: str, signed: list[tuple[str, str]]) -> None:
        super().__init__(credentials, service, region)
        self._signed = signed

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        out = HTTPHeaders()
        for name, value in self._signed:
            out[name] = value  # appends: repeated headers join with "," in the canonical form
        return out


def verify_sigv4(
    method: str,
    target: str,
    items: list[tuple[str, str]],
    body: bytes,
    lookup: Callable[[str], Credential | None],
    service: str = "lambda",
    now: datetime | None = None,
) -> dict[str, Any]:
    """Check a request's SigV4 signature (Authorization header or presigned query) as AWS does in
    front of a Function URL with AuthType AWS_IAM, and return the caller for `authorizer.iam`.
    Raises Denied. The canonical request is recomputed from what arrived: method, raw path (encoded
    once more, as for every service but S3), query (without X-Amz-Signature), the signed headers,
    and the SHA-256 of the body received."""
    split = urlsplit(target)
    pairs = parse_qsl(split.query, keep_blank_values=True)
    query = dict(pairs)
    headers: dict[str, list[str]] = {}
    for name, value in items:
        headers.setdefault(name.lower(), []).append(value)
    auth = headers.get("authorization", [])
    if auth:
        found = _AUTHORIZATION.fullmatch(auth[0].strip()) if len(auth) == 1 else None
        if found is None:
            raise Denied("the Authorization header is not one AWS4-HMAC-SHA256 signature")
        credential, signed, signature = found.groups()
        stamp, token, expires = _one(headers, "x-amz-date"), _one(headers, "x-amz-security-token"), None
        if "x-amz-date" not in signed.split(";"):
            raise Denied("X-Amz-Date is not signed")
    elif query.get("X-Amz-Algorithm") == "AWS4-HMAC-SHA256":
        credential, signed = query.get("X-Amz-Credential", ""), query.get("X-Amz-SignedHeaders", "")
        signature, stamp = query.get("X-Amz-Signature", ""), query.get("X-Amz-Date")
        token, expires = query.get("X-Amz-Security-Token"), query.get("X-Amz-Expires", "")
        pairs = [(k, v) for k, v in pairs if k != "X-Amz-Signature"]
    else:
        raise Denied("the request is not signed (no SigV4 Authorization header or presigned query)")
    parts = credential.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request":
        raise Denied(f"malformed credential scope {credential[:120]!r}")
    access_key_id, day, region, signed_for, _ = parts
    if signed_for != service or region != REGION:
        raise Denied(f"signed for {signed_for} in {region}, not {service} in {REGION}")
    try:
        when = datetime.strptime(stamp or "", "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise Denied("no valid X-Amz-Date") from None
    if day != (stamp or "")[:8]:
        raise Denied("the credential scope's date is not X-Amz-Date's")
    now = now or datetime.now(UTC)
    if expires is None:
        if abs((now - when).total_seconds()) > SKEW_S:
            raise Denied("the signature's time is more than 15 minutes from now")
    elif not expires.isdigit() or not 1 <= int(expires) <= 604800:
        raise Denied("X-Amz-Expires must be 1 to 604800 seconds")
    elif (now - when).total_seconds() > int(expires) or (when - now).total_seconds() > SKEW_S:
        raise Denied("the presigned request has expired or is not valid yet")
    names = signed.split(";")
    if names != sorted(set(names)) or "host" not in names or any(n not in headers for n in names):
        raise Denied(f"signed headers {signed[:200]!r}: sorted, with host, each one sent")
    declared = _one(headers, "x-amz-content-sha256")
    if declared is not None and declared != hashlib.sha256(body).hexdigest():
        raise Denied("X-Amz-Content-SHA256 is not the body's hash")
    found_key = lookup(access_key_id)
    if found_key is None:
        raise Denied(f"the access key {access_key_id[:32]} is not an active key of the IAM")
    if found_key.token is None and token is not None:
        raise Denied("a session token came with a long-term key")
    if found_key.token is not None and not hmac.compare_digest((token or "").encode(), found_key.token.encode()):
        raise Denied("the session token is not the temporary key's")
    canonical_query = "&".join(
        f"{k}={v}" for k, v in sorted((quote(k, safe="-_.~"), quote(v, safe="-_.~")) for k, v in pairs)
    )
    request = AWSRequest(method=method, url=f"http://front-door{split.path or '/'}?{canonical_query}", data=body)
    request.context["timestamp"] = stamp
    signer = _Recompute(
        Credentials(access_key_id, found_key.secret, found_key.token),
        service,
        REGION,
        [(n, v) for n in names for v in headers[n]],
    )
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if not hmac.compare_digest(expected.encode(), signature.encode()):
        raise Denied("the signature does not match")
    if found_key.caller["accountId"] != ACCOUNT:  # the URL's resource policy: Principal = AWS::AccountId
        raise Denied(f"account {found_key.caller['accountId']} may not invoke the function URL")
    return found_key.caller


def _one(headers: dict[str, list[str]], name: str) -> str | None:
    values = headers.get(name)
    return ",".join(values) if values else None


# ---- the front door ------------------------------------------------------------------------------


def _headers_v2(items: list[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in items:
        key = k.lower()
        if key == "cookie":
            continue
        out[key] = f"{out[key]},{v}" if key in out else v
    return out


def build_event(
    method: str, target: str, items: list[tuple[str, str]], body: bytes, route_key: str, params: dict[str, str] | None
) -> dict[str, Any]:
    """A payload 2.0 event, as a Function URL or an HTTP API sends it."""
    split = urlsplit(target)
    headers = _headers_v2(items)
    cookies = [c.strip() for k, v in items if k.lower() == "cookie" for c in v.split(";") if c.strip()]
    query: dict[str, str] = {}
    for k, v in parse_qsl(split.query, keep_blank_values=True):
        query[k] = f"{query[k]},{v}" if k in query else v
    now = datetime.now(UTC)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": split.path,
        "rawQueryString": split.query,
        "headers": headers,
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": "local",
            "domainName": headers.get("host", "localhost").split(":")[0],
            "domainPrefix": "local",
            "http": {
                "method": method,
                "path": split.path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": uuid.uuid4().hex,
            "routeKey": route_key,
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "isBase64Encoded": False,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = query
    if params:
        event["pathParameters"] = params
    if body:
        textual = headers.get("content-type", "").lower().startswith(TEXT_TYPES)
        try:
            event["body"] = body.decode() if textual else base64.b64encode(body).decode()
            event["isBase64Encoded"] = not textual
        except UnicodeDecodeError:
            event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode(), True
    return event


def _front_handler(emulator: Emulator, function_url: bool, iam: bool = False) -> type[BaseHTTPRequestHandler]:
    """The Function URL (everything to the all-in-one function; with `iam`, only SigV4-signed
    requests of the IAM's principals) or the HTTP API (routes to the functions of route groups)."""

    class Handler(_KeepAlive):
        def _read_body(self) -> bytes:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                chunks = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _handle(self) -> None:
            body = self._read_body()
            path = urlsplit(self.path).path
            caller = None
            if iam:
                try:
                    caller = verify_sigv4(
                        self.command, self.path, list(self.headers.items()), body, LocalIam.credential
                    )
                except Denied as denied:
                    emulator.denials.append(f"{self.command} {path[:200]}: {denied}")
                    json_type = ("Content-Type", "application/json")
                    return self._reply(403, FORBIDDEN, [json_type, ("x-amzn-ErrorType", "AccessDeniedException")])
            if function_url:
                fn, route_key, params = "APIHandler", "$default", None
            else:
                found = emulator.routes.match(self.command, path)
                if found is None:
                    return self._reply(404, b'{"message":"Not Found"}', [("Content-Type", "application/json")])
                fn, route_key, params = found
            built = build_event(self.command, self.path, list(self.headers.items()), body, route_key, params)
            if caller is not None:  # what AWS vouches for: the function believes it (CATALOG_FRONT_DOOR=aws_iam)
                built["requestContext"]["authorizer"] = {"iam": caller}
            event = json.dumps(built)
            if len(event.encode()) > PAYLOAD_LIMIT:  # refused before any function runs, as Lambda does
                message = f"Request must be smaller than {PAYLOAD_LIMIT} bytes for the InvokeFunction operation"
                return self._reply(
                    413, json.dumps({"message": message}).encode(), [("Content-Type", "application/json")]
                )
            kind, raw, _ = emulator.pools[fn].invoke(event.encode())
            if kind != "ok":
                return self._reply(
                    502,
                    json.dumps({"message": "Internal Server Error", "error": json.loads(raw or b"{}")}).encode(),
                    [("Content-Type", "application/json")],
                )
            if len(raw) > PAYLOAD_LIMIT:
                return self._reply(
                    502,
                    b'{"message":"Response payload size exceeded maximum allowed payload size"}',
                    [("Content-Type", "application/json")],
                )
            self._respond(json.loads(raw))

        def _respond(self, result: Any) -> None:
            if not isinstance(result, dict) or "statusCode" not in result:
                return self._reply(200, json.dumps(result).encode(), [("Content-Type", "application/json")])
            body = result.get("body") or ""
            data = base64.b64decode(body) if result.get("isBase64Encoded") else str(body).encode()
            headers = [(k, str(v)) for k, v in (result.get("headers") or {}).items()]
            headers += [("Set-Cookie", c) for c in result.get("cookies") or []]
            self._reply(int(result["statusCode"]), data, headers)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _handle  # noqa: N815

    return Handler


# ---- the emulator --------------------------------------------------------------------------------


class Emulator:
    def __init__(
        self,
        build_dir: Path,
        work: Path,
        overrides: dict[str, str],
        params: dict[str, str] | None = None,
        max_instances: int = 4,
        function_url: bool = False,
        runtime_python: Path | None = None,
        port: int = 0,
        function_url_auth: str | None = None,
        api_port: int = 0,
        iam_port: int = 0,
    ) -> None:
        self.work = work
        self.overrides = overrides
        self.runtime_python = runtime_python or ROOT / ".venv-lambda" / "bin" / "python"
        if not self.runtime_python.exists():
            raise RuntimeError(f"no Lambda runtime at {self.runtime_python}: run `make lambda-runtime`")
        template = json.loads((build_dir / "template.json").read_text())
        params = dict(params or {})
        if function_url_auth:  # the same as --param FunctionUrlAuthType=...
            params["FunctionUrlAuthType"] = function_url_auth
        default_auth = template.get("Parameters", {}).get("FunctionUrlAuthType", {}).get("Default", "NONE")
        self.function_url_auth = str(params.get("FunctionUrlAuthType") or default_auth).upper()
        if self.function_url_auth not in ("NONE", "AWS_IAM"):
            raise ValueError(f"FunctionUrlAuthType is NONE or AWS_IAM, not {self.function_url_auth}")
        self.functions = load_functions(template, params)
        task_root = self._unzip(build_dir / "deployment.zip", work / "task")
        self.runtime_dir = work / "runtime"
        self.runtime_dir.mkdir(parents=True, exist_ok=True)
        (self.runtime_dir / "sitecustomize.py").write_text(GUARD)
        self.violations_file = work / "violations.log"
        self.violations_file.touch()
        self.pools = {fn: Pool(self, spec, task_root, max_instances) for fn, spec in self.functions.items()}
        self.routes = HttpApiRoutes(self.functions)
        self.denials: list[str] = []  # why the IAM front door refused each request it refused
        self.iam: LocalIam | None = None
        self.servers: list[_Server] = []
        if self.function_url_auth == "AWS_IAM":
            self.iam = LocalIam(iam_port)
            self.url = self._serve(port, _front_handler(self, function_url=True, iam=True))
            self.api_url = self._serve(api_port, _front_handler(self, function_url=False))
        else:
            self.url = self.api_url = self._serve(port, _front_handler(self, function_url))

    def _serve(self, port: int, handler: type[BaseHTTPRequestHandler]) -> str:
        server = _Server(("127.0.0.1", port), handler)
        self.servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{server.server_address[1]}"

    @property
    def iam_endpoint(self) -> str:
        """The IAM and STS endpoint (AWS_IAM mode) where the Function URL's callers are made."""
        return self.iam.endpoint if self.iam else ""

    @staticmethod
    def _unzip(zip_path: Path, dest: Path) -> Path:
        """The package alone, read-only, as /var/task is."""
        if dest.exists():
            for p in [dest, *dest.rglob("*")]:
                p.chmod(p.stat().st_mode | stat.S_IWUSR)
            shutil.rmtree(dest)
        with zipfile.ZipFile(zip_path) as z:
            z.extractall(dest)
        for p in [*dest.rglob("*"), dest]:
            p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        return dest

    def violations(self) -> list[str]:
        return [line for line in self.violations_file.read_text().splitlines() if line.strip()]

    def stats(self) -> dict[str, dict[str, Any]]:
        return {fn: dict(p.stats, instances=len(p.instances)) for fn, p in self.pools.items() if p.stats["invocations"]}

    def recycle(self) -> None:
        """End every idle instance, as Lambda does after a quiet spell: the next request is cold."""
        for pool in self.pools.values():
            with pool.cond:
                idle = [i for i in pool.instances if not i.busy]
                pool.instances = [i for i in pool.instances if i.busy]
            for instance in idle:
                instance.stop()

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
        if self.iam is not None:
            self.iam.stop()
        for pool in self.pools.values():
            for instance in list(pool.instances):
                instance.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("--port", type=int, default=9001)
    parser.add_argument("--work", type=Path, default=ROOT / ".localdata" / "lambda")
    parser.add_argument("--max-instances", type=int, default=4)
    parser.add_argument("--function-url", action="store_true", help="send everything to the all-in-one function")
    parser.add_argument("--param", action="append", default=[], help="template parameter K=V")
    parser.add_argument("--env", action="append", default=[], help="endpoint override K=V")
    parser.add_argument(
        "--function-url-auth",
        choices=["NONE", "AWS_IAM"],
        help="the template's FunctionUrlAuthType; AWS_IAM: the IAM front door (module docstring)",
    )
    parser.add_argument("--api-port", type=int, default=0, help="AWS_IAM: the HTTP API's port (0: any free)")
    parser.add_argument("--iam-port", type=int, default=0, help="AWS_IAM: the IAM/STS endpoint's port (0: any free)")
    a = parser.parse_args(argv)
    emulator = Emulator(
        a.build_dir,
        a.work,
        dict(e.split("=", 1) for e in a.env),
        dict(p.split("=", 1) for p in a.param),
        a.max_instances,
        a.function_url,
        port=a.port,
        function_url_auth=a.function_url_auth,
        api_port=a.api_port,
        iam_port=a.iam_port,
    )
    print(f"Lambda emulator: {emulator.url} ({len(emulator.functions)} functions)", flush=True)
    if emulator.iam is not None:
        print(f"  Function URL (AWS_IAM, SigV4 for lambda in {REGION}): {emulator.url}", flush=True)
        print(f"  HTTP API (the catalog checks callers itself): {emulator.api_url}", flush=True)
        print(f"  IAM and STS of account {ACCOUNT}: {emulator.iam_endpoint}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
