"""The Spark session factory: local by default, any cluster by configuration.

pyspark is imported only inside :func:`get_spark`, so nothing that does not need
Spark (opening tables, lookups, listing indexes) pays for it or starts a JVM.

A session it builds speaks Delta's and Iceberg's SQL when their Spark runtimes are on its
classpath (:data:`RUNTIMES`): jars named by ``$LAKEHOUSE_INDEX_SPARK_JARS``, by ``spark.jars``
or ``spark.jars.packages`` in the conf, or shipped in Spark's own ``jars/`` folder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse_index.errors import SparkUnavailableError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "JARS_ENV",
    "LOCAL_DEFAULTS",
    "MASTER_ENV",
    "RUNTIMES",
    "FormatRuntime",
    "get_spark",
    "java_major_version",
    "runtime_settings",
]

#: Environment variable naming the Spark master when none is passed.
MASTER_ENV = "LAKEHOUSE_INDEX_SPARK_MASTER"

#: Environment variable naming jars for the sessions :func:`get_spark` builds: comma-separated
#: jar files or folders (each of their ``*.jar``), e.g. the formats' Spark runtimes.
JARS_ENV = "LAKEHOUSE_INDEX_SPARK_JARS"

#: Settings for sessions this module builds (a conf mapping overrides them).
LOCAL_DEFAULTS: Mapping[str, str] = {
    # Small local jobs: the default 200 shuffle partitions mostly schedule empty tasks.
    "spark.sql.shuffle.partitions": "8",
    "spark.default.parallelism": "8",
    # delta-spark rebuilds a table's log state in 50 partitions by default: as many tiny tasks.
    "spark.databricks.delta.snapshotPartitions": "8",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Naive timestamps in where clauses mean UTC, as in the pyarrow executor.
    "spark.sql.session.timeZone": "UTC",
    # Expressions in where clauses mean what the pyarrow executor computes: Spark 3.5's
    # default (division by zero and bad casts give NULL), also on Spark 4, whose default is ANSI.
    "spark.sql.ansi.enabled": "false",
    "spark.sql.adaptive.enabled": "true",
}

#: Added for ``local`` masters only: keep a local driver on the loopback interface.
_LOCAL_DRIVER: Mapping[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


@dataclass(frozen=True)
class FormatRuntime:
    """A table format's Spark runtime: how its jar is recognised and what a session needs to use it."""

    name: str
    #: The start of its jar's file name, and of its Maven coordinates (``spark.jars.packages``).
    jar_prefix: str
    package_prefix: str
    #: Its SQL extension class (``spark.sql.extensions``).
    extension: str
    #: The catalog it registers (its ``spark.sql.catalog.<name>`` key) and that catalog's settings,
    #: applied unless the conf configures that catalog itself. ``{warehouse}`` stands for the
    #: session's ``spark.sql.warehouse.dir``, made absolute.
    catalog: str
    catalog_settings: Mapping[str, str]


#: The runtimes :func:`get_spark` configures when their jar is on the session's classpath.
RUNTIMES: tuple[FormatRuntime, ...] = (
    FormatRuntime(
        name="delta",
        jar_prefix="delta-spark_",
        package_prefix="io.delta:delta-spark_",
        extension="io.delta.sql.DeltaSparkSessionExtension",
        # Delta's catalog wraps the session catalog: Delta DDL, and delta.`<path>` in SQL.
        catalog="spark.sql.catalog.spark_catalog",
        catalog_settings={
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        },
    ),
    FormatRuntime(
        name="iceberg",
        jar_prefix="iceberg-spark-runtime-",
        package_prefix="org.apache.iceberg:iceberg-spark-runtime-",
        extension="org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        # A catalog needing no service: `iceberg.db.t` lives in `<warehouse>/db/t`, a folder
        # li.open_table opens by path.
        catalog="spark.sql.catalog.iceberg",
        catalog_settings={
            "spark.sql.catalog.iceberg": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.iceberg.type": "hadoop",
            "spark.sql.catalog.iceberg.warehouse": "{warehouse}",
        },
    ),
)

_EXTENSIONS = "spark.sql.extensions"
_CLASSPATH = "spark.driver.extraClassPath"


def _split(value: object, sep: str = ",") -> list[str]:
    return [part.strip() for part in str(value or "").split(sep) if part.strip()]


def _jar_files(paths: Iterable[str]) -> list[str]:
    """Each path as given, or the ``*.jar`` files in it when it is a folder."""
    out: list[str] = []
    for path in paths:
        folder = Path(path)
        out += sorted(str(j) for j in folder.glob("*.jar")) if folder.is_dir() else [path]
    return out


