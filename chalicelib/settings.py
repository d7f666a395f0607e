"""Deployment settings, read once from the environment."""

from __future__ import annotations

import fnmatch
import ipaddress
import json
import logging
import os
from dataclasses import dataclass, field


def _flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    return default if raw is None else raw.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class WarehouseEndpoint:
    """Where the buckets of the warehouses whose names match `pattern` live, when not on the
    catalog's own S3: another region, or another S3-compatible provider (a replica's destination)."""

    pattern: str  # a warehouse name, or an fnmatch pattern of names ("dr-*")
    endpoint: str | None  # the S3 API the catalog calls (None: the region's AWS endpoint)
    region: str
    client_endpoint: str | None  # the S3 endpoint handed to clients, if not `endpoint`


def _warehouse_endpoints(raw: str | None, region: str) -> tuple[WarehouseEndpoint, ...]:
    """CATALOG_WAREHOUSE_S3_ENDPOINTS: {"<name or pattern>": {"endpoint", "region", "client-endpoint"}}."""
    if not raw or not raw.strip():
        return ()
    try:
        doc = json.loads(raw)
    except ValueError:
        raise ValueError("CATALOG_WAREHOUSE_S3_ENDPOINTS must be a JSON object") from None
    if not isinstance(doc, dict):
        raise ValueError("CATALOG_WAREHOUSE_S3_ENDPOINTS must be a JSON object")
    out = []
    for pattern, spec in doc.items():
        if not isinstance(spec, dict) or set(spec) - {"endpoint", "region", "client-endpoint"}:
            raise ValueError(f"CATALOG_WAREHOUSE_S3_ENDPOINTS[{pattern!r}]: expected endpoint, region, client-endpoint")
        if not all(isinstance(v, str) and v for v in spec.values()) or not (spec.get("endpoint") or spec.get("region")):
            raise ValueError(f"CATALOG_WAREHOUSE_S3_ENDPOINTS[{pattern!r}]: an endpoint or a region is required")
        endpoint = spec.get("endpoint")
        out.append(
            WarehouseEndpoint(
                str(pattern), endpoint, spec.get("region") or region, spec.get("client-endpoint") or endpoint
            )
        )
    return tuple(out)


def _networks(raw: str | None) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """CATALOG_EVENT_SINK_ALLOWED_NETWORKS: comma-separated CIDRs (`10.20.0.0/16,fd12::/48`)."""
    out = []
    for item in (raw or "").split(","):
        if item.strip():
            try:
                out.append(ipaddress.ip_network(item.strip(), strict=False))
            except ValueError:
                raise ValueError(f"CATALOG_EVENT_SINK_ALLOWED_NETWORKS: {item.strip()[:60]!r} is not a CIDR") from None
    return tuple(out)


