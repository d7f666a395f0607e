"""Assemble a working Iceberg 1.10 Spark classpath from PyPI wheels, for hosts without Maven.

The Iceberg Spark runtime jar shipped in `snowpark-connect-deps-iceberg` lacks its relocated Jackson
and httpclient5 classes. This step rebuilds them the way Maven shade does: it copies Jackson
(from pyspark's own jars) and httpclient5/httpcore5 (from `bodo-iceberg-connector`) under
`org/apache/iceberg/shaded/...`, rewriting class names in each class file's constant pool, and adds
a stub for `TlsSocketStrategy` (only in httpclient5 >= 5.4). The AWS SDK v2 jars (S3FileIO, SigV4 REST
auth) come from the same bodo wheel. Inputs are pinned and checked by SHA-256; the result is cached.

    python -m spark_jobs.classpath            # build (or reuse) and print the jar paths
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("SPARK_CLASSPATH_CACHE", ROOT / ".cache" / "spark-classpath"))

WHEELS = {
    "snowpark-connect-deps-iceberg==1.0.3": (
        "snowpark_connect_deps_iceberg-1.0.3-py3-none-any.whl",
        "4f280e3677ab8d3a89f16647fc392ab2a3d48369f0c48873fe07bc1e74e06ffc",
    ),
    "bodo-iceberg-connector==2026.10": (
        "bodo_iceberg_connector-2026.10-py3-none-any.whl",
        "947a72aea7d0f0fa49e7609841d8871dd4841335eeaaf9e6abe2ae34075e4c55",
    ),
}
RUNTIME_JAR = "snowpark_connect_deps_iceberg/jars/iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
BODO_LIBS = "bodo_iceberg_connector/jars/libs/"
AWS_SDK_VERSION = "2.29.26"
# AWS SDK v2 modules S3FileIO, the SigV4 REST signer and Iceberg's GlueCatalog need (kms is required
# by S3FileIO's set-up).
AWS_SDK_MODULES = (
    "annotations apache-client arns auth aws-core aws-json-protocol aws-query-protocol aws-xml-protocol "
    "checksums checksums-spi crt-core endpoints-spi glue http-auth http-auth-aws http-auth-aws-eventstream "
    "http-auth-spi http-client-spi identity-spi json-utils kms metrics-spi profiles protocol-core regions "
    "retries retries-spi s3 sdk-core sts third-party-jackson-core url-connection-client utils"
).split()
AWS_EXTRA_JARS = ("eventstream-1.0.1.jar", "reactive-streams-1.0.4.jar")
HC_JARS = ("httpclient5-5.3.1.jar", "httpcore5-5.2.jar", "httpcore5-h2-5.2.4.jar")
JACKSON_PREFIXES = ("jackson-core-", "jackson-databind-", "jackson-annotations-")
SHADE = "org/apache/iceberg/shaded/"
RELOCATE = ("com/fasterxml/jackson/", "org/apache/hc/")
STUB = "org.apache.iceberg.shaded.org.apache.hc.client5.http.ssl.TlsSocketStrategy"
FORMAT = 3  # bump when the assembly changes


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _lock_key() -> str:
    return hashlib.sha256(json.dumps([WHEELS, AWS_SDK_MODULES, FORMAT], sort_keys=True).encode()).hexdigest()[:16]


# ---- class file relocation -------------------------------------------------------------------


def _relocate_text(data: bytes) -> bytes:
    for prefix in RELOCATE:
        slash = prefix.encode()
        dot = prefix.replace("/", ".").encode()
        data = data.replace(slash, SHADE.encode() + slash).replace(dot, SHADE.replace("/", ".").encode() + dot)
    # Undo double shading if a name was already relocated.
    for prefix in RELOCATE:
        twice = (SHADE + SHADE + prefix).encode()
        data = data.replace(twice, (SHADE + prefix).encode())
    return data


def relocate_class(data: bytes) -> bytes:
    """Rewrite the CONSTANT_Utf8 entries of a class file; everything after the pool is copied as is."""
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a class file")
    count = struct.unpack(">H", data[8:10])[0]
    out = bytearray(data[:10])
    pos, index = 10, 1
    sizes = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}
    while index < count:
        tag = data[pos]
        if tag == 1:
            length = struct.unpack(">H", data[pos + 1 : pos + 3])[0]
            text = _relocate_text(data[pos + 3 : pos + 3 + length])
            out += bytes([1]) + struct.pack(">H", len(text)) + text
            pos += 3 + length
        else:
            size = sizes[tag]
            out += data[pos : pos + 1 + size]
            pos += 1 + size
        index += 2 if tag in (5, 6) else 1
    out += data[pos:]
    return bytes(out)


def _relocated_name(name: str) -> str | None:
    for prefix in RELOCATE:
        if name.startswith(prefix):
            return SHADE + name
    if name.startswith("META-INF/services/"):
        svc = name[len("META-INF/services/") :]
        for prefix in RELOCATE:
            if svc.startswith(prefix.replace("/", ".")):
                return "META-INF/services/" + SHADE.replace("/", ".") + svc
    return None


def build_shade_fill(sources: list[Path], target: Path, stub_class: Path | None) -> int:
    """Write a jar with the relocated classes of `sources`; returns the number of classes."""
    written: set[str] = set()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for src in sources:
            with zipfile.ZipFile(src) as jar:
                for info in jar.infolist():
                    name = _relocated_name(info.filename)
                    if name is None or info.is_dir() or name in written:
                        continue
                    data = jar.read(info)
                    data = relocate_class(data) if name.endswith(".class") else _relocate_text(data)
                    out.writestr(name, data)
                    written.add(name)
        if stub_class is not None:
            out.write(stub_class, STUB.replace(".", "/") + ".class")
            written.add(STUB)
    return sum(1 for n in written if n.endswith(".class")) + (1 if stub_class else 0)


def _compile_stub(workdir: Path) -> Path:
    package, _, cls = STUB.rpartition(".")
    src_dir = workdir / "stub" / package.replace(".", "/")
    src_dir.mkdir(parents=True)
    (src_dir / f"{cls}.java").write_text(f"package {package};\npublic interface {cls} {{}}\n")
    subprocess.run(
        ["javac", "--release", "8", "-d", str(workdir / "stub-out"), str(src_dir / f"{cls}.java")],
        check=True,
        capture_output=True,
    )
    return workdir / "stub-out" / package.replace(".", "/") / f"{cls}.class"


# ---- assembly --------------------------------------------------------------------------------


def _download(dest: Path) -> dict[str, Path]:
    dest.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for spec, (filename, digest) in WHEELS.items():
        path = dest / filename
        if not path.exists() or _sha256(path) != digest:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dest), spec], check=True
            )
        actual = _sha256(path)
        if actual != digest:
            raise RuntimeError(f"{filename}: SHA-256 {actual} does not match the pinned {digest}")
        paths[spec] = path
    return paths


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def build(cache: Path = CACHE) -> list[Path]:
    """The jars to put on Spark's classpath (built once, then read from the cache)."""
    out_dir = cache / _lock_key()
    manifest = out_dir / "jars.json"
    if manifest.exists():
        jars = [out_dir / n for n in json.loads(manifest.read_text())]
        if all(j.exists() for j in jars):
            return jars
    wheels = _download(cache / "downloads")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        staging = tmp / "jars"
        staging.mkdir()
        with zipfile.ZipFile(wheels["snowpark-connect-deps-iceberg==1.0.3"]) as whl:
            (staging / Path(RUNTIME_JAR).name).write_bytes(whl.read(RUNTIME_JAR))
        wanted = [f"{m}-{AWS_SDK_VERSION}.jar" for m in AWS_SDK_MODULES] + list(AWS_EXTRA_JARS) + list(HC_JARS)
        with zipfile.ZipFile(wheels["bodo-iceberg-connector==2026.10"]) as whl:
            for name in wanted:
                (staging / name).write_bytes(whl.read(BODO_LIBS + name))
        jackson = sorted(p for p in pyspark_jars_dir().glob("jackson-*.jar") if p.name.startswith(JACKSON_PREFIXES))
        fill = staging / "iceberg-shade-fill-1.10.2.jar"
        build_shade_fill(jackson + [staging / n for n in HC_JARS], fill, _compile_stub(tmp))
        for name in HC_JARS:  # only their relocated copies are needed
            (staging / name).unlink()
        if out_dir.exists():
            shutil.rmtree(out_dir)
        shutil.copytree(staging, out_dir)
    names = sorted(p.name for p in out_dir.glob("*.jar"))
    manifest.write_text(json.dumps(names))
    return [out_dir / n for n in names]


if __name__ == "__main__":
    for jar in build():
        print(jar)
