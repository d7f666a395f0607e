"""Iceberg REST wire format <-> the core's typed commands and results (parse and format only)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from chalicelib.core.catalog import commands
from chalicelib.core.model import Namespace, TableChange, TableState
from chalicelib.errors import BadRequest
from chalicelib.names import check_namespace, check_table


def etag_for(metadata_location: str) -> str:
    return '"' + hashlib.sha256(metadata_location.encode()).hexdigest()[:32] + '"'


def load_result(
    state: TableState,
    config: dict[str, str],
    credentials: list[dict[str, Any]] | None = None,
    restrictions: dict[str, Any] | None = None,
) -> str:
    """LoadTableResult as JSON text, embedding the stored metadata bytes without re-encoding."""
    signing = remote_signing_config(config)
    return (
        '{"metadata-location":'
        + json.dumps(state.metadata_location)
        + ',"metadata":'
        + state.raw_metadata.decode()
        + ',"config":'
        + json.dumps(config)
        + (',"storage-credentials":' + json.dumps(credentials) if credentials else "")
        + (',"remote-signing-config":' + json.dumps(signing) if signing is not None else "")
        + (',"read-restrictions":' + json.dumps(restrictions) if restrictions else "")
        + "}"
    )


def remote_signing_config(config: dict[str, str]) -> dict[str, Any] | None:
    """The spec's RemoteSigningConfig for a table its client signs for: what the signer client must
    pass through to the default signing endpoint (the table's /sign), for clients after Iceberg
    Java 1.11 that read it instead of `s3.signer.*`: a staged table's creation grant as the
    `staged` property, and a SigV4 client's signing token as its Authorization header."""
    if config.get("s3.remote-signing-enabled") != "true":
        return None
    from urllib.parse import parse_qs, urlsplit

    out: dict[str, Any] = {}
    staged = parse_qs(urlsplit(config.get("s3.signer.endpoint", "")).query).get("staged")
    if staged:
        out["properties"] = {"staged": staged[0]}
    if config.get("header.Authorization"):
        out["headers"] = {"Authorization": [config["header.Authorization"]]}
    return out


def with_etag(
    state: TableState,
    config: dict[str, str],
    credentials: list[dict[str, Any]] | None = None,
    restrictions: dict[str, Any] | None = None,
    tag: str = "",
) -> tuple[int, str, dict[str, str]]:
    """A LoadTableResult and the ETag of its metadata location and the caller's restrictions' tag
    (none for a staged create)."""
    location = state.metadata_location
    body = load_result(state, config, credentials, restrictions)
    headers = {"ETag": etag_for(location + tag)} if location else {}
    return 200, body, {**headers, **caching(credentials, restrictions)}


def caching(credentials: Any, restrictions: Any) -> dict[str, str]:
    """An answer carrying credentials is stored nowhere; one carrying read restrictions is the
    caller's alone (the spec: not cached outside the authenticated scope)."""
    if credentials:
        return {"Cache-Control": "no-store"}
    return {"Cache-Control": "private"} if restrictions else {}


# The REST create body is the Iceberg table definition S3 Tables' CreateTable carries too.
parse_create = commands.new_table


def parse_change(body: Any, ns: Namespace | None = None, name: str | None = None) -> TableChange:
    """A CommitTableRequest; the path names the table (ns, name) unless it is a transaction's change."""

    if not isinstance(body, dict):
        raise BadRequest("Invalid commit request: expected a JSON object")
    ident = body.get("identifier")
    if ns is None or name is None:
        if not isinstance(ident, dict):
            raise BadRequest('Invalid transaction: every table change needs an "identifier"')
        ns, name = check_namespace(ident.get("namespace")), check_table(ident.get("name"))
    elif ident is not None:
        if not isinstance(ident, dict) or tuple(ident.get("namespace") or ()) != ns or ident.get("name") != name:
            raise BadRequest('Invalid commit request: "identifier" does not match the table in the path')
    return commands.parse_change(ns, name, body.get("requirements", []), body.get("updates", []))


def parse_transaction(body: Any) -> list[TableChange]:
    if not isinstance(body, dict) or not isinstance(body.get("table-changes"), list) or not body["table-changes"]:
        raise BadRequest('Invalid transaction: "table-changes" must be a non-empty array')
    return [parse_change(change) for change in body["table-changes"]]


def parse_rename(body: Any) -> tuple[tuple[Namespace, str], tuple[Namespace, str]]:
    if (
        not isinstance(body, dict)
        or not isinstance(body.get("source"), dict)
        or not isinstance(body.get("destination"), dict)
    ):
        raise BadRequest('Invalid rename request: "source" and "destination" identifiers are required')
    src, dst = body["source"], body["destination"]
    return (
        (check_namespace(src.get("namespace")), check_table(src.get("name"))),
        (check_namespace(dst.get("namespace")), check_table(dst.get("name"))),
    )


def parse_register(body: Any) -> tuple[str, object, bool]:
    if not isinstance(body, dict):
        raise BadRequest("Invalid register-table request: expected a JSON object")
    overwrite = body.get("overwrite", False)
    if not isinstance(overwrite, bool):
        raise BadRequest('Invalid register-table request: "overwrite" must be a boolean')
    return check_table(body.get("name")), body.get("metadata-location"), overwrite
