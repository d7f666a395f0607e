"""catalog-admin: the catalog's operator tool.

Through the catalog's API (root credentials: CATALOG_ROOT_ACCESS_KEY and CATALOG_ROOT_SECRET_KEY;
CATALOG_URL, default http://127.0.0.1:8181/_iceberg; requests SigV4-signed for s3tables):
  users, access keys and policies  list-users, create-user, get-user, delete-user, create-key,
                                   delete-key, put-policy, delete-policy
  trusted engines                  trust-engine USER on|off (it enforces the read restrictions
                                   its table loads carry, and reads the tables' files whole)
  audit trail                      audit [--warehouse W [--table NS.T]] [--principal P] [--operation OP]
  dropped tables                   trash W, undrop W DROP_ID [--to NS.T], purge-dropped W DROP_ID
  change-event sinks               event-sinks W, add-event-sink W NAME KIND TARGET, remove-event-sink W NAME,
                                   replay-events W NAME

Straight on S3, with the catalog's own settings (S3_ENDPOINT_URL, CATALOG_SYSTEM_BUCKET, AWS
credentials and region; under `make run`: S3_ENDPOINT_URL=http://127.0.0.1:4566
AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test, as its banner prints):
  fsck W [--repair] [--json]       check a warehouse against the design's invariants
  policy-check W [--json]          whose table-data access changes when W's legacy-data-actions goes
                                   off (GetTableData and PutTableData instead of GetTable and UpdateTable)
  export W --to FILE, import FILE --warehouse W [--copy-data]
  history W NS.T, rollback-table W NS.T METADATA_LOCATION
  dispatch-events [--warehouse W] [--once | --every SECONDS]   send change events to the sinks

Exit codes: 0 done; 1 refused or failed (the reason on stderr; fsck: violations found); 2 bad
usage (fsck: unfinished work left for the sweeper).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

# Run as `python scripts/catalog_admin.py`, the script's own folder is on the path, not the catalog's.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


class SigV4(requests.auth.AuthBase):
    """requests auth that signs like PyIceberg does (botocore SigV4Auth over the final request)."""

    def __init__(self, access_key: str, secret_key: str, region: str = "us-east-1", service: str = "s3tables") -> None:
        self.credentials = Credentials(access_key, secret_key)
        self.region, self.service = region, service

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        headers = {k: v for k, v in r.headers.items() if k.lower() != "connection"}
        aws = AWSRequest(method=r.method, url=r.url, data=r.body or b"", headers=headers)
        SigV4Auth(self.credentials, self.service, self.region).add_auth(aws)
        r.headers.update(dict(aws.headers.items()))
        return r


def session(access_key: str | None = None, secret_key: str | None = None) -> requests.Session:
    s = requests.Session()
    s.auth = SigV4(
        access_key or os.environ["CATALOG_ROOT_ACCESS_KEY"],
        secret_key or os.environ["CATALOG_ROOT_SECRET_KEY"],
        os.environ.get("CATALOG_SIGNING_REGION", "us-east-1"),
    )
    return s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="catalog-admin",
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", default=os.environ.get("CATALOG_URL", "http://127.0.0.1:8181/_iceberg"))
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name, (args, what) in {
        "list-users": ([], "list the users"),
        "create-user": (["user"], "create a user (no access key, no policy)"),
        "get-user": (["user"], "a user: its access key ids and policies"),
        "delete-user": (["user"], "delete a user, its keys and policies (its tokens stop working)"),
        "create-key": (["user"], "a new access key for a user (the secret is printed once)"),
        "delete-key": (["user", "key"], "delete an access key"),
        "put-policy": (["user", "policy", "file"], "attach or replace a named IAM policy read from a JSON file"),
        "delete-policy": (["user", "policy"], "remove a named policy"),
        "trust-engine": (["user", "value"], "on: the user is an engine that enforces read restrictions itself"),
    }.items():
        cmd = sub.add_parser(name, help=what)
        for arg in args:
            cmd.add_argument(arg)
    audit = sub.add_parser("audit", help="the audit trail: of a warehouse, or without --warehouse the system's")
    for opt in ("--warehouse", "--table", "--principal", "--operation"):
        audit.add_argument(opt)
    audit.add_argument("--limit", type=int, default=50)
    for name, what in {
        "trash": "a warehouse's dropped tables and views",
        "undrop": "restore a dropped table or view",
        "purge-dropped": "delete a dropped table or view now",
    }.items():
        cmd = sub.add_parser(name, help=what)
        cmd.add_argument("warehouse")
        if name != "trash":
            cmd.add_argument("drop_id")
        if name == "undrop":
            cmd.add_argument("--to", help="restore as NS.TABLE instead of the old name")
    fsck = sub.add_parser(
        "fsck", help="check a warehouse's S3 state against the design's invariants (direct S3 access)"
    )
    fsck.add_argument("warehouse")
    fsck.add_argument("--repair", action="store_true", help="first do what the sweeper would (past-lease work only)")
    fsck.add_argument("--json", action="store_true")
    check = sub.add_parser(
        "policy-check",
        help="which users' table-data access changes under AWS's data actions, and what to add (direct S3 access)",
    )
    check.add_argument("warehouse")
    check.add_argument("--json", action="store_true")
    for name in ("history", "rollback-table"):
        cmd = sub.add_parser(name, help="a table's metadata files" if name == "history" else "undo commits (audited)")
        cmd.add_argument("warehouse")
        cmd.add_argument("table", help="NS.TABLE")
        if name == "rollback-table":
            cmd.add_argument("metadata_location", help="a file of the table's history (see history)")
    for name, what in {
        "event-sinks": "a warehouse's change-event sinks",
        "add-event-sink": "send a warehouse's change events to an SQS queue, SNS topic, EventBridge bus or webhook",
        "remove-event-sink": "stop sending (the sink's position and parked events go too)",
        "replay-events": "send a sink's parked (dead-letter) events again",
    }.items():
        cmd = sub.add_parser(name, help=what)
        cmd.add_argument("warehouse")
        if name != "event-sinks":
            cmd.add_argument("sink")
        if name == "add-event-sink":
            cmd.add_argument("kind", choices=("sqs", "sns", "eventbridge", "webhook"))
            cmd.add_argument("target", help="queue URL, topic ARN, bus name or ARN, or https:// URL")
            for opt in ("--namespace", "--table", "--type"):
                cmd.add_argument(opt, action="append", default=[], help="a filter (repeatable)")
    export = sub.add_parser("export", help="a warehouse's catalog state to one JSON file (table files stay)")
    export.add_argument("warehouse")
    export.add_argument("--to", required=True, help="the file to write ('-': standard output)")
    export.add_argument(
        "--skip-damaged",
        action="store_true",
        help="export around objects that cannot be read (listed under skipped-damaged) instead of refusing",
    )
    imp = sub.add_parser("import", help="an export into a warehouse (created if absent; refuses a non-empty one)")
    imp.add_argument("file")
    imp.add_argument("--warehouse", required=True)
    imp.add_argument(
        "--copy-data", action="store_true", help="copy the table files into the warehouse's bucket, rewriting paths"
    )
    dispatch = sub.add_parser(
        "dispatch-events",
        help="send change events to the warehouses' sinks and replicate their replicated tables (direct S3 access)",
    )
    dispatch.add_argument("--warehouse", action="append", help="only this warehouse (repeatable; default: all)")
    when = dispatch.add_mutually_exclusive_group()
    when.add_argument("--once", action="store_true", help="one pass, then exit (the default)")
    when.add_argument(
        "--every",
        type=_seconds,
        metavar="SECONDS",
        help="a pass every SECONDS until Ctrl-C (which lets the pass under way finish; a second one stops at once)",
    )
    dispatch.add_argument("--budget-seconds", type=float, default=50.0, help="time for one warehouse's pass")
    a = parser.parse_args(argv)
    direct = {"export": _transfer, "import": _transfer, "fsck": _fsck, "history": _rollback, "policy-check": _policy}
    direct.update({"rollback-table": _rollback, "dispatch-events": _dispatch})
    if a.cmd in direct:
        return _on_s3(direct[a.cmd], a)
    if not os.environ.get("CATALOG_ROOT_ACCESS_KEY") or not os.environ.get("CATALOG_ROOT_SECRET_KEY"):
        print("catalog-admin: set CATALOG_ROOT_ACCESS_KEY and CATALOG_ROOT_SECRET_KEY", file=sys.stderr)
        return 2
    base = a.url.rstrip("/") + "/admin/users"
    user = quote(getattr(a, "user", ""), safe="")
    calls: dict[str, tuple[str, str, Any]] = {
        "list-users": ("GET", base, None),
        "create-user": ("POST", base, {"name": getattr(a, "user", "")}),
        "get-user": ("GET", f"{base}/{user}", None),
        "delete-user": ("DELETE", f"{base}/{user}", None),
        "create-key": ("POST", f"{base}/{user}/access-keys", None),
        "delete-key": ("DELETE", f"{base}/{user}/access-keys/{quote(getattr(a, 'key', ''), safe='')}", None),
        "delete-policy": ("DELETE", f"{base}/{user}/policies/{quote(getattr(a, 'policy', ''), safe='')}", None),
    }
    if a.cmd == "trust-engine":
        if a.value not in ("on", "off"):
            print("catalog-admin: trust-engine USER on|off", file=sys.stderr)
            return 2
        calls["trust-engine"] = ("PATCH", f"{base}/{user}", {"trusted-engine": a.value == "on"})
    if a.cmd == "put-policy":
        try:
            with open(a.file, encoding="utf-8") as fh:
                calls["put-policy"] = ("PUT", f"{base}/{user}/policies/{quote(a.policy, safe='')}", json.load(fh))
        except (OSError, ValueError) as exc:
            print(f"catalog-admin: cannot read the policy file {a.file}: {exc}", file=sys.stderr)
            return 1
    if a.cmd == "audit":
        return _audit(a)
    if a.cmd in ("trash", "undrop", "purge-dropped"):
        trash = f"{a.url.rstrip('/')}/v1/{quote(a.warehouse, safe='')}/trash"
        drop_id = quote(getattr(a, "drop_id", ""), safe="")
        to = getattr(a, "to", None)
        dst = {"destination": {"namespace": to.split(".")[:-1], "name": to.split(".")[-1]}} if to else {}
        calls.update(
            {
                "trash": ("GET", trash, None),
                "undrop": ("POST", f"{trash}/{drop_id}/restore", dst),
                "purge-dropped": ("DELETE", f"{trash}/{drop_id}", None),
            }
        )
    if a.cmd in ("event-sinks", "add-event-sink", "remove-event-sink", "replay-events"):
        sinks = f"{a.url.rstrip('/')}/v1/{quote(a.warehouse, safe='')}/event-sinks"
        sink = quote(getattr(a, "sink", ""), safe="")
        filters = {
            k: v
            for k, v in (
                ("namespaces", getattr(a, "namespace", [])),
                ("tables", getattr(a, "table", [])),
                ("types", getattr(a, "type", [])),
            )
            if v
        }
        body = {"name": getattr(a, "sink", ""), "kind": getattr(a, "kind", ""), "target": getattr(a, "target", "")}
        calls.update(
            {
                "event-sinks": ("GET", sinks, None),
                "add-event-sink": ("POST", sinks, {**body, "filters": filters}),
                "remove-event-sink": ("DELETE", f"{sinks}/{sink}", None),
                "replay-events": ("POST", f"{sinks}/{sink}/replay", None),
            }
        )
    method, url, body = calls[a.cmd]
    try:
        resp = session().request(method, url, json=body, timeout=30)
    except requests.RequestException as exc:
        print(f"catalog-admin: cannot reach {a.url}: {type(exc).__name__}", file=sys.stderr)
        return 1
    if resp.content:
        out = sys.stdout if resp.ok else sys.stderr  # an error answer is the reason, not a result
        try:  # an error answer is one line (the ErrorModel JSON), a result reads as pretty JSON
            print(json.dumps(resp.json(), indent=2 if resp.ok else None), file=out)
        except ValueError:  # a proxy or gateway error page
            print(f"HTTP {resp.status_code}: {resp.text[:500]}", file=sys.stderr)
    return 0 if resp.ok else 1


def _audit(a: argparse.Namespace) -> int:
    """Print entries newest first, one line each, following pages up to --limit."""
    if a.warehouse:
        url = f"{a.url.rstrip('/')}/v1/{quote(a.warehouse, safe='')}/audit"
    else:
        url = f"{a.url.rstrip('/')}/admin/audit"
    params: dict[str, Any] = {"pageSize": min(a.limit, 200)}
    if a.table:
        *ns, table = a.table.split(".")
        params.update(namespace="\x1f".join(ns), table=table)
    params.update({k: v for k, v in (("principal", a.principal), ("operation", a.operation)) if v})
    shown = 0
    while shown < a.limit:
        try:
            resp = session().get(url, params=params, timeout=60)
        except requests.RequestException as exc:
            print(f"catalog-admin: cannot reach {a.url}: {type(exc).__name__}", file=sys.stderr)
            return 1
        if not resp.ok:
            print(f"HTTP {resp.status_code}: {resp.text[:500]}", file=sys.stderr)
            return 1
        page = resp.json()
        for e in page["entries"][: a.limit - shown]:
            print(json.dumps(e, sort_keys=True))
            shown += 1
        if not page.get("next-page-token"):
            break
        params["pageToken"] = page["next-page-token"]
    return 0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be a number of seconds above 0")
    return value


def _on_s3(command: Any, a: argparse.Namespace) -> int:
    """Run a command that reads and writes S3 itself; S3 or catalog trouble is one line on stderr."""
    from botocore.exceptions import BotoCoreError, ClientError

    from chalicelib.errors import CatalogError
    from chalicelib.storage import BucketNotFound, StorageUnavailable

    try:
        system = _core().settings.system_bucket
        if not _core().storage.bucket_exists(system):  # a typo would otherwise make a new catalog
            print(
                f"catalog-admin: the catalog's system bucket {system!r} does not exist on this S3 "
                "(check CATALOG_SYSTEM_BUCKET and S3_ENDPOINT_URL)",
                file=sys.stderr,
            )
            return 1
        if getattr(a, "warehouse", None) and a.cmd != "import":  # a name, not a missing bucket's traceback
            from chalicelib.core.containers import warehouses

            for name in a.warehouse if isinstance(a.warehouse, list) else [a.warehouse]:
                warehouses.require(_core(), name)
        return int(command(a))
    except CatalogError as exc:
        print(f"catalog-admin: {exc.message}", file=sys.stderr)
    except BucketNotFound as exc:
        print(
            f"catalog-admin: a bucket does not exist on this S3: {exc} (check CATALOG_BUCKET_PREFIX)", file=sys.stderr
        )
    except StorageUnavailable as exc:
        print(f"catalog-admin: S3 is unavailable or refused access: {exc}", file=sys.stderr)
        print("  (the tool reads S3 with S3_ENDPOINT_URL, CATALOG_SYSTEM_BUCKET and AWS credentials)", file=sys.stderr)
    except (BotoCoreError, ClientError) as exc:
        print(f"catalog-admin: {exc}", file=sys.stderr)
    except OSError as exc:  # the export or import file
        print(f"catalog-admin: {exc}", file=sys.stderr)
    return 1


def _fsck(a: argparse.Namespace) -> int:
    """Exit 0: clean (leftovers listed); 1: violations; 2: unfinished work for the sweeper (--repair)."""
    ctx = _core()
    from chalicelib.core.admin import fsck

    repaired = fsck.repair(ctx, a.warehouse) if a.repair else None
    report = fsck.check(ctx, a.warehouse)
    if a.json:
        print(json.dumps({**report.as_json(), "repaired": repaired}, indent=2))
    else:
        if repaired is not None:
            print(f"repaired (the sweeper's pass): {json.dumps(repaired, sort_keys=True)}")
        print(f"{a.warehouse}: checked {json.dumps(report.checked, sort_keys=True)}")
        for f in report.findings:
            print(f"  {f.severity:10s} {f.kind:20s} {f.message}")
            for key in f.keys:
                print(f"  {'':31s} {key}")
        if not report.findings:
            print("  clean")
    return 1 if report.of(fsck.VIOLATION) else 2 if report.of(fsck.UNFINISHED) else 0


def _policy(a: argparse.Namespace) -> int:
    """Exit 0 whatever it finds: a report, for the operator to act on before turning the property off."""
    from chalicelib.auth import policy_check

    report = policy_check.check(_core(), a.warehouse)
    print(json.dumps(report.as_json(), indent=2) if a.json else policy_check.render(report))
    return 0


def _core() -> Any:
    """The catalog's core on its own settings (S3_ENDPOINT_URL, CATALOG_SYSTEM_BUCKET, AWS keys):
    the operator's tools read and write S3 directly, as the functions do."""
    from chalicelib.core.primitives import audit
    from chalicelib.core.primitives.context import get_context

    _log_to_stderr()
    audit.set_actor("catalog-admin", "admin-cli", "")
    return get_context()


