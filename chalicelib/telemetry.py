"""Operations telemetry: one structured log line and one metrics record per request.

- Logs: the "catalog" logger writes one JSON object per line (Powertools' Logger shape: level,
  location, message, timestamp, service, then the line's own fields), and every chalicelib logger
  is its child, so every line (a request's, a warning's, the sweeper's) is JSON. While a request
  runs, its lines carry its keys: request id (Lambda's), the caller's X-Request-Id and
  Idempotency-Key, principal, face and operation. Nothing secret is ever a field: no header, no
  query string, no body.
- Metrics: the Embedded Metric Format, one record per request (so the local server's threads never
  mix two), namespace CATALOG_METRICS_NAMESPACE (IcebergCatalog), dimension sets
  [Face, Operation, service] and [service] (what alarms watch). docs/operations.md lists every metric.
- Both are written here with the standard library: AWS Lambda Powertools wrote the same shapes,
  and its import (jmespath, gzip, its own logger machinery) cost every cold start ~80-160 ms.
- The local server (chalicelib/devserver.py) also keeps them in a Prometheus registry
  (prometheus-client, a development dependency), served at GET /metrics to the root user.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from chalicelib import scope

SERVICE = "catalog"
NAMESPACE = os.environ.get("CATALOG_METRICS_NAMESPACE", "IcebergCatalog")
EMF = os.environ.get("CATALOG_METRICS_EMF", "true").lower() not in ("0", "false", "no")

_logger: Any = None
_prometheus: Any = None  # the registry's metrics, once the local server enables them


class JsonLogger:
    """The "catalog" logger's handler and the keys its lines carry (the calls of Powertools'
    Logger the catalog made: info/warning/..., thread_safe_append_keys, thread_safe_clear_keys)."""

    def __init__(self, service: str, level: str, stream: Any = None) -> None:
        self.service = service
        self._log = logging.getLogger(service)
        self._log.setLevel(level.upper())
        handler = logging.StreamHandler(stream or sys.stdout)
        handler.setFormatter(_JsonFormatter(self))
        self._log.handlers = [handler]
        self._log.propagate = False  # Lambda's root handler would print each line again

    def thread_safe_append_keys(self, **keys: Any) -> None:
        """Keys for the lines of the request this code works for (its scope: chalicelib/scope.py)."""
        current = scope.current()
        current.log_keys = {**current.log_keys, **keys}

    def thread_safe_clear_keys(self) -> None:
        scope.current().log_keys = {}

    def __getattr__(self, name: str) -> Any:  # info, warning, error, exception, debug
        return getattr(self._log, name)


def _log_keys() -> dict[str, Any]:
    current = scope.peek()
    return current.log_keys if current is not None else {}


_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class _JsonFormatter(logging.Formatter):
    def __init__(self, owner: JsonLogger) -> None:
        super().__init__()
        self.owner = owner

    def format(self, record: logging.LogRecord) -> str:
        import json
        import time

        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created))
        line: dict[str, Any] = {
            "level": record.levelname,
            "location": f"{record.funcName}:{record.lineno}",
            "message": record.getMessage(),
            "timestamp": f"{stamp},{int(record.msecs):03d}{time.strftime('%z', time.localtime(record.created))}",
            "service": self.owner.service,
            **_log_keys(),
        }
        line.update({k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS})
        if record.exc_info and record.exc_info[0] is not None:
            line["exception"] = self.formatException(record.exc_info)
            line["exception_name"] = record.exc_info[0].__name__
        return json.dumps(line, default=str, separators=(",", ":"))


def logger(stream: Any = None, level: str | None = None) -> Any:
    """The JSON logger behind logging.getLogger("catalog") and its children (made once: a later
    call's stream and level apply only if it is the first)."""
    global _logger
    if _logger is None:
        _logger = JsonLogger(SERVICE, level or os.environ.get("CATALOG_LOG_LEVEL", "INFO"), stream)
    return _logger


@dataclass
class RequestRecord:
    """What one request did, for its log line and its metrics."""

    face: str
    operation: str
    method: str
    path: str
    status: int
    latency_ms: float
    s3_requests: int
    principal: str = "anonymous"
    request_id: str = ""
    client_request_id: str = ""
    idempotency_key: str = ""
    target: dict[str, str] = field(default_factory=dict)
    error: str = ""
    events: dict[str, float] = field(default_factory=dict)
    samples: dict[str, list[float]] = field(default_factory=dict)
    # The warehouse it names has request metrics on (PutTableBucketMetricsConfiguration).
    table_bucket_metrics: bool = False

    @property
    def in_doubt(self) -> bool:
        """The answer said the change may or may not have been applied (500 CommitStateUnknown)."""
        return self.error == "CommitStateUnknown"


def request_keys(record: RequestRecord) -> dict[str, str]:
    """The keys every log line of the request carries."""
    keys = {
        "request_id": record.request_id,
        "client_request_id": record.client_request_id,
        "idempotency_key": record.idempotency_key,
        "principal": record.principal,
        "face": record.face,
        "operation": record.operation,
    }
    return {k: v for k, v in keys.items() if v}


def begin_request(record: RequestRecord) -> None:
    logger().thread_safe_append_keys(**request_keys(record))


def end_request(record: RequestRecord) -> None:
    """The request's one log line and its metrics (after its response is built)."""
    log = logger()
    line: dict[str, Any] = {
        "status": record.status,
        "latency_ms": round(record.latency_ms, 2),
        "s3_requests": record.s3_requests,
        "s3_retries": int(record.events.get("S3Retries", 0)),
        "in_doubt": record.in_doubt,
        "method": record.method,
        "path": record.path[:300],
        **{k: v for k, v in record.target.items() if v},
    }
    if record.error:
        line["error"] = record.error
    if record.events:
        line["events"] = {k: v for k, v in sorted(record.events.items())}
    log.info("request", extra=line)
    log.thread_safe_clear_keys()
    metrics = request_metrics(record)
    bucket = record.target.get("warehouse", "") if record.table_bucket_metrics else ""
    if EMF:
        emit(metrics, {"Face": record.face, "Operation": record.operation}, record.samples)
        if bucket:
            emit(_bucket_metrics(metrics), {"TableBucketName": bucket, "Operation": record.operation}, rollup=False)
    if _prometheus is not None:
        _observe(record, metrics)
        if bucket:
            _observe_bucket(record, bucket)


# What a metered table bucket's requests add (docs/operations.md, "Request metrics per table bucket").
BUCKET_METRICS = ("Requests", "Latency", "S3Requests", "Errors4xx", "Errors5xx")


def _bucket_metrics(metrics: dict[str, tuple[str, float]]) -> dict[str, tuple[str, float]]:
    return {name: metrics[name] for name in BUCKET_METRICS}


def request_metrics(record: RequestRecord) -> dict[str, tuple[str, float]]:
    """Metric name -> (unit, value) for one request."""
    cls = record.status // 100
    out: dict[str, tuple[str, float]] = {
        "Requests": ("Count", 1.0),
        "Latency": ("Milliseconds", record.latency_ms),
        "S3Requests": ("Count", float(record.s3_requests)),
        "Errors4xx": ("Count", 1.0 if cls == 4 else 0.0),
        "Errors5xx": ("Count", 1.0 if cls == 5 else 0.0),
    }
    if record.status == 409:
        out["Conflicts"] = ("Count", 1.0)
    if record.error == "CommitStateUnknown":
        out["CommitStateUnknown"] = ("Count", 1.0)
    for name, value in record.events.items():
        out.setdefault(name, ("Count", value))
    return out


def emit(
    metrics: dict[str, tuple[str, float]], dimensions: dict[str, str], samples: Any = None, rollup: bool = True
) -> None:
    """One EMF record on stdout: the metrics under `dimensions` (+ service), and under service alone
    (rollup) or else under the first dimension alone (a table bucket's own totals, which must not
    count its requests twice in the service's)."""
    import json
    import time

    dims = {name: value or "-" for name, value in dimensions.items()}
    values: dict[str, list[float]] = {}
    units: dict[str, str] = {}
    for name, (unit, value) in metrics.items():
        values.setdefault(name, []).append(value)
        units[name] = unit
    for name, sampled in (samples or {}).items():
        values.setdefault(name, []).extend(sampled)
        units.setdefault(name, "Count")
    if not values:
        return
    record: dict[str, Any] = {
        "_aws": {
            "Timestamp": int(time.time() * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": NAMESPACE,
                    "Dimensions": [[*dims, "service"], ["service"] if rollup else [next(iter(dims)), "service"]],
                    "Metrics": [{"Name": name, "Unit": units[name]} for name in values],
                }
            ],
        },
        **dims,
        "service": SERVICE,
        **{name: v[0] if len(v) == 1 else v for name, v in values.items()},
    }
    sys.stdout.write(json.dumps(record, separators=(",", ":")) + "\n")
    sys.stdout.flush()


