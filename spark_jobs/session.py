"""One call to an Iceberg-enabled SparkSession pointed at the catalog's URL.

Settings come from (lowest to highest precedence) a JSON config file, environment variables and
command-line flags. The catalog vends the S3 settings in /config and the load-table `config`, so a
job needs only the catalog URL, the warehouse and credentials.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import zipfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

ENV = {
    "catalog_url": "CATALOG_URL",
    "warehouse": "CATALOG_WAREHOUSE",
    "catalog_name": "SPARK_CATALOG_NAME",
    "auth": "CATALOG_AUTH",
    "access_key_id": "CATALOG_ACCESS_KEY_ID",
    "secret_access_key": "CATALOG_SECRET_ACCESS_KEY",
    "signing_region": "CATALOG_SIGNING_REGION",
    "s3_endpoint": "S3_ENDPOINT",
    "s3_path_style": "S3_PATH_STYLE",
    "s3_region": "S3_REGION",
    "packages": "SPARK_ICEBERG_PACKAGES",
    "master": "SPARK_MASTER",
    "access_delegation": "CATALOG_ACCESS_DELEGATION",
    "driver_java_options": "SPARK_DRIVER_JAVA_OPTIONS",
}

# A local-mode job (a laptop, a test, a scheduled maintenance run) lives seconds to minutes: the JIT's
# second tier (C2) spends more CPU compiling than it saves. Measured on 2 cores: a create-insert-read
# job 36 -> 21 CPU-s (20 -> 17 s), a 1M-row ingest 50 -> 37 CPU-s (16.4 -> 15.1 s).
LOCAL_DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


@dataclass
class JobSettings:
    catalog_url: str = "http://127.0.0.1:8181/_iceberg"
    warehouse: str = "demo"
    catalog_name: str = "lake"
    auth: str = "sigv4"  # "sigv4" | "bearer" | "none"
    access_key_id: str = ""
    secret_access_key: str = ""
    signing_region: str = "us-east-1"
    s3_endpoint: str = ""  # only to override what the catalog vends
    s3_path_style: str = ""
    s3_region: str = ""
    packages: str = ""  # Maven coordinates; empty = the classpath assembled from PyPI wheels
    master: str = "local[2]"
    # "remote-signing" (the catalog signs each S3 request) or "vended-credentials" (STS keys for one
    # table): the job then needs no S3 keys of its own.
    access_delegation: str = ""
    # The driver JVM's options; empty: LOCAL_DRIVER_JAVA_OPTIONS for a local master, none otherwise.
    driver_java_options: str = ""

    @classmethod
    def load(cls, config_file: str | None = None, overrides: dict[str, Any] | None = None) -> JobSettings:
        values: dict[str, Any] = {}
        path = config_file or os.environ.get("SPARK_JOBS_CONFIG")
        if path:
            values.update(json.loads(Path(path).read_text()))
        for name, var in ENV.items():
            if os.environ.get(var):
                values[name] = os.environ[var]
        secret_id = values.pop("credentials_secret_id", None) or os.environ.get("CATALOG_CREDENTIALS_SECRET_ID")
        if secret_id and not values.get("access_key_id"):
            values.update(credentials_from_secret(secret_id))
        if not values.get("access_key_id") and os.environ.get("CATALOG_ROOT_ACCESS_KEY"):
            values["access_key_id"] = os.environ["CATALOG_ROOT_ACCESS_KEY"]
            values["secret_access_key"] = os.environ.get("CATALOG_ROOT_SECRET_KEY", "")
        values.update({k: v for k, v in (overrides or {}).items() if v not in (None, "")})
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown settings: {sorted(unknown)}")
        settings = cls(**values)
        if settings.auth not in ("sigv4", "bearer", "none"):
            raise ValueError("auth must be sigv4, bearer or none")
        return settings

    def redacted(self) -> dict[str, Any]:
        out = asdict(self)
        if out["secret_access_key"]:
            out["secret_access_key"] = "***"
        return out


def credentials_from_secret(secret_id: str) -> dict[str, str]:
    """Catalog keys from AWS Secrets Manager (JSON with access_key_id / secret_access_key), so that
    scheduled jobs never carry them in a template or on a command line."""
    import boto3

    raw = boto3.client("secretsmanager").get_secret_value(SecretId=secret_id)["SecretString"]
    doc = json.loads(raw)
    return {"access_key_id": doc["access_key_id"], "secret_access_key": doc["secret_access_key"]}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The settings as --flags, for spark-submit command lines."""
    parser.add_argument("--config", help="JSON file with settings (keys as in JobSettings)")
    for f in fields(JobSettings):
        parser.add_argument("--" + f.name.replace("_", "-"), dest=f.name, default=None)