def _log_to_stderr() -> None:
    """The catalog's log lines (a damaged object's key, a sweeper warning) as JSON on stderr, where
    they do not mix with the command's output; warnings and errors unless CATALOG_LOG_LEVEL says."""
    from chalicelib import telemetry

    telemetry.logger(sys.stderr, os.environ.get("CATALOG_LOG_LEVEL", "WARNING"))


def _rollback(a: argparse.Namespace) -> int:
    from chalicelib.core.tables import rollback

    ctx = _core()
    *levels, name = a.table.split(".")
    if a.cmd == "history":
        print(json.dumps(rollback.history(ctx, a.warehouse, tuple(levels), name), indent=2))
    else:
        state = rollback.rollback(ctx, a.warehouse, tuple(levels), name, a.metadata_location)
        print(json.dumps({"metadata-location": state.metadata_location, "restored-from": a.metadata_location}))
    return 0


def _transfer(a: argparse.Namespace) -> int:
    ctx = _core()
    from chalicelib.core.admin import transfer

    if a.cmd == "export":
        text = json.dumps(transfer.export(ctx, a.warehouse, skip_damaged=a.skip_damaged))
        if a.to == "-":
            print(text)
        else:
            with open(a.to, "w", encoding="utf-8") as fh:
                fh.write(text)
        return 0
    with open(a.file, encoding="utf-8") as fh:
        try:
            doc = json.load(fh)
        except ValueError as exc:
            print(f"catalog-admin: {a.file} is not an export (not JSON: {exc})", file=sys.stderr)
            return 1
    print(json.dumps(transfer.import_(ctx, doc, a.warehouse, copy_data=a.copy_data)))
    return 0


