"""Chalice apps per route group: each Lambda function imports only its own group's modules."""

from __future__ import annotations

import importlib

from chalice.app import Chalice

GROUPS: dict[str, tuple[str, ...]] = {
    "config": ("config",),
    "auth": ("auth",),  # token exchange and the admin API
    "warehouses": ("warehouses",),
    "namespaces": ("namespaces",),
    "tables": ("tables", "views", "functions", "trash", "audit", "planning"),  # views share the tables' name space
    "transactions": ("transactions",),
    "events": ("events",),  # the events feed and the event sinks (the dispatcher is its own function)
    "data": ("data_access",),  # remote signing and vended-credential refresh: one call per S3 request
    "glue": ("chalicelib.glue.face",),  # the Glue face: one route, dispatched on X-Amz-Target
    "s3tables": ("chalicelib.s3tables.face",),  # the S3 Tables face (botocore's s3tables model)
    "iam": ("chalicelib.iam.face",),  # the IAM face: users, keys, roles, OpenID Connect providers
    "sts": ("chalicelib.sts.face",),  # the STS face: temporary credentials for roles
    "console": ("console",),  # the catalog browser: a static page that calls the API above
}
ALL = tuple(m for mods in GROUPS.values() for m in mods)


def build(modules: tuple[str, ...], name: str = "s3-iceberg-catalog") -> Chalice:
    from chalicelib.auth.plugin import install
    from chalicelib.pipeline import PIPELINE, method_not_allowed

    install(PIPELINE)
    app = Chalice(app_name=name)
    for module in modules:
        path = module if "." in module else f"chalicelib.routes.{module}"
        importlib.import_module(path).bp.register(app)
    method_not_allowed(app)
    return app
