"""The AWS query protocol (IAM, STS), driven by botocore's own service models: a form-encoded request
(`Action=CreateRole&Tags.member.1.Key=k`) to the operation's input as boto3 would pass it, and an
output (or an error) to the XML a botocore client parses. One walk over the model serves every
operation, so a face implements operations, not wire formats.

Validation follows AWS's own (the model's `required`, `min`/`max`, `pattern`, `enum`), with its
message: `1 validation error detected: Value 'x' at 'roleName' failed to satisfy constraint: ...`.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote

if TYPE_CHECKING:
    from botocore.model import ServiceModel, Shape


class QueryError(Exception):
    """An error answer: its code, message and HTTP status (5xx is the server's fault: "Receiver")."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.status = code, message, status

    @property
    def sender(self) -> bool:
        return self.status < 500


@functools.cache
def service(name: str) -> ServiceModel:
    """botocore's model of the service, loaded on first use (botocore and the model cost ~50 ms)."""
    from botocore.loaders import create_loader
    from botocore.model import ServiceModel

    # AWS_DATA_PATH as a botocore session reads it: a newer model put there is the one clients speak.
    loader = create_loader(os.environ.get("AWS_DATA_PATH"))
    return ServiceModel(loader.load_service_model(name, "service-2"), service_name=name)


# ---- requests ------------------------------------------------------------------------------------


class _Node:
    """The parameters as a tree of their dotted names: `Tags.member.1.Key` is Tags > member > 1 > Key."""

    __slots__ = ("value", "children")

    def __init__(self) -> None:
        self.value: str | None = None
        self.children: dict[str, _Node] = {}


_ABSENT: Any = object()


def parse(service_name: str, body: bytes | str, query: dict[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """The operation named by `Action` and its input, as boto3's parameters (the query string's
    parameters count too, the body's over them). Unknown parameters are ignored, as AWS does."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    params = {**(query or {}), **dict(parse_qsl(text, keep_blank_values=True))}
    model = service(service_name)
    action = params.get("Action")
    if not action:
        raise QueryError("MissingAction", "Missing Action")
    if action not in model.operation_names:
        raise QueryError("InvalidAction", f"Could not find operation {action} for version {model.api_version}")
    shape = model.operation_model(action).input_shape
    if shape is None:
        return action, {}
    errors: list[str] = []
    found = _read(_tree(params), shape, "", errors)
    if errors:
        plural = "s" if len(errors) > 1 else ""
        raise QueryError("ValidationError", f"{len(errors)} validation error{plural} detected: " + "; ".join(errors))
    return action, found


def _tree(params: dict[str, str]) -> _Node:
    root = _Node()
    for key, value in params.items():
        node = root
        for part in key.split("."):
            node = node.children.setdefault(part, _Node())
        node.value = value
    return root


def _wire_name(shape: Shape, name: str) -> str:
    # A flattened list with a named member is sent (and answered) under its member's name.
    if shape.type_name == "list" and shape.serialization.get("flattened"):
        return str(shape.member.serialization.get("name", name))
    return str(shape.serialization.get("name", name))


def _items(node: _Node) -> list[_Node]:
    """The numbered children (`.1`, `.2`, ...), in their numbers' order."""
    return [node.children[k] for k in sorted((k for k in node.children if k.isdigit()), key=int)]


def _read(node: _Node, shape: Shape, path: str, errors: list[str]) -> Any:
    """The value under `node` as `shape` says, or _ABSENT; what fails the model goes to `errors`."""
    kind = shape.type_name
    value: Any
    if kind == "structure":
        out: dict[str, Any] = {}
        for name, member in shape.members.items():
            child = node.children.get(_wire_name(member, name))
            where = f"{path}.{name[:1].lower()}{name[1:]}" if path else name[:1].lower() + name[1:]
            value = _ABSENT if child is None else _read(child, member, where, errors)
            if value is not _ABSENT:
                out[name] = value
            elif name in shape.required_members:
                errors.append(f"Value null at '{where}' failed to satisfy constraint: Member must not be null")
        return out
    if kind == "list":
        flat = shape.serialization.get("flattened")
        holder = node if flat else node.children.get(shape.member.serialization.get("name", "member"), _Node())
        items = _items(holder)
        if not items and node.value is None:
            return _ABSENT  # `Tags.x=1` is no list; `Tags=` (no items) is how botocore sends an empty one
        found = [
            _read(item, shape.member, f"{path}.{i}" + ("" if flat else ".member"), errors)
            for i, item in enumerate(items, 1)
        ]
        value = [v for v in found if v is not _ABSENT]
    elif kind == "map":
        entries = _items(node if shape.serialization.get("flattened") else node.children.get("entry", _Node()))
        key_name = shape.key.serialization.get("name", "key")
        value_name = shape.value.serialization.get("name", "value")
        value = {}
        for i, entry in enumerate(entries, 1):
            k, v = (entry.children.get(n, _Node()) for n in (key_name, value_name))
            k, v = _read(k, shape.key, f"{path}.{i}.key", errors), _read(v, shape.value, f"{path}.{i}.value", errors)
            if k is not _ABSENT and v is not _ABSENT:
                value[k] = v
    elif node.value is None:
        return _ABSENT  # `X.y=1` names no scalar X
    else:
        try:
            value = _scalar(kind, node.value)
        except ValueError:
            errors.append(
                f"Value '{node.value}' at '{path}' failed to satisfy constraint: Member must be {_KINDS[kind]}"
            )
            return _ABSENT
    errors.extend(
        f"{_shown(shape, value)} at '{path}' failed to satisfy constraint: Member must {c}"
        for c in _broken(shape, value)
    )
    return value


_KINDS = {"integer": "an integer", "long": "an integer", "float": "a number", "double": "a number"}
_KINDS |= {"boolean": "true or false", "timestamp": "an ISO 8601 timestamp", "blob": "base64"}


def _scalar(kind: str, text: str) -> Any:
    if kind in ("integer", "long"):
        if not re.fullmatch(r"[+-]?[0-9]+", text):  # as Java reads one: not int()'s "1_000" or " 1"
            raise ValueError(text)
        return int(text)
    if kind in ("float", "double"):
        return float(text)
    if kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise ValueError(text)
        return text.lower() == "true"
    if kind == "timestamp":  # botocore sends ISO 8601 for the query protocol; epoch seconds accepted too
        when = datetime.fromtimestamp(float(text), UTC) if text.replace(".", "", 1).isdigit() else None
        when = when or datetime.fromisoformat(text)
        return when if when.tzinfo else when.replace(tzinfo=UTC)
    if kind == "blob":
        return base64.b64decode(text, validate=True)  # binascii.Error is a ValueError
    return text


def _broken(shape: Shape, value: Any) -> list[str]:
    """The model's constraints the value fails, in AWS's words."""
    meta, out = shape.metadata, list[str]()
    sized = isinstance(value, str | list | dict)
    measure, unit = (len(value), "length") if sized else (value, "value")
    if isinstance(measure, int | float) and not isinstance(value, bool):
        if "min" in meta and measure < meta["min"]:
            out.append(f"have {unit} greater than or equal to {meta['min']}")
        if "max" in meta and measure > meta["max"]:
            out.append(f"have {unit} less than or equal to {meta['max']}")
    if isinstance(value, str):
        if "pattern" in meta and not _pattern(meta["pattern"]).fullmatch(value):
            out.append(f"satisfy regular expression pattern: {meta['pattern']}")
        if meta.get("enum") and value not in meta["enum"]:
            out.append(f"satisfy enum value set: [{', '.join(meta['enum'])}]")
    return out


def _shown(shape: Shape, value: Any) -> str:
    # AWS leaves a sensitive value (a password, a token) out of its message.
    if shape.metadata.get("sensitive"):
        return "Value"
    return f"Value '{'[' + ', '.join(map(str, value)) + ']' if isinstance(value, list) else value}'"


_JAVA_Z = " \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"  # Unicode's Z: the separators


@functools.cache
def _pattern(java: str) -> re.Pattern[str]:
    """The model's Java regex in Python's: Java's \\w is ASCII (re.ASCII), and Python has no \\p{..}.
    IAM's tags use [\\p{L}\\p{Z}\\p{N}_...]: inside a class, Unicode \\w is letters, numbers and '_'."""
    if "\\p{" not in java:
        return re.compile(java, re.ASCII)
    return re.compile(java.replace("\\p{L}", "\\w").replace("\\p{N}", "\\w").replace("\\p{Z}", _JAVA_Z))


# ---- responses -----------------------------------------------------------------------------------


def render(service_name: str, operation: str, result: dict[str, Any], request_id: str) -> bytes:
    """The XML answer of a successful operation: the output shape's members in the model's order
    under `<{operation}Result>`, then the request id. Names not in the shape, and None, are left out."""
    model = service(service_name)
    root = ET.Element(f"{operation}Response", xmlns=model.metadata["xmlNamespace"])
    shape = model.operation_model(operation).output_shape
    if shape is not None:
        wrapper = shape.serialization.get("resultWrapper")
        _members(ET.SubElement(root, wrapper) if wrapper else root, shape, result)
    ET.SubElement(ET.SubElement(root, "ResponseMetadata"), "RequestId").text = request_id
    return ET.tostring(root, encoding="unicode").encode()


def render_error(service_name: str, code: str, message: str, request_id: str, sender: bool = True) -> bytes:
    """The XML of an error answer, as IAM and STS send it (botocore reads Error/Code and Error/Message)."""
    root = ET.Element("ErrorResponse", xmlns=service(service_name).metadata["xmlNamespace"])
    error = ET.SubElement(root, "Error")
    for tag, text in (("Type", "Sender" if sender else "Receiver"), ("Code", code), ("Message", message)):
        ET.SubElement(error, tag).text = text
    ET.SubElement(root, "RequestId").text = request_id
    return ET.tostring(root, encoding="unicode").encode()


def _members(parent: ET.Element, shape: Shape, value: dict[str, Any]) -> None:
    for name, member in shape.members.items():
        if value.get(name) is not None:
            _put(parent, _wire_name(member, name), member, value[name])


def _put(parent: ET.Element, tag: str, shape: Shape, value: Any) -> None:
    kind = shape.type_name
    if kind == "structure":
        _members(ET.SubElement(parent, tag), shape, value)
    elif kind == "list":
        flat = shape.serialization.get("flattened")  # items repeat in the parent, under `tag`
        holder, item_tag = (
            (parent, tag) if flat else (ET.SubElement(parent, tag), shape.member.serialization.get("name", "member"))
        )
        for item in value:
            _put(holder, item_tag, shape.member, item)
    elif kind == "map":
        flat = shape.serialization.get("flattened")
        holder = parent if flat else ET.SubElement(parent, tag)
        for k, v in value.items():
            entry = ET.SubElement(holder, tag if flat else "entry")
            _put(entry, shape.key.serialization.get("name", "key"), shape.key, k)
            _put(entry, shape.value.serialization.get("name", "value"), shape.value, v)
    elif shape.name == "policyDocumentType":
        # IAM answers a policy document URL-encoded (JSON text or a dict given): botocore's parser
        # leaves it so, a botocore client's after-call handler (keyed on this shape name) unquotes
        # it and json.loads it into a dict.
        ET.SubElement(parent, tag).text = quote(value if isinstance(value, str) else json.dumps(value), safe="")
    else:
        ET.SubElement(parent, tag).text = _text(kind, value)


def _text(kind: str, value: Any) -> str:
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "timestamp" and isinstance(value, int | float):
        value = datetime.fromtimestamp(value, UTC)
    if kind == "timestamp" and isinstance(value, datetime):
        # AWS's form, 2026-12-07T19:00:00Z; a naive datetime is UTC; fractions only when there are some.
        utc = value.astimezone(UTC) if value.tzinfo else value
        return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if utc.microsecond else "%Y-%m-%dT%H:%M:%SZ")
    if kind == "blob":
        return base64.b64encode(value.encode() if isinstance(value, str) else value).decode()
    return str(value)
