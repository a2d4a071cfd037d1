"""Spark with Apache Iceberg for integration tests, without Maven.

The Iceberg Spark runtime jar comes from the PyPI wheel ``snowpark-connect-deps-iceberg``
(the ``spark-iceberg`` extra). That copy lacks Iceberg's shaded Jackson: the runtime
references ``org.apache.iceberg.shaded.com.fasterxml.jackson.*`` classes it does not
contain. :func:`relocated_jackson_jar` builds them from pyspark's own
``jackson-{core,databind,annotations}`` jars by relocating every class into the shaded
package: class names and descriptors are rewritten in each class file's constant pool
(``CONSTANT_Utf8`` entries), entry names are moved, and ``META-INF/services`` files are
renamed and rewritten. The result is cached under ``~/.cache/lakehouse-index/`` keyed
by a hash of the input jars and of the relocation rules, so it is built once.
"""

from __future__ import annotations

import glob
import hashlib
import os
import struct
import sys
import zipfile
from pathlib import Path
from typing import Any

RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
#: The Spark line (major.minor) the runtime jar is built for.
SPARK_LINE = "3.5"
_FROM_SLASH, _TO_SLASH = b"com/fasterxml/jackson/", b"org/apache/iceberg/shaded/com/fasterxml/jackson/"
_FROM_DOT, _TO_DOT = b"com.fasterxml.jackson.", b"org.apache.iceberg.shaded.com.fasterxml.jackson."
_JACKSON = ("jackson-core", "jackson-databind", "jackson-annotations")
#: Bump when the relocation rules change, to invalidate cached jars.
_RULES_VERSION = "1"
CACHE_DIR = Path(os.environ.get("LAKEHOUSE_INDEX_CACHE", Path.home() / ".cache" / "lakehouse-index"))


class SparkIcebergUnavailable(RuntimeError):
    """The ``spark-iceberg`` extra is not installed or pyspark's Jackson jars are missing."""


def iceberg_runtime_fits() -> bool:
    """Whether the installed pyspark is the Spark line the runtime jar is built for (3.5).

    Read from the distribution's metadata: pyspark is not imported.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pyspark").startswith(SPARK_LINE + ".")
    except PackageNotFoundError:
        return False


def iceberg_runtime_jar() -> Path:
    """Path of the Iceberg Spark runtime jar shipped by ``snowpark-connect-deps-iceberg``."""
    try:
        from snowpark_connect_deps_iceberg import get_jar_path
    except ImportError as e:
        raise SparkIcebergUnavailable(
            "the Iceberg Spark runtime is missing: pip install 'lakehouse-index[spark-iceberg]'"
        ) from e
    return Path(get_jar_path(RUNTIME_JAR))


def _jackson_jars() -> list[Path]:
    import pyspark

    jars_dir = Path(pyspark.__file__).parent / "jars"
    out = []
    for name in _JACKSON:
        found = sorted(glob.glob(str(jars_dir / f"{name}-2.*.jar")))
        if not found:
            raise SparkIcebergUnavailable(f"pyspark ships no {name} jar in {jars_dir}")
        out.append(Path(found[-1]))
    return out


def _relocate(data: bytes) -> bytes:
    return data.replace(_FROM_SLASH, _TO_SLASH).replace(_FROM_DOT, _TO_DOT)


def relocate_class(data: bytes) -> bytes:
    """A class file with every ``CONSTANT_Utf8`` naming Jackson moved to the shaded package.

    Only the constant pool changes; everything after it is copied byte for byte (it
    refers to constants by index, which relocation does not change).
    """
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a class file")
    count = struct.unpack_from(">H", data, 8)[0]
    out = bytearray(data[:10])
    pos, i = 10, 1
    while i < count:
        tag = data[pos]
        if tag == 1:  # CONSTANT_Utf8: u2 length, modified UTF-8 bytes
            length = struct.unpack_from(">H", data, pos + 1)[0]
            text = _relocate(data[pos + 3 : pos + 3 + length])
            out += bytes([1]) + struct.pack(">H", len(text)) + text
            pos += 3 + length
        else:
            size = _CONSTANT_SIZES.get(tag)
            if size is None:
                raise ValueError(f"unknown constant pool tag {tag} at offset {pos}")
            out += data[pos : pos + 1 + size]
            pos += 1 + size
            if tag in (5, 6):  # long and double take two constant pool slots
                i += 1
        i += 1
    out += data[pos:]
    return bytes(out)


# Payload sizes of the non-Utf8 constant pool entries (JVMS §4.4).
_CONSTANT_SIZES = {
    3: 4,
    4: 4,
    5: 8,
    6: 8,
    7: 2,
    8: 2,
    9: 4,
    10: 4,
    11: 4,
    12: 4,
    15: 3,
    16: 2,
    17: 4,
    18: 4,
    19: 2,
    20: 2,
}


def _relocate_jars(jars: list[Path], target: Path) -> None:
    seen: set[str] = set()
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
        for jar in jars:
            with zipfile.ZipFile(jar) as zin:
                for info in zin.infolist():
                    name = info.filename
                    if info.is_dir() or name.endswith("module-info.class"):
                        continue
                    data = zin.read(name)
                    if name.endswith(".class") and _FROM_SLASH.decode() in name:
                        new_name = _relocate(name.encode()).decode()
                        data = relocate_class(data)
                    elif name.startswith("META-INF/services/"):
                        new_name = _relocate(name.encode()).decode()
                        data = _relocate(data)
                    else:
                        continue  # manifests, licences, ...: not needed on the classpath
                    if new_name not in seen:
                        seen.add(new_name)
                        out.writestr(new_name, data)
    os.replace(tmp, target)


def relocated_jackson_jar() -> Path:
    """The shaded-Jackson jar the Iceberg runtime needs (built once, then cached)."""
    jars = _jackson_jars()
    h = hashlib.sha256(_RULES_VERSION.encode())
    for jar in jars:
        h.update(jar.name.encode())
        h.update(jar.read_bytes())
    target = CACHE_DIR / f"iceberg-shaded-jackson-{h.hexdigest()[:16]}.jar"
    if not target.exists():
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        _relocate_jars(jars, target)
    return target


def spark_jars() -> list[Path]:
    """Jars to put on ``spark.jars`` for Iceberg."""
    return [iceberg_runtime_jar(), relocated_jackson_jar()]


def spark_session(warehouse: str | Path, catalog: str = "local") -> Any:
    """A local Spark session with the Iceberg extensions and a Hadoop catalog on ``warehouse``.

    Tables of ``<catalog>.db.t`` live in ``<warehouse>/db/t`` with ``metadata/vN.metadata.json``
    and ``version-hint.text``. Reuses (and reconfigures) an active session's catalog.
    """
    from pyspark.sql import SparkSession

    # Python workers must run this interpreter (with pyarrow), also for later users of the
    # session (the core's session factory sets it only when it starts the JVM itself).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    jars = ",".join(str(p) for p in spark_jars())
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("lakehouse-index-iceberg-tests")
        .config("spark.jars", jars)
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.conf.set(f"spark.sql.catalog.{catalog}", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"spark.sql.catalog.{catalog}.type", "hadoop")
    spark.conf.set(f"spark.sql.catalog.{catalog}.warehouse", str(warehouse))
    return spark