# ---- the local server's Prometheus registry ------------------------------------------------------


def enable_prometheus() -> None:
    """Keep every request's metrics in a Prometheus registry (the local server calls this)."""
    global _prometheus
    from prometheus_client import CollectorRegistry, Counter, Histogram

    registry = CollectorRegistry()
    _prometheus = {
        "registry": registry,
        "requests": Counter("catalog_requests", "Requests", ["face", "operation", "status_class"], registry=registry),
        "latency": Histogram(
            "catalog_request_latency_seconds", "Request latency", ["face", "operation"], registry=registry
        ),
        "s3": Counter("catalog_s3_requests", "S3 requests made", ["face", "operation"], registry=registry),
        "events": Counter(
            "catalog_events", "Events (metric names of docs/operations.md)", ["event"], registry=registry
        ),
        "bucket_requests": Counter(
            "catalog_table_bucket_requests",
            "Requests naming a table bucket whose request metrics are on",
            ["table_bucket", "operation", "status_class"],
            registry=registry,
        ),
        "bucket_latency": Histogram(
            "catalog_table_bucket_request_latency_seconds",
            "Request latency, per metered table bucket",
            ["table_bucket", "operation"],
            registry=registry,
        ),
        "bucket_s3": Counter(
            "catalog_table_bucket_s3_requests",
            "S3 requests made, per metered table bucket",
            ["table_bucket", "operation"],
            registry=registry,
        ),
        "batches": Histogram(
            "catalog_group_commit_batch_size",
            "Commits written by one pointer CAS",
            buckets=(1, 2, 4, 8, 16, 32, 64),
            registry=registry,
        ),
    }