def settings_from_args(args: argparse.Namespace) -> JobSettings:
    overrides = {f.name: getattr(args, f.name, None) for f in fields(JobSettings)}
    return JobSettings.load(args.config, overrides)


def spark_conf(s: JobSettings) -> dict[str, str]:
    cat = f"spark.sql.catalog.{s.catalog_name}"
    conf = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        cat: "org.apache.iceberg.spark.SparkCatalog",
        f"{cat}.type": "rest",
        f"{cat}.uri": s.catalog_url.rstrip("/"),  # the Java client appends /v1 itself
        f"{cat}.warehouse": s.warehouse,
        f"{cat}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{cat}.client.region": s.s3_region or s.signing_region,
        "spark.sql.defaultCatalog": s.catalog_name,
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        # Spark's default pattern misses "credential" (bearer mode's "id:secret"): keep it out of
        # event logs and the Environment tab.
        "spark.redaction.regex": "(?i)secret|password|token|access[.]key|credential",
    }
    if s.auth == "sigv4":
        conf.update(
            {
                f"{cat}.rest.auth.type": "sigv4",
                f"{cat}.rest.signing-name": "s3tables",
                f"{cat}.rest.signing-region": s.signing_region,
                f"{cat}.rest.access-key-id": s.access_key_id,
                f"{cat}.rest.secret-access-key": s.secret_access_key,
            }
        )
    elif s.auth == "bearer":
        conf.update(
            {
                f"{cat}.credential": f"{s.access_key_id}:{s.secret_access_key}",
                f"{cat}.oauth2-server-uri": s.catalog_url.rstrip("/") + "/v1/oauth/tokens",
                f"{cat}.scope": "catalog",
            }
        )
    if s.access_delegation:
        conf[f"{cat}.header.X-Iceberg-Access-Delegation"] = s.access_delegation
    if s.s3_endpoint:
        conf[f"{cat}.s3.endpoint"] = s.s3_endpoint
    if s.s3_path_style:
        conf[f"{cat}.s3.path-style-access"] = s.s3_path_style
    local = s.master.startswith("local")
    java_options = s.driver_java_options or (LOCAL_DRIVER_JAVA_OPTIONS if local else "")
    if java_options:
        conf["spark.driver.extraJavaOptions"] = java_options  # passed to spark-submit before the JVM starts
    if loopback_cluster(s.master):
        # Executors on this machine reach the driver on the loopback address, whatever the host's name
        # resolves to.
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    if s.packages:
        conf["spark.jars.packages"] = s.packages
    else:
        from spark_jobs.classpath import build

        jars = build()
        conf["spark.jars"] = ",".join(str(p) for p in (jars if local else cluster_jars(jars)))
    return conf


def loopback_cluster(master: str) -> bool:
    """A standalone master on this machine (scripts/spark_cluster.py, `make spark-cluster`)."""
    host = master.removeprefix("spark://").split(",")[0].rsplit(":", 1)[0]
    return master.startswith("spark://") and host in ("127.0.0.1", "localhost")


# ---- the AWS SDK's IoUtils for executors ------------------------------------------------------
#
# Iceberg 1.10's VendedCredentialsProvider.close() calls IoUtils.closeQuietlyV2(AutoCloseable,
# software.amazon.awssdk.utils.Logger), which AWS SDK 2.29 (the SDK of the pinned wheel) lacks. Spark
# closes a table's broadcast FileIO when it drops the broadcast: in an executor JVM the
# NoSuchMethodError reaches Spark's uncaught-exception handler, which kills the executor (exit 50)
# after a write or scan with vended credentials (a local master was not seen to hit it). For a
# cluster, the SDK's utils jar is replaced by a copy whose IoUtils has the method, delegating to
# closeQuietly(closeable, null): the same quiet close, logged at debug by IoUtils' own logger.
SDK_UTILS_JAR = "utils-2.29.26.jar"
SDK_UTILS_COMPAT_JAR = "utils-2.29.26-closequietlyv2.jar"
_IO_UTILS = "software/amazon/awssdk/utils/IoUtils.class"
_CP_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}