def _dispatch(a: argparse.Namespace) -> int:
    """What the scheduled dispatcher function does, from here: needed when no deployed dispatcher
    watches the S3 the catalog uses (`make run` with S3_ENDPOINT_URL). One JSON report per pass."""
    import signal
    import threading

    from chalicelib import keys
    from chalicelib.handlers.dispatcher import pass_over

    ctx = _core()
    stop = threading.Event()

    def on_interrupt(signum: int, frame: Any) -> None:
        """Ctrl-C ends the loop after the pass under way (its pool threads finish their requests); a
        second one stops at once."""
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, on_interrupt) if a.every else None
    try:
        while True:
            names = a.warehouse or [
                keys.warehouse_from_record(k)
                for k in ctx.storage.list_keys(ctx.settings.system_bucket, keys.WAREHOUSES_PREFIX)
            ]
            report = pass_over(ctx, names, a.budget_seconds)
            print(json.dumps(report, sort_keys=True), flush=True)
            if not a.every:
                return 1 if any(_failed(r) for r in report.values()) else 0
            if stop.wait(a.every):
                return 0
    except KeyboardInterrupt:  # a pass cut short resends its unconfirmed events next time
        return 0
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _failed(report: dict[str, Any]) -> bool:
    """A warehouse's pass failed, or one of its sinks', or a replication destination."""
    if isinstance(report.get("error"), str):
        return True
    replication = report.get("replication") or {}
    if replication.get("error") or replication.get("failed"):
        return True
    return any(isinstance(sink, dict) and ("error" in sink or sink.get("failed")) for sink in report.values())


if __name__ == "__main__":
    sys.exit(main())