@dataclass(frozen=True)
class Settings:
    s3_endpoint_url: str | None = None
    region: str = "us-east-1"
    system_bucket: str = "iceberg-catalog-system"
    bucket_prefix: str = ""
    # S3 settings handed to clients in /config and load-table `config`, so engines need only the URL.
    client_s3_endpoint: str | None = None
    # Static emulator keys for vended-credentials; refused unless S3 is an emulator (S3_ENDPOINT_URL).
    vend_s3_credentials: bool = False
    client_config: dict[str, str] = field(default_factory=dict)
    # Vended credentials: STS AssumeRole of this role with a per-table session policy.
    data_access_role_arn: str | None = None
    sts_endpoint_url: str | None = None
    vended_ttl_s: int = 3600  # the life reported to clients; STS is asked for at least 900 s (vending)
    remote_signing: bool = True
    public_url: str | None = None  # the catalog's base URL for signer URIs, if not the request's host
    # Warehouses whose buckets are on another S3 endpoint or region (first match wins).
    warehouse_endpoints: tuple[WarehouseEndpoint, ...] = ()
    # Ranges event sinks may reach though not public (core/changes/sink_network.py refuses the rest).
    event_sink_allowed_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    def endpoint_for(self, warehouse: str) -> WarehouseEndpoint | None:
        for spec in self.warehouse_endpoints:
            if fnmatch.fnmatchcase(warehouse, spec.pattern):
                return spec
        return None

    def region_for(self, warehouse: str) -> str:
        spec = self.endpoint_for(warehouse)
        return spec.region if spec is not None else self.region

    def client_endpoint_for(self, warehouse: str) -> str | None:
        spec = self.endpoint_for(warehouse)
        return spec.client_endpoint if spec is not None else self.client_s3_endpoint

    def client_config_for(self, warehouse: str) -> dict[str, str]:
        """The S3 settings clients of this warehouse's tables need: its own endpoint and region."""
        spec = self.endpoint_for(warehouse)
        if spec is None:
            return self.client_config
        out = {k: v for k, v in self.client_config.items() if k not in ("s3.endpoint", "s3.path-style-access")}
        out.update({"s3.region": spec.region, "client.region": spec.region})
        if spec.client_endpoint:
            out.update({"s3.endpoint": spec.client_endpoint, "s3.path-style-access": "true"})
        return out

    @classmethod
    def from_env(cls) -> Settings:
        endpoint = os.environ.get("S3_ENDPOINT_URL") or None
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        client_endpoint = os.environ.get("CATALOG_CLIENT_S3_ENDPOINT") or endpoint
        vend = _flag("CATALOG_VEND_S3_CREDENTIALS", False)
        if vend and not endpoint:
            logging.getLogger("catalog").error(
                "CATALOG_VEND_S3_CREDENTIALS is ignored: the catalog hands out its own keys only to an S3 emulator"
            )
            vend = False
        cfg: dict[str, str] = {"s3.region": region, "client.region": region}
        if client_endpoint:
            cfg["s3.endpoint"] = client_endpoint
            cfg["s3.path-style-access"] = "true"
        if vend:  # emulator keys are not secrets; real keys never reach this branch
            key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
            if key and secret:
                cfg["s3.access-key-id"] = key
                cfg["s3.secret-access-key"] = secret
                if os.environ.get("AWS_SESSION_TOKEN"):
                    cfg["s3.session-token"] = os.environ["AWS_SESSION_TOKEN"]
        # 1 s to 43200 s (STS's maximum). Below STS's minimum of 900 s, STS is still asked for 900 s
        # (it refuses less) and the catalog reports and caches the credentials by this shorter life:
        # clients refresh that soon, but a key handed out stays valid until STS's own expiry.
        ttl = min(max(int(os.environ.get("CATALOG_VENDED_CREDENTIALS_TTL_S", "3600")), 1), 43200)
        if ttl < 900 and os.environ.get("CATALOG_DATA_ACCESS_ROLE_ARN"):
            logging.getLogger("catalog").warning(
                "CATALOG_VENDED_CREDENTIALS_TTL_S=%d: vended credentials are refreshed after %d s but stay "
                "valid for 900 s (STS's minimum)",
                ttl,
                ttl,
            )
        from chalicelib.names import namespace_separator

        namespace_separator()  # a separator no client could use fails here, not on first request
        return cls(
            s3_endpoint_url=endpoint,
            region=region,
            system_bucket=os.environ.get("CATALOG_SYSTEM_BUCKET", "iceberg-catalog-system"),
            bucket_prefix=os.environ.get("CATALOG_BUCKET_PREFIX", ""),
            client_s3_endpoint=client_endpoint,
            vend_s3_credentials=vend,
            client_config=cfg,
            data_access_role_arn=os.environ.get("CATALOG_DATA_ACCESS_ROLE_ARN") or None,
            sts_endpoint_url=os.environ.get("STS_ENDPOINT_URL") or endpoint,
            vended_ttl_s=ttl,
            remote_signing=_flag("CATALOG_REMOTE_SIGNING", True),
            public_url=(os.environ.get("CATALOG_PUBLIC_URL") or "").rstrip("/") or None,
            warehouse_endpoints=_warehouse_endpoints(os.environ.get("CATALOG_WAREHOUSE_S3_ENDPOINTS"), region),
            event_sink_allowed_networks=_networks(os.environ.get("CATALOG_EVENT_SINK_ALLOWED_NETWORKS")),
        )
