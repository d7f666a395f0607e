"""Shared job plumbing: logging, argument parsing, exit codes, table names."""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Callable
from typing import Any

from spark_jobs.session import JobSettings, add_arguments, build_session, settings_from_args

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
_IDENT = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")


def quote_identifier(name: str) -> str:
    """One Spark SQL identifier, whatever it holds: in backticks, each backtick doubled (Spark's own
    quoteIdentifier). Every name a job puts into SQL goes through this or a name check."""
    return "`" + name.replace("`", "``") + "`"


def quote_name(*parts: str) -> str:
    """A multi-part name (catalog, namespace levels, table, metadata table), each part quoted."""
    return ".".join(quote_identifier(p) for p in parts)


def logger(name: str) -> logging.Logger:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    return logging.getLogger(name)


def table_name(value: str) -> str:
    if not _IDENT.match(value):
        raise argparse.ArgumentTypeError(f"expected namespace.table in lowercase letters, digits and _: {value!r}")
    return value


def run_job(
    name: str,
    configure: Callable[[argparse.ArgumentParser], None],
    body: Callable[[Any, argparse.Namespace, JobSettings, logging.Logger], Any],
    argv: list[str] | None,
) -> int:
    parser = argparse.ArgumentParser(prog=f"spark_jobs.{name}")
    configure(parser)
    add_arguments(parser)
    try:
        args = parser.parse_args(argv)
        settings = settings_from_args(args)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    except ValueError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    log = logger(f"spark_jobs.{name}")
    log.info("settings: %s", settings.redacted())
    try:
        spark = build_session(settings, app_name=f"iceberg-{name}")
        body(spark, args, settings, log)
    except Exception as exc:  # noqa: BLE001 - a job reports and exits non-zero
        log.error("%s failed: %s", name, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return EXIT_FAILED
    return EXIT_OK
