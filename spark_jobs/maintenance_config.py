"""What maintenance a table wants, read from the catalog's S3 Tables API, and where its runs are reported.

The catalog stores S3 Tables maintenance configuration (PutTableMaintenanceConfiguration,
PutTableBucketMaintenanceConfiguration). `spark_jobs.maintain` follows every type that was put for
a table (or its bucket); for the others its own options decide. It reports each run, which
GetTableMaintenanceJobStatus shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from spark_jobs.session import JobSettings


@dataclass
class Plan:
    """The governed steps of one table's run; None for a step that is disabled."""

    compaction: dict[str, Any] | None = None  # target_mb, strategy
    snapshots: dict[str, Any] | None = None  # retain_last, older_than_hours
    orphans: dict[str, Any] | None = None  # older_than_hours
    outcome: dict[str, dict[str, str]] = field(default_factory=dict)
    # Types the catalog says must not run on this table now (their owner may no longer), and why.
    refused: dict[str, str] = field(default_factory=dict)


STEP_TYPES = {
    "rewrite_data_files": "icebergCompaction",
    "expire_snapshots": "icebergSnapshotManagement",
    "remove_orphan_files": "icebergUnreferencedFileRemoval",
}


class CatalogMaintenance:
    """Signed calls to the catalog's S3 Tables API (service s3tables) with the job's catalog keys."""

    def __init__(self, settings: JobSettings) -> None:
        self.settings = settings
        self.base = settings.catalog_url.rstrip("/").rsplit("/_iceberg", 1)[0] + "/_s3tables"
        buckets = self._call("GET", "/buckets", {"prefix": settings.warehouse})["tableBuckets"]
        found = [b["arn"] for b in buckets if b["name"] == settings.warehouse]
        if not found:
            raise LookupError(f"table bucket {settings.warehouse!r} not found")
        self.bucket = quote(found[0], safe="")
        self.bucket_config = self._call("GET", f"/buckets/{self.bucket}/maintenance", {"stored": "true"})[
            "configuration"
        ]

    def _call(self, method: str, path: str, query: dict[str, str] | None = None, body: Any = None) -> Any:
        import requests
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        url = self.base + path + (f"?{urlencode(query)}" if query else "")
        data = json.dumps(body).encode() if body is not None else b""
        req = AWSRequest(method=method, url=url, data=data, headers={"Content-Type": "application/json"})
        creds = Credentials(self.settings.access_key_id, self.settings.secret_access_key)
        SigV4Auth(creds, "s3tables", self.settings.signing_region).add_auth(req)
        resp = requests.request(method, url, data=data, headers=dict(req.headers), timeout=30)
        resp.raise_for_status()
        return resp.json() if resp.content else None

    def _table_path(self, table: str) -> str:
        namespace, name = table.rsplit(".", 1)
        return f"/tables/{self.bucket}/{namespace}/{name}"

    def plan(self, table: str, fallback: Plan) -> Plan:
        """The table's configured types; the fallback (the job's options) for types never put. A type
        that deletes files runs only while whoever put it may write the table's data: the catalog says
        which it refuses now, and those are not run (nor replaced by the job's options)."""
        answer = self._call("GET", self._table_path(table) + "/maintenance", {"stored": "true"})
        config = answer["configuration"]
        plan = Plan(fallback.compaction, fallback.snapshots, fallback.orphans)
        plan.refused = {str(k): str(v)[:2000] for k, v in (answer.get("refused") or {}).items()}
        compaction = config.get("icebergCompaction")
        if compaction is not None:
            own = compaction.get("settings", {}).get("icebergCompaction", {})
            strategy = "sort" if own.get("strategy") == "sort" else "binpack"
            enabled = compaction.get("status") == "enabled"
            plan.compaction = (
                {"target_mb": int(own.get("targetFileSizeMB", 512)), "strategy": strategy} if enabled else None
            )
        snapshots = config.get("icebergSnapshotManagement")
        if snapshots is not None:
            own = snapshots.get("settings", {}).get("icebergSnapshotManagement", {})
            enabled = snapshots.get("status") == "enabled"
            plan.snapshots = (
                {
                    "retain_last": int(own.get("minSnapshotsToKeep", 1)),
                    "older_than_hours": float(own.get("maxSnapshotAgeHours", 120)),
                }
                if enabled
                else None
            )
        orphans = self.bucket_config.get("icebergUnreferencedFileRemoval")
        if orphans is not None:
            own = orphans.get("settings", {}).get("icebergUnreferencedFileRemoval", {})
            enabled = orphans.get("status") == "enabled"
            plan.orphans = {"older_than_hours": 24.0 * int(own.get("unreferencedDays", 3))} if enabled else None
        if "icebergSnapshotManagement" in plan.refused:
            plan.snapshots = None
        if "icebergUnreferencedFileRemoval" in plan.refused:
            plan.orphans = None
        return plan

    def report(self, table: str, outcome: dict[str, dict[str, str]]) -> None:
        """PUT the run's outcome (a catalog extension of the S3 Tables API)."""
        self._call("PUT", self._table_path(table) + "/maintenance-job-status", body={"status": outcome})


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
