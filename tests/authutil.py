"""Helpers to create users with policies through the admin API."""

from __future__ import annotations

import uuid
from typing import Any


def make_user(http: Any, catalog_url: str, policies: dict[str, dict[str, Any]]) -> tuple[str, str, str]:
    """Create a user with an access key and the given policies; returns (name, key id, secret)."""
    name = f"user-{uuid.uuid4().hex[:8]}"
    admin = f"{catalog_url}/admin/users"
    assert http.post(admin, json={"name": name}).status_code == 200
    key = http.post(f"{admin}/{name}/access-keys").json()
    for policy_name, doc in policies.items():
        resp = http.put(f"{admin}/{name}/policies/{policy_name}", json=doc)
        assert resp.status_code == 204, resp.text
    return name, key["access-key-id"], key["secret-access-key"]


def allow(actions: list[str], resource: str, condition: dict[str, Any] | None = None, effect: str = "Allow") -> dict:
    st: dict[str, Any] = {"Effect": effect, "Action": actions, "Resource": resource}
    if condition:
        st["Condition"] = condition
    return {"Version": "2012-10-17", "Statement": [st]}


def policy(*statements: dict[str, Any]) -> dict[str, Any]:
    """A policy document of these statements."""
    return {"Version": "2012-10-17", "Statement": list(statements)}


def statement(effect: str, actions: list[str], resource: str, condition: dict[str, Any] | None = None) -> dict:
    """One statement (`allow` wraps one in a document)."""
    out: dict[str, Any] = {"Effect": effect, "Action": actions, "Resource": resource}
    if condition:
        out["Condition"] = condition
    return out