def prometheus_enabled() -> bool:
    return _prometheus is not None


def _observe(record: RequestRecord, metrics: dict[str, tuple[str, float]]) -> None:
    p = _prometheus
    labels = (record.face, record.operation)
    p["requests"].labels(*labels, f"{record.status // 100}xx").inc()
    p["latency"].labels(*labels).observe(record.latency_ms / 1000)
    p["s3"].labels(*labels).inc(record.s3_requests)
    for name, (_, value) in metrics.items():
        if name not in ("Requests", "Latency", "S3Requests", "Errors4xx", "Errors5xx") and value:
            p["events"].labels(name).inc(value)
    for value in record.samples.get("GroupCommitBatchSize", []):
        p["batches"].observe(value)


def _observe_bucket(record: RequestRecord, bucket: str) -> None:
    p = _prometheus
    p["bucket_requests"].labels(bucket, record.operation, f"{record.status // 100}xx").inc()
    p["bucket_latency"].labels(bucket, record.operation).observe(record.latency_ms / 1000)
    p["bucket_s3"].labels(bucket, record.operation).inc(record.s3_requests)


def exposition() -> tuple[bytes, str]:
    """The registry in Prometheus' text format, and its content type."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return generate_latest(_prometheus["registry"]), CONTENT_TYPE_LATEST