def runtime_settings(settings: Mapping[str, Any], spark_jars: Path | None = None) -> dict[str, str]:
    """The settings that make the formats' runtimes in a session's classpath usable.

    A runtime is there when a jar of ``spark.jars`` or ``spark.driver.extraClassPath``, a
    coordinate of ``spark.jars.packages``, or a jar in the folder ``spark_jars`` (Spark's own)
    is its. The result appends their extensions to ``settings``' ``spark.sql.extensions`` and
    registers their catalogs, each unless ``settings`` configures it (names any of its keys).
    """
    names = [Path(j).name for j in _split(settings.get("spark.jars"))]
    names += [Path(j).name for j in _split(settings.get(_CLASSPATH), os.pathsep)]
    if spark_jars is not None and spark_jars.is_dir():
        names += [j.name for j in spark_jars.glob("*.jar")]
    packages = _split(settings.get("spark.jars.packages"))
    present = [
        r
        for r in RUNTIMES
        if any(n.startswith(r.jar_prefix) for n in names)
        or any(p.startswith(r.package_prefix) for p in packages)
    ]
    if not present:
        return {}
    extensions = _split(settings.get(_EXTENSIONS))
    out = {
        _EXTENSIONS: ",".join(extensions + [r.extension for r in present if r.extension not in extensions])
    }
    warehouse = os.path.abspath(str(settings.get("spark.sql.warehouse.dir") or "spark-warehouse"))
    for runtime in present:
        if not any(k == runtime.catalog or k.startswith(runtime.catalog + ".") for k in settings):
            out.update({k: v.format(warehouse=warehouse) for k, v in runtime.catalog_settings.items()})
    return out


def _with_env_jars(settings: dict[str, Any], local: bool) -> None:
    """Put the jars of ``$LAKEHOUSE_INDEX_SPARK_JARS`` on the session's classpath."""
    jars = _jar_files(_split(os.environ.get(JARS_ENV)))
    if not jars:
        return
    if local:
        # One JVM runs the driver and the executors: on its classpath from its start, the jars
        # are not copied into the executor's work folder as `spark.jars` are (the AWS SDK's
        # bundle alone is hundreds of MB).
        settings[_CLASSPATH] = os.pathsep.join([*_split(settings.get(_CLASSPATH), os.pathsep), *jars])
    else:
        settings["spark.jars"] = ",".join([*_split(settings.get("spark.jars")), *jars])


def java_major_version(java: str | None = None) -> int:
    """Major version of ``java`` on PATH (or JAVA_HOME); SparkUnavailableError if there is none."""
    exe = java
    if exe is None:
        home = os.environ.get("JAVA_HOME")
        candidate = os.path.join(home, "bin", "java") if home else None
        exe = candidate if candidate and os.path.exists(candidate) else shutil.which("java")
    if exe is None:
        raise SparkUnavailableError(
            "Spark needs Java, but no `java` was found (JAVA_HOME / PATH): install a JDK 17, "
            "e.g. `apt-get install openjdk-17-jre-headless`"
        )
    try:
        proc = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SparkUnavailableError(f"cannot run {exe} -version: {e}; install a JDK 17") from e
    text = proc.stderr + proc.stdout
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if m is None:
        raise SparkUnavailableError(f"cannot tell the Java version from {exe} -version: {text.strip()!r}")
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0_392" is Java 8
        major = int(m.group(2))
    return major


def _required_java(pyspark_version: str) -> int:
    major = int(pyspark_version.split(".")[0])
    return 17 if major >= 4 else 8


def get_spark(
    spark: SparkSession | None = None,
    master: str | None = None,
    conf: Mapping[str, Any] | None = None,
) -> SparkSession:
    """A Spark session: ``spark`` if given, else the active one, else a new one.

    A new session runs on ``master`` (argument, else ``$LAKEHOUSE_INDEX_SPARK_MASTER``,
    else ``local[*]``) with :data:`LOCAL_DEFAULTS` overridden by ``conf``, the jars named by
    ``$LAKEHOUSE_INDEX_SPARK_JARS`` (:data:`JARS_ENV`), and the SQL extensions and catalogs of
    the formats' runtimes it has (:func:`runtime_settings`). Raises SparkUnavailableError when
    pyspark is missing or Java is missing or too old.
    """
    if spark is not None:
        return spark
    try:
        import pyspark
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise SparkUnavailableError("pyspark is not installed: `pip install 'pyspark>=3.5,<5'`") from e
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    need = _required_java(pyspark.__version__)
    have = java_major_version()
    if have < need:
        raise SparkUnavailableError(
            f"pyspark {pyspark.__version__} needs Java {need} or newer, but Java {have} was found: "
            "install a JDK 17 and point JAVA_HOME at it"
        )
    url = master or os.environ.get(MASTER_ENV) or "local[*]"
    builder = SparkSession.builder.master(url).appName("lakehouse-index")
    settings: dict[str, Any] = dict(LOCAL_DEFAULTS)
    if url.startswith("local"):
        settings.update(_LOCAL_DRIVER)
        # Read by the JVM at launch: without it Spark binds the machine's public address.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Local Python workers must run this interpreter (its venv has pyarrow for the
        # Arrow UDFs that write index files), not whatever `python3` is first on PATH.
        # (SparkContext reads PYSPARK_PYTHON from the environment, not from the conf.)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings.update(conf or {})
    _with_env_jars(settings, local=url.startswith("local"))
    spark_home = os.environ.get("SPARK_HOME")
    spark_jars = Path(spark_home) / "jars" if spark_home else Path(pyspark.__file__).parent / "jars"
    settings.update(runtime_settings(settings, spark_jars))
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    try:
        return builder.getOrCreate()
    except Exception as e:  # the JVM gateway raises plain Exceptions / RuntimeErrors
        raise SparkUnavailableError(f"Spark failed to start: {e}") from e