def cluster_jars(jars: list[Path]) -> list[Path]:
    """The classpath for a cluster's executors: the SDK utils jar swapped for its compatible copy."""
    out = []
    for jar in jars:
        if jar.name == SDK_UTILS_JAR:
            compat = jar.parent / SDK_UTILS_COMPAT_JAR
            if not compat.exists():
                tmp = compat.with_suffix(f".{os.getpid()}.tmp")
                with zipfile.ZipFile(jar) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
                    for info in src.infolist():
                        data = src.read(info)
                        dst.writestr(info, with_close_quietly_v2(data) if info.filename == _IO_UTILS else data)
                os.replace(tmp, compat)  # concurrent jobs each write their own copy; one wins whole
            jar = compat
        out.append(jar)
    return out


def _u16(data: bytes, pos: int) -> int:
    return int(struct.unpack(">H", data[pos : pos + 2])[0])


def _skip_members(data: bytes, pos: int) -> int:
    """Past a class file's fields_count/fields or methods_count/methods starting at pos."""
    count, pos = _u16(data, pos), pos + 2
    for _ in range(count):
        attributes, pos = _u16(data, pos + 6), pos + 8
        for _ in range(attributes):
            pos += 6 + int(struct.unpack(">I", data[pos + 2 : pos + 6])[0])
    return pos


def with_close_quietly_v2(cls: bytes) -> bytes:
    """IoUtils' class file with `public static void closeQuietlyV2(AutoCloseable, Logger)` added:
    `closeQuietly(closeable, null)` (aload_0, aconst_null, invokestatic, return: no branches, so no
    stack map frames are needed). The existing code and constant pool are kept byte for byte."""
    count, pos, index = _u16(cls, 8), 10, 1
    while index < count:
        tag = cls[pos]
        pos += 3 + _u16(cls, pos + 1) if tag == 1 else 1 + _CP_SIZES[tag]
        index += 2 if tag in (5, 6) else 1
    pool_end = pos
    this_class = _u16(cls, pool_end + 2)

    def utf8(text: str) -> bytes:
        return b"\x01" + struct.pack(">H", len(text)) + text.encode()

    n = count  # the first new constant's index
    added = [
        utf8("closeQuietlyV2"),  # n
        utf8("(Ljava/lang/AutoCloseable;Lsoftware/amazon/awssdk/utils/Logger;)V"),  # n + 1
        utf8("Code"),  # n + 2
        utf8("closeQuietly"),  # n + 3
        utf8("(Ljava/lang/AutoCloseable;Lorg/slf4j/Logger;)V"),  # n + 4
        b"\x0c" + struct.pack(">HH", n + 3, n + 4),  # n + 5: NameAndType
        b"\x0a" + struct.pack(">HH", this_class, n + 5),  # n + 6: Methodref IoUtils.closeQuietly
    ]
    code = bytes([0x2A, 0x01, 0xB8]) + struct.pack(">H", n + 6) + bytes([0xB1])
    method = struct.pack(">HHHH", 0x0009, n, n + 1, 1)  # public static, one attribute
    method += struct.pack(">HIHHI", n + 2, 12 + len(code), 2, 2, len(code)) + code + struct.pack(">HH", 0, 0)
    interfaces = _u16(cls, pool_end + 6)
    methods_at = _skip_members(cls, pool_end + 8 + 2 * interfaces)
    methods_end = _skip_members(cls, methods_at)
    return (
        cls[:8]
        + struct.pack(">H", count + len(added))
        + cls[10:pool_end]
        + b"".join(added)
        + cls[pool_end:methods_at]
        + struct.pack(">H", _u16(cls, methods_at) + 1)
        + cls[methods_at + 2 : methods_end]
        + method
        + cls[methods_end:]
    )


def build_session(settings: JobSettings | None = None, app_name: str = "iceberg-job") -> Any:
    """An Iceberg-enabled SparkSession for the catalog described by settings."""
    s = settings or JobSettings.load()
    if s.master.startswith("local") or loopback_cluster(s.master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # not for a remote cluster's executors to reach
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).master(s.master)
    for key, value in spark_conf(s).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
